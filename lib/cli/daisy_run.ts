/**
 * A daisy session's `run`: the pipeline from Python through `runPipeline`, the same stages as
 * `blockwise run` (ledger, outputs, resume, budgets, summary), with three hooks into the Python
 * process: its worker threads are launched through `ThreadLauncher`, `check_function` is asked
 * with `check` events, and a serial run hands each block over with a `block` event. Progress
 * goes to Python as `progress` events; the answer carries the final counters and daisy's run
 * statistics.
 */

import process from "node:process";
import { blockIdToJson } from "../blocks/mod.ts";
import type {
  BlockFailure,
  RunObserver,
  RunResult,
  TaskResult,
  UtilizationReport,
} from "../run/run_types.ts";
import { combineObservers } from "../report/observers.ts";
import { runPipeline } from "./run.ts";
import { installStopSwitch, type StopSwitch } from "./signals.ts";
import { isRecord } from "../errors.ts";
import type { Block } from "../pipeline/spec.ts";
import { type GpuOption, parseResourcesOption, type Resources } from "../schedule/mod.ts";
import type { JsonObject, LineChannel } from "../daisy/json_lines.ts";
import { parseDaisyPipeline, SessionRefusal } from "../daisy/pipeline_json.ts";
import { countersJson } from "../daisy/scheduler_handle.ts";
import { ThreadLauncher } from "../daisy/thread_launcher.ts";

/** Progress events at most this often between a run's start and its end (ms). */
const PROGRESS_EVERY_MS = 100;

type Failure = { message: string; stack?: string } | null;

/** What the session routes to the run in progress: answers and requests from Python. */
export interface RunInProgress {
  stop(why: string): void;
  exited(task: string, worker: number, ok: boolean, error: string | null): void;
  checked(q: number, done: boolean): void;
  ran(q: number, failure: Failure, stop: boolean): void;
  /** Python closed the session: stop, and answer for it whatever it still owed. */
  peerGone(): void;
}

/** Failed attempts the answer lists at most (the ledger and errors.jsonl keep them all). */
const MAX_FAILURES = 100;

export function blockEventJson(block: Block): JsonObject {
  return {
    task: block.taskId,
    id: blockIdToJson(block.id),
    index: [...block.index],
    readRoi: { offset: [...block.readRoi.offset], shape: [...block.readRoi.shape] },
    writeRoi: { offset: [...block.writeRoi.offset], shape: [...block.writeRoi.shape] },
    attempt: block.attempt,
  };
}

export interface RunOptionsJson {
  readonly serial: boolean;
  readonly resources: Resources | null;
  /** The GPUs of `resources` as given (`"gpu": [0, 1]` names devices), or null. */
  readonly gpu: GpuOption | null;
  readonly trackingDir: string | null;
  readonly resourceTracking: boolean;
  readonly events: string | null;
  /** Where worker processes on other machines connect (`--listen`), or null for loopback. */
  readonly listen: string | null;
  /** The live dashboard (`--serve`): true for its default address, or HOST:PORT. */
  readonly serve: string | true | null;
}

export function parseRunOptions(value: unknown): RunOptionsJson {
  const o = isRecord(value) ? value : {};
  const text = (key: string): string | null => {
    const v = o[key];
    if (v === undefined || v === null) return null;
    if (typeof v !== "string") {
      throw new SessionRefusal("TypeError", `Run option "${key}" must be a path; got ${v}`);
    }
    return v;
  };
  let resources: Resources | null = null;
  let gpu: GpuOption | null = null;
  const r = o["resources"];
  if (r !== undefined && r !== null) {
    if (!isRecord(r)) {
      throw new SessionRefusal(
        "TypeError",
        `resources must be a dict of resource name to amount, e.g. {"cpu": 4, "gpu": 1}; got ${
          JSON.stringify(r)
        }`,
      );
    }
    try {
      const parsed = parseResourcesOption(
        Object.entries(r).map(([k, v]) => `${k}=${String(v)}`).join(","),
      );
      resources = parsed.counts;
      gpu = parsed.gpu;
    } catch (error) {
      throw new SessionRefusal("ValueError", (error as Error).message);
    }
  }
  return {
    serial: o["serial"] === true,
    resources,
    gpu,
    trackingDir: text("trackingDir"),
    resourceTracking: o["resourceTracking"] === true,
    events: text("events"),
    listen: text("listen"),
    serve: o["serve"] === true ? true : text("serve"),
  };
}

/**
 * Runs a pipeline for the session; `attach` receives the run's handlers while it runs (and null
 * after). Resolves to the answer of the `run` request.
 */
export async function runForSession(
  request: JsonObject,
  channel: LineChannel,
  attach: (run: RunInProgress | null) => void,
): Promise<JsonObject> {
  let nextQuestion = 0;
  const checks = new Map<number, (done: boolean) => void>();
  const blocks = new Map<number, (failure: Failure) => void>();
  const ask = (block: Block): Promise<boolean> =>
    new Promise((resolve) => {
      const q = ++nextQuestion;
      checks.set(q, resolve);
      channel.send({ ev: "check", q, block: blockEventJson(block) });
    });
  const pipeline = parseDaisyPipeline(request["pipeline"], ask);
  const options = parseRunOptions(request["options"]);
  const launcher = new ThreadLauncher(channel);
  const stop: StopSwitch = installStopSwitch();
  let result: RunResult | null = null;
  attach({
    stop: (why) => stop.request("SIGINT", why),
    exited: (task, worker, ok, error) => launcher.exited(task, worker, ok, error),
    checked: (q, done) => {
      checks.get(q)?.(done);
      checks.delete(q);
    },
    ran: (q, failure, stopNow) => {
      if (stopNow) stop.request("SIGINT", "Stopping: the process function raised in a serial run");
      blocks.get(q)?.(failure);
      blocks.delete(q);
    },
    peerGone: () => {
      stop.request("SIGTERM", "Stopping: the Python process closed the session");
      owedNothing();
    },
  });
  const owedNothing = () => {
    for (const resolve of checks.values()) resolve(false);
    for (const resolve of blocks.values()) {
      resolve({ message: "the Python process ended before the block finished" });
    }
    checks.clear();
    blocks.clear();
  };
  const failures: BlockFailure[] = [];
  const observer = combineObservers(
    progressEvents(channel, (r) => (result = r)),
    {
      blockFailed: (failure) => {
        if (failures.length < MAX_FAILURES) failures.push(failure);
      },
    },
  );
  let code: number;
  try {
    code = await runPipeline(pipeline.config, {
      serial: options.serial,
      progress: false,
      ...(options.resources === null ? {} : { resources: options.resources, gpu: options.gpu }),
      ...(options.trackingDir === null ? {} : { trackingDir: options.trackingDir }),
      ...(options.events === null ? {} : { events: options.events }),
      ...(options.listen === null ? {} : { listen: options.listen }),
      ...(options.serve === null ? {} : { serve: options.serve }),
      resourceTracking: options.resourceTracking,
      embeddedLauncher: launcher,
      embeddedBlock: (block, outputs) =>
        new Promise((resolve) => {
          const q = ++nextQuestion;
          blocks.set(q, resolve);
          const json = blockEventJson(block);
          if (Object.keys(outputs).length > 0) json["outputs"] = outputs;
          channel.send({ ev: "block", q, block: json });
        }),
      observer,
      workerStdout: process.stderr,
    }, stop);
  } finally {
    attach(null);
    stop.dispose();
    owedNothing();
  }
  const finished = result as RunResult | null;
  if (finished === null) {
    throw new Error("Internal error: the run ended without reporting its result");
  }
  return {
    code,
    outcome: finished.outcome,
    states: statesJson(finished.tasks),
    stats: runStatsJson(finished.utilization),
    failures: failures.map((f) => ({
      task: f.taskId,
      id: blockIdToJson(f.blockId),
      attempt: f.attempt,
      message: f.message,
      ...(f.stack === undefined ? {} : { stack: f.stack }),
      permanent: f.permanent,
    })),
  };
}

function statesJson(tasks: readonly TaskResult[]): JsonObject {
  const states: JsonObject = {};
  for (const t of tasks) {
    states[t.id] = countersJson(t.counters, t.workerFailures ?? 0, t.restarts ?? 0);
  }
  return states;
}

/** `start`, throttled `progress` and `finish` events, and the result when the run ends. */
function progressEvents(
  channel: LineChannel,
  finished: (result: RunResult) => void,
): RunObserver {
  let last = 0;
  return {
    runStarted: (tasks) => {
      last = performance.now();
      channel.send({ ev: "progress", kind: "start", states: statesJson(tasks) });
    },
    progress: (tasks) => {
      const now = performance.now();
      if (now - last < PROGRESS_EVERY_MS) return;
      last = now;
      channel.send({ ev: "progress", kind: "progress", states: statesJson(tasks) });
    },
    runFinished: (result) => {
      channel.send({ ev: "progress", kind: "finish", states: statesJson(result.tasks) });
      finished(result);
    },
  };
}

/** daisy's `Server.last_run_stats`: process, per_task and per_worker (RUN_STATS.md of daisy). */
function runStatsJson(report: UtilizationReport | undefined): JsonObject {
  if (report === undefined) return { process: {}, per_task: {}, per_worker: [] };
  const perTask: JsonObject = {};
  for (const t of report.tasks) {
    perTask[t.id] = {
      blocks_processed: t.blocks,
      max_concurrent_workers: t.maxConcurrent,
      workers_spawned: t.workersSpawned,
      worker_restarts: t.restarts,
      worker_failures: t.workerFailures,
      total_block_time_secs: t.busySeconds,
      total_cpu_time_secs: t.cpuSeconds,
      total_wall_time_secs: t.wallSeconds,
      mean_block_ms: t.meanMs,
      block_ms_slope: t.slopeMs,
    };
  }
  return {
    process: {
      wall_time_secs: report.wallSeconds,
      total_cpu_time_secs: report.processCpuSeconds,
      peak_rss_bytes: report.peakRssBytes,
      disk_read_bytes: report.ioReadBytes,
      disk_write_bytes: report.ioWriteBytes,
    },
    per_task: perTask,
    per_worker: report.workers.map((w) => ({
      task_id: w.taskId,
      worker_id: w.workerId,
      blocks_processed: w.blocks,
      failed_blocks: w.failedBlocks,
      cpu_time_secs: w.cpuSeconds,
      wall_time_secs: Math.max(
        0,
        (Number.isNaN(w.endedAt) ? w.startedAt : w.endedAt) - w.startedAt,
      ),
      exit: w.exit,
      ...(w.reason === undefined ? {} : { reason: w.reason }),
    })),
  };
}
