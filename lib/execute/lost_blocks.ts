/** What becomes of the blocks a lost executor held (`ExecutorPool.lost`). */

import type { BlockSource } from "./block_source.ts";
import type { BlockCompletion } from "./completion.ts";
import type { BlockReport } from "../run/block_report.ts";
import type { Executor } from "./executor.ts";

/**
 * The block it was running fails this attempt (when `blockAtFault`); its other blocks return to
 * the queue untouched, and its queue is emptied. `now`: run clock milliseconds.
 */
export function settleLostBlocks(
  executor: Executor,
  reason: string,
  blockAtFault: boolean,
  now: number,
  completion: BlockCompletion,
  source: BlockSource,
): void {
  const t = executor.task;
  const queue = executor.inFlight;
  // Executors run blocks in the order sent: the running one is the oldest held. When the
  // executor cannot say, a lone block is the only one it can have been running.
  const running = executor.runningPosition();
  const culprit = !blockAtFault
    ? -1
    : running >= 0
    ? running
    : queue.size === 1
    ? queue.positionAt(0)
    : -1;
  for (let i = 0; i < queue.size; i++) {
    const position = queue.positionAt(i);
    if (position === culprit) {
      const report: BlockReport = {
        task: t,
        position,
        attempt: queue.attemptAt(i),
        sentAt: queue.sentAtAt(i),
        returnedAt: now,
        workerId: executor.id,
        usage: null,
        commit: null,
        seconds: 0,
      };
      completion.failed(report, {
        message: `Worker ${executor.id} stopped while running this block: ${reason}`,
      });
    } else {
      source.handBack(t, position);
    }
  }
  queue.clear();
}
