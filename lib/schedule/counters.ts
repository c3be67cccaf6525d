/**
 * Per-task counters as a typestate: a task is `running` until its counters balance (`done`) or
 * it is given up (`abandoned`). Every counter is private and only moves through a transition of
 * `RunningCounters`, which exists only while the task runs: once terminal, `whileRunning()` is
 * null and a late message from a terminated worker can never move a counter (daisy §5.5).
 *
 * Every counter is kept on its own (none is derived from the others), so the conservation law
 *   total = ready + processing + pending + completed + failed + orphaned
 * with `skipped <= completed` is a real check of the transitions (`assertBalanced`).
 *
 * This module is internal to lib/schedule: only the scheduler holds `TaskCounters`; everyone
 * else reads a `CounterSnapshot`.
 */

export type TaskPhase = "running" | "done" | "abandoned";

/**
 * How far a worker got before it failed to start: `start`, its process ended before it
 * connected (an interpreter that is not there, or exits at once); `import`, its module did not
 * import (a syntax error, a missing package); `setup`, its setup function raised.
 */
export type StartStage = "start" | "import" | "setup";

/** Why a task was given up. */
export type AbandonReason =
  | {
    readonly kind: "workers-failed";
    /** Workers of the task that crashed, timed out or failed setup. */
    readonly failures: number;
    readonly maxWorkerRestarts: number;
  }
  | {
    readonly kind: "setup-failed";
    readonly message: string;
    /** Where the workers failed (absent: their setup function): see `StartStage`. */
    readonly stage?: "start" | "import";
  }
  | { readonly kind: "upstream-abandoned"; readonly upstream: string };

/** The sentence the summary, the progress lines and the events file show for a reason. */
export function describeAbandonReason(reason: AbandonReason): string {
  switch (reason.kind) {
    case "workers-failed":
      return `its workers failed ${reason.failures} times and maxWorkerRestarts (${reason.maxWorkerRestarts}) is spent`;
    case "setup-failed":
      if (reason.stage === "start") {
        return `its workers exit before they connect: ${reason.message}`;
      }
      if (reason.stage === "import") return `the module failed to import: ${reason.message}`;
      return `setup failed: ${reason.message}`;
    case "upstream-abandoned":
      return `upstream task "${reason.upstream}" was abandoned`;
  }
}

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
  readonly abandonReason?: AbandonReason;
}

/** The transitions of a running task. Each moves blocks between exactly two counters. */
export interface RunningCounters {
  /** ready -> processing (a block was handed out). */
  dispatch(): void;
  /** processing -> ready (handed back unstarted, or retried after a failed attempt). */
  requeue(failedAttempt: boolean): void;
  /** processing -> completed (and skipped when `skipped`). */
  complete(skipped: boolean): void;
  /** processing -> failed, after its last attempt failed. */
  failPermanently(): void;
  /** pending -> ready (its last upstream block succeeded). */
  promote(): void;
  /** pending -> orphaned (an upstream block failed for good). */
  orphan(): void;
  /**
   * pending -> completed and skipped, `count` blocks at once: blocks a resume found done (or
   * masked) with everything upstream of them so, never handed out (`Scheduler.succeedInBulk`).
   */
  completeInBulk(count: number): void;
  /** Everything not terminal -> orphaned; the task becomes `abandoned`. */
  abandon(reason: AbandonReason): void;
  /** Move to `done` when every block is terminal; returns whether it did. */
  finalize(): boolean;
}

export class TaskCounters {
  readonly total: number;
  #phase: TaskPhase = "running";
  #ready: number;
  #processing = 0;
  #pending: number;
  #completed = 0;
  #skipped = 0;
  #failed = 0;
  #orphaned = 0;
  #failedAttempts = 0;
  #started = false;
  #abandonReason: AbandonReason | null = null;
  readonly #transitions: RunningCounters;

  constructor(total: number, ready: number) {
    this.total = total;
    this.#ready = ready;
    this.#pending = total - ready;
    this.#transitions = {
      dispatch: () => {
        this.#ready--;
        this.#processing++;
        this.#started = true;
      },
      requeue: (failedAttempt) => {
        this.#processing--;
        this.#ready++;
        if (failedAttempt) this.#failedAttempts++;
      },
      complete: (skipped) => {
        this.#processing--;
        this.#completed++;
        if (skipped) this.#skipped++;
      },
      failPermanently: () => {
        this.#processing--;
        this.#failed++;
        this.#failedAttempts++;
      },
      promote: () => {
        this.#pending--;
        this.#ready++;
      },
      orphan: () => {
        this.#pending--;
        this.#orphaned++;
      },
      completeInBulk: (count) => {
        this.#pending -= count;
        this.#completed += count;
        this.#skipped += count;
        if (count > 0) this.#started = true;
      },
      abandon: (reason) => {
        this.#orphaned += this.#ready + this.#processing + this.#pending;
        this.#ready = 0;
        this.#processing = 0;
        this.#pending = 0;
        this.#abandonReason = reason;
        this.#phase = "abandoned";
      },
      finalize: () => {
        if (this.#completed + this.#failed + this.#orphaned !== this.total) return false;
        this.#phase = "done";
        return true;
      },
    };
  }

  /** A task whose every block was done before the run: completed and skipped, phase done. */
  static alreadyDone(total: number): TaskCounters {
    const c = new TaskCounters(total, 0);
    c.#pending = 0;
    c.#completed = c.#skipped = total;
    c.#started = total > 0;
    c.#phase = "done";
    return c;
  }

  /** The transitions, or null once the task is terminal (every late change is refused). */
  whileRunning(): RunningCounters | null {
    return this.#phase === "running" ? this.#transitions : null;
  }

  get phase(): TaskPhase {
    return this.#phase;
  }
  get running(): boolean {
    return this.#phase === "running";
  }
  get ready(): number {
    return this.#ready;
  }
  get processing(): number {
    return this.#processing;
  }
  get pending(): number {
    return this.#pending;
  }
  get completed(): number {
    return this.#completed;
  }
  get failed(): number {
    return this.#failed;
  }
  get orphaned(): number {
    return this.#orphaned;
  }

  snapshot(): CounterSnapshot {
    const s: CounterSnapshot = {
      phase: this.#phase,
      total: this.total,
      ready: this.#ready,
      processing: this.#processing,
      pending: this.#pending,
      completed: this.#completed,
      skipped: this.#skipped,
      failed: this.#failed,
      orphaned: this.#orphaned,
      failedAttempts: this.#failedAttempts,
      started: this.#started,
    };
    return this.#abandonReason === null ? s : { ...s, abandonReason: this.#abandonReason };
  }

  /** Throws when the conservation law is broken: that is a bug, never a user error. */
  assertBalanced(taskId: string): void {
    const parts = [
      this.#ready,
      this.#processing,
      this.#pending,
      this.#completed,
      this.#failed,
      this.#orphaned,
    ];
    const sum = parts.reduce((a, b) => a + b, 0);
    if (parts.some((v) => v < 0) || sum !== this.total || this.#skipped > this.#completed) {
      throw new Error(
        `Internal error: counters of task "${taskId}" are unbalanced: ${
          JSON.stringify(this.snapshot())
        }`,
      );
    }
  }
}
