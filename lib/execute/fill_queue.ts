/**
 * Which executors a pump fills. Filling every executor of every task on every pump made each
 * results message cost O(executors), and counting a task's waiting executors inside each fill
 * O(executors²): with 2,000 remote workers the scheduler spent its core on it (under 8,000
 * no-op blocks/s; docs/design/REMOTE.md, "A fleet of workers"). Now a pump fills
 *   - the executors *marked* since the last one: one that joined its task (started, or back from
 *     parking), became ready, reported results (its window may have grown too) or handed blocks
 *     back, i.e. whatever changed its own state;
 *   - and, while its task has blocks available, the *hungry* ones: executors the dispatcher left
 *     wanting because the task had too few blocks (`Dispatcher.fill` returns true). Nothing of
 *     their own will happen to an idle one, so they wait here until the task has blocks again
 *     (released downstream, handed back, retried, an asynchronous check answering, the
 *     pre-checks' next turn), and are tried oldest first until the blocks run out.
 * A busy executor refused for its fair share, a window waiting to be half free, or a full one is
 * not kept: its own results mark it again. Tasks paced by their readers (a temporary task when
 * downstream tasks are preferred) have an allowance that moves with other tasks' state: their
 * few local executors are all filled on every pump, as before.
 *
 * The invariant (`check`, run after every pump under BLOCKWISE_CHECK_DISPATCH=1): after a pump,
 * no ready executor that holds nothing, with an allowance of a block, belongs to a task (not
 * paced) with blocks available; and the counts kept per task equal a recount. A missed mark
 * breaks it (and could hang a run): the run-loop tests pass with the check on, and
 * tests/fill_queue.test.ts makes it after every event of random runs.
 */

import type { BlockSource } from "./block_source.ts";
import type { Dispatcher } from "./dispatch.ts";
import type { Executor } from "./executor.ts";
import { QueueTally } from "./in_flight.ts";
import type { TaskRuntime } from "./task_runtime.ts";

const startsFar = (e: Executor): boolean => e.state === "starting" && e.batchMs !== undefined;

export class FillQueue {
  readonly #tasks: readonly TaskRuntime[];
  readonly #source: BlockSource;
  /** Tasks whose executors are all filled on every pump (their allowance moves by itself). */
  readonly #paced: readonly boolean[];
  readonly #tallies: QueueTally[];
  #marked: Set<Executor>[];
  /** The other set of each task's pair: marks made while a pass walks the first go here. */
  #spare: Set<Executor>[];
  readonly #hungry: Set<Executor>[];
  /**
   * Remote executors still starting (`batchMs` set: a job in a cluster's queue may be minutes
   * away). The fair share keeps no blocks for them: a window holds REMOTE_TARGET_BATCH_MS of
   * blocks, and `rebalanceHeld` spreads the held ones once they connect and idle. A local
   * worker starts within milliseconds and keeps its share.
   */
  readonly #starting: Set<Executor>[];
  /** Local executors still starting: they hold nothing, but cannot take blocks handed back. */
  readonly #startingNear: Set<Executor>[];

  constructor(tasks: readonly TaskRuntime[], source: BlockSource, paced: readonly boolean[]) {
    this.#tasks = tasks;
    this.#source = source;
    this.#paced = paced;
    this.#tallies = tasks.map(() => new QueueTally());
    this.#marked = tasks.map(() => new Set());
    this.#spare = tasks.map(() => new Set());
    this.#hungry = tasks.map(() => new Set());
    this.#starting = tasks.map(() => new Set());
    this.#startingNear = tasks.map(() => new Set());
  }

  /** Executors of `task` that wait for blocks: starting, or holding none. */
  waiting(task: number): number {
    return this.#tallies[task]!.empty;
  }

  /** Executors of `task` holding none and not a remote one still starting (the fair share's). */
  idle(task: number): number {
    return this.#tallies[task]!.empty - this.#starting[task]!.size;
  }

  /** Executors of `task` that run blocks: neither starting nor gone (counted, not walked). */
  running(task: number): number {
    return this.#tasks[task]!.executors.size - this.#starting[task]!.size -
      this.#startingNear[task]!.size;
  }

  /**
   * Executors of `task` that are ready and hold nothing (counted, not walked: with thousands of
   * workers, walking them on every pump of a run's tail was a third of the scheduler's time).
   */
  readyIdle(task: number): number {
    return this.idle(task) - this.#startingNear[task]!.size;
  }

  /**
   * Executors of `task` the dispatcher left wanting (the task had too few blocks for them): in
   * a run's tail, its idle executors. A copy: the caller may retire them.
   */
  hungry(task: number): Executor[] {
    return [...this.#hungry[task]!];
  }

  /** Executors of `task` holding more than two blocks (some an idle sibling could take). */
  heavy(task: number): number {
    return this.#tallies[task]!.heavy;
  }

  /** The executor was added to its task's executors. */
  joined(executor: Executor): void {
    executor.inFlight.track(this.#tallies[executor.task]!);
    if (startsFar(executor)) this.#starting[executor.task]!.add(executor);
    else if (executor.state === "starting") this.#startingNear[executor.task]!.add(executor);
    this.mark(executor);
  }

  /** The executor left `starting`: it runs blocks now. */
  ready(executor: Executor): void {
    this.#starting[executor.task]!.delete(executor);
    this.#startingNear[executor.task]!.delete(executor);
    this.mark(executor);
  }

  /** The executor left its task's executors (retired, parked, lost). */
  left(executor: Executor): void {
    executor.inFlight.track(null);
    this.#marked[executor.task]!.delete(executor);
    this.#hungry[executor.task]!.delete(executor);
    this.#starting[executor.task]!.delete(executor);
    this.#startingNear[executor.task]!.delete(executor);
  }

  /** Every executor left (the run ends). */
  clear(): void {
    for (const task of this.#tasks) for (const e of task.executors) e.inFlight.track(null);
    for (const sets of [this.#marked, this.#hungry, this.#starting, this.#startingNear]) {
      for (const s of sets) s.clear();
    }
  }

  /** Something of the executor's own changed: the next pump fills it. */
  mark(executor: Executor): void {
    this.#marked[executor.task]!.add(executor);
  }

  /** One pump's filling of `task`: its hungry executors while blocks last, then the marked. */
  fill(task: number, dispatcher: Dispatcher): void {
    const executors = this.#tasks[task]!.executors;
    if (this.#paced[task]) {
      for (const e of executors) dispatcher.fill(e);
      this.#marked[task]!.clear();
      return;
    }
    const hungry = this.#hungry[task]!;
    if (hungry.size > 0 && this.#source.available(task) > 0) {
      let still: Executor[] | null = null;
      for (const e of hungry) {
        if (this.#source.available(task) === 0) break;
        hungry.delete(e);
        if (executors.has(e) && dispatcher.fill(e) && executors.has(e)) (still ??= []).push(e);
      }
      // Added back after the walk, which would visit them again otherwise.
      for (const e of still ?? []) hungry.add(e);
    }
    const marked = this.#marked[task]!;
    if (marked.size === 0) return;
    this.#marked[task] = this.#spare[task]!;
    for (const e of marked) {
      if (executors.has(e) && dispatcher.fill(e) && executors.has(e)) hungry.add(e);
    }
    marked.clear();
    this.#spare[task] = marked;
  }

  /**
   * The invariant above, or a description of how it is broken. `allowance` is the pool's: an
   * idle executor with less than one block of it is not owed one.
   */
  check(allowance: (executor: Executor) => number): string | null {
    for (const [t, task] of this.#tasks.entries()) {
      let empty = 0;
      let heavy = 0;
      let starting = 0;
      let startingNear = 0;
      for (const e of task.executors) {
        if (startsFar(e)) starting++;
        else if (e.state === "starting") startingNear++;
        if (e.inFlight.size === 0) empty++;
        else if (e.inFlight.size > 2) heavy++;
      }
      if (this.#starting[t]!.size !== starting) {
        return `task ${t}: ${
          this.#starting[t]!.size
        } executors are counted as starting, a recount says ${starting}`;
      }
      if (this.#startingNear[t]!.size !== startingNear) {
        return `task ${t}: ${
          this.#startingNear[t]!.size
        } local executors are counted as starting, a recount says ${startingNear}`;
      }
      const tally = this.#tallies[t]!;
      if (tally.empty !== empty || tally.heavy !== heavy) {
        return `task ${t}: the tally says ${tally.empty} executors empty and ${tally.heavy} heavy, a recount ${empty} and ${heavy}`;
      }
      // A paced task's allowance moves with its readers, filled after it: as before, it may
      // be owed blocks until the next pump.
      const available = this.#source.available(t);
      if (available === 0 || this.#paced[t]) continue;
      for (const e of task.executors) {
        if (e.state !== "ready" || e.inFlight.size > 0 || e.window < 1) continue;
        if (allowance(e) < 1) continue;
        return `task ${t}: executor ${e.id} is ready and holds nothing while ${available} blocks are available (marked: ${
          this.#marked[t]!.has(e)
        }, hungry: ${this.#hungry[t]!.has(e)})`;
      }
    }
    return null;
  }
}
