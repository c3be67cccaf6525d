/**
 * Executors asked by `ExecutorPool.rebalanceHeld` to hand back their unstarted blocks that have
 * not answered yet, with a count per task, so the pool asks how many a task has without walking
 * its executors (with thousands of workers, walks on every pump of a run's tail cost a third of
 * the scheduler's time; docs/design/REMOTE.md).
 */

import type { Executor } from "./executor.ts";

export class Recalls {
  readonly #asked = new Set<Executor>();
  readonly #perTask: number[] = [];

  has(executor: Executor): boolean {
    return this.#asked.has(executor);
  }

  add(executor: Executor): void {
    if (this.#asked.has(executor)) return;
    this.#asked.add(executor);
    this.#perTask[executor.task] = this.of(executor.task) + 1;
  }

  /** It answered, or left the run. */
  delete(executor: Executor): void {
    if (!this.#asked.delete(executor)) return;
    this.#perTask[executor.task] = this.of(executor.task) - 1;
  }

  /** Executors of `task` asked and not answered. */
  of(task: number): number {
    return this.#perTask[task] ?? 0;
  }
}
