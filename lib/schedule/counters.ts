/**
 * Per-task counters as a typestate: a task is `running` until its counters balance (`done`) or
 * it is given up (`abandoned`). Terminal states are sticky: every later change is refused, so
 * a late message from a terminated worker can never move a counter (daisy reference §5.5).
 *
 * Conservation (daisy §5.5), checked by `assertBalanced`:
 *   total = ready + processing + pending + completed + failed + orphaned
 * with `skipped <= completed` (skipped blocks count as completed and also in `skipped`).
 */

export type TaskPhase = "running" | "done" | "abandoned";

export interface CounterSnapshot {
  readonly phase: TaskPhase;
  readonly total: number;
  readonly ready: number;
  readonly processing: number;
  readonly pending: number;
  readonly completed: number;
  readonly skipped: number;
  readonly failed: number;
  readonly orphaned: number;
  /** Failed attempts, including the ones that were retried. */
  readonly failedAttempts: number;
  readonly started: boolean;
  readonly abandonReason?: string;
}

export class TaskCounters {
  private phaseValue: TaskPhase = "running";
  readonly total: number;
  ready = 0;
  processing = 0;
  completed = 0;
  skipped = 0;
  failed = 0;
  orphaned = 0;
  failedAttempts = 0;
  started = false;
  abandonReason: string | undefined;

  constructor(total: number, ready: number) {
    this.total = total;
    this.ready = ready;
  }

  get phase(): TaskPhase {
    return this.phaseValue;
  }

  get running(): boolean {
    return this.phaseValue === "running";
  }

  get pending(): number {
    return this.total - this.ready - this.processing - this.completed - this.failed -
      this.orphaned;
  }

  /** Blocks that reached a terminal state. */
  get finished(): number {
    return this.completed + this.failed + this.orphaned;
  }

  /** Move to `done` when every block is terminal; returns whether the task is done now. */
  finalize(): boolean {
    if (this.phaseValue === "running" && this.finished === this.total) this.phaseValue = "done";
    return this.phaseValue === "done";
  }

  /** Give up on the task: every block not yet terminal becomes orphaned. */
  abandon(reason: string): boolean {
    if (this.phaseValue !== "running") return false;
    this.orphaned += Math.max(this.total - this.finished, 0);
    this.ready = 0;
    this.processing = 0;
    this.abandonReason = reason;
    this.phaseValue = "abandoned";
    return true;
  }

  snapshot(): CounterSnapshot {
    const s = {
      phase: this.phaseValue,
      total: this.total,
      ready: this.ready,
      processing: this.processing,
      pending: this.pending,
      completed: this.completed,
      skipped: this.skipped,
      failed: this.failed,
      orphaned: this.orphaned,
      failedAttempts: this.failedAttempts,
      started: this.started,
    };
    return this.abandonReason === undefined ? s : { ...s, abandonReason: this.abandonReason };
  }

  /** Throws when the conservation invariant is broken: that is a bug, never a user error. */
  assertBalanced(taskId: string): void {
    const values = [this.ready, this.processing, this.pending, this.completed, this.failed];
    if (values.some((v) => v < 0) || this.orphaned < 0 || this.skipped > this.completed) {
      throw new Error(
        `Internal error: counters of task "${taskId}" are unbalanced: ${
          JSON.stringify(this.snapshot())
        }`,
      );
    }
  }
}
