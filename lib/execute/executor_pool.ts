/**
 * The executors of a run: started round-robin over tasks in display order while a task has
 * blocks for them and room in the `--resources` budget, retired when their task has nothing left
 * for them (or another task waits for budget), replaced after a crash while `maxWorkerRestarts`
 * allows, and the task abandoned when it does not. A lost executor's running block fails that
 * attempt; its other blocks go back to the queue untouched. Elastic counts: elastic_workers.ts.
 */

import { type DependencyGraph, readsMarked } from "../graph/mod.ts";
import type { OutputPlan } from "../outputs/output_plan.ts";
import type { ResourceBudget, Scheduler } from "../schedule/mod.ts";
import { describeAbandonReason } from "../schedule/mod.ts";
import type { BlockSource } from "./block_source.ts";
import {
  type BudgetView,
  descendantsOf,
  readersLack,
  temporaryAllowance,
  yieldable,
} from "./budget_yield.ts";
import type { BlockCompletion } from "./completion.ts";
import type { Executor, ExecutorEvents, ExecutorFactory, TaskDemand } from "./executor.ts";
import { ElasticWorkers } from "./elastic_workers.ts";
import type { FillQueue } from "./fill_queue.ts";
import type { DeviceSeats } from "./device_seats.ts";
import { lostNotice } from "./lost_notice.ts";
import { settleLostBlocks } from "./lost_blocks.ts";
import { ParkedExecutors } from "./parked_executors.ts";
import type { RunClock } from "./run_clock.ts";
import { SetupFailures, type SetupLoss } from "./setup_failures.ts";
import { Recalls } from "./recalls.ts";
import { WorkerLifetimes } from "./run_stats.ts";
import type { RunObserver } from "../run/run_types.ts";
import type { TaskRuntime } from "./task_runtime.ts";
import { taskDemands } from "./worker_demand.ts";

export interface ExecutorPoolOptions {
  readonly pipelinePath: string;
  readonly graph: DependencyGraph;
  readonly scheduler: Scheduler;
  readonly source: BlockSource;
  readonly completion: BlockCompletion;
  readonly tasks: readonly TaskRuntime[];
  /** Told of every executor joining and leaving a task (it keeps the counts of idle ones). */
  readonly fills: FillQueue;
  readonly budget: ResourceBudget;
  readonly factory: ExecutorFactory;
  readonly clock: RunClock;
  readonly events: ExecutorEvents;
  readonly observer: RunObserver;
  readonly measure: (task: number) => boolean;
  readonly maxWindow: number;
  /**
   * Prefer downstream tasks (pipelines with temporaries): workers go to the most downstream task
   * with blocks, and an upstream task's executors drain to make room, so temporary data is read
   * and freed soon after it is written instead of piling up across the volume.
   */
  readonly preferDownstream?: boolean;
  /** Each task's resolved outputs (none: empty). */
  readonly outputs: (task: number) => readonly OutputPlan[];
  readonly runId: string;
  /** GPUs per worker of the tasks that require them here (none: no task does). */
  readonly devices?: DeviceSeats | undefined;
}

/** Waiting blocks of a temporary task's reader that drain its upstream when budget is short. */
const BACKLOG = 32;

export class ExecutorPool {
  readonly #o: ExecutorPoolOptions;
  /** Each worker's statistics, for the summary and `runs.jsonl`. */
  readonly lifetimes = new WorkerLifetimes();
  /** Executors that get no new blocks: they finish what they hold and are retired. */
  readonly #draining = new Set<Executor>();
  /** Executors leaving on their own (walltime): not counted against maxWorkers or the budget. */
  readonly #leaving = new Set<Executor>();
  /** Per task, how many are leaving (a fleet's jobs reach their walltime together). */
  readonly #leavingCount: number[];
  readonly setupFailures = new SetupFailures();
  #nextWorkerId = 0;
  readonly #descendants: readonly ReadonlySet<number>[];
  readonly #budgetView: BudgetView;
  readonly #recalled = new Recalls();
  /** Readers of a temporary task: only their backlog drains the tasks upstream (TEMPORARIES.md). */
  readonly #readsTemporary: readonly boolean[];
  /** Idle executors out of the budget until their task's turn comes back. */
  readonly #parked = new ParkedExecutors(this.lifetimes);
  readonly #elastic: ElasticWorkers; // tasks with launch.workers
  readonly #demand: TaskDemand[]; // per task: could one more worker help now (servers ask)

  constructor(options: ExecutorPoolOptions) {
    this.#o = options;
    this.#elastic = new ElasticWorkers(options);
    this.#leavingCount = options.tasks.map(() => 0);
    this.#demand = taskDemands(options.tasks, (t) => options.fills.running(t), options.clock);
    const { dag } = options.graph;
    this.#descendants = descendantsOf(dag.downstream);
    this.#readsTemporary = options.preferDownstream === true
      ? readsMarked(dag, (u) => options.tasks[u]!.config.temporary)
      : dag.upstream.map(() => false);
    this.#budgetView = {
      downstream: dag.downstream,
      preferDownstream: options.preferDownstream === true,
      available: (t) => options.source.available(t),
      processing: (t) => options.scheduler.snapshot(t).processing,
      heldBack: (t) => this.#heldBack(t),
    };
  }

  /**
   * How many more blocks the dispatcher may hand this executor now: none while it drains, and
   * (downstream tasks preferred) a temporary task's only what its readers lack
   * (`temporaryAllowance`), so the live temporary data follows the readers' frontier.
   */
  allowance(executor: Executor): number {
    if (this.#draining.has(executor)) return 0;
    return temporaryAllowance(this.#o, executor);
  }

  /** A temporary task whose readers have enough: its executors may take nothing now. */
  #heldBack(t: number): boolean {
    const lack = readersLack(this.#o, t);
    return lack !== null && lack <= 0;
  }

  spawnWanted(): void {
    const order = this.#o.preferDownstream === true
      ? [...this.#o.graph.dag.order].reverse()
      : this.#o.graph.dag.order;
    let grew = true;
    while (grew) {
      grew = false;
      for (const t of order) {
        if (this.#wantsExecutor(t)) {
          this.#spawn(t);
          grew = true;
        }
      }
    }
  }

  #wantsExecutor(t: number): boolean {
    const { scheduler, source, budget } = this.#o;
    const task = this.#o.tasks[t]!;
    if (!scheduler.isRunning(t)) return false;
    const available = source.available(t);
    if (available === 0 || this.#heldBack(t)) return false;
    const alive = task.stats.alive - this.#leavingCount[t]!;
    if (alive >= task.config.maxWorkers) return false;
    if (!this.#elastic.allows(t, alive, available)) return false;
    // Do not start more executors than there are blocks waiting for one.
    if (this.#o.fills.waiting(t) >= available) return false;
    const restart = task.stats.workerFailures > task.stats.restarts;
    if (restart && task.stats.restarts >= task.config.maxWorkerRestarts) return false;
    if (restart && this.setupFailures.deterministic(t) !== null) return false; // abandoned next
    if (this.#o.devices?.canSeat(t) === false) return false; // GPUs back when a process exits
    if (budget.canAdmit(task.config.requires)) return true;
    this.#freeBudgetFor(t); // freed budget of other tasks' idle executors is used now
    if (available >= BACKLOG && this.#readsTemporary[t]) this.#drainUpstreamOf(t);
    return budget.canAdmit(task.config.requires);
  }

  /** It no longer leaves (it is gone); false when it was not leaving. */
  #unleave(executor: Executor): boolean {
    if (!this.#leaving.delete(executor)) return false;
    this.#leavingCount[executor.task]!--;
    return true;
  }

  /**
   * A worker takes no more blocks (its job nears its walltime): it gets none, hands back what it
   * has not started, finishes its block and is retired; a replacement may start at once. One
   * that leaves before finishing any block counts as a failed worker (not one that joined by
   * hand), so that jobs too short to do anything spend the restart cap instead of churning.
   */
  leaving(executor: Executor, reason: string): void {
    const task = this.#o.tasks[executor.task]!;
    if (!task.executors.has(executor) || this.#leaving.has(executor)) return;
    this.#leaving.add(executor);
    this.#leavingCount[executor.task]!++;
    this.#draining.add(executor);
    this.#o.budget.release(task.config.requires);
    const idle = this.lifetimes.of(executor).blocks === 0 && executor.joined !== true;
    if (idle && this.#o.scheduler.isRunning(executor.task)) task.stats.workerFailures++;
    this.#o.observer.notice?.(
      `Task "${task.config.id}": worker ${executor.id} takes no more blocks (${reason}); a replacement starts while blocks remain`,
    );
    if (executor.inFlight.size === 0 && executor.state === "ready") this.#retire(executor, "clean");
    else executor.recall();
  }

  /** Let the executors of tasks upstream of `t` finish their blocks and make room for it. */
  #drainUpstreamOf(t: number): void {
    this.#o.tasks.forEach((task, u) => {
      // A temporary task is paced by its readers already (allowance): draining it would starve
      // them a moment later, and start and retire its workers over and over.
      if (!this.#descendants[u]!.has(t) || task.config.temporary) return;
      for (const executor of task.executors) {
        if (this.#draining.has(executor)) continue;
        this.#draining.add(executor);
        if (executor.inFlight.size === 0 && executor.state === "ready") {
          this.#retire(executor, "parked");
        } else executor.recall();
      }
    });
  }

  #spawn(t: number): void {
    const o = this.#o;
    const task = o.tasks[t]!;
    const back = this.#parked.take(t, o.clock.now());
    if (back !== null) {
      o.budget.acquire(task.config.requires);
      task.executors.add(back);
      o.fills.joined(back);
      task.stats.workerResumed();
      return;
    }
    const id = this.#nextWorkerId++;
    if (task.stats.workerFailures > task.stats.restarts) task.stats.restarts++;
    const devices = o.devices?.take(t, id);
    const executor = o.factory({
      id,
      task: t,
      config: task.config,
      layout: o.graph.layouts[t]!,
      pipelinePath: o.pipelinePath,
      measure: o.measure(t),
      outputs: o.outputs(t),
      runId: o.runId,
      clock: o.clock,
      events: o.events,
      demand: this.#demand[t]!,
      ...(devices === undefined ? {} : { devices }),
    });
    executor.window = Math.min(executor.window, o.maxWindow);
    o.budget.acquire(task.config.requires);
    task.executors.add(executor);
    o.fills.joined(executor);
    const now = o.clock.now();
    task.stats.workerStarted(now);
    this.lifetimes.started(executor, id, task.config.id, now);
    this.#elastic.launched(executor, now);
  }

  /**
   * An executor is gone (crash, timeout, self-close, failed setup). The block it was running
   * fails this attempt (when `blockAtFault`); its other blocks return to the queue untouched.
   */
  lost(executor: Executor, reason: string, blockAtFault: boolean, setup?: SetupLoss): void {
    const { scheduler, completion, source, observer } = this.#o;
    const t = executor.task;
    const task = this.#o.tasks[t]!;
    this.#draining.delete(executor);
    this.#recalled.delete(executor);
    if (!task.executors.delete(executor)) {
      this.#parked.lost(executor, this.#o.clock.now(), reason, observer, task.config.id);
      return;
    }
    this.#o.fills.left(executor);
    executor.kill();
    this.#o.devices?.vacate(executor);
    if (!this.#unleave(executor)) this.#o.budget.release(task.config.requires);
    const now = this.#o.clock.now();
    task.stats.workerEnded(now);
    this.lifetimes.ended(executor, "crashed", now, 0, reason);
    if (scheduler.isRunning(t) && executor.joined !== true) {
      task.stats.workerFailures++;
      this.setupFailures.lost(t, setup, task.stats.workerFailures === 1);
    }
    settleLostBlocks(executor, reason, blockAtFault, now, completion, source);
    const final = this.setupFailures.deterministic(t) !== null;
    if (scheduler.isRunning(t)) observer.notice?.(lostNotice(task, executor, reason, final));
  }

  /** Let every executor check itself at the run clock's `now` (timeouts, leases). */
  checkHealth(now: number): void {
    for (const task of this.#o.tasks) {
      for (const executor of [...task.executors]) executor.checkHealth(now);
    }
  }

  /** Retire the executors of tasks that are no longer running. */
  retireFinished(): void {
    for (let t = 0; t < this.#o.tasks.length; t++) {
      if (!this.#o.scheduler.isRunning(t)) this.retireAll(t);
    }
  }

  /** Retire an idle executor of a task that will never have more work for it. */
  retireIdle(): void {
    const { scheduler, source } = this.#o;
    // On every pump: with thousands of workers nothing here may walk them all while blocks are
    // ready (nor copy the set of draining ones when it is empty).
    if (this.#draining.size > 0) {
      for (const executor of [...this.#draining]) {
        if (executor.inFlight.size === 0 && executor.state !== "starting") {
          this.#retire(executor, this.#leaving.has(executor) ? "clean" : "parked");
        }
      }
    }
    this.#o.tasks.forEach((task, t) => {
      if (task.executors.size === 0) return;
      // An elastic task's idle workers beyond its min leave (blocks being checked may run).
      if (this.#elastic.range(t) !== undefined) {
        const waiting = source.available(t) + source.checking(t);
        this.#elastic.release(t, this.#leavingCount[t]!, waiting, (e) => this.#retire(e, "clean"));
      }
      if (source.available(t) > 0 || scheduler.snapshot(t).pending > 0) return;
      // A block whose asynchronous check has not answered may still need to run: retiring now
      // would start a new executor (and its setup) for it moments later.
      if (source.checking(t) > 0) return;
      // Keep idle executors while a sibling holds unstarted blocks they can take over, or was
      // asked to hand them back and has not answered yet (they come back ready for them).
      if (this.#o.fills.heavy(t) > 0 || this.#recalled.of(t) > 0) return;
      if (this.#o.fills.readyIdle(t) === 0) return;
      // The idle ones are those the dispatcher left wanting. Walking every executor instead, on
      // each pump of a tail where thousands of workers idle one after another, was quadratic.
      const idle = (e: Executor) => e.inFlight.size === 0 && e.state === "ready";
      for (const executor of this.#o.fills.hungry(t)) {
        if (idle(executor)) this.#retire(executor, "clean");
      }
      if (this.#o.fills.readyIdle(t) === 0) return;
      for (const executor of [...task.executors]) {
        if (idle(executor)) this.#retire(executor, "clean");
      }
    });
  }

  /** One idles while a sibling holds several unstarted blocks (its window grew on fast blocks,
   * then blocks turned slow): recall them so they spread. */
  rebalanceHeld(): void {
    this.#o.tasks.forEach((task, t) => {
      if (task.executors.size < 2 || this.#o.source.available(t) > 0) return;
      if (this.#o.fills.heavy(t) === 0) return; // nobody holds blocks to spread
      if (this.#o.fills.readyIdle(t) === 0) return; // nobody is idle to take them
      // Every one that holds some is asked already (or was, and has not answered).
      if (this.#recalled.of(t) >= this.#o.fills.heavy(t)) return;
      for (const executor of task.executors) {
        if (executor.inFlight.size <= 2 || this.#recalled.has(executor)) continue;
        this.#recalled.add(executor);
        executor.recall();
      }
    });
  }

  /** An executor answered a recall (`returned`). */
  recallAnswered(executor: Executor): void {
    this.#recalled.delete(executor);
  }

  /** Another task waits for budget: stop executors of tasks with nothing ready to run. */
  #freeBudgetFor(waiting: number): void {
    const starved = this.#o.tasks[waiting]!.stats.alive - this.#leavingCount[waiting]! === 0;
    this.#o.tasks.forEach((task, t) => {
      if (t === waiting) return;
      let n = yieldable(
        this.#budgetView,
        this.#descendants,
        waiting,
        t,
        task.executors.size,
        starved,
      );
      for (const executor of [...task.executors]) {
        if (n <= 0) return;
        if (executor.inFlight.size === 0 && executor.state === "ready") {
          this.#retire(executor, "parked");
          n--;
        }
      }
    });
  }

  /** Abandon tasks that have no live executor and owe a restart they cannot have. */
  checkAbandonment(): void {
    const { scheduler, observer } = this.#o;
    this.#o.tasks.forEach((task, t) => {
      if (!scheduler.isRunning(t)) return;
      const deterministic = this.setupFailures.deterministic(t);
      if (deterministic === null) {
        if (task.stats.alive > 0) return;
        const owed = task.stats.workerFailures > task.stats.restarts;
        if (!owed || task.stats.restarts < task.config.maxWorkerRestarts) return;
      }
      const abandoned = scheduler.abandon(
        t,
        this.setupFailures.abandonReason(t) ?? {
          kind: "workers-failed",
          failures: task.stats.workerFailures,
          maxWorkerRestarts: task.config.maxWorkerRestarts,
        },
      );
      for (const a of abandoned) {
        const reason = scheduler.snapshot(a).abandonReason;
        observer.notice?.(
          `Task "${this.#o.tasks[a]!.config.id}" abandoned: ${
            reason === undefined ? "no reason recorded" : describeAbandonReason(reason)
          }`,
        );
        this.retireAll(a);
      }
    });
  }

  /** Kill a task's executors; the blocks they hold go back to the queue. */
  retireAll(t: number): void {
    this.#parked.end(this.#o.clock.now(), "clean", t);
    for (const executor of [...this.#o.tasks[t]!.executors]) {
      const queue = executor.inFlight;
      // One holding nothing is told to stop, even while it starts: a remote worker then exits and
      // ends its job by itself, and one still setting up (thousands when a big fleet's run ends)
      // does not log a lost scheduler and fail. One never connected: stop cancels its launch.
      const idle = queue.size === 0;
      for (let i = 0; i < queue.size; i++) this.#o.scheduler.requeue(t, queue.positionAt(i));
      queue.clear();
      this.#retire(executor, idle ? "clean" : "killed");
    }
  }

  /** Kill everything now (teardown); no event fires afterwards. */
  killAll(): void {
    this.#parked.end(this.#o.clock.now(), "killed");
    this.#o.fills.clear();
    for (const task of this.#o.tasks) {
      for (const executor of task.executors) executor.kill();
      task.executors.clear();
    }
  }

  /** Take an executor out of the run: "parked" (an idle one whose task will want it back) keeps
   * it out of the budget when it may be parked, else it exits as "clean". */
  #retire(executor: Executor, exit: "clean" | "killed" | "parked"): void {
    const task = this.#o.tasks[executor.task]!;
    this.#draining.delete(executor);
    this.#recalled.delete(executor);
    if (!task.executors.delete(executor)) return;
    this.#o.fills.left(executor);
    const now = this.#o.clock.now();
    const park = exit === "parked" && ParkedExecutors.eligible(executor, task.config) &&
      this.#o.scheduler.isRunning(executor.task);
    if (park) this.#parked.park(executor, now);
    else if (exit === "killed") executor.kill();
    else executor.stop();
    if (!park) this.#o.devices?.vacate(executor);
    if (!this.#unleave(executor)) this.#o.budget.release(task.config.requires);
    task.stats.workerEnded(now);
    if (!park) this.lifetimes.ended(executor, exit === "killed" ? "killed" : "clean", now);
  }
}
