/**
 * The scheduler: which block may run now. It owns the ready queues, the counters, the retry
 * counts and the frontier of partly satisfied blocks; it never runs user code. Every method is
 * synchronous and O(neighbours), so the run loop can call it from the main thread for millions
 * of blocks.
 *
 * Readiness is counted, not searched: a block becomes ready when its last upstream block
 * succeeds. `pending` remembers, for blocks with some but not all upstream blocks done, how many
 * are still missing; entries are created on the first upstream success and removed when the
 * block becomes ready, so memory follows the active frontier, not the task size.
 */

import type { BlockSet, DependencyGraph } from "../graph/mod.ts";
import { type BlockId, compareBlockIds } from "../blocks/mod.ts";
import { type AbandonReason, type CounterSnapshot, TaskCounters } from "./counters.ts";
import { PositionCounts } from "./position_counts.ts";
import { ReadyQueue } from "./ready_queue.ts";

/** Why a block was not run: a done marker, a skip mask, or the task's `check`. */
export type SkipReason = "done" | "masked" | "checked";

export interface SchedulerTaskOptions {
  /** Extra attempts after the first failure. */
  readonly maxRetries: number;
  /**
   * Every block is already done (a fully resumed task): the task starts done, all blocks
   * counted as skipped, and no block of it is ever handed out.
   */
  readonly alreadyDone?: boolean;
  /**
   * Every block but these succeeded before the run (a resume that skipped done blocks in bulk;
   * they are counted by `succeedInBulk`). Ignored with `alreadyDone`.
   */
  readonly satisfiedExcept?: BlockSet;
  /** Serve the lowest ready position first instead of the longest ready (`ReadyQueue`). */
  readonly byPosition?: boolean;
}

export type FailureOutcome = "retry" | "failed" | "dropped";

export interface SchedulerEvents {
  /** A block was orphaned because an upstream block failed permanently. */
  onOrphaned?(task: number, position: number): void;
  /** A task reached a terminal phase. */
  onTaskFinished?(task: number): void;
}

export class Scheduler {
  readonly graph: DependencyGraph;
  readonly #counters: TaskCounters[] = [];
  readonly #queues: ReadyQueue[] = [];
  readonly #pending: PositionCounts[] = [];
  readonly #orphaned: Set<number>[] = [];
  readonly #retries: Map<number, number>[] = [];
  /** Per task, processing blocks whose downstream was released before they succeeded. */
  readonly #releasedEarly: Set<number>[] = [];
  readonly #options: readonly SchedulerTaskOptions[];
  readonly #events: SchedulerEvents;

  constructor(
    graph: DependencyGraph,
    options: readonly SchedulerTaskOptions[],
    events: SchedulerEvents = {},
  ) {
    if (options.length !== graph.taskCount) {
      throw new RangeError(
        `Scheduler needs options for ${graph.taskCount} tasks, got ${options.length}`,
      );
    }
    this.graph = graph;
    this.#options = options;
    this.#events = events;
    const n = graph.taskCount;
    for (let t = 0; t < n; t++) {
      const o = options[t]!;
      if (o.alreadyDone === true) graph.markSatisfied(t);
      else if (o.satisfiedExcept !== undefined) graph.markSatisfiedExcept(t, o.satisfiedExcept);
    }
    for (let t = 0; t < n; t++) {
      const layout = graph.layouts[t]!;
      this.#pending.push(new PositionCounts());
      this.#orphaned.push(new Set());
      this.#retries.push(new Map());
      this.#releasedEarly.push(new Set());
      if (options[t]!.alreadyDone === true) {
        this.#counters.push(TaskCounters.alreadyDone(layout.blockCount));
        this.#queues.push(new ReadyQueue(null));
        continue;
      }
      // A resume that skips every block in bulk leaves none ready.
      const initial = layout.blockCount === 0 || options[t]!.satisfiedExcept?.size === 0
        ? 0
        : graph.initialCount(t);
      this.#counters.push(new TaskCounters(layout.blockCount, initial));
      this.#queues.push(
        new ReadyQueue(
          initial === 0 ? null : graph.initialCursor(t),
          initial,
          options[t]!.byPosition === true,
        ),
      );
    }
    for (let t = 0; t < n; t++) this.#finalize(t);
  }

  get taskCount(): number {
    return this.#counters.length;
  }

  taskId(task: number): string {
    return this.graph.dag.ids[task]!;
  }

  snapshot(task: number): CounterSnapshot {
    return this.#counters[task]!.snapshot();
  }

  isRunning(task: number): boolean {
    return this.#counters[task]!.running;
  }

  readyCount(task: number): number {
    return this.#counters[task]!.ready;
  }

  processingCount(task: number): number {
    return this.#counters[task]!.processing;
  }

  /** Length of the task's ready queue, counted by the queue itself (tests compare it with `ready`). */
  queuedCount(task: number): number {
    return this.#queues[task]!.length;
  }

  /** 1 for the first attempt of a block, 2 for its first retry, and so on. */
  attemptOf(task: number, position: number): number {
    return (this.#retries[task]!.get(position) ?? 0) + 1;
  }

  /** Hand out the next ready block of a task (it becomes `processing`), or -1 when none is ready. */
  acquire(task: number): number {
    const c = this.#counters[task]!;
    const running = c.whileRunning();
    if (running === null || c.ready === 0) return -1;
    const position = this.#queues[task]!.shift();
    if (position < 0) return -1;
    running.dispatch();
    return position;
  }

  /**
   * A processing block succeeded, or was skipped (done marker, mask, `check`). Returns false
   * when the release was dropped because the task is no longer running.
   */
  succeed(task: number, position: number, skipped: SkipReason | null = null): boolean {
    const running = this.#counters[task]!.whileRunning();
    if (running === null) return false;
    running.complete(skipped !== null);
    this.#retries[task]!.delete(position);
    if (!this.#releasedEarly[task]!.delete(position)) this.#releaseDownstream(task, position);
    this.#finalize(task);
    return true;
  }

  /**
   * Release the blocks downstream of a processing block before it succeeds: its outputs are in
   * place for its readers and only not yet durable (a temporary task's block once its files are
   * renamed into place). Once per block: its success later releases nothing more, nor does a
   * retry after its commit failed. Returns false when nothing was released.
   */
  releaseEarly(task: number, position: number): boolean {
    if (this.#counters[task]!.whileRunning() === null) return false;
    const released = this.#releasedEarly[task]!;
    if (released.has(position)) return false;
    released.add(position);
    this.#releaseDownstream(task, position);
    return true;
  }

  /** Processing blocks of the task whose downstream was released early (`releaseEarly`). */
  releasedEarly(task: number): number {
    return this.#releasedEarly[task]!.size;
  }

  /**
   * `count` blocks that are not processing, ready or in the frontier succeeded before the run:
   * a resume skipped them in bulk (they are outside the task's `satisfiedExcept` set, so no
   * block still to run waits for them). Returns false when dropped (the task is not running).
   */
  succeedInBulk(task: number, count: number): boolean {
    const c = this.#counters[task]!;
    const running = c.whileRunning();
    if (running === null) return false;
    if (!Number.isSafeInteger(count) || count < 0 || count > c.pending) {
      throw new RangeError(
        `Internal error: cannot skip ${count} blocks of task "${
          this.taskId(task)
        }" in bulk, ${c.pending} are pending`,
      );
    }
    running.completeInBulk(count);
    this.#finalize(task);
    return true;
  }

  /**
   * A processing block's attempt failed. It is queued again until `maxRetries` retries were
   * spent; then it fails permanently and everything downstream of it is orphaned.
   */
  fail(task: number, position: number, retry = true): FailureOutcome {
    const running = this.#counters[task]!.whileRunning();
    if (running === null) return "dropped";
    const retries = this.#retries[task]!;
    const spent = retries.get(position) ?? 0;
    if (retry && spent < this.#options[task]!.maxRetries) {
      retries.set(position, spent + 1);
      this.#queues[task]!.push(position);
      running.requeue(true);
      return "retry";
    }
    retries.delete(position);
    running.failPermanently();
    // Released early, its readers had its files in place and went on: none is orphaned.
    const touched = this.#releasedEarly[task]!.delete(position)
      ? new Set<number>()
      : this.#orphanDownstream(task, position);
    this.#finalize(task);
    for (const t of touched) this.#finalize(t);
    return "failed";
  }

  /**
   * Return a processing block to the back of its queue without spending an attempt: its
   * worker was lost before it started the block, or the run is stopping.
   */
  requeue(task: number, position: number): boolean {
    const running = this.#counters[task]!.whileRunning();
    if (running === null) return false;
    this.#queues[task]!.push(position);
    running.requeue(false);
    return true;
  }

  /**
   * Give up on a task (its workers kept failing, or its setup failed): every block not yet
   * terminal is orphaned, and so is every task downstream of it. Returns the tasks abandoned.
   */
  abandon(task: number, reason: AbandonReason): number[] {
    const abandoned: number[] = [];
    // Downstream tasks name the task that was given up first: the root cause.
    const upstream: AbandonReason = { kind: "upstream-abandoned", upstream: this.taskId(task) };
    const stack: [number, AbandonReason][] = [[task, reason]];
    while (stack.length > 0) {
      const [t, why] = stack.pop()!;
      const running = this.#counters[t]!.whileRunning();
      if (running === null) continue;
      running.abandon(why);
      this.#queues[t]!.clear();
      this.#pending[t]!.clear();
      this.#retries[t]!.clear();
      this.#releasedEarly[t]!.clear();
      abandoned.push(t);
      this.#events.onTaskFinished?.(t);
      for (const d of this.graph.dag.downstream[t]!) stack.push([d, upstream]);
    }
    return abandoned;
  }

  /** Every task is done or abandoned. */
  isFinished(): boolean {
    return this.#counters.every((c) => !c.running);
  }

  /**
   * Nothing is ready or processing anywhere, yet some task is still running: the run could
   * never finish. The graph makes this impossible; it is checked so a bug fails loudly instead
   * of hanging.
   */
  isStalled(): boolean {
    let running = false;
    for (const c of this.#counters) {
      if (c.ready > 0 || c.processing > 0) return false;
      if (c.running) running = true;
    }
    return running;
  }

  assertBalanced(): void {
    this.#counters.forEach((c, t) => c.assertBalanced(this.taskId(t)));
  }

  /**
   * Blocks made ready by one release, as parallel arrays (no object per block): the first
   * `#readyCount` entries. Never truncated, since `length = 0` frees an array's storage and the
   * next release would allocate it again.
   */
  readonly #readyTasks: number[] = [];
  readonly #readyPositions: number[] = [];
  readonly #readyIds: BlockId[] = [];
  #readyCount = 0;

  /** Counts one upstream success for a downstream block; created once, not per release. */
  readonly #countDown = (t: number, p: number): void => {
    if (!this.#counters[t]!.running || this.#orphaned[t]!.has(p)) return;
    const pending = this.#pending[t]!;
    const known = pending.get(p);
    const missing = (known < 0 ? this.graph.upstreamCount(t, p) : known) - 1;
    if (missing === 0) {
      pending.delete(p);
      this.#readyTasks[this.#readyCount] = t;
      this.#readyPositions[this.#readyCount++] = p;
    } else {
      pending.set(p, missing);
    }
  };

  #releaseDownstream(task: number, position: number): void {
    const tasks = this.#readyTasks;
    const positions = this.#readyPositions;
    this.#readyCount = 0;
    this.graph.forEachDownstream(task, position, this.#countDown);
    const n = this.#readyCount;
    if (n > 1) {
      // daisy appends newly ready blocks in block-ID order (reference §5.2): a stable insertion
      // sort of the few blocks one release frees, keyed by ID, in place.
      const ids = this.#readyIds;
      for (let i = 0; i < n; i++) {
        const t = tasks[i]!;
        const p = positions[i]!;
        const id = this.graph.layouts[t]!.blockIdOf(p);
        let j = i;
        while (j > 0 && compareBlockIds(ids[j - 1]!, id) > 0) {
          ids[j] = ids[j - 1]!;
          tasks[j] = tasks[j - 1]!;
          positions[j] = positions[j - 1]!;
          j--;
        }
        ids[j] = id;
        tasks[j] = t;
        positions[j] = p;
      }
    }
    for (let i = 0; i < n; i++) this.#enqueue(tasks[i]!, positions[i]!);
  }

  #enqueue(task: number, position: number): void {
    const running = this.#counters[task]!.whileRunning();
    if (running === null) return;
    this.#queues[task]!.push(position);
    running.promote();
  }

  /** Orphan the transitive downstream closure of a failed block; returns the tasks touched. */
  #orphanDownstream(task: number, position: number): Set<number> {
    const touched = new Set<number>();
    const stack: number[] = [task, position];
    while (stack.length > 0) {
      const p = stack.pop()!;
      const t = stack.pop()!;
      this.graph.forEachDownstream(t, p, (dt, dp) => {
        const running = this.#counters[dt]!.whileRunning();
        if (running === null) return;
        const orphaned = this.#orphaned[dt]!;
        if (orphaned.has(dp)) return;
        orphaned.add(dp);
        this.#pending[dt]!.delete(dp);
        running.orphan();
        touched.add(dt);
        this.#events.onOrphaned?.(dt, dp);
        stack.push(dt, dp);
      });
    }
    return touched;
  }

  #finalize(task: number): void {
    if (this.#counters[task]!.whileRunning()?.finalize() === true) {
      this.#events.onTaskFinished?.(task);
    }
  }
}
