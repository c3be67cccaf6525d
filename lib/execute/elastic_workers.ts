/**
 * Elastic worker counts (`launch.workers: { min, max }` on a task with launched workers): the
 * pool starts `min` workers (fewer when fewer blocks are ready), submits more while the backlog
 * would keep them busy for longer than a worker takes to start, and releases idle ones down to
 * `min` when nothing waits. Released workers leave cleanly (they are not lost workers and spend
 * no `maxWorkerRestarts`). The rule is `wantedWorkers`; see docs/design/REMOTE.md.
 */

import type { WorkerRange } from "../pipeline/spec.ts";
import type { Executor } from "./executor.ts";
import type { RunClock } from "./run_clock.ts";
import type { RunObserver } from "../run/run_types.ts";
import type { TaskRuntime } from "./task_runtime.ts";

/**
 * Seconds a worker is assumed to take from launch to connect before any worker of the task has
 * connected (a SLURM job's scheduling, start and the worker's own start-up; a measured start-up
 * replaces it as soon as one worker connects).
 */
export const DEFAULT_STARTUP_SECONDS = 30;

/**
 * How many workers (queued and running) a task wants now. A worker started now helps only once
 * it has started, `startupSeconds` from now; the `backlog` blocks take `backlog * meanSeconds`
 * worker-seconds, so `ceil(backlog * meanSeconds / startupSeconds)` workers are kept busy at least
 * as long as one takes to start: more would arrive to find nothing left. Clamped to
 * [min, max], and at least one while blocks wait. Before any block was measured (`meanSeconds`
 * NaN): `min` (at least one) until the first block's time is known.
 */
export function wantedWorkers(
  backlog: number,
  meanSeconds: number,
  startupSeconds: number,
  range: WorkerRange,
): number {
  if (backlog <= 0) return range.min;
  if (!(meanSeconds > 0)) return Math.max(range.min, 1);
  const busy = Math.ceil(backlog * meanSeconds / Math.max(startupSeconds, 1e-3));
  return Math.min(range.max, Math.max(range.min, 1, busy));
}

/** Per elastic task: launch times of its workers not yet connected, and start-ups measured. */
export class ElasticWorkers {
  readonly #tasks: readonly TaskRuntime[];
  readonly #launched = new Map<Executor, number>();
  readonly #startupSum: number[];
  readonly #startups: number[];
  readonly #clock: RunClock;
  readonly #notice: (message: string) => void;

  constructor(o: {
    readonly tasks: readonly TaskRuntime[];
    readonly clock: RunClock;
    readonly observer: RunObserver;
  }) {
    const { tasks, clock, observer } = o;
    this.#tasks = tasks;
    this.#clock = clock;
    this.#notice = (message) => observer.notice?.(message);
    this.#startupSum = tasks.map(() => 0);
    this.#startups = tasks.map(() => 0);
  }

  /** The task's `launch.workers`, or undefined for a fixed count (`maxWorkers`). */
  range(t: number): WorkerRange | undefined {
    const launch = this.#tasks[t]!.config.launch;
    return "workers" in launch ? launch.workers : undefined;
  }

  /** A worker was launched at `now` (run clock ms); its connect time is measured. */
  launched(executor: Executor, now: number): void {
    if (this.range(executor.task) !== undefined) this.#launched.set(executor, now);
  }

  /** Mean seconds from launch to connect of the task's workers so far (or the default). */
  startupSeconds(t: number): number {
    this.#observe();
    const n = this.#startups[t]!;
    return n === 0 ? DEFAULT_STARTUP_SECONDS : this.#startupSum[t]! / n;
  }

  /** Note the workers that connected since the last look (every pump looks, via `release`). */
  #observe(): void {
    const now = this.#clock.now();
    for (const [executor, at] of this.#launched) {
      if (executor.state === "starting") continue;
      this.#launched.delete(executor);
      if (executor.state !== "ready") continue;
      this.#startupSum[executor.task]! += (now - at) / 1000;
      this.#startups[executor.task]!++;
    }
  }

  /** Blocks waiting for a worker: ready ones plus those held by a worker and not started. */
  backlog(t: number, available: number): number {
    let n = available;
    for (const e of this.#tasks[t]!.executors) n += Math.max(0, e.inFlight.size - 1);
    return n;
  }

  /** Whether an elastic task may start another worker while `alive` are queued or running. */
  allows(t: number, alive: number, available: number): boolean {
    const range = this.range(t);
    if (range === undefined) return true;
    const task = this.#tasks[t]!;
    const wanted = wantedWorkers(
      this.backlog(t, available),
      task.meanSeconds,
      this.startupSeconds(t),
      range,
    );
    return alive < wanted;
  }

  /**
   * Idle workers of an elastic task to release now: when no block waits for a worker (none
   * ready, no sibling holding more than it can start soon, which `rebalanceHeld` would spread),
   * those beyond `min` of the `alive` ones; never a worker still starting (it may be needed
   * soon, and its job is cancelled at the task's end anyway).
   */
  releasable(t: number, alive: number, available: number): Executor[] {
    const range = this.range(t);
    if (range === undefined || available > 0) return [];
    const executors = this.#tasks[t]!.executors;
    for (const e of executors) if (e.inFlight.size > 2) return [];
    const out: Executor[] = [];
    for (const e of executors) {
      if (alive - out.length <= range.min) break;
      if (e.state === "ready" && e.inFlight.size === 0) out.push(e);
    }
    return out;
  }

  /**
   * Release the `releasable` workers through `retire` (idle, they finish nothing); `leaving`
   * workers (walltime) do not count as alive.
   */
  release(t: number, leaving: number, available: number, retire: (e: Executor) => void): void {
    this.#observe();
    const task = this.#tasks[t]!;
    for (const executor of this.releasable(t, task.stats.alive - leaving, available)) {
      retire(executor);
      task.stats.released++;
      this.#notice(
        `Task "${task.config.id}": worker ${executor.id} released (no block waits; launch.workers.min is ${
          this.range(t)!.min
        })`,
      );
    }
  }
}
