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
import { messageOf } from "../errors.ts";
import type { Scheduler, SkipReason } from "../schedule/mod.ts";
import type { BlockReport, CompletionSink } from "../run/block_report.ts";
import type { BlockFailure, RunObserver } from "../run/run_types.ts";

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
    const copy: BlockReport = { ...report, usage: null, gpu: null };
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
