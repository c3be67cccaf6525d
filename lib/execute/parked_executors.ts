/**
 * Idle executors kept for their task while a `--resources` budget hands their share to another
 * task. With fewer budget units than the tasks could use, tasks take turns (a temporary task and
 * its readers, paced against each other, do on every layer of blocks), and each turn used to
 * exit a worker and start another, which runs its task's `setup` again: `bench/temporary.ts
 * --budget` on tmpfs took 5.77 s against 1.72 s without `temporary` (one run: 118 worker starts,
 * 10.2 s of CPU against 3.0). A parked executor is out of the budget (it runs nothing and holds no
 * block) and comes back set up and warm when its task gets a turn: 2.21 s against 1.76 s, 4.0 s
 * of CPU, one start per worker.
 *
 * Only executors that cost nothing while idle are parked (`Executor.parkable`: a local Web
 * Worker, not a batch job on a cluster), and only of tasks that require nothing but `cpu`: a
 * parked worker keeps what its task's `setup` made, so a task that declares memory, a GPU or
 * any other resource has its idle workers exit to give that back. A task has at most
 * `maxWorkers` workers, parked ones included: its executors are unparked before any is started.
 */

import type { TaskConfig } from "../pipeline/spec.ts";
import type { Executor } from "./executor.ts";
import type { WorkerLifetimes } from "./run_stats.ts";
import type { RunObserver } from "../run/run_types.ts";

interface Parked {
  readonly executor: Executor;
  /** Run clock milliseconds when it was parked. */
  readonly since: number;
}

export class ParkedExecutors {
  readonly #byTask = new Map<number, Parked[]>();
  readonly #lifetimes: WorkerLifetimes;

  /** Parked time is added to each worker's `parkedSeconds` in `lifetimes`. */
  constructor(lifetimes: WorkerLifetimes) {
    this.#lifetimes = lifetimes;
  }

  /** Whether an idle executor of this task may be parked instead of exited. */
  static eligible(executor: Executor, config: TaskConfig): boolean {
    return executor.parkable === true &&
      Object.keys(config.requires).every((name) => name === "cpu");
  }

  /** `now`: run clock milliseconds, as below. */
  park(executor: Executor, now: number): void {
    const list = this.#byTask.get(executor.task);
    const entry = { executor, since: now };
    if (list === undefined) this.#byTask.set(executor.task, [entry]);
    else list.push(entry);
  }

  /**
   * The most recently parked executor of `task` that is still alive, or null. One that died
   * while parked (it held nothing of the run's) is recorded as crashed and dropped.
   */
  take(task: number, now: number): Executor | null {
    const list = this.#byTask.get(task);
    while (list !== undefined && list.length > 0) {
      const { executor, since } = list.pop()!;
      const parked = (now - since) / 1000;
      if (executor.state === "ready") {
        this.#lifetimes.of(executor).parkedSeconds += parked;
        return executor;
      }
      this.#lifetimes.ended(executor, "crashed", now, parked);
    }
    return null;
  }

  /**
   * A parked executor died (user code's timer threw, the thread was killed): drop it and say
   * so, since nothing else will; it held no block and spends no restart. False when not parked.
   */
  lost(
    executor: Executor,
    now: number,
    reason: string,
    observer: RunObserver,
    taskId: string,
  ): boolean {
    const list = this.#byTask.get(executor.task) ?? [];
    const at = list.findIndex((p) => p.executor === executor);
    if (at < 0) return false;
    const [{ since }] = list.splice(at, 1) as [Parked];
    this.#lifetimes.ended(executor, "crashed", now, (now - since) / 1000, reason);
    observer.notice?.(
      `Task "${taskId}": worker ${executor.id} ended while parked (${reason}); it held no block, and its task starts another when it needs one`,
    );
    return true;
  }

  /**
   * End every parked executor of `task` (of all tasks when omitted): "clean" asks each to stop,
   * "killed" ends it now.
   */
  end(now: number, exit: "clean" | "killed", task?: number): void {
    for (const t of task === undefined ? [...this.#byTask.keys()] : [task]) {
      for (const { executor, since } of this.#byTask.get(t) ?? []) {
        if (exit === "clean") executor.stop();
        else executor.kill();
        this.#lifetimes.ended(executor, exit, now, (now - since) / 1000);
      }
      this.#byTask.delete(t);
    }
  }
}
