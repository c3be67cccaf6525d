/** One run observer that tells several (the console and the events file). */

import type { BlockDone, RunObserver } from "../run/run_types.ts";

export function combineObservers(...observers: (RunObserver | null)[]): RunObserver {
  const list = observers.filter((o): o is RunObserver => o !== null);
  const perBlock = list.filter((o) => o.blockDone !== undefined);
  return {
    runStarted: (tasks) => list.forEach((o) => o.runStarted?.(tasks)),
    blockFailed: (failure) => list.forEach((o) => o.blockFailed?.(failure)),
    // Defined only when someone listens: the run then skips building a record per block.
    ...(perBlock.length === 0
      ? {}
      : { blockDone: (done: BlockDone) => perBlock.forEach((o) => o.blockDone?.(done)) }),
    progress: (tasks) => list.forEach((o) => o.progress?.(tasks)),
    notice: (message) => list.forEach((o) => o.notice?.(message)),
    outputsReconciled: (summaries) => list.forEach((o) => o.outputsReconciled?.(summaries)),
    runFinished: (result) => list.forEach((o) => o.runFinished?.(result)),
  };
}
