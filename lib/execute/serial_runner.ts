/**
 * `blockwise run --serial`: every block in the main thread, one at a time, in dependency
 * order. Unlike daisy's serial mode this is not fail-fast: a failing block is retried up to
 * `maxRetries` and then failed with its downstream orphaned, exactly as in a parallel run, so the
 * two modes give the same counters. `setup` runs once per task, before its first block. Outcomes
 * go through the same `BlockCompletion` as in a parallel run.
 */

import process from "node:process";
import { Scheduler } from "../schedule/mod.ts";
import type { DependencyGraph } from "../graph/mod.ts";
import type { PipelineConfig, TaskConfig } from "../pipeline/spec.ts";
import { makeBlock } from "./block.ts";
import { BlockSource, type Precheck } from "./block_source.ts";
import { runCommandBlock } from "./command_block.ts";
import { workerEnvironment } from "./worker_profile.ts";
import { BlockCompletion } from "./completion.ts";
import type { BlockReport, CompletionSink } from "../run/block_report.ts";
import { type RunClock, SYSTEM_CLOCK, yieldToEventLoop } from "./run_clock.ts";
import {
  errorParts,
  outcomeOf,
  type RunObserver,
  type RunResult,
  type StopReason,
  type TaskResult,
  type TemporaryStats,
} from "../run/run_types.ts";
import { schedulerOptions } from "./scheduler_options.ts";
import { BlockOutputs } from "../outputs/block_outputs.ts";
import type { OutputPlan } from "../outputs/output_plan.ts";
import { InputError } from "../errors.ts";
import type { ResumePlan } from "./resume_plan.ts";
import type { Block } from "../pipeline/spec.ts";

/** Longest stretch of blocks run without letting timers and signal handlers in. */
const YIELD_EVERY_MS = 50;

export interface SerialRunOptions {
  readonly observer?: RunObserver;
  readonly sink?: CompletionSink;
  /** Done-marker (and skip-mask) pre-check per task. */
  readonly precheck?: (task: number) => Precheck | undefined;
  /** Tasks whose every block is done already (a fully resumed task). */
  readonly alreadyDone?: (task: number) => boolean;
  /** Blocks a resume skips in bulk (`planResume`); the rest are pre-checked one by one. */
  readonly resume?: ResumePlan;
  /** Checked between blocks; when it reports a reason the run stops and reports it. */
  readonly stopRequested?: () => StopReason | null;
  readonly clock?: RunClock;
  /** Each task's resolved outputs, indexed like the pipeline's tasks (default: none). */
  readonly outputs?: readonly (readonly OutputPlan[])[];
  /** Names this run's staging folders (default "run"). */
  readonly runId?: string;
  /** A temporary task's live and deleted outputs, for progress and the summary. */
  readonly temporaryStats?: (task: number) => TemporaryStats | null;
  /** Runs a block of an embedded Python task (the daisy session's serial runs). */
  readonly embeddedBlock?: EmbeddedBlockRunner;
}

/**
 * Runs one block of an embedded Python task in the process that started the run (the daisy
 * API's `multiprocessing=False`): resolves to null when it succeeded, else its failure.
 */
export type EmbeddedBlockRunner = (
  block: Block,
  outputs: Readonly<Record<string, string>>,
) => Promise<{ message: string; stack?: string } | null>;

/** A Python task whose blocks need worker processes (not one run by the daisy session). */
function needsWorkerProcesses(task: TaskConfig): boolean {
  return task.kind === "python" && task.python.embedded === undefined;
}

/** Python tasks need their worker processes: --serial (this thread only) cannot run them. */
export function checkSerialRunnable(pipeline: PipelineConfig): void {
  const python = pipeline.tasks.filter(needsWorkerProcesses).map((t) => `"${t.id}"`);
  if (python.length > 0) {
    throw new InputError(
      `--serial runs every block in blockwise's own thread, but task ${
        python.join(", ")
      } runs Python (python field), which needs Python worker processes; run without --serial (maxWorkers: 1 runs one block at a time)`,
    );
  }
}

export async function runSerial(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  options: SerialRunOptions = {},
): Promise<RunResult> {
  checkSerialRunnable(pipeline);
  const started = performance.now();
  const clock = options.clock ?? SYSTEM_CLOCK;
  const observer = options.observer ?? {};
  const tasks = pipeline.tasks;
  let completion: BlockCompletion | null = null;
  const scheduler = new Scheduler(graph, schedulerOptions(pipeline, options), {
    onOrphaned: (t, p) => completion?.orphaned(t, p),
  });
  let pendingBug: unknown = null;
  completion = new BlockCompletion({
    scheduler,
    layouts: graph.layouts,
    taskIds: tasks.map((t) => t.id),
    sink: options.sink ?? null,
    observer,
    onSettled: () => {},
    onBug: (error) => (pendingBug = error),
  });
  const source = new BlockSource({
    scheduler,
    completion,
    tasks,
    layouts: graph.layouts,
    prechecks: tasks.map((_, t) => options.precheck?.(t)),
    observer,
    accepting: () => true,
    onAnswer: (apply) => apply(),
  });
  const order = graph.dag.order;
  const snapshots = (): TaskResult[] =>
    order.map((t) => {
      const temporary = options.temporaryStats?.(t) ?? null;
      return {
        id: tasks[t]!.id,
        counters: scheduler.snapshot(t),
        running: 0,
        ...(temporary === null ? {} : { temporary }),
      };
    });
  const contexts = new Map<number, unknown>();
  const staging = tasks.map((_, t) =>
    new BlockOutputs(options.outputs?.[t] ?? [], options.runId ?? "run")
  );
  const outputsOf = (t: number): BlockOutputs => staging[t]!;
  const commandEnvs = new Map<number, Record<string, string | undefined>>();
  const commandEnv = (t: number): Record<string, string | undefined> => {
    let env = commandEnvs.get(t);
    if (env === undefined) {
      const variables = workerEnvironment(pipeline.tasks[t]!, process.env).variables;
      commandEnvs.set(t, env = { ...process.env, ...variables });
    }
    return env;
  };
  let stoppedBy: StopReason | null = null;

  options.resume?.apply(completion);
  observer.runStarted?.(snapshots());

  const contextOf = async (t: number, task: TaskConfig): Promise<unknown> => {
    const setup = task.kind === "process" ? task.setup : null;
    if (!contexts.has(t)) contexts.set(t, setup === null ? undefined : await setup());
    return contexts.get(t);
  };

  let yieldedAt = performance.now();
  while (!scheduler.isFinished()) {
    if (pendingBug !== null) throw pendingBug;
    // Blocks and skips that never wait would keep signals out: give them a turn now and then.
    if (source.starved || performance.now() - yieldedAt > YIELD_EVERY_MS) {
      await yieldToEventLoop();
      yieldedAt = performance.now();
    }
    source.resetSkipBudget();
    stoppedBy = options.stopRequested?.() ?? null;
    if (stoppedBy !== null) break;
    let ran = false;
    for (const t of order) {
      const position = source.nextPrechecked(t);
      if (position < 0) continue;
      ran = true;
      const task = tasks[t]!;
      const block = makeBlock(
        task.id,
        graph.layouts[t]!,
        position,
        scheduler.attemptOf(t, position),
      );
      if (
        task.check !== null &&
        await checkSaysDone(task, block.id, () => task.check!(block), observer)
      ) {
        completion.skipped(t, position, "checked");
        break;
      }
      let context: unknown;
      try {
        context = await contextOf(t, task);
      } catch (error) {
        const { message } = errorParts(error);
        scheduler.requeue(t, position);
        scheduler.abandon(t, { kind: "setup-failed", message });
        observer.notice?.(`Task "${task.id}": setup failed, task abandoned: ${message}`);
        break;
      }
      const report: BlockReport = {
        task: t,
        position,
        attempt: block.attempt,
        sentAt: clock.now(),
        returnedAt: 0,
        workerId: -1,
        usage: null,
        commit: null,
        seconds: 0,
      };
      const staging = outputsOf(t);
      let failure: { message: string; stack?: string } | null = null;
      const t0 = performance.now();
      try {
        const outputs = staging.empty ? {} : staging.prepare(block);
        if (task.kind === "process") {
          await task.process(block, context, { outputs, params: task.params ?? {} });
        } else if (task.kind === "command") {
          await runCommandBlock(task.command, block, {
            cwd: task.cwd,
            outputs,
            env: commandEnv(t),
          });
        } else if (options.embeddedBlock !== undefined) {
          failure = await options.embeddedBlock(block, outputs);
          if (failure !== null && !staging.empty) staging.discard(block);
        } else throw new Error(`Internal error: --serial cannot run Python task "${task.id}"`);
        if (failure === null && !staging.empty) report.commit = staging.collect(block, position);
      } catch (error) {
        failure = errorParts(error);
        if (!staging.empty) staging.discard(block);
      }
      report.seconds = (performance.now() - t0) / 1000;
      report.returnedAt = clock.now();
      if (failure === null) await completion.done(report);
      else completion.failed(report, failure);
      break;
    }
    observer.progress?.(snapshots());
    if (!ran && !source.starved && scheduler.isStalled()) {
      throw new Error(
        `Internal error: no block is ready or running but tasks are unfinished: ${
          JSON.stringify(snapshots())
        }`,
      );
    }
  }
  if (stoppedBy === null) scheduler.assertBalanced();
  const finalTasks = snapshots();
  const result: RunResult = {
    tasks: finalTasks,
    failures: completion.failures,
    seconds: (performance.now() - started) / 1000,
    stoppedBy,
    outcome: outcomeOf(finalTasks, stoppedBy),
  };
  observer.runFinished?.(result);
  return result;
}

/** A `check` that throws or returns anything but `true` means "run the block". */
async function checkSaysDone(
  task: TaskConfig,
  blockId: unknown,
  check: () => boolean | Promise<boolean>,
  observer: RunObserver,
): Promise<boolean> {
  try {
    return (await check()) === true;
  } catch (error) {
    observer.notice?.(
      `Task "${task.id}": check threw for block ${String(blockId)}, running the block: ${
        errorParts(error).message
      }`,
    );
    return false;
  }
}
