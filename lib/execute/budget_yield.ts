/**
 * Which idle executors make room when a task waits for `--resources` budget. Freeing budget for
 * whichever task asks, one waiting task at a time, lets two tasks that take turns (a temporary
 * task and its readers, paced against each other) retire each other's workers on every turn:
 * hundreds of worker starts for a few thousand blocks. These rules free only executors whose
 * task cannot use them before the waiting task has made it work.
 * Also what pacing a temporary task to its readers asks of them (`readersLack`) and how much it
 * may take (`temporaryAllowance`).
 */

import type { DependencyGraph } from "../graph/mod.ts";
import type { Scheduler } from "../schedule/mod.ts";
import type { BlockSource } from "./block_source.ts";
import type { Executor } from "./executor.ts";
import type { TaskRuntime } from "./task_runtime.ts";

/** What pacing a temporary task reads of the run (the executor pool's options). */
export interface PacingContext {
  readonly preferDownstream?: boolean;
  readonly tasks: readonly TaskRuntime[];
  readonly graph: DependencyGraph;
  readonly scheduler: Scheduler;
  readonly source: BlockSource;
  /** Blocks of a task whose results arrived, not yet committed; ones whose removal lags. */
  readonly completion: {
    committing(task: number): number;
    removalBacklog(task: number): number;
    holdForRemoval(): void;
    barrierMs(): number;
  };
}

export interface BudgetView {
  /** Tasks reading each task's outputs. */
  readonly downstream: readonly (readonly number[])[];
  readonly preferDownstream: boolean;
  /** Blocks ready for the task's executors now. */
  available(task: number): number;
  /** Blocks of the task dispatched and not yet done (running, held or committing). */
  processing(task: number): number;
  /** A temporary task whose readers have enough: its executors may take nothing now. */
  heldBack(task: number): boolean;
}

/** For each task, every task downstream of it, directly or not. */
export function descendantsOf(downstream: readonly (readonly number[])[]): Set<number>[] {
  return downstream.map((_, t) => {
    const seen = new Set<number>();
    const stack = [...downstream[t]!];
    while (stack.length > 0) {
      const d = stack.pop()!;
      if (seen.has(d)) continue;
      seen.add(d);
      stack.push(...downstream[d]!);
    }
    return seen;
  });
}

/**
 * How many idle executors of `task` may retire so that `waiting` can start one, given how many
 * `task` has (`alive`) and whether `waiting` has none (`starved`):
 * - a task with blocks ready keeps them, except a temporary task held back, which gives one to
 *   a reader that has no executor;
 * - when downstream tasks are preferred, a task downstream of the waiting one yields only if its
 *   next blocks can come from nowhere else (no task between them has blocks ready or running),
 *   and keeps one executor unless the waiting task has none;
 * - any other task with nothing ready yields every idle executor.
 */
export function yieldable(
  view: BudgetView,
  descendants: readonly ReadonlySet<number>[],
  waiting: number,
  task: number,
  alive: number,
  starved: boolean,
): number {
  if (view.available(task) > 0) {
    return starved && view.heldBack(task) && view.downstream[task]!.includes(waiting) ? 1 : 0;
  }
  if (!view.preferDownstream || !descendants[waiting]!.has(task)) return alive;
  for (const between of descendants[waiting]!) {
    if (between === task || !descendants[between]!.has(task)) continue;
    if (view.available(between) > 0 || view.processing(between) > 0) return 0;
  }
  return starved ? alive : Math.max(0, alive - 1);
}

/**
 * What the readers of a temporary task lack when downstream tasks are preferred (the most any
 * reading task lacks; zero or less: they have enough), or null when the task is not paced (not
 * temporary, no preference, or no reader running).
 */
export function readersLack(
  o: PacingContext,
  t: number,
): number | null {
  if (o.preferDownstream !== true || !o.tasks[t]!.config.temporary) return null;
  let lack = Number.NEGATIVE_INFINITY;
  for (const d of o.graph.dag.downstream[t]!) {
    if (!o.scheduler.isRunning(d)) continue;
    const task = o.tasks[d]!;
    // What its workers will ask for next: half a window each, since a worker is sent blocks
    // once half its window is free (at least two blocks per worker).
    let wanted = 2 * task.config.maxWorkers;
    let queued = o.source.available(d);
    for (const e of task.executors) {
      queued += Math.max(0, e.inFlight.size - 1);
      wanted += Math.ceil(e.window / 2);
    }
    lack = Math.max(lack, wanted - queued);
  }
  return lack === Number.NEGATIVE_INFINITY ? null : lack;
}

/**
 * How many more blocks a temporary task's `executor` may be handed when downstream tasks are
 * preferred: none while its readers have enough (`readersLack`), else enough to fill its
 * workers' windows, counting its blocks in flight and committing as supply already on its way
 * (nothing until half a window fits, so blocks go out in batches: a message costs a few hundred
 * microseconds of thread wake-ups, more than a small block). While a reader starves (nothing
 * queued, a worker idle) only half of the committing blocks count: counting them all kept the
 * task and its reader both waiting for the commit, cores idle (bench/temporary.ts: 11-13 %
 * slower than without `temporary`, against 7-9 % with half, for about half a point of peak),
 * where barriers are quick (`QUICK_BARRIER_MS`); on a disk all of them count.
 * Nothing either while more of its blocks wait for their files' removal than its windows hold:
 * where an unlink trims the disk or crosses a network, removal can fall behind the readers, and
 * the live data would grow with the backlog (41.9 % of the task on disk at the peak instead of
 * under 20 %, on ext4 mounted with `discard`). Infinite for a task that is not paced. Under a
 * `--resources` budget that runs fewer of its workers than `maxWorkers`, the pipe is still
 * sized for `maxWorkers` (bench/temporary.ts --budget, one worker each for it and its reader:
 * 13.1 % slower than without `temporary` against 18.7 % with the pipe of one worker's window,
 * peak at most 17.5 % against 16.2 %).
 */
export function temporaryAllowance(o: PacingContext, executor: Executor): number {
  const t = executor.task;
  const lack = readersLack(o, t);
  if (lack === null) return Number.POSITIVE_INFINITY;
  if (lack <= 0) return 0;
  const task = o.tasks[t]!;
  let windows = 0;
  for (const e of task.executors) windows += e.window;
  if (o.completion.removalBacklog(t) > windows) {
    o.completion.holdForRemoval();
    return 0;
  }
  // The pipe holds what `maxWorkers` workers' windows would, however few the budget lets run:
  // the commit latency it hides is the same.
  windows = Math.floor(windows * task.config.maxWorkers / Math.max(1, task.executors.size));
  // Blocks released early already reached the readers: supply delivered, not in the pipe.
  const released = o.scheduler.releasedEarly(t);
  let inPipe = o.scheduler.snapshot(t).processing - released;
  if (readerStarving(o, t) && o.completion.barrierMs() < QUICK_BARRIER_MS) {
    inPipe -= Math.floor((o.completion.committing(t) - released) / 2);
  }
  const left = windows - inPipe;
  return left < executor.window / 2 ? 0 : left;
}

/**
 * Commit barriers quicker than this (median of the last 15, in ms) let half of a temporary
 * task's committing blocks go uncounted while a reader starves. tmpfs measured 0.7-1.4 ms (the
 * helper thread's wake-up on a busy machine), this VM's ext4 3.7-4.8 ms, a journaled ext4 9 ms:
 * there the blocks committing are a barrier's worth of production, and counting half of them
 * put the peak over 20 % (bench/temporary.ts on a journaled ext4: 20.3 % at the median and 21.9 %
 * at most against 18.5 % and 19.0 % counting them all, 15.2 % slower against 25.1 %).
 */
const QUICK_BARRIER_MS = 2.5;

/** Whether a reader of task `t` waits for it: nothing queued for it and one of its workers idle. */
function readerStarving(o: PacingContext, t: number): boolean {
  for (const d of o.graph.dag.downstream[t]!) {
    if (!o.scheduler.isRunning(d) || o.source.available(d) > 0) continue;
    for (const e of o.tasks[d]!.executors) {
      if (e.state === "ready" && e.inFlight.size === 0) return true;
    }
  }
  return false;
}
