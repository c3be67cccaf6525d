/**
 * `blockwise run`: the parallel run loop. The main thread owns the scheduler; this module only
 * glues the parts together and decides when the run ends:
 *   - `ExecutorPool` starts, retires, replaces and health-checks executors (made by a factory),
 *   - `Dispatcher` fills their windows from the `BlockSource` (pre-checks and `check`),
 *   - `ResultIntake` turns what comes back into outcomes, and
 *   - `BlockCompletion` records every outcome and releases downstream blocks.
 *
 * Every path ends with balanced counters: a crashed, timed-out or self-closed executor's block
 * fails that attempt, its other blocks go back to the queue, and results that arrive from a
 * terminated executor are dropped by the executor itself, so they never move a counter.
 */

import type { DependencyGraph } from "../graph/mod.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { ResourceBudget, Scheduler, type StartStage } from "../schedule/mod.ts";
import { ioBytes, peakRssBytes, processCpuSeconds } from "../runtime/mod.ts";
import process from "node:process";
import { BlockCompletion } from "./completion.ts";
import { BlockSource } from "./block_source.ts";
import { Dispatcher, MAX_WINDOW } from "./dispatch.ts";
import type { Executor, ExecutorEvents } from "./executor.ts";
import { localExecutorFactory } from "./executor_factory.ts";
import { ExecutorPool } from "./executor_pool.ts";
import { lostReason } from "./setup_failures.ts";
import { FillQueue } from "./fill_queue.ts";
import type { ResultsMessage } from "./protocol/messages.ts";
import { ResultIntake } from "./result_intake.ts";
import { type RunClock, SYSTEM_CLOCK } from "./run_clock.ts";
import {
  outcomeOf,
  type RunObserver,
  type RunResult,
  type StopReason,
  type TaskResult,
  type UtilizationReport,
} from "../run/run_types.ts";
import { schedulerOptions } from "./scheduler_options.ts";
import type { ParallelRunOptions } from "./parallel_options.ts";

export type { ParallelRunOptions } from "./parallel_options.ts";
import { TaskRuntime } from "./task_runtime.ts";

const HEALTH_TICK_MS = 200;
/** Check `FillQueue`'s invariant after every pump (tests; it walks every executor). */
const CHECK_DISPATCH = process.env.BLOCKWISE_CHECK_DISPATCH === "1";

export async function runParallel(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  options: ParallelRunOptions = {},
): Promise<RunResult> {
  return await new ParallelRun(pipeline, graph, options).start();
}

/** The run loop; exported for tests that watch its parts between events. */
export class ParallelRun implements ExecutorEvents {
  readonly scheduler: Scheduler;
  readonly tasks: readonly TaskRuntime[];
  readonly source: BlockSource;
  readonly completion: BlockCompletion;
  readonly #graph: DependencyGraph;
  readonly #options: ParallelRunOptions;
  readonly #observer: RunObserver;
  readonly #clock: RunClock;
  readonly #pool: ExecutorPool;
  readonly #dispatcher: Dispatcher;
  readonly #fills: FillQueue;
  readonly #intake: ResultIntake;
  #stopReason: StopReason | null = null;
  #stopDeadline = Number.POSITIVE_INFINITY;
  #finished = false;
  #pumping = false;
  #pumpAgain = false;
  /** A pump is due after a turn of the event loop (the skip budget ran out). */
  #pumpDeferred = false;
  /** A pump is queued for the commits settling in this turn (`#pumpAfterSettled`). */
  #settledPumpDue = false;
  #settle: { resolve(r: RunResult): void; reject(e: unknown): void } | null = null;
  #stopTicking: (() => void) | null = null;
  readonly #startedAt = performance.now();
  readonly #io0 = ioBytes(false);
  readonly #cpu0 = processCpuSeconds();

  constructor(pipeline: PipelineConfig, graph: DependencyGraph, options: ParallelRunOptions) {
    this.#graph = graph;
    this.#options = options;
    this.#observer = options.observer ?? {};
    this.#clock = options.clock ?? SYSTEM_CLOCK;
    const budget = new ResourceBudget(options.resources ?? null);
    for (const task of pipeline.tasks) budget.checkFits(task.id, task.requires);
    this.tasks = pipeline.tasks.map((config) => new TaskRuntime(config));
    options.onStarted?.(this.tasks);
    let completion: BlockCompletion | null = null;
    this.scheduler = new Scheduler(graph, schedulerOptions(pipeline, options), {
      onOrphaned: (t, p) => completion?.orphaned(t, p),
    });
    completion = this.completion = new BlockCompletion({
      scheduler: this.scheduler,
      layouts: graph.layouts,
      taskIds: pipeline.tasks.map((t) => t.id),
      sink: options.sink ?? null,
      observer: this.#observer,
      onSettled: () => this.#pumpAfterSettled(),
      onBug: (error) =>
        this.#guard(() => {
          throw error;
        }),
    });
    this.source = new BlockSource({
      scheduler: this.scheduler,
      completion,
      tasks: pipeline.tasks,
      layouts: graph.layouts,
      prechecks: pipeline.tasks.map((_, t) => options.precheck?.(t)),
      observer: this.#observer,
      accepting: () => this.#stopReason === null && !this.#finished,
      onAnswer: (apply) =>
        this.#guard(() => {
          if (this.#finished) return;
          apply();
          this.#pump();
        }),
    });
    const maxWindow = Math.min(options.maxInFlight ?? MAX_WINDOW, MAX_WINDOW);
    const preferDownstream = options.preferDownstream === true;
    const fills = this.#fills = new FillQueue(
      this.tasks,
      this.source,
      pipeline.tasks.map((task) => preferDownstream && task.temporary),
    );
    this.#dispatcher = new Dispatcher(
      this.scheduler,
      this.source,
      this.tasks,
      this.#clock,
      maxWindow,
      (executor) => this.#pool.allowance(executor),
      (t) => fills.idle(t),
    );
    this.#pool = new ExecutorPool({
      preferDownstream,
      fills,
      pipelinePath: pipeline.path,
      graph,
      scheduler: this.scheduler,
      source: this.source,
      completion,
      tasks: this.tasks,
      budget,
      factory: options.executorFactory ?? localExecutorFactory,
      clock: this.#clock,
      events: this,
      observer: this.#observer,
      measure: options.measure ?? (() => false),
      maxWindow,
      outputs: (t) => options.outputs?.[t] ?? [],
      runId: options.runId ?? "run",
      devices: options.devices,
    });
    this.#intake = new ResultIntake(
      this.tasks,
      completion,
      this.source,
      this.#dispatcher,
      this.#clock,
      (e) => this.#pool.lifetimes.of(e),
      options.gpu ?? null,
    );
  }

  start(): Promise<RunResult> {
    return new Promise((resolve, reject) => {
      this.#settle = { resolve, reject };
      this.#options.onStopRequest?.((reason) => this.#requestStop(reason));
      this.#options.resume?.apply(this.completion);
      this.#observer.runStarted?.(this.snapshots());
      this.#stopTicking = this.#clock.every(HEALTH_TICK_MS, () => this.#guard(() => this.#tick()));
      this.#guard(() => this.#pump());
    });
  }

  // ---- executor events ----------------------------------------------------------------------

  ready(executor: Executor): void {
    this.#pool.setupFailures.started(executor.task);
    // A worker joining a task whose blocks were measured takes a full window at once, not one
    // block first (with 2,000 workers that was 2,000 batches of one and their results).
    const mean = this.tasks[executor.task]!.meanSeconds;
    if (!Number.isNaN(mean)) this.#dispatcher.resize(executor, mean);
    this.#fills.ready(executor);
    this.#guard(() => this.#pump());
  }

  setupFailed(
    executor: Executor,
    message: string,
    stack: string | undefined,
    stage?: StartStage,
  ): void {
    this.#guard(() => {
      const id = this.tasks[executor.task]!.config.id;
      const failure = { message, details: stack, stage };
      const notice = this.#pool.setupFailures.notice(executor.task, id, executor.id, failure);
      if (notice !== null) this.#observer.notice?.(notice);
      this.#pool.lost(executor, lostReason(message, stage), false, { message, stage });
      this.#pump();
    });
  }

  results(executor: Executor, results: ResultsMessage): void {
    this.#guard(() => {
      if (this.#finished) return;
      const violation = this.#intake.results(executor, results);
      this.#fills.mark(executor);
      if (violation !== null) this.#pool.lost(executor, violation, true);
      this.#pump();
    });
  }

  returned(executor: Executor, positions: Float64Array, count: number): void {
    this.#guard(() => {
      if (this.#finished) return;
      const violation = this.#intake.returned(executor, positions, count);
      this.#fills.mark(executor);
      this.#pool.recallAnswered(executor);
      if (violation !== null) this.#pool.lost(executor, violation, true);
      this.#pump();
    });
  }

  crashed(executor: Executor, reason: string): void {
    this.#guard(() => {
      this.#pool.lost(executor, reason, true);
      this.#pump();
    });
  }

  output(executor: Executor, stream: "stdout" | "stderr", text: string): void {
    this.#options.output?.(this.tasks[executor.task]!.config.id, executor.id, stream, text);
  }

  leaving(executor: Executor, reason: string): void {
    this.#guard(() => {
      if (this.#finished) return;
      this.#pool.leaving(executor, reason);
      this.#pump();
    });
  }

  // ---- the loop -----------------------------------------------------------------------------

  /** Blocks the run holds in some form: in executors, being checked, being committed. */
  inFlightCount(): number {
    let n = this.completion.committingTotal;
    this.tasks.forEach((task, t) => (n += this.source.checking(t) + task.inFlight()));
    return n;
  }

  snapshots(): TaskResult[] {
    return this.#graph.dag.order.map((t) => {
      const temporary = this.#options.temporaryStats?.(t) ?? null;
      const workers = this.tasks[t]!.workerCounts();
      return {
        id: this.tasks[t]!.config.id,
        counters: this.scheduler.snapshot(t),
        running: this.tasks[t]!.running(),
        queued: this.tasks[t]!.queued(),
        workerFailures: this.tasks[t]!.stats.workerFailures,
        restarts: this.tasks[t]!.stats.restarts,
        ...(temporary === null ? {} : { temporary }),
        ...(workers === null ? {} : { workers }),
      };
    });
  }

  #requestStop(reason: StopReason): void {
    if (this.#stopReason !== null) return;
    this.#stopReason = reason;
    this.#stopDeadline = this.#clock.now() + (this.#options.graceSeconds ?? 30) * 1000;
    this.#guard(() => {
      for (const task of this.tasks) for (const executor of task.executors) executor.recall(true);
      this.source.requeueWaiting();
      this.#pump();
    });
  }

  /** Run `body`; an exception here is a bug: end the run with it instead of hanging. */
  #guard(body: () => void): void {
    try {
      body();
    } catch (error) {
      this.#teardown();
      this.#settle?.reject(error);
      this.#settle = null;
    }
  }

  /**
   * One pump for the commits that settle together (a group commit resolves a promise per block):
   * a pump after each handed an idle reader one block per message (docs/design/WORKERS.md).
   */
  #pumpAfterSettled(): void {
    if (this.#settledPumpDue) return;
    this.#settledPumpDue = true;
    queueMicrotask(() => {
      this.#settledPumpDue = false;
      this.#guard(() => this.#pump());
    });
  }

  #pump(): void {
    if (this.#finished) return;
    if (this.#pumping) {
      this.#pumpAgain = true;
      return;
    }
    this.#pumping = true;
    this.source.resetSkipBudget();
    try {
      do {
        this.#pumpAgain = false;
        this.#pumpOnce();
      } while (this.#pumpAgain && !this.#finished && !this.source.starved);
    } finally {
      this.#pumping = false;
    }
    if (CHECK_DISPATCH) this.#checkDispatch();
    if (this.source.starved && !this.#finished && !this.#pumpDeferred) {
      // Skipping done blocks one by one: let signals, timers and results in, then go on.
      this.#pumpDeferred = true;
      setTimeout(() => {
        this.#pumpDeferred = false;
        this.#guard(() => this.#pump());
      }, 0);
    }
  }

  #pumpOnce(): void {
    if (this.#stopReason !== null) {
      if (this.inFlightCount() === 0 || this.#clock.now() >= this.#stopDeadline) this.#finish();
      return;
    }
    this.#pool.retireFinished();
    this.#pool.spawnWanted();
    const skipped = this.source.skippedThisTurn;
    for (let t = 0; t < this.tasks.length; t++) this.#fills.fill(t, this.#dispatcher);
    // Blocks the pre-checks skipped just now may have finished a task or made blocks of
    // another ready: retire and spawn again before anything waits for an event.
    if (this.source.skippedThisTurn > skipped) this.#pumpAgain = true;
    this.#pool.rebalanceHeld();
    this.#pool.retireIdle();
    this.#pool.checkAbandonment();
    if (this.scheduler.isFinished()) {
      this.#finish();
      return;
    }
    if (this.scheduler.isStalled()) {
      throw new Error(
        `Internal error: no block is ready or running but tasks are unfinished: ${
          JSON.stringify(this.snapshots())
        }`,
      );
    }
  }

  /**
   * How `FillQueue`'s invariant is broken between events, or null (always null once the run
   * stops or ends). BLOCKWISE_CHECK_DISPATCH=1 checks it after every pump and ends the run.
   */
  checkDispatch(): string | null {
    if (this.#finished || this.#stopReason !== null || this.source.starved) return null;
    return this.#fills.check((e) => this.#pool.allowance(e));
  }

  #checkDispatch(): void {
    const broken = this.checkDispatch();
    if (broken !== null) throw new Error(`Internal error: dispatch invariant broken: ${broken}`);
  }

  #tick(): void {
    if (this.#finished) return;
    const now = this.#clock.now();
    this.#pool.checkHealth(now);
    if (this.#stopReason !== null && now >= this.#stopDeadline) this.#finish();
    if (this.#finished) return;
    this.#observer.progress?.(this.snapshots());
    this.#pump();
  }

  #finish(): void {
    if (this.#finished) return;
    // Blocks still held after the grace period go back to the queue, so counters balance.
    for (let t = 0; t < this.tasks.length; t++) this.#pool.retireAll(t);
    this.source.requeueWaiting();
    this.#finished = true;
    this.completion.close();
    this.#teardown();
    if (this.#stopReason === null) this.scheduler.assertBalanced();
    const tasks = this.snapshots();
    const result: RunResult = {
      tasks,
      failures: this.completion.failures,
      seconds: (performance.now() - this.#startedAt) / 1000,
      stoppedBy: this.#stopReason,
      outcome: outcomeOf(tasks, this.#stopReason),
      utilization: this.#utilization(),
    };
    this.#observer.runFinished?.(result);
    this.#settle?.resolve(result);
    this.#settle = null;
  }

  #teardown(): void {
    this.#stopTicking?.();
    this.#stopTicking = null;
    this.#pool.killAll();
  }

  #utilization(): UtilizationReport {
    const wall = (performance.now() - this.#startedAt) / 1000;
    const io = ioBytes(false);
    const now = this.#clock.now();
    return {
      wallSeconds: wall,
      processCpuSeconds: processCpuSeconds() - this.#cpu0,
      peakRssBytes: peakRssBytes(),
      ioReadBytes: io.read - this.#io0.read,
      ioWriteBytes: io.write - this.#io0.write,
      tasks: this.#graph.dag.order.map((t) => {
        const { config, stats } = this.tasks[t]!;
        return {
          id: config.id,
          blocks: stats.durations.count,
          workersSpawned: stats.workersSpawned,
          maxConcurrent: stats.maxConcurrent,
          restarts: stats.restarts,
          workerFailures: stats.workerFailures,
          meanMs: stats.durations.meanMs,
          slopeMs: stats.durations.slopeMs,
          busySeconds: stats.durations.totalSeconds,
          cpuSeconds: stats.cpuSeconds,
          wallSeconds: stats.spanSeconds(now),
          faultsPerBlock: stats.faultsPerBlock,
        };
      }),
      workers: this.#pool.lifetimes.all(),
    };
  }
}
