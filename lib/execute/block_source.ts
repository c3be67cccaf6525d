/**
 * Where the run loops take their next block from: the scheduler's ready queue, through the
 * pre-checks in DESIGN.md's order (done marker, then skip mask, then the task's `check`).
 * Blocks a pre-check skips are completed as skipped on the way, through `BlockCompletion` like
 * every other outcome. An asynchronous `check` parks its block (still `processing`) until it
 * answers; a block whose check said "run it" waits in a ring until an executor takes it, and
 * keeps that answer if it is handed back unstarted.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import type { TaskConfig } from "../pipeline/spec.ts";
import { ReadyQueue, type Scheduler, type SkipReason } from "../schedule/mod.ts";
import { makeBlock } from "./block.ts";
import type { BlockCompletion } from "./completion.ts";
import { errorParts, type RunObserver } from "../run/run_types.ts";

import type { PrecheckRefusal } from "../outputs/precheck_refusal.ts";

export type { PrecheckRefusal };

/**
 * The synchronous pre-check of a task: done marker, then skip mask; null means run it, a
 * refusal fails the block without running it.
 */
export type Precheck = (position: number) => SkipReason | PrecheckRefusal | null;

export interface BlockSourceOptions {
  readonly scheduler: Scheduler;
  readonly completion: BlockCompletion;
  readonly tasks: readonly TaskConfig[];
  readonly layouts: readonly TaskLayout[];
  readonly prechecks: readonly (Precheck | undefined)[];
  readonly observer: RunObserver;
  /** False once the run stops taking new blocks: answered checks go back to the queue. */
  readonly accepting: () => boolean;
  /** An asynchronous check answered (the run loop pumps); runs inside the loop's guard. */
  readonly onAnswer: (apply: () => void) => void;
}

/**
 * A turn of skipping blocks one by one (done marker, skip mask) ends after SKIP_TURN_MS, looked
 * at every SKIP_CHECK blocks: a run loop that pumps then gives signals, timers and results a
 * turn, however many done blocks a task resumed block by block holds (a skip costs from a
 * fraction of a microsecond to several, with many downstream blocks to count down).
 */
export const SKIP_TURN_MS = 20;
const SKIP_CHECK = 1024;

export class BlockSource {
  readonly #o: BlockSourceOptions;
  readonly #checked: ReadyQueue[];
  readonly #checking: number[];
  #turnStart = performance.now();
  #untilCheck = SKIP_CHECK;
  #skipped = 0;
  #starved = false;

  constructor(options: BlockSourceOptions) {
    this.#o = options;
    this.#checked = options.tasks.map(() => new ReadyQueue(null));
    this.#checking = options.tasks.map(() => 0);
  }

  /** Blocks whose `check` said "run it", waiting for an executor. */
  waiting(task: number): number {
    return this.#checked[task]!.length;
  }

  /** Blocks whose asynchronous `check` has not answered yet. */
  checking(task: number): number {
    return this.#checking[task]!;
  }

  /** Blocks available to an executor now (ready in the scheduler, or checked and waiting). */
  available(task: number): number {
    return this.#o.scheduler.readyCount(task) + this.#checked[task]!.length;
  }

  /** Start a new turn of skipping (see SKIP_TURN_MS). */
  resetSkipBudget(): void {
    this.#turnStart = performance.now();
    this.#untilCheck = SKIP_CHECK;
    this.#skipped = 0;
    this.#starved = false;
  }

  /** Blocks the pre-checks skipped since the last `resetSkipBudget`. */
  get skippedThisTurn(): number {
    return this.#skipped;
  }

  /**
   * This turn of skipping is over: blocks may be ready although `next` answered -1, and the run
   * loop must come back after yielding to the event loop.
   */
  get starved(): boolean {
    return this.#starved;
  }

  /**
   * A ready block that passed the done marker and the skip mask, or -1 (none ready, or the
   * skip budget is spent). Blocks either one skips are completed as skipped on the way,
   * releasing their downstream blocks.
   */
  nextPrechecked(task: number): number {
    const { scheduler, completion } = this.#o;
    const precheck = this.#o.prechecks[task];
    while (true) {
      if (this.#starved) return -1;
      const position = scheduler.acquire(task);
      if (position < 0) return -1;
      const skip = precheck === undefined ? null : precheck(position);
      if (skip === null) return position;
      this.#skipped++;
      if (--this.#untilCheck === 0) {
        this.#untilCheck = SKIP_CHECK;
        this.#starved = performance.now() - this.#turnStart > SKIP_TURN_MS;
      }
      if (typeof skip === "object") {
        completion.refused(task, position, scheduler.attemptOf(task, position), skip.refuse);
      } else {
        completion.skipped(task, position, skip);
      }
    }
  }

  /**
   * The next block an executor should run, or -1: one whose check said "run it", else a ready
   * block through the pre-checks and a synchronous `check`.
   */
  next(task: number): number {
    const checked = this.#checked[task]!;
    if (checked.length > 0) return checked.shift();
    const config = this.#o.tasks[task]!;
    const check = config.check;
    while (true) {
      const position = this.nextPrechecked(task);
      if (position < 0 || check === null) return position;
      const block = makeBlock(
        config.id,
        this.#o.layouts[task]!,
        position,
        this.#o.scheduler.attemptOf(task, position),
      );
      let answer: boolean | Promise<boolean>;
      try {
        answer = check(block);
      } catch (error) {
        this.#checkThrew(task, block.id, error);
        return position;
      }
      if (answer instanceof Promise) {
        this.#checking[task]!++;
        answer.then(
          (value) => this.#o.onAnswer(() => this.#answered(task, position, value === true)),
          (error) =>
            this.#o.onAnswer(() => {
              this.#checkThrew(task, block.id, error);
              this.#answered(task, position, false);
            }),
        );
        continue;
      }
      if (answer !== true) return position;
      this.#o.completion.skipped(task, position, "checked");
    }
  }

  /** A block handed back unstarted: it keeps its check answer, or goes back to the queue. */
  handBack(task: number, position: number): void {
    if (this.#o.tasks[task]!.check !== null && this.#o.accepting()) {
      this.#checked[task]!.push(position);
    } else {
      this.#o.scheduler.requeue(task, position);
    }
  }

  /** The run stops: blocks waiting for an executor go back to the scheduler's queue. */
  requeueWaiting(): void {
    this.#checked.forEach((ring, task) => {
      for (let p = ring.shift(); p >= 0; p = ring.shift()) this.#o.scheduler.requeue(task, p);
    });
  }

  #answered(task: number, position: number, done: boolean): void {
    this.#checking[task]!--;
    if (done) this.#o.completion.skipped(task, position, "checked");
    else this.handBack(task, position);
  }

  #checkThrew(task: number, blockId: unknown, error: unknown): void {
    this.#o.observer.notice?.(
      `Task "${this.#o.tasks[task]!.id}": check threw for block ${
        String(blockId)
      }, running the block: ${errorParts(error).message}`,
    );
  }
}
