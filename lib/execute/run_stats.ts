/**
 * Run statistics for the resource-utilisation table and `runs.jsonl`: per task, block
 * durations (mean and least-squares slope over completion order, as daisy reports them), CPU,
 * workers spawned and the peak of concurrently alive workers; per worker, its lifetime.
 */

import type { WorkerStats } from "../run/run_types.ts";

/** Where the count and each sum live in `DurationTrend`'s array. */
const SUM_X = 0;
const SUM_Y = 1;
const SUM_XY = 2;
const SUM_XX = 3;
const COUNT = 4;

export class DurationTrend {
  /**
   * The count and the sums, in a Float64Array: as fields they started as small integers and
   * overflowed past 2^31 (x * x at the 46,341st block), and each change of type sent the JIT
   * back to recompile the result loop this is inlined into.
   */
  readonly #sums = new Float64Array(5);

  add(seconds: number): void {
    const sums = this.#sums;
    const x = sums[COUNT]!;
    sums[COUNT] = x + 1;
    const y = seconds * 1000;
    sums[SUM_X]! += x;
    sums[SUM_Y]! += y;
    sums[SUM_XY]! += x * y;
    sums[SUM_XX]! += x * x;
  }

  get count(): number {
    return this.#sums[COUNT]!;
  }

  /** Mean block time in ms. */
  get meanMs(): number {
    const n = this.#sums[COUNT]!;
    return n === 0 ? 0 : this.#sums[SUM_Y]! / n;
  }

  /** Change of block time per block, in ms (ordinary least squares); 0 below two blocks. */
  get slopeMs(): number {
    const sums = this.#sums;
    const n = sums[COUNT]!;
    if (n < 2) return 0;
    const sumX = sums[SUM_X]!;
    const sumY = sums[SUM_Y]!;
    const sumXY = sums[SUM_XY]!;
    const sumXX = sums[SUM_XX]!;
    const denominator = n * sumXX - sumX * sumX;
    return denominator === 0 ? 0 : (n * sumXY - sumX * sumY) / denominator;
  }

  get totalSeconds(): number {
    return this.#sums[SUM_Y]! / 1000;
  }
}

/** Each worker's `WorkerStats`, from its start to its end, by its executor. */
export class WorkerLifetimes {
  readonly #byExecutor = new Map<object, WorkerStats>();

  /** `now`: run clock milliseconds, as for the rest below. */
  started(executor: object, workerId: number, taskId: string, now: number): void {
    this.#byExecutor.set(executor, {
      workerId,
      taskId,
      startedAt: now / 1000,
      endedAt: Number.NaN,
      blocks: 0,
      failedBlocks: 0,
      cpuSeconds: 0,
      parkedSeconds: 0,
      exit: "running",
    });
  }

  of(executor: object): WorkerStats {
    return this.#byExecutor.get(executor)!;
  }

  ended(
    executor: object,
    exit: "clean" | "crashed" | "killed",
    now: number,
    parkedSeconds = 0,
    reason?: string,
  ): void {
    const stats = this.of(executor);
    stats.endedAt = now / 1000;
    stats.parkedSeconds += parkedSeconds;
    stats.exit = exit;
    if (reason !== undefined) stats.reason = reason;
  }

  all(): WorkerStats[] {
    return [...this.#byExecutor.values()];
  }
}

export class TaskStats {
  readonly durations = new DurationTrend();
  cpuSeconds = 0;
  workersSpawned = 0;
  restarts = 0;
  workerFailures = 0;
  /** Idle workers let go by an elastic task (`launch.workers`) while it ran: not failures. */
  released = 0;
  alive = 0;
  maxConcurrent = 0;
  firstStart = Number.NaN;
  lastEnd = Number.NaN;
  /** Minor page faults of the measured blocks (resource tracking), and how many were measured. */
  minorFaults = 0;
  faultedBlocks = 0;

  /** Seconds from the task's first worker start to its last worker end (or `now`, in ms). */
  spanSeconds(now: number): number {
    if (Number.isNaN(this.firstStart)) return 0;
    return ((Number.isNaN(this.lastEnd) ? now : this.lastEnd) - this.firstStart) / 1000;
  }

  /** Mean minor page faults of a measured block, or NaN when none was measured. */
  get faultsPerBlock(): number {
    return this.faultedBlocks === 0 ? Number.NaN : this.minorFaults / this.faultedBlocks;
  }

  /** A measured block's minor page faults (NaN: its worker could not tell). */
  addFaults(faults: number): void {
    if (!Number.isFinite(faults)) return;
    this.minorFaults += faults;
    this.faultedBlocks++;
  }

  workerStarted(now: number): void {
    this.workersSpawned++;
    this.alive++;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.alive);
    if (Number.isNaN(this.firstStart)) this.firstStart = now;
  }

  /** A parked worker takes blocks again (it counts as alive, not as spawned). */
  workerResumed(): void {
    this.alive++;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.alive);
  }

  workerEnded(now: number): void {
    this.alive--;
    this.lastEnd = now;
  }
}
