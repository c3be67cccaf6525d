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

import { type BlockRef, type DependencyGraph } from "../graph/mod.ts";
import { compareBlockIds } from "../blocks/mod.ts";
import { type CounterSnapshot, TaskCounters } from "./counters.ts";
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
  /** Cheap synchronous pre-check (done marker, then skip mask); null means run the block. */
  readonly precheck?: (position: number) => SkipReason | null;
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
  private readonly counters: TaskCounters[];
  private readonly queues: ReadyQueue[];
  private readonly pending: Map<number, number>[];
  private readonly orphaned: Set<number>[];
  private readonly retries: Map<number, number>[];
  private readonly options: readonly SchedulerTaskOptions[];
  private readonly events: SchedulerEvents;
  private readonly newlyReady: BlockRef[] = [];

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
    this.options = options;
    this.events = events;
    const n = graph.taskCount;
    this.counters = [];
    this.queues = [];
    this.pending = [];
    this.orphaned = [];
    this.retries = [];
    for (let t = 0; t < n; t++) {
      if (options[t]!.alreadyDone === true) graph.markSatisfied(t);
    }
    for (let t = 0; t < n; t++) {
      const layout = graph.layouts[t]!;
      if (options[t]!.alreadyDone === true) {
        const c = new TaskCounters(layout.blockCount, 0);
        c.completed = c.skipped = layout.blockCount;
        c.started = layout.blockCount > 0;
        this.counters.push(c);
        this.queues.push(new ReadyQueue(null));
        this.pending.push(new Map());
        this.orphaned.push(new Set());
        this.retries.push(new Map());
        continue;
      }
      const initial = layout.blockCount === 0 ? 0 : graph.initialCount(t);
      this.counters.push(new TaskCounters(layout.blockCount, initial));
      this.queues.push(new ReadyQueue(initial === 0 ? null : graph.initialPositions(t)));
      this.pending.push(new Map());
      this.orphaned.push(new Set());
      this.retries.push(new Map());
    }
    for (let t = 0; t < n; t++) this.finalize(t);
  }

  get taskCount(): number {
    return this.counters.length;
  }

  taskId(task: number): string {
    return this.graph.dag.ids[task]!;
  }

  snapshot(task: number): CounterSnapshot {
    return this.counters[task]!.snapshot();
  }

  isRunning(task: number): boolean {
    return this.counters[task]!.running;
  }

  readyCount(task: number): number {
    return this.counters[task]!.ready;
  }

  processingCount(task: number): number {
    return this.counters[task]!.processing;
  }

  /** 1 for the first attempt of a block, 2 for its first retry, and so on. */
  attemptOf(task: number, position: number): number {
    return (this.retries[task]!.get(position) ?? 0) + 1;
  }

  /**
   * Hand out the next ready block of a task (it becomes `processing`), or -1 when none is
   * ready. Blocks the pre-check skips are released as successes on the way, as daisy does.
   */
  acquire(task: number): number {
    const c = this.counters[task]!;
    if (!c.running) return -1;
    const queue = this.queues[task]!;
    const precheck = this.options[task]!.precheck;
    while (c.ready > 0) {
      const position = queue.shift();
      if (position < 0) break;
      c.ready--;
      c.processing++;
      c.started = true;
      const skip = precheck === undefined ? null : precheck(position);
      if (skip === null) return position;
      this.succeed(task, position, skip);
      if (!c.running) return -1;
    }
    return -1;
  }

  /**
   * A processing block succeeded (or was skipped by `check`). Returns false when the release was
   * dropped because the task is no longer running.
   */
  succeed(task: number, position: number, skipped: SkipReason | null = null): boolean {
    const c = this.counters[task]!;
    if (!c.running) return false;
    c.processing--;
    c.completed++;
    if (skipped !== null) c.skipped++;
    this.retries[task]!.delete(position);
    this.releaseDownstream(task, position);
    this.finalize(task);
    return true;
  }

  /**
   * A processing block's attempt failed. It is queued again until `maxRetries` retries were
   * spent; then it fails permanently and everything downstream of it is orphaned.
   */
  fail(task: number, position: number): FailureOutcome {
    const c = this.counters[task]!;
    if (!c.running) return "dropped";
    c.failedAttempts++;
    const retries = this.retries[task]!;
    const spent = retries.get(position) ?? 0;
    if (spent < this.options[task]!.maxRetries) {
      retries.set(position, spent + 1);
      this.queues[task]!.push(position);
      c.processing--;
      c.ready++;
      return "retry";
    }
    retries.delete(position);
    c.processing--;
    c.failed++;
    const touched = this.orphanDownstream(task, position);
    this.finalize(task);
    for (const t of touched) this.finalize(t);
    return "failed";
  }

  /**
   * Return a processing block to the back of its queue without spending an attempt: its
   * worker was lost before it started the block, or the run is stopping.
   */
  requeue(task: number, position: number): boolean {
    const c = this.counters[task]!;
    if (!c.running) return false;
    this.queues[task]!.push(position);
    c.processing--;
    c.ready++;
    return true;
  }

  /**
   * Give up on a task (its workers kept crashing, or the run is being torn down): every block
   * not yet terminal is orphaned, and so is every task downstream of it.
   */
  abandon(task: number, reason: string): number[] {
    const abandoned: number[] = [];
    const stack = [task];
    let why = reason;
    while (stack.length > 0) {
      const t = stack.pop()!;
      if (this.counters[t]!.abandon(why)) {
        this.queues[t]!.clear();
        this.pending[t]!.clear();
        this.retries[t]!.clear();
        abandoned.push(t);
        this.events.onTaskFinished?.(t);
        for (const d of this.graph.dag.downstream[t]!) stack.push(d);
      }
      why = `upstream task "${this.taskId(task)}" was abandoned`;
    }
    return abandoned;
  }

  /** Every task is done or abandoned. */
  isFinished(): boolean {
    return this.counters.every((c) => !c.running);
  }

  /**
   * Nothing is ready or processing anywhere, yet some task is still running: the run could
   * never finish. The graph makes this impossible; it is checked so a bug fails loudly instead
   * of hanging.
   */
  isStalled(): boolean {
    let running = false;
    for (const c of this.counters) {
      if (c.ready > 0 || c.processing > 0) return false;
      if (c.running) running = true;
    }
    return running;
  }

  assertBalanced(): void {
    this.counters.forEach((c, t) => c.assertBalanced(this.taskId(t)));
  }

  private releaseDownstream(task: number, position: number): void {
    const ready = this.newlyReady;
    ready.length = 0;
    this.graph.forEachDownstream(task, position, (t, p) => {
      if (!this.counters[t]!.running || this.orphaned[t]!.has(p)) return;
      const pending = this.pending[t]!;
      const missing = (pending.get(p) ?? this.graph.upstreamCount(t, p)) - 1;
      if (missing === 0) {
        pending.delete(p);
        ready.push({ task: t, position: p });
      } else {
        pending.set(p, missing);
      }
    });
    if (ready.length > 1) {
      // daisy appends newly ready blocks in block-ID order (reference §5.2).
      const keyed = ready.map((r) => ({ r, id: this.graph.blockIdOf(r) }));
      keyed.sort((a, b) => compareBlockIds(a.id, b.id));
      for (const { r } of keyed) this.enqueue(r.task, r.position);
    } else if (ready.length === 1) {
      this.enqueue(ready[0]!.task, ready[0]!.position);
    }
  }

  private enqueue(task: number, position: number): void {
    const c = this.counters[task]!;
    if (!c.running) return;
    this.queues[task]!.push(position);
    c.ready++;
  }

  /** Orphan the transitive downstream closure of a failed block; returns the tasks touched. */
  private orphanDownstream(task: number, position: number): Set<number> {
    const touched = new Set<number>();
    const stack: number[] = [task, position];
    while (stack.length > 0) {
      const p = stack.pop()!;
      const t = stack.pop()!;
      this.graph.forEachDownstream(t, p, (dt, dp) => {
        const c = this.counters[dt]!;
        if (!c.running) return;
        const orphaned = this.orphaned[dt]!;
        if (orphaned.has(dp)) return;
        orphaned.add(dp);
        this.pending[dt]!.delete(dp);
        c.orphaned++;
        touched.add(dt);
        this.events.onOrphaned?.(dt, dp);
        stack.push(dt, dp);
      });
    }
    return touched;
  }

  private finalize(task: number): void {
    const c = this.counters[task]!;
    if (c.running && c.finalize()) this.events.onTaskFinished?.(task);
  }
}
