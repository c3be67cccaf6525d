/** The notice for a lost executor: a launched worker is restarted, a joined one is just gone. */

import type { Executor } from "./executor.ts";
import type { TaskRuntime } from "./task_runtime.ts";

/** `final`: every start of the task failed the same way, so it is not restarted. */
export function lostNotice(
  task: TaskRuntime,
  executor: Executor,
  reason: string,
  final = false,
): string {
  const id = task.config.id;
  if (executor.joined === true) {
    return `Task "${id}": worker ${executor.id}, which joined by hand, is gone (${reason}); its blocks go back to the queue and its place waits for another worker to join`;
  }
  if (final) {
    return `Task "${id}": worker ${executor.id} was terminated (${reason}); not restarted: its starts fail the same way every time`;
  }
  const left = task.config.maxWorkerRestarts - task.stats.restarts;
  return `Task "${id}": worker ${executor.id} was terminated (${reason}); ` +
    (left > 0
      ? `restarting it (${left} restart${left === 1 ? "" : "s"} left)`
      : "no restarts left");
}
