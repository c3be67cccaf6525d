/** `blockwise run PIPELINE`: run every block, then print the execution summary. */

import process from "node:process";
import {
  buildPipelineGraph,
  type RunObserver,
  runParallel,
  type RunResult,
  runSerial,
  runSucceeded,
} from "../execute/mod.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { loadPipeline } from "../pipeline/mod.ts";
import { createRunConsole } from "../report/console_output.ts";
import { createEventLog } from "../report/events.ts";
import { formatExecutionSummary } from "../report/summary.ts";
import { formatUtilization } from "../report/utilization.ts";
import type { Resources } from "../schedule/mod.ts";
import { exitCodeForOutcome, type RunOutcome } from "./exit_codes.ts";
import { installStopSwitch } from "./signals.ts";

export interface RunCommandOptions {
  readonly serial?: boolean;
  /** false with --no-progress. */
  readonly progress?: boolean;
  readonly resources?: Resources;
  readonly events?: string;
  readonly logDir?: string;
  readonly grace?: number;
  readonly progressInterval?: number;
}

export async function runCommand(file: string, options: RunCommandOptions): Promise<number> {
  const pipeline = await loadPipeline(file);
  return await runPipeline(pipeline, options);
}

export async function runPipeline(
  pipeline: PipelineConfig,
  options: RunCommandOptions,
): Promise<number> {
  const graph = buildPipelineGraph(pipeline);
  const color = process.stderr.isTTY === true && process.env.NO_COLOR === undefined;
  const events = options.events === undefined
    ? null
    : createEventLog(options.events, pipeline.path);
  const console = createRunConsole({
    stderr: process.stderr,
    mode: options.progress === false ? "off" : "auto",
    ...(options.progressInterval === undefined
      ? {}
      : { intervalSeconds: options.progressInterval }),
    logDir: options.logDir ?? null,
    color,
  });
  const observer = combineObservers(console.observer, events);
  const stop = installStopSwitch(() => {
    console.close();
    events?.close();
  });
  let result: RunResult;
  try {
    result = options.serial === true
      ? await runSerial(pipeline, graph, { observer, stopRequested: stop.reason })
      : await runParallel(pipeline, graph, {
        observer,
        resources: options.resources ?? null,
        onStopRequest: stop.onStop,
        ...(options.grace === undefined ? {} : { graceSeconds: options.grace }),
        output: console.output,
      });
  } finally {
    stop.dispose();
    console.close();
  }
  const code = exitCodeForOutcome(outcomeOf(result));
  events?.finish(result, code);
  events?.close();
  // The utilisation table first, so the summary's verdict is the last line on the terminal.
  let text = "";
  if (result.utilization !== undefined) text += "\n" + formatUtilization(result.utilization) + "\n";
  text += "\n" + summaryText(result, color, code) + "\n";
  process.stderr.write(text);
  return code;
}

export function outcomeOf(result: RunResult): RunOutcome {
  if (result.stoppedBy === "SIGINT") return "interrupted-sigint";
  if (result.stoppedBy === "SIGTERM") return "interrupted-sigterm";
  return runSucceeded(result) ? "complete" : "incomplete";
}

export function summaryText(result: RunResult, color: boolean, exitCode: number): string {
  return formatExecutionSummary(
    result.tasks.map((t) => ({ id: t.id, counters: t.counters })),
    result.failures.map((f) => ({
      taskId: f.taskId,
      blockId: f.blockId,
      index: f.index,
      attempts: f.attempt,
      message: f.message,
      ...(f.stack === undefined ? {} : { stack: f.stack }),
    })),
    { color, exitCode },
  );
}

function combineObservers(...observers: (RunObserver | null)[]): RunObserver {
  const list = observers.filter((o): o is RunObserver => o !== null);
  return {
    runStarted: (tasks) => list.forEach((o) => o.runStarted?.(tasks)),
    blockFailed: (failure) => list.forEach((o) => o.blockFailed?.(failure)),
    progress: (tasks) => list.forEach((o) => o.progress?.(tasks)),
    notice: (message) => list.forEach((o) => o.notice?.(message)),
    runFinished: (result) => list.forEach((o) => o.runFinished?.(result)),
  };
}
