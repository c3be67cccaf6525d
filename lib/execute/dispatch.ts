/**
 * Handing blocks to executors. Each executor has a window of blocks in flight, sized after every
 * result batch so a window holds about `TARGET_BATCH_MS` of work: hundreds of no-op blocks per
 * message, one or two slow blocks (so no worker hoards slow blocks while others idle). A batch is
 * sent when half the window is free, written straight into a typed array the executor lends.
 */

import type { Executor } from "./executor.ts";
import type { BlockSource } from "./block_source.ts";
import type { RunClock } from "./run_clock.ts";
import type { Scheduler } from "../schedule/mod.ts";
import type { TaskRuntime } from "./task_runtime.ts";

/**
 * A batch message and a results message cost the scheduler's thread about 0.2 ms each in a short
 * run (its code still interpreted), taken from the workers' cores on a small machine: 20 ms of
 * blocks per window (a Web Worker reports every half window, workers/block_worker.ts) pays it
 * half as often as 10 ms did (docs/design/CODECS.md, "Two workers on two cores").
 */
export const TARGET_BATCH_MS = 20;
/**
 * The same for workers launched elsewhere (SLURM jobs, launched commands, joined by hand): every
 * batch costs the scheduler a frame and a system call, which with thousands of workers and
 * blocks of milliseconds is most of its time (docs/design/REMOTE.md, "A fleet of workers").
 */
export const REMOTE_TARGET_BATCH_MS = 100;
export const MAX_WINDOW = 1024;
export const MIN_WINDOW = 2;

/**
 * The executors of a task that wait for blocks: starting, or holding none (one that holds blocks
 * is ready: only ready executors are sent any). This walks them; the run loop keeps the count
 * instead (`FillQueue.waiting`), since with thousands of workers the walk per fill was most of
 * the scheduler's time.
 */
export function countWaiting(tasks: readonly TaskRuntime[], task: number): number {
  let waiting = 0;
  for (const e of tasks[task]!.executors) {
    if (e.state === "starting" || e.inFlight.size === 0) waiting++;
  }
  return waiting;
}

export class Dispatcher {
  readonly #scheduler: Scheduler;
  readonly #source: BlockSource;
  readonly #clock: RunClock;
  readonly #maxWindow: number;
  readonly #allowance: (executor: Executor) => number;
  readonly #waiting: (task: number) => number;

  constructor(
    scheduler: Scheduler,
    source: BlockSource,
    tasks: readonly TaskRuntime[],
    clock: RunClock,
    maxWindow = MAX_WINDOW,
    allowance: (executor: Executor) => number = () => Number.POSITIVE_INFINITY,
    /** The task's executors that wait (`countWaiting`, which is the default). */
    waiting: (task: number) => number = (t) => countWaiting(tasks, t),
  ) {
    this.#allowance = allowance;
    this.#scheduler = scheduler;
    this.#source = source;
    this.#clock = clock;
    this.#maxWindow = maxWindow;
    this.#waiting = waiting;
  }

  get maxWindow(): number {
    return this.#maxWindow;
  }

  /**
   * Hand an executor blocks until its window is full. Returns true when it is left wanting
   * because its task had too few blocks (none ready, or the pre-checks' turn ran out): it should
   * take more as soon as the task has some, and nothing of its own will say so (`FillQueue`
   * keeps it). False when it has what it may have now: not ready, its window full or waiting to
   * be half free, its share while siblings wait, or its allowance (draining, or a paced
   * temporary task). A busy executor's next results bring it back; an idle ready one gets a
   * block whenever the task has one, unless its allowance is under one block.
   */
  fill(executor: Executor): boolean {
    if (executor.state !== "ready") return false;
    const t = executor.task;
    const held = executor.inFlight.size;
    const free = executor.window - held;
    // The cheap refusals first: with thousands of workers a full window or an empty queue must
    // cost no more than a comparison.
    if (free <= 0) return false;
    if (this.#source.available(t) === 0) return true;
    const allowed = this.#allowance(executor);
    if (allowed <= 0) return false;
    // Batch: wait until half the window is free, unless the executor is idle (or may only get
    // a few blocks now anyway).
    if (held > 0 && free < executor.window / 2 && allowed >= free) return false;
    // While sibling executors are starting or idle, take only a fair share of what is ready, so
    // a window grown on fast blocks does not hoard slow ones.
    let limit = free;
    const waiting = this.#waiting(t) - (held === 0 ? 1 : 0);
    if (waiting > 0) {
      const ready = this.#source.available(t);
      const share = Math.ceil((ready + held) / (waiting + 1)) - held;
      // An idle executor always gets a block; a busy one holding its share already gets none
      // (else it takes one more on every pump while its siblings wait).
      limit = Math.min(free, held === 0 ? Math.max(1, share) : share);
      if (limit <= 0) return false;
    }
    // Whole blocks only: a fractional allowance would never equal the count below.
    limit = Math.floor(Math.min(limit, allowed));
    if (limit <= 0) return false;
    // The buffer is taken only once a block needs it: pre-checks may skip everything ready.
    const first = this.#source.next(t);
    if (first < 0) return true;
    return this.#send(executor, first, limit);
  }

  /**
   * The batch from `first` on, up to `limit` blocks. Apart from the decisions above so that the
   * JIT compiles this hot loop once: inlined into them, it was compiled again (and at three times
   * the cost) whenever a thousand workers took the fair-share branch for the first time.
   */
  #send(executor: Executor, first: number, limit: number): boolean {
    const t = executor.task;
    let position = first;
    const batch = executor.batchBuffer(limit);
    const now = this.#clock.now();
    executor.inFlight.reserve(limit);
    let count = 0;
    while (position >= 0) {
      const attempt = this.#scheduler.attemptOf(t, position);
      executor.inFlight.push(position, attempt, now);
      batch[2 * count] = position;
      batch[2 * count + 1] = attempt;
      count++;
      if (count >= limit) break;
      position = this.#source.next(t);
    }
    executor.send(batch, count);
    return count < limit;
  }

  /** Resize the window so it holds about `batchMs` (TARGET_BATCH_MS) of the task's blocks. */
  resize(executor: Executor, meanSeconds: number): void {
    const target = executor.batchMs ?? TARGET_BATCH_MS;
    const wanted = Math.round(target / 1000 / Math.max(meanSeconds, 1e-7));
    executor.window = Math.max(
      Math.min(MIN_WINDOW, this.#maxWindow),
      Math.min(this.#maxWindow, wanted),
    );
  }
}
