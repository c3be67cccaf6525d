/**
 * The one place a block's outcome is recorded: done, skipped (done marker, skip mask, `check`),
 * failed (an attempt, or for good) and orphaned all go through `BlockCompletion`, in the serial
 * and the parallel runner alike. Only this module moves a processing block to a terminal state
 * in the scheduler.
 *
 * Completion may be asynchronous: a sink that must make a block's outputs durable first returns
 * a promise from `done`, and the block stays `processing` (counted in `committing`) until it
 * settles; only then are its downstream blocks released. A rejected commit is a failed attempt.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import type { BlockCommit } from "../outputs/block_outputs.ts";
import { messageOf } from "../errors.ts";
import type { Scheduler, SkipReason } from "../schedule/mod.ts";
import type { BlockFailure, RunObserver } from "./run_types.ts";

/**
 * What the sink learns about one block. The run loop reuses one report object: it is valid only
 * during the call, so a sink keeps copies of what it needs.
 */
export interface BlockReport {
  task: number;
  position: number;
  /** 1-based attempt that finished. */
  attempt: number;
  /** Run clock (ms) when the block was handed to an executor, and when its result came back. */
  sentAt: number;
  returnedAt: number;
  /** Run-wide worker number, or -1 (serial runs). */
  workerId: number;
  /** The `Usage` figures of the attempt (resource tracking), or null. */
  usage: Float64Array | null;
  /** What a block with declared outputs staged (its files and hashes), or null. */
  commit: BlockCommit | null;
  /** Seconds the attempt ran (wall time). */
  seconds: number;
}

/** Where outcomes are kept (the tracking store, later the output manifest). */
export interface CompletionSink {
  /**
   * A block succeeded. Return a promise to hold it in `processing` until its completion is
   * durable; a rejection fails the attempt with the rejection's message.
   */
  done(report: BlockReport): void | Promise<void>;
  /** An attempt failed; `permanent` when no retry is left. */
  failed(report: BlockReport, permanent: boolean): void;
  skipped?(task: number, position: number, reason: SkipReason): void;
  /**
   * `count` blocks a resume skipped in bulk (never handed out, never visited one by one). A
   * sink that must see each skipped block keeps the run from skipping in bulk instead.
   */
  skippedInBulk?(task: number, count: number, reason: SkipReason): void;
  orphaned?(task: number, position: number): void;
  /** Blocks of a temporary task due for deletion whose files are not removed yet. */
  removalBacklog?(task: number): number;
  /** Median duration of the recent commit barriers, in ms (0: none, or nothing to commit). */
  barrierMs?(): number;
  /** Call `listener` after each batch of removals (pacing may let a temporary task go on). */
  onRemoved?(listener: () => void): void;
  /**
   * Call `listener` when a block's outputs are in place for its readers, before its completion
   * is durable: its downstream is released then, and nothing more when it succeeds.
   */
  onRenamed?(listener: (task: number, position: number) => void): void;
}

export interface CompletionOptions {
  readonly scheduler: Scheduler;
  readonly layouts: readonly TaskLayout[];
  readonly taskIds: readonly string[];
  readonly sink: CompletionSink | null;
  readonly observer: RunObserver;
  /** Called after an asynchronous completion settled (the run loop pumps). */
  readonly onSettled: () => void;
  /** Called when a promise-returning sink throws outside the promise: a bug. */
  readonly onBug: (error: unknown) => void;
}

export class BlockCompletion {
  readonly #o: CompletionOptions;
  readonly #committing: number[];
  readonly #failures: BlockFailure[] = [];
  #closed = false;
  #heldForRemoval = false;

  constructor(options: CompletionOptions) {
    this.#o = options;
    this.#committing = options.layouts.map(() => 0);
    options.sink?.onRemoved?.(() => {
      if (!this.#heldForRemoval || this.#closed) return;
      this.#heldForRemoval = false;
      options.onSettled();
    });
    options.sink?.onRenamed?.((task, position) => {
      if (this.#closed) return;
      if (options.scheduler.releaseEarly(task, position)) options.onSettled();
    });
  }

  /**
   * The run has ended: a commit that settles later is durable but moves no counter (the block
   * is found done, or its outputs adopted, by the next run).
   */
  close(): void {
    this.#closed = true;
  }

  /** Permanently failed blocks of the run, with their last error. */
  get failures(): readonly BlockFailure[] {
    return this.#failures;
  }

  /** Blocks of the task whose completion is being made durable (still `processing`). */
  committing(task: number): number {
    return this.#committing[task]!;
  }

  /** Blocks of a temporary task whose readers are done but whose files are still on disk. */
  removalBacklog(task: number): number {
    return this.#o.sink?.removalBacklog?.(task) ?? 0;
  }

  barrierMs(): number {
    return this.#o.sink?.barrierMs?.() ?? 0;
  }

  /** Pacing held a temporary task back for its removal backlog: pump when a removal ends. */
  holdForRemoval(): void {
    this.#heldForRemoval = true;
  }

  get committingTotal(): number {
    let n = 0;
    for (const c of this.#committing) n += c;
    return n;
  }

  /**
   * A block succeeded; its downstream is released once the sink says it is durable. Returns a
   * promise that settles after that (undefined when the sink answered at once).
   */
  done(report: BlockReport): Promise<void> | undefined {
    const task = report.task;
    const position = report.position;
    const pending = this.#o.sink?.done(report);
    if (pending === undefined) {
      this.#o.scheduler.succeed(task, position);
      this.#announceDone(report);
      return undefined;
    }
    const attempt = report.attempt;
    const copy: BlockReport = { ...report, usage: null };
    this.#committing[task]!++;
    return pending.then(
      () => {
        this.#committing[task]!--;
        if (this.#closed) return;
        this.#o.scheduler.succeed(task, position);
        this.#announceDone(copy);
        this.#o.onSettled();
      },
      (error: unknown) => {
        this.#committing[task]!--;
        if (this.#closed) return;
        try {
          this.failed(copy, {
            message: `Committing the block's outputs failed: ${messageOf(error)}`,
          }, attempt);
        } catch (bug) {
          this.#o.onBug(bug);
          return;
        }
        this.#o.onSettled();
      },
    );
  }

  #announceDone(report: BlockReport): void {
    const observe = this.#o.observer.blockDone;
    if (observe === undefined) return;
    const layout = this.#o.layouts[report.task]!;
    observe.call(this.#o.observer, {
      taskId: this.#o.taskIds[report.task]!,
      blockId: layout.blockIdOf(report.position),
      index: layout.gridIndexOf(report.position),
      attempt: report.attempt,
      workerId: report.workerId < 0 ? null : report.workerId,
      seconds: report.seconds,
    });
  }

  /** A pre-check refused a block that cannot run in this run: it fails for good, unrun. */
  refused(task: number, position: number, attempt: number, message: string): void {
    const report: BlockReport = {
      task,
      position,
      attempt,
      sentAt: 0,
      returnedAt: 0,
      workerId: -1,
      usage: null,
      commit: null,
      seconds: 0,
    };
    this.failed(report, { message }, attempt, false);
  }

  /** An attempt failed: retried, or failed for good with its downstream orphaned. */
  failed(
    report: BlockReport,
    error: { readonly message: string; readonly stack?: string },
    attempt = report.attempt,
    retry = true,
  ): void {
    const task = report.task;
    const outcome = this.#o.scheduler.fail(task, report.position, retry);
    if (outcome === "dropped") return;
    const permanent = outcome === "failed";
    this.#o.sink?.failed(report, permanent);
    const layout = this.#o.layouts[task]!;
    const failure: BlockFailure = {
      taskId: this.#o.taskIds[task]!,
      blockId: layout.blockIdOf(report.position),
      index: layout.gridIndexOf(report.position),
      attempt,
      message: error.message,
      ...(error.stack === undefined ? {} : { stack: error.stack }),
      permanent,
    };
    if (permanent) this.#failures.push(failure);
    this.#o.observer.blockFailed?.(failure);
  }

  /** A processing block needs no run: done marker, skip mask, or `check`. */
  skipped(task: number, position: number, reason: SkipReason): void {
    if (this.#o.scheduler.succeed(task, position, reason)) {
      this.#o.sink?.skipped?.(task, position, reason);
    }
  }

  /**
   * Blocks a resume found done (or masked) with everything upstream of them so: counted as
   * completed and skipped at once, through the same sink, without a visit per block.
   */
  skippedInBulk(task: number, count: number, reason: SkipReason): void {
    if (count === 0) return;
    if (this.#o.scheduler.succeedInBulk(task, count)) {
      this.#o.sink?.skippedInBulk?.(task, count, reason);
    }
  }

  /** The scheduler orphaned a block (an upstream block failed for good). */
  orphaned(task: number, position: number): void {
    this.#o.sink?.orphaned?.(task, position);
  }
}
