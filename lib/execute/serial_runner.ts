/**
 * `blockwise run --serial`: every block in the main thread, one at a time, in dependency
 * order. Unlike daisy's serial mode this is not fail-fast: a failing block is retried up to
 * `maxRetries` and then failed with its downstream orphaned, exactly as in a parallel run, so the
 * two modes give the same counters. `setup` runs once per task, before its first block.
 */

import { Scheduler, type SchedulerTaskOptions, type SkipReason } from "../schedule/mod.ts";
import type { BlockRecorder } from "./parallel_runner.ts";
import type { DependencyGraph } from "../graph/mod.ts";
import type { PipelineConfig, TaskConfig } from "../pipeline/spec.ts";
import { makeBlock } from "./block.ts";
import { runCommandBlock } from "./command_block.ts";
import {
  type BlockFailure,
  errorParts,
  type RunObserver,
  type RunResult,
  type StopReason,
  type TaskResult,
} from "./run_types.ts";

export interface SerialRunOptions {
  readonly observer?: RunObserver;
  readonly recorder?: BlockRecorder;
  /** Done-marker (and skip-mask) pre-check per task. */
  readonly precheck?: (task: number) => ((position: number) => SkipReason | null) | undefined;
  /** Tasks whose every block is done already (a fully resumed task). */
  readonly alreadyDone?: (task: number) => boolean;
  /** Checked between blocks; when it reports a reason the run stops and reports it. */
  readonly stopRequested?: () => StopReason | null;
}

export async function runSerial(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  options: SerialRunOptions = {},
): Promise<RunResult> {
  const started = performance.now();
  const observer = options.observer ?? {};
  const tasks = pipeline.tasks;
  const scheduler = new Scheduler(graph, schedulerOptions(pipeline, options));
  const order = graph.dag.order;
  const snapshots = (): TaskResult[] =>
    order.map((t) => ({ id: tasks[t]!.id, counters: scheduler.snapshot(t) }));
  const failures: BlockFailure[] = [];
  const contexts = new Map<number, unknown>();
  let stoppedBy: StopReason | null = null;

  observer.runStarted?.(snapshots());

  const contextOf = async (t: number, task: TaskConfig): Promise<unknown> => {
    const setup = task.kind === "process" ? task.setup : null;
    if (!contexts.has(t)) contexts.set(t, setup === null ? undefined : await setup());
    return contexts.get(t);
  };

  while (!scheduler.isFinished()) {
    stoppedBy = options.stopRequested?.() ?? null;
    if (stoppedBy !== null) break;
    let ran = false;
    for (const t of order) {
      const position = scheduler.acquire(t);
      if (position < 0) continue;
      ran = true;
      const task = tasks[t]!;
      const layout = graph.layouts[t]!;
      const block = makeBlock(task.id, layout, position, scheduler.attemptOf(t, position));
      if (
        task.check !== null &&
        await checkSaysDone(task, block.id, () => task.check!(block), observer)
      ) {
        scheduler.succeed(t, position, "checked");
        break;
      }
      let context: unknown;
      try {
        context = await contextOf(t, task);
      } catch (error) {
        const { message } = errorParts(error);
        scheduler.fail(t, position);
        scheduler.abandon(t, `setup failed: ${message}`);
        observer.notice?.(`Task "${task.id}": setup failed, task abandoned: ${message}`);
        break;
      }
      const sentAt = Date.now();
      try {
        if (task.kind === "process") await task.process(block, context);
        else await runCommandBlock(task.command, block, { cwd: task.cwd });
        if (scheduler.succeed(t, position)) {
          options.recorder?.succeeded?.(t, position, sentAt, Date.now(), -1, null);
        }
      } catch (error) {
        options.recorder?.failed?.(t, position, sentAt, Date.now(), -1, null);
        const outcome = scheduler.fail(t, position);
        const failure: BlockFailure = {
          taskId: task.id,
          blockId: block.id,
          index: block.index,
          attempt: block.attempt,
          ...errorParts(error),
          permanent: outcome === "failed",
        };
        if (failure.permanent) failures.push(failure);
        observer.blockFailed?.(failure);
      }
      break;
    }
    observer.progress?.(snapshots());
    if (!ran && scheduler.isStalled()) {
      throw new Error(
        `Internal error: no block is ready or running but tasks are unfinished: ${
          JSON.stringify(snapshots())
        }`,
      );
    }
  }
  if (stoppedBy === null) scheduler.assertBalanced();
  const result: RunResult = {
    tasks: snapshots(),
    failures,
    seconds: (performance.now() - started) / 1000,
    stoppedBy,
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

/** Scheduler options shared by the serial and parallel runners. */
export function schedulerOptions(
  pipeline: PipelineConfig,
  options: {
    readonly precheck?: (task: number) => ((position: number) => SkipReason | null) | undefined;
    readonly alreadyDone?: (task: number) => boolean;
  },
): SchedulerTaskOptions[] {
  return pipeline.tasks.map((t, i) => {
    const precheck = options.precheck?.(i);
    return {
      maxRetries: t.maxRetries,
      ...(precheck === undefined ? {} : { precheck }),
      ...(options.alreadyDone?.(i) === true ? { alreadyDone: true } : {}),
    };
  });
}
