/**
 * Admission by need: whether one more worker could make a task's blocks go faster now. A worker
 * launched elsewhere connects when its job starts; admitting it (handshake, set-up, first
 * batches, its results, its stop) costs the scheduler's one thread about 100 µs on a 2-core VM
 * (docs/design/REMOTE.md, "Admission by need"). When the workers already admitted spend most of
 * their time waiting for blocks, something else limits the run (the scheduler's own thread, or
 * too few ready blocks), and each admission makes it slower. So the worker server holds
 * connections back while no task that still waits for workers `wanted()` one.
 *
 * The measure is the share of the admitted workers' time spent in blocks, over a window:
 * seconds of blocks reported in it, over the integral of the task's running workers (connected
 * and set up) across it. Results arrive after their blocks, so a window counts only once its
 * workers reported enough blocks each that the blocks still running weigh little: at least
 * DEMAND_BLOCKS_PER_WORKER each by DEMAND_WINDOW_MS, or DEMAND_EARLY_BLOCKS_PER_WORKER each after
 * DEMAND_EARLY_MS. Longer blocks give no verdict (wanted): a scheduler that moves millions of
 * blocks a second is not what keeps workers of 50 ms blocks waiting. Nothing is measured before
 * the task's first results either.
 */

/** A window ends after this long (ms); it counts with DEMAND_BLOCKS_PER_WORKER blocks a worker. */
export const DEMAND_WINDOW_MS = 100;
export const DEMAND_BLOCKS_PER_WORKER = 2;
/** A window with many short blocks ends sooner: after DEMAND_EARLY_MS with this many a worker. */
export const DEMAND_EARLY_MS = 10;
export const DEMAND_EARLY_BLOCKS_PER_WORKER = 8;
/** Workers spending less than this share of their time in blocks do not need company. */
export const DEMAND_BUSY_SHARE = 0.5;

import type { TaskDemand } from "./executor.ts";
import type { RunClock } from "./run_clock.ts";
import type { TaskRuntime } from "./task_runtime.ts";

/** What the measure reads of one task. */
export interface DemandSource {
  /** Seconds of blocks its workers reported so far. */
  busySeconds(): number;
  /** Blocks its workers reported so far (done or failed). */
  blocks(): number;
  /** Its workers that run blocks now: connected and set up. */
  running(): number;
  /** The run clock, ms. */
  now(): number;
}

export class WorkerDemand implements TaskDemand {
  readonly #source: DemandSource;
  /** Start of the current window (run clock ms); NaN before the task's first results. */
  #windowStart = Number.NaN;
  #lastAt = 0;
  /** Integral of running workers over the window so far, worker-ms. */
  #workerMs = 0;
  #busy0 = 0;
  #blocks0 = 0;
  /** The last finished window's share of worker time in blocks; NaN when it said nothing. */
  #share = Number.NaN;
  #decided = false;

  constructor(source: DemandSource) {
    this.#source = source;
  }

  /** Whether one more worker may help now: true unless the last window says the workers wait. */
  wanted(): boolean {
    this.#observe();
    return !(this.#share < DEMAND_BUSY_SHARE);
  }

  get decided(): boolean {
    this.#observe();
    return this.#decided;
  }

  /** The last window's share of worker time in blocks (NaN: no verdict), for notices. */
  get busyShare(): number {
    this.#observe();
    return this.#share;
  }

  #observe(): void {
    const source = this.#source;
    const now = source.now();
    if (Number.isNaN(this.#windowStart)) {
      if (source.blocks() > 0) this.#start(now);
      return;
    }
    this.#workerMs += source.running() * Math.max(0, now - this.#lastAt);
    this.#lastAt = now;
    const elapsed = now - this.#windowStart;
    if (elapsed < DEMAND_EARLY_MS) return;
    const blocks = source.blocks() - this.#blocks0;
    const workers = this.#workerMs / elapsed; // running, on average over the window
    const early = blocks >= DEMAND_EARLY_BLOCKS_PER_WORKER * workers;
    if (!early && elapsed < DEMAND_WINDOW_MS) return;
    this.#share = workers > 0 && blocks >= DEMAND_BLOCKS_PER_WORKER * workers
      ? (source.busySeconds() - this.#busy0) * 1000 / this.#workerMs
      : Number.NaN;
    this.#decided = true;
    this.#start(now);
  }

  #start(now: number): void {
    const source = this.#source;
    this.#windowStart = now;
    this.#lastAt = now;
    this.#workerMs = 0;
    this.#busy0 = source.busySeconds();
    this.#blocks0 = source.blocks();
  }
}

/** Each task's demand in a run: its block times, its running executors, the run's clock. */
export function taskDemands(
  tasks: readonly TaskRuntime[],
  running: (task: number) => number,
  clock: RunClock,
): WorkerDemand[] {
  return tasks.map((task, t) =>
    new WorkerDemand({
      busySeconds: () => task.stats.durations.totalSeconds,
      blocks: () => task.stats.durations.count,
      running: () => running(t),
      now: () => clock.now(),
    })
  );
}
