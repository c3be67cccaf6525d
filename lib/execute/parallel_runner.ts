/**
 * `blockwise run`: the parallel run loop. The main thread owns the scheduler and hands blocks
 * to executors (Web Workers, or command slots) in batches sized so that each batch takes about
 * `TARGET_BATCH_MS` of work: no-op blocks travel hundreds per message, slow blocks one or two
 * at a time so no worker hoards work while others idle.
 *
 * Every path ends with balanced counters: a crashed, timed-out or self-closed worker is
 * terminated, the block it was running fails that attempt, its other in-flight blocks go back
 * to the queue, and a replacement starts until `maxWorkerRestarts` is spent; then the task and
 * everything downstream of it are abandoned. Results that arrive from a terminated worker are
 * ignored (the executor drops them), so they never move a counter.
 */

import type { DependencyGraph } from "../graph/mod.ts";
import type { PipelineConfig, TaskConfig } from "../pipeline/spec.ts";
import { ResourceBudget, type Resources, Scheduler, type SkipReason } from "../schedule/mod.ts";
import { schedulerOptions } from "./serial_runner.ts";
import { collectGarbage, ioBytes, peakRssBytes, processCpuSeconds } from "../runtime/mod.ts";
import { makeBlock } from "./block.ts";
import { CommandExecutor } from "./command_executor.ts";
import type { Executor, ExecutorEvents } from "./executor.ts";
import {
  type BlockFailure,
  errorParts,
  type RunObserver,
  type RunResult,
  type StopReason,
  type TaskResult,
} from "./run_types.ts";
import { TaskStats, type UtilizationReport, type WorkerStats } from "./run_stats.ts";
import type { BlockError } from "./worker_protocol.ts";
import { USAGE_FIELDS } from "./worker_protocol.ts";
import { WorkerExecutor } from "./worker_executor.ts";

const TARGET_BATCH_MS = 10;
const MAX_WINDOW = 1024;
const MIN_WINDOW = 2;
const HEALTH_TICK_MS = 200;
/** Collect garbage after this many bytes of transferred result buffers (see collectGarbage). */
const GC_AFTER_BYTES = 2 * 1024 * 1024;

/**
 * What the tracking store (or a test) learns about each finished block. `usage` (the worker's
 * figures in `Usage` order, or null) is only valid during the call: copy what you keep.
 */
export interface BlockRecorder {
  succeeded?(
    task: number,
    position: number,
    sentAt: number,
    returnedAt: number,
    workerId: number,
    usage: ArrayLike<number> | null,
  ): void;
  failed?(
    task: number,
    position: number,
    sentAt: number,
    returnedAt: number,
    workerId: number,
    usage: ArrayLike<number> | null,
  ): void;
}

export interface ParallelRunOptions {
  readonly observer?: RunObserver;
  readonly recorder?: BlockRecorder;
  readonly resources?: Resources | null;
  /** Measure CPU, RSS and I/O per block. */
  readonly measure?: (task: number) => boolean;
  /** Pre-check per task (done marker, skip mask), run on the main thread. */
  readonly precheck?: (task: number) => ((position: number) => SkipReason | null) | undefined;
  /** Tasks whose every block is done already (a fully resumed task). */
  readonly alreadyDone?: (task: number) => boolean;
  /** Register for stop requests (signals); the run stops dispatching and drains. */
  readonly onStopRequest?: (listener: (reason: StopReason) => void) => void;
  /** Seconds in-flight blocks get to finish after a stop request before workers are killed. */
  readonly graceSeconds?: number;
  /** Cap on blocks in flight per executor (1 = one message per block; benchmarks only). */
  readonly maxInFlight?: number;
  /** Where worker output goes. */
  readonly output?: (
    taskId: string,
    workerId: number,
    stream: "stdout" | "stderr",
    text: string,
  ) => void;
}

interface TaskRuntime {
  readonly config: TaskConfig;
  readonly stats: TaskStats;
  readonly executors: Set<Executor>;
  /** Blocks whose asynchronous `check` said "run it", waiting for an executor. */
  readonly checked: number[];
  checking: number;
  /** Mean seconds per block (moving average), for batch sizing. */
  meanSeconds: number;
}

export async function runParallel(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  options: ParallelRunOptions = {},
): Promise<RunResult> {
  const run = new ParallelRun(pipeline, graph, options);
  return await run.start();
}

class ParallelRun implements ExecutorEvents {
  private readonly scheduler: Scheduler;
  private readonly budget: ResourceBudget;
  private readonly tasks: TaskRuntime[];
  private readonly observer: RunObserver;
  private readonly failures: BlockFailure[] = [];
  private readonly workerStats = new Map<Executor, WorkerStats>();
  private nextWorkerId = 0;
  private stopReason: StopReason | null = null;
  private stopDeadline = Number.POSITIVE_INFINITY;
  private finished = false;
  private pumping = false;
  private pumpAgain = false;
  private resolve: ((result: RunResult) => void) | null = null;
  private reject: ((error: unknown) => void) | null = null;
  private tick: ReturnType<typeof setInterval> | null = null;
  private readonly startedAt = performance.now();
  private readonly maxWindow: number;
  private readonly figures = new Float64Array(USAGE_FIELDS);
  /** Bytes of result buffers received since the last collection. */
  private receivedBytes = 0;
  private readonly io0 = ioBytes(false);
  private readonly cpu0 = processCpuSeconds();

  constructor(
    private readonly pipeline: PipelineConfig,
    private readonly graph: DependencyGraph,
    private readonly options: ParallelRunOptions,
  ) {
    this.observer = options.observer ?? {};
    this.maxWindow = options.maxInFlight ?? MAX_WINDOW;
    this.budget = new ResourceBudget(options.resources ?? null);
    for (const task of pipeline.tasks) this.budget.checkFits(task.id, task.requires);
    this.scheduler = new Scheduler(graph, schedulerOptions(pipeline, options));
    this.tasks = pipeline.tasks.map((config) => ({
      config,
      stats: new TaskStats(),
      executors: new Set(),
      checked: [],
      checking: 0,
      meanSeconds: Number.NaN,
    }));
  }

  start(): Promise<RunResult> {
    return new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
      this.options.onStopRequest?.((reason) => this.requestStop(reason));
      this.observer.runStarted?.(this.snapshots());
      this.tick = setInterval(() => this.guard(() => this.healthTick()), HEALTH_TICK_MS);
      this.guard(() => this.pump());
    });
  }

  // ---- executor events ----------------------------------------------------------------------

  ready(executor: Executor): void {
    this.guard(() => this.pump());
    void executor;
  }

  setupFailed(executor: Executor, message: string, stack: string | undefined): void {
    this.guard(() => {
      const task = this.tasks[executor.task]!;
      this.observer.notice?.(
        `Task "${task.config.id}": setup failed in worker ${executor.id}: ${message}` +
          (stack ? `\n${indent(stack)}` : ""),
      );
      this.executorLost(executor, `setup failed: ${message}`, false);
    });
  }

  results(
    executor: Executor,
    done: Float64Array,
    durations: Float64Array,
    usage: Float64Array,
    failed: readonly BlockError[],
    cpuSeconds: number,
  ): void {
    this.guard(() => {
      if (this.finished) return;
      const t = executor.task;
      const task = this.tasks[t]!;
      const now = Date.now();
      const measured = usage.length > 0;
      const stats = this.workerStats.get(executor)!;
      this.receivedBytes += done.byteLength + durations.byteLength + usage.byteLength;
      if (this.receivedBytes >= GC_AFTER_BYTES) {
        this.receivedBytes = 0;
        collectGarbage();
      }
      if (!Number.isNaN(cpuSeconds)) {
        task.stats.cpuSeconds += cpuSeconds;
        stats.cpuSeconds += cpuSeconds;
      }
      let seconds = 0;
      for (let i = 0; i < done.length; i++) {
        const position = done[i]!;
        const entry = executor.inFlight.get(position);
        if (entry === undefined) continue;
        executor.inFlight.delete(position);
        const d = durations[i]!;
        seconds += d;
        task.stats.durations.add(d);
        stats.blocks++;
        let figures: Float64Array | null = null;
        if (measured) {
          // One reused record, not a view per block: a million views are ~100 MB of garbage.
          figures = this.figures;
          for (let k = 0; k < USAGE_FIELDS; k++) figures[k] = usage[i * USAGE_FIELDS + k]!;
        }
        if (this.scheduler.succeed(t, position)) {
          this.options.recorder?.succeeded?.(t, position, entry.sentAt, now, executor.id, figures);
        }
      }
      for (const f of failed) {
        const entry = executor.inFlight.get(f.position);
        if (entry === undefined) continue;
        executor.inFlight.delete(f.position);
        seconds += f.seconds;
        task.stats.durations.add(f.seconds);
        stats.blocks++;
        stats.failedBlocks++;
        this.blockFailed(t, f.position, entry.attempt, {
          message: f.message,
          ...(f.stack === undefined ? {} : { stack: f.stack }),
        });
        this.options.recorder?.failed?.(
          t,
          f.position,
          entry.sentAt,
          now,
          executor.id,
          f.usage.length > 0 ? f.usage : null,
        );
      }
      const n = done.length + failed.length;
      if (n > 0) {
        const mean = seconds / n;
        task.meanSeconds = Number.isNaN(task.meanSeconds)
          ? mean
          : 0.7 * task.meanSeconds + 0.3 * mean;
        const wanted = Math.round(TARGET_BATCH_MS / 1000 / Math.max(task.meanSeconds, 1e-7));
        executor.window = Math.max(
          Math.min(MIN_WINDOW, this.maxWindow),
          Math.min(this.maxWindow, wanted),
        );
      }
      this.pump();
    });
  }

  returned(executor: Executor, positions: Float64Array): void {
    this.guard(() => {
      if (this.finished) return;
      const task = this.tasks[executor.task]!;
      for (const position of positions) {
        if (!executor.inFlight.delete(position)) continue;
        // Its `check` already said "run it": keep the answer instead of asking again.
        if (task.config.check !== null) task.checked.push(position);
        else this.scheduler.requeue(executor.task, position);
      }
      this.pump();
    });
  }

  crashed(executor: Executor, reason: string): void {
    this.guard(() => this.executorLost(executor, reason, true));
  }

  output(executor: Executor, stream: "stdout" | "stderr", text: string): void {
    const taskId = this.tasks[executor.task]!.config.id;
    if (this.options.output !== undefined) this.options.output(taskId, executor.id, stream, text);
  }

  // ---- the loop -----------------------------------------------------------------------------

  private requestStop(reason: StopReason): void {
    if (this.stopReason !== null) return;
    this.stopReason = reason;
    this.stopDeadline = Date.now() + (this.options.graceSeconds ?? 30) * 1000;
    this.guard(() => {
      for (const task of this.tasks) for (const executor of task.executors) executor.recall(true);
      this.pump();
    });
  }

  /** Run `body`; an exception here is a bug: end the run with it instead of hanging. */
  private guard(body: () => void): void {
    try {
      body();
    } catch (error) {
      this.teardown();
      this.reject?.(error);
      this.resolve = null;
      this.reject = null;
    }
  }

  private pump(): void {
    if (this.finished) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        this.pumpOnce();
      } while (this.pumpAgain && !this.finished);
    } finally {
      this.pumping = false;
    }
  }

  private pumpOnce(): void {
    if (this.stopReason !== null) {
      if (this.inFlightCount() === 0 || Date.now() >= this.stopDeadline) this.finish();
      return;
    }
    for (let t = 0; t < this.tasks.length; t++) {
      if (!this.scheduler.isRunning(t)) this.retireAll(t);
    }
    this.spawnWorkers();
    for (const task of this.tasks) {
      for (const executor of task.executors) this.fill(executor);
    }
    this.rebalanceHeld();
    this.retireIdle();
    this.checkAbandonment();
    if (this.scheduler.isFinished()) {
      this.finish();
      return;
    }
    if (this.scheduler.isStalled() && this.tasks.every((t) => t.checking === 0)) {
      throw new Error(
        `Internal error: no block is ready or running but tasks are unfinished: ${
          JSON.stringify(this.snapshots())
        }`,
      );
    }
  }

  private inFlightCount(): number {
    let n = 0;
    for (const task of this.tasks) {
      n += task.checking;
      for (const e of task.executors) n += e.inFlight.size;
    }
    return n;
  }

  /** Round-robin over tasks in display order, one new executor per task per pass. */
  private spawnWorkers(): void {
    let grew = true;
    while (grew) {
      grew = false;
      for (const t of this.graph.dag.order) {
        if (this.wantsWorker(t)) {
          this.spawn(t);
          grew = true;
        }
      }
    }
  }

  private wantsWorker(t: number): boolean {
    const task = this.tasks[t]!;
    if (!this.scheduler.isRunning(t)) return false;
    const ready = this.scheduler.readyCount(t) + task.checked.length;
    if (ready === 0) return false;
    const alive = task.stats.alive;
    if (alive >= task.config.maxWorkers) return false;
    // Do not start more executors than there are blocks waiting for one.
    let idle = 0;
    for (const e of task.executors) if (e.state === "starting" || e.inFlight.size === 0) idle++;
    if (idle >= ready) return false;
    const restart = task.stats.workerFailures > task.stats.restarts;
    if (restart && task.stats.restarts >= task.config.maxWorkerRestarts) return false;
    if (!this.budget.canAdmit(task.config.requires)) {
      this.freeBudgetFor(t);
      return false;
    }
    return true;
  }

  private spawn(t: number): void {
    const task = this.tasks[t]!;
    const config = task.config;
    const id = this.nextWorkerId++;
    if (task.stats.workerFailures > task.stats.restarts) task.stats.restarts++;
    const executor: Executor = config.kind === "command"
      ? new CommandExecutor({
        id,
        task: t,
        taskId: config.id,
        layout: this.graph.layouts[t]!,
        command: config.command,
        cwd: config.cwd,
        timeout: config.timeout,
        events: this,
      })
      : new WorkerExecutor({
        id,
        task: t,
        taskId: config.id,
        pipelinePath: this.pipeline.path,
        layout: config.layout,
        measure: this.options.measure?.(t) ?? false,
        events: this,
      });
    executor.window = Math.min(executor.window, this.maxWindow);
    this.budget.acquire(config.requires);
    task.executors.add(executor);
    const now = Date.now();
    task.stats.workerStarted(now);
    this.workerStats.set(executor, {
      workerId: id,
      taskId: config.id,
      startedAt: now / 1000,
      endedAt: Number.NaN,
      blocks: 0,
      failedBlocks: 0,
      cpuSeconds: 0,
      exit: "running",
    });
  }

  /** Hand an executor blocks until its window is full. */
  private fill(executor: Executor): void {
    if (executor.state !== "ready") return;
    const t = executor.task;
    const free = executor.window - executor.inFlight.size;
    // Batch: wait until half the window is free, unless the executor is idle.
    if (free <= 0 || (executor.inFlight.size > 0 && free < executor.window / 2)) return;
    // While sibling executors are starting or idle, take only a fair share of what is ready, so
    // a window grown on fast blocks does not hoard slow ones.
    let limit = free;
    let waiting = 0;
    for (const e of this.tasks[t]!.executors) {
      if (e !== executor && (e.state === "starting" || e.inFlight.size === 0)) waiting++;
    }
    if (waiting > 0) {
      const ready = this.scheduler.readyCount(t) + this.tasks[t]!.checked.length;
      const held = executor.inFlight.size;
      limit = Math.min(free, Math.max(1, Math.ceil((ready + held) / (waiting + 1)) - held));
    }
    const batch: number[] = [];
    const now = Date.now();
    while (batch.length < limit * 2) {
      const position = this.nextBlock(t);
      if (position < 0) break;
      const attempt = this.scheduler.attemptOf(t, position);
      executor.inFlight.set(position, { attempt, sentAt: now });
      batch.push(position, attempt);
    }
    if (batch.length > 0) executor.send(batch);
  }

  /** The next block to dispatch: one whose `check` said "run it", else a ready block. */
  private nextBlock(t: number): number {
    const task = this.tasks[t]!;
    if (task.checked.length > 0) return task.checked.shift()!;
    const check = task.config.check;
    while (true) {
      const position = this.scheduler.acquire(t);
      if (position < 0 || check === null) return position;
      const block = makeBlock(
        task.config.id,
        this.graph.layouts[t]!,
        position,
        this.scheduler.attemptOf(t, position),
      );
      let answer: boolean | Promise<boolean>;
      try {
        answer = check(block);
      } catch (error) {
        this.checkThrew(t, block.id, error);
        return position;
      }
      if (answer instanceof Promise) {
        task.checking++;
        answer.then(
          (value) => this.checkAnswered(t, position, value === true),
          (error) => {
            this.checkThrew(t, block.id, error);
            this.checkAnswered(t, position, false);
          },
        );
        continue;
      }
      if (answer !== true) return position;
      this.scheduler.succeed(t, position, "checked");
    }
  }

  private checkAnswered(t: number, position: number, done: boolean): void {
    this.guard(() => {
      const task = this.tasks[t]!;
      task.checking--;
      if (this.finished) return;
      if (done) this.scheduler.succeed(t, position, "checked");
      else if (this.stopReason === null && this.scheduler.isRunning(t)) task.checked.push(position);
      else this.scheduler.requeue(t, position);
      this.pump();
    });
  }

  private checkThrew(t: number, blockId: unknown, error: unknown): void {
    this.observer.notice?.(
      `Task "${this.tasks[t]!.config.id}": check threw for block ${
        String(blockId)
      }, running the block: ${errorParts(error).message}`,
    );
  }

  private blockFailed(
    t: number,
    position: number,
    attempt: number,
    error: { message: string; stack?: string },
  ): void {
    const outcome = this.scheduler.fail(t, position);
    if (outcome === "dropped") return;
    const layout = this.graph.layouts[t]!;
    const failure: BlockFailure = {
      taskId: this.tasks[t]!.config.id,
      blockId: layout.blockIdOf(position),
      index: layout.gridIndexOf(position),
      attempt,
      ...error,
      permanent: outcome === "failed",
    };
    if (failure.permanent) this.failures.push(failure);
    this.observer.blockFailed?.(failure);
  }

  /**
   * An executor is gone (crash, timeout, self-close, failed setup). The block it was running
   * fails this attempt; its other in-flight blocks return to the queue untouched.
   */
  private executorLost(executor: Executor, reason: string, blockAtFault: boolean): void {
    const t = executor.task;
    const task = this.tasks[t]!;
    if (!task.executors.delete(executor)) return;
    executor.kill();
    this.budget.release(task.config.requires);
    const now = Date.now();
    task.stats.workerEnded(now);
    const stats = this.workerStats.get(executor)!;
    stats.endedAt = now / 1000;
    stats.exit = "crashed";
    stats.reason = reason;
    if (this.scheduler.isRunning(t)) task.stats.workerFailures++;
    const running = blockAtFault ? executor.runningPosition() : -1;
    for (const [position, entry] of executor.inFlight) {
      if (position === running || (blockAtFault && running < 0 && executor.inFlight.size === 1)) {
        this.blockFailed(t, position, entry.attempt, {
          message: `Worker ${executor.id} stopped while running this block: ${reason}`,
        });
        this.options.recorder?.failed?.(t, position, entry.sentAt, now, executor.id, null);
      } else {
        this.scheduler.requeue(t, position);
      }
    }
    executor.inFlight.clear();
    if (this.scheduler.isRunning(t)) {
      const left = task.config.maxWorkerRestarts - task.stats.restarts;
      this.observer.notice?.(
        `Task "${task.config.id}": worker ${executor.id} was terminated (${reason}); ` +
          (left > 0
            ? `restarting it (${left} restart${left === 1 ? "" : "s"} left)`
            : "no restarts left"),
      );
    }
    this.pump();
  }

  private healthTick(): void {
    if (this.finished) return;
    const now = Date.now();
    for (const task of this.tasks) {
      const timeout = task.config.timeout;
      if (timeout === null) continue;
      for (const executor of [...task.executors]) {
        if (executor instanceof CommandExecutor) continue; // the slot kills its own child
        const since = executor.runningSince();
        if (!Number.isNaN(since) && now - since > timeout * 1000) {
          this.executorLost(
            executor,
            `block ran longer than the task's timeout of ${timeout} s`,
            true,
          );
        }
      }
    }
    if (this.stopReason !== null && now >= this.stopDeadline) this.finish();

    this.observer.progress?.(this.snapshots());
    this.pump();
  }

  /** Retire an idle executor of a task that will never have more work for it. */
  private retireIdle(): void {
    for (let t = 0; t < this.tasks.length; t++) {
      const task = this.tasks[t]!;
      if (task.executors.size === 0) continue;
      const s = this.scheduler.snapshot(t);
      if (s.ready > 0 || s.pending > 0 || task.checked.length > 0) continue;
      // Keep idle executors while a sibling holds unstarted blocks they can take over.
      if ([...task.executors].some((e) => e.inFlight.size > 2)) continue;
      for (const executor of [...task.executors]) {
        if (executor.inFlight.size === 0 && executor.state === "ready") {
          this.retire(executor, "clean");
        }
      }
    }
  }

  /**
   * An executor sits idle while nothing is ready but a sibling holds several unstarted blocks
   * (its window grew on fast blocks, then blocks turned slow): recall them so they spread.
   */
  private rebalanceHeld(): void {
    for (let t = 0; t < this.tasks.length; t++) {
      const task = this.tasks[t]!;
      if (task.executors.size < 2 || this.scheduler.readyCount(t) > 0) continue;
      const idle = [...task.executors].some((e) => e.state === "ready" && e.inFlight.size === 0);
      if (!idle) continue;
      for (const executor of task.executors) {
        if (executor.inFlight.size > 2) executor.recall();
      }
    }
  }

  /** Another task waits for budget: stop executors of tasks with nothing ready to run. */
  private freeBudgetFor(waiting: number): void {
    for (let t = 0; t < this.tasks.length; t++) {
      if (t === waiting) continue;
      const task = this.tasks[t]!;
      if (this.scheduler.readyCount(t) > 0 || task.checked.length > 0) continue;
      for (const executor of [...task.executors]) {
        if (executor.inFlight.size === 0 && executor.state === "ready") {
          this.retire(executor, "clean");
        }
      }
    }
  }

  private retireAll(t: number): void {
    for (const executor of [...this.tasks[t]!.executors]) {
      for (const position of executor.inFlight.keys()) this.scheduler.requeue(t, position);
      executor.inFlight.clear();
      this.retire(executor, "killed");
    }
  }

  private retire(executor: Executor, exit: "clean" | "killed"): void {
    const task = this.tasks[executor.task]!;
    if (!task.executors.delete(executor)) return;
    if (exit === "clean") executor.stop();
    else executor.kill();
    this.budget.release(task.config.requires);
    const now = Date.now();
    task.stats.workerEnded(now);
    const stats = this.workerStats.get(executor)!;
    stats.endedAt = now / 1000;
    stats.exit = exit;
  }

  private checkAbandonment(): void {
    for (let t = 0; t < this.tasks.length; t++) {
      const task = this.tasks[t]!;
      if (!this.scheduler.isRunning(t) || task.stats.alive > 0) continue;
      const owed = task.stats.workerFailures > task.stats.restarts;
      if (owed && task.stats.restarts >= task.config.maxWorkerRestarts) {
        const reason =
          `its workers failed ${task.stats.workerFailures} times and maxWorkerRestarts (${task.config.maxWorkerRestarts}) is spent`;
        for (const a of this.scheduler.abandon(t, reason)) {
          this.observer.notice?.(
            `Task "${this.tasks[a]!.config.id}" abandoned: ${
              this.scheduler.snapshot(a).abandonReason
            }`,
          );
          this.retireAll(a);
        }
      }
    }
  }

  private finish(): void {
    if (this.finished) return;
    // Blocks still in flight after the grace period go back to the queue, so counters balance.
    for (let t = 0; t < this.tasks.length; t++) {
      this.retireAll(t);
      const checked = this.tasks[t]!.checked;
      for (const position of checked) this.scheduler.requeue(t, position);
      checked.length = 0;
    }
    this.finished = true;
    this.teardown();
    if (this.stopReason === null) this.scheduler.assertBalanced();
    const result: RunResult = {
      tasks: this.snapshots(),
      failures: this.failures,
      seconds: (performance.now() - this.startedAt) / 1000,
      stoppedBy: this.stopReason,
      utilization: this.utilization(),
    };
    this.observer.runFinished?.(result);
    this.resolve?.(result);
    this.resolve = null;
    this.reject = null;
  }

  private teardown(): void {
    if (this.tick !== null) clearInterval(this.tick);
    this.tick = null;
    for (const task of this.tasks) {
      for (const executor of task.executors) executor.kill();
      task.executors.clear();
    }
  }

  private snapshots(): TaskResult[] {
    return this.graph.dag.order.map((t) => ({
      id: this.tasks[t]!.config.id,
      counters: this.scheduler.snapshot(t),
    }));
  }

  private utilization(): UtilizationReport {
    const wall = (performance.now() - this.startedAt) / 1000;
    const io = ioBytes(false);
    return {
      wallSeconds: wall,
      processCpuSeconds: processCpuSeconds() - this.cpu0,
      peakRssBytes: peakRssBytes(),
      ioReadBytes: io.read - this.io0.read,
      ioWriteBytes: io.write - this.io0.write,
      tasks: this.graph.dag.order.map((t) => {
        const { config, stats } = this.tasks[t]!;
        const span = Number.isNaN(stats.firstStart)
          ? 0
          : ((Number.isNaN(stats.lastEnd) ? Date.now() : stats.lastEnd) - stats.firstStart) / 1000;
        return {
          id: config.id,
          blocks: stats.durations.count,
          workersSpawned: stats.workersSpawned,
          maxConcurrent: stats.maxConcurrent,
          restarts: stats.restarts,
          meanMs: stats.durations.meanMs,
          slopeMs: stats.durations.slopeMs,
          busySeconds: stats.durations.totalSeconds,
          cpuSeconds: stats.cpuSeconds,
          wallSeconds: span,
        };
      }),
      workers: [...this.workerStats.values()],
    };
  }
}

function indent(text: string): string {
  return text.split("\n").map((l) => `    ${l}`).join("\n");
}
