/** `blockwise run PIPELINE`: run every block, then print the execution summary. */

import process from "node:process";
import { InputError } from "../errors.ts";
import {
  buildPipelineGraph,
  checkSerialRunnable,
  localExecutorFactory,
  type ResumePlan,
  runParallel,
  runSerial,
  SYSTEM_CLOCK,
} from "../execute/mod.ts";
import type { RunObserver, RunResult, StopReason } from "../run/run_types.ts";
import type { LaunchKind, PipelineConfig } from "../pipeline/spec.ts";
import { effectiveLaunches, type RemoteWorkers } from "../remote/remote_workers.ts";
import { checkInterpreters } from "../remote/python_client.ts";
import { preflight } from "../pipeline/preflight.ts";
import { openRemoteWorkers, workerLogLocation } from "./run_remote.ts";
import { yieldToEventLoop } from "../execute/run_clock.ts";
import { prepareWorkers } from "../execute/worker_profile.ts";
import type { DependencyGraph } from "../graph/mod.ts";
import { formatCount } from "../report/table.ts";
import { loadPipeline } from "../pipeline/mod.ts";
import { type ConsoleStream, createRunConsole, type RunConsole } from "../report/console_output.ts";
import type { Launcher } from "../remote/launcher.ts";
import type { EmbeddedBlockRunner } from "../execute/serial_runner.ts";
import { createEventLog, type EventLog } from "../report/events.ts";
import { combineObservers } from "../report/observers.ts";
import type { RunLocations } from "../report/summary.ts";
import { type GpuOption, ResourceBudget, type Resources } from "../schedule/mod.ts";
import { describeDevices, type DeviceSeats, deviceSeats } from "../execute/device_seats.ts";
import { exitCodeForOutcome, exitCodeForSignal } from "./exit_codes.ts";
import { TrackingSession } from "../tracking/mod.ts";
import { combinePrechecks, finalText, mmapKindFor } from "./run_parts.ts";
import { RunGpu } from "./run_gpu.ts";
import { RunDashboard } from "./run_serve.ts";
import { loadRunMasks, parseSkipMaskFlags, type SkipMask } from "../masks/mod.ts";
import { installStopSwitch, resumeHint, type StopSwitch } from "./signals.ts";
import { LARGE_RUN_BLOCKS, planRunResume, trackedBlocks } from "./run_resume.ts";
import {
  describeReconcile,
  ForcedBlocks,
  needsProvenance,
  positionOfIndex,
  RunOutputs,
} from "../outputs/mod.ts";
import { errorsLogObserver } from "../outputs/errors_log.ts";
import { heldByLeftOutReaders } from "../outputs/outside_readers.ts";
import { describeSelection, selectForCommand } from "../pipeline/task_selection.ts";
import { emptyTasks } from "./plan.ts";
import { resolve } from "node:path";

export interface RunCommandOptions {
  readonly serial?: boolean;
  /** false with --no-progress. */
  readonly progress?: boolean;
  readonly resources?: Resources;
  /** `--resources gpu=...`: the GPUs of local workers (ids or a count), or null. */
  readonly gpu?: GpuOption | null;
  readonly events?: string;
  readonly eventsBlocks?: boolean;
  readonly logDir?: string;
  readonly grace?: number;
  readonly progressInterval?: number;
  readonly trackingDir?: string;
  readonly resourceTracking?: boolean;
  readonly trackingIo?: "auto" | "mmap" | "fs";
  readonly verbose?: boolean;
  /** `--skip-mask TASK=PATH`, repeatable. */
  readonly skipMask?: readonly string[];
  /** `--keep-temp`: delete no temporary outputs in this run. */
  readonly keepTemp?: boolean;
  /** `--allow-empty`: run although a task has no block (else refused). */
  readonly allowEmpty?: boolean;
  /** `--tasks A,B`, repeatable: run these tasks and the tasks upstream of them only. */
  readonly tasks?: readonly string[];
  /** `--force TASK[:OFFSET:SHAPE]`, repeatable: run those blocks whatever the ledger says. */
  readonly force?: readonly string[];
  /** `--serve [HOST:PORT]`: a live dashboard of the run (true: the default address). */
  readonly serve?: string | true;
  /** `--listen HOST:PORT`: where remote workers connect (default loopback, any free port). */
  readonly listen?: string;
  /** `--launcher KIND`: where every task's workers run. */
  readonly launcher?: LaunchKind;
  /** `--lease SECONDS`: how long a remote worker may stay silent before it counts as lost. */
  readonly lease?: number;
  /** The daisy session: starts the worker threads of its embedded Python tasks. */
  readonly embeddedLauncher?: Launcher;
  /** The daisy session's serial runs: runs one block of an embedded Python task. */
  readonly embeddedBlock?: EmbeddedBlockRunner;
  /** Told of the run as the console is (the daisy session's progress events). */
  readonly observer?: RunObserver;
  /** Where worker stdout goes (default this process's stdout). */
  readonly workerStdout?: ConsoleStream;
}

export async function runCommand(file: string, options: RunCommandOptions): Promise<number> {
  // Installed first, so that a signal is answered in every phase, loading included.
  const stop = installStopSwitch();
  stop.setPhase("loading the pipeline");
  stop.setResume(resumeHint(file, options.trackingDir));
  try {
    const pipeline = await loadPipeline(file);
    return await runPipeline(pipeline, options, stop);
  } finally {
    stop.dispose();
  }
}

/** A signal arrived before the run loop started (see `checkpoint`). */
class StoppedBeforeRun {
  constructor(readonly reason: StopReason) {}
}

export async function runPipeline(
  pipeline: PipelineConfig,
  options: RunCommandOptions,
  stopSwitch?: StopSwitch,
): Promise<number> {
  const stop = stopSwitch ?? installStopSwitch();
  // NVML, when the run wants GPU figures: closed here, whichever way the run ends.
  let gpu = RunGpu.NONE;
  try {
    gpu = await RunGpu.open(selectForCommand(pipeline, options).pipeline, options, process.env);
    return await runStages(pipeline, options, stop, gpu);
  } finally {
    gpu.close();
    if (stopSwitch === undefined) stop.dispose();
  }
}

async function runStages(
  whole: PipelineConfig,
  options: RunCommandOptions,
  stop: StopSwitch,
  gpu: RunGpu,
): Promise<number> {
  const selection = selectForCommand(whole, options);
  const pipeline = selection.pipeline;
  /** Between two steps of the start: let a signal in, and stop there when one came. */
  const checkpoint = async (): Promise<void> => {
    await yieldToEventLoop();
    const reason = stop.reason();
    if (reason !== null) throw new StoppedBeforeRun(reason);
  };
  stop.setPhase("preparing the run");
  const graph = buildPipelineGraph(pipeline);
  // Refuse a task that could never start a worker before any store is opened or written.
  preflight(pipeline);
  let devices: DeviceSeats | null = null;
  if (options.serial === true) checkSerialRunnable(pipeline);
  else {
    const launches = effectiveLaunches(pipeline, options.launcher);
    checkInterpreters(pipeline, launches);
    const budget = new ResourceBudget(options.resources ?? null);
    for (const task of pipeline.tasks) budget.checkFits(task.id, task.requires);
    devices = deviceSeats(pipeline, launches, options.gpu ?? null, process.env, gpu.counter);
  }
  const masks = await loadRunMasks(
    pipeline,
    graph.layouts,
    parseSkipMaskFlags(options.skipMask ?? []),
  );
  const color = process.stderr.isTTY === true && process.env.NO_COLOR === undefined;
  // Refuses (exit 2) an events path that cannot be written, before any store is touched.
  if (options.eventsBlocks === true && options.events === undefined) {
    throw new InputError(
      "--events-blocks adds lines to the events file: give it with --events FILE",
    );
  }
  const dashboard = options.serve === undefined
    ? null
    : new RunDashboard(pipeline, graph, options.serve, options.trackingDir);
  const events = options.events === undefined
    ? null
    : createEventLog(options.events, pipeline.path, { blocks: options.eventsBlocks === true });
  const console = createRunConsole({
    stderr: process.stderr,
    ...(options.workerStdout === undefined ? {} : { stdout: options.workerStdout }),
    mode: options.progress === false ? "off" : "auto",
    ...(options.progressInterval === undefined
      ? {}
      : { intervalSeconds: options.progressInterval }),
    logDir: options.logDir ?? null,
    color,
  });
  const observer = combineObservers(
    console.observer,
    events,
    dashboard?.observer ?? null,
    options.observer ?? null,
  );
  let tracking: TrackingSession | null = null;
  let outputs: RunOutputs | null = null;
  const closeAll = (stoppedBy: StopReason | null, code: number | null) => {
    tracking?.close(null, code, undefined, stoppedBy);
    console.close();
    events?.close();
    void dashboard?.close();
  };
  stop.setHardExit((code) => closeAll(stop.reason() ?? "SIGINT", code));
  let plan: ResumePlan;
  let forced: ForcedBlocks;
  try {
    await checkpoint();
    const selected = describeSelection(selection, "Running");
    if (selected !== null) observer.notice?.(selected);
    for (const w of emptyTasks(pipeline, graph.layouts, options.allowEmpty === true)) {
      observer.notice?.(`warning: ${w}`);
    }
    const launches = effectiveLaunches(pipeline, options.launcher);
    for (const line of prepareWorkers(pipeline, launches)) observer.notice?.(line);
    devices?.announce(describeDevices(pipeline, devices, launches), (m) => observer.notice?.(m));
    if (gpu.notRecorded !== null) observer.notice?.(gpu.notRecorded);
    const trackingDir = options.trackingDir ?? null;
    const huge = trackedBlocks(pipeline, graph.layouts, trackingDir) >= LARGE_RUN_BLOCKS;
    if (huge) {
      observer.notice?.(
        `Opening tracking stores (${
          formatCount(trackedBlocks(pipeline, graph.layouts, trackingDir))
        } blocks)...`,
      );
    }
    stop.setPhase("opening tracking stores");
    const provenance = needsProvenance(pipeline, graph);
    tracking = await TrackingSession.open(pipeline, graph.layouts, {
      trackingDir,
      resourceTracking: options.resourceTracking === true,
      mmap: mmapKindFor(options.trackingIo ?? "auto"),
      provenance: (t) => provenance[t] === true,
      onNotice: (message) => observer.notice?.(message),
    });
    await checkpoint();
    forced = ForcedBlocks.parse(options.force ?? [], pipeline, graph.layouts);
    outputs = RunOutputs.open(pipeline, graph, tracking, {
      forced,
      keepTemp: options.keepTemp === true,
      ...(selection.leftOut.length === 0 ? {} : {
        held: heldByLeftOutReaders(selection, buildPipelineGraph(whole), trackingDir),
      }),
      onNotice: (message) => observer.notice?.(message),
    });
    stop.setPhase("checking done markers");
    await checkpoint();
    plan = await planRunResume({
      pipeline,
      graph,
      tracking,
      outputs,
      forced,
      masks,
      checkpoint,
      notice: huge ? (message) => observer.notice?.(message) : null,
    });
    if (dashboard !== null) {
      const session = tracking;
      const url = await dashboard.start(session.runId, (t) => session.store(t));
      observer.notice?.(`Dashboard of this run: ${url}`);
    }
    await checkpoint();
  } catch (error) {
    if (outputs !== null) await outputs.close();
    if (error instanceof StoppedBeforeRun) {
      const code = exitCodeForSignal(error.reason);
      closeAll(error.reason, code);
      process.stderr.write(
        `Stopped by ${error.reason} before any block ran` +
          (tracking === null ? ".\n" : "; the tracking stores are closed and unlocked.\n"),
      );
      return code;
    }
    closeAll(null, null);
    throw error;
  }
  return await runLoop(pipeline, graph, options, {
    stop,
    tracking,
    outputs,
    forced,
    masks,
    plan,
    observer,
    console,
    events,
    color,
    dashboard,
    devices,
    gpu,
  });
}

interface Started {
  readonly stop: StopSwitch;
  readonly tracking: TrackingSession;
  readonly outputs: RunOutputs;
  readonly forced: ForcedBlocks;
  readonly masks: readonly (SkipMask | null)[];
  readonly plan: ResumePlan;
  readonly observer: RunObserver;
  readonly console: RunConsole;
  readonly events: EventLog | null;
  readonly color: boolean;
  readonly dashboard: RunDashboard | null;
  readonly devices: DeviceSeats | null;
  readonly gpu: RunGpu;
}

async function runLoop(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  options: RunCommandOptions,
  started: Started,
): Promise<number> {
  const { stop, tracking, outputs, forced, masks, observer, console, events, color } = started;
  const notice = (message: string) => observer.notice?.(message);
  const errorsLog = errorsLogObserver({
    storeOf: (id) => tracking.store(pipeline.tasks.findIndex((t) => t.id === id))?.path ?? null,
    runId: tracking.runId,
    onNotice: notice,
    ignore: (f) => {
      const t = pipeline.tasks.findIndex((task) => task.id === f.taskId);
      return outputs.wasQuarantined(t, positionOfIndex(graph.layouts[t]!, f.index));
    },
  });
  for (const summary of outputs.summaries) observer.notice?.(describeReconcile(summary));
  observer.outputsReconciled?.(outputs.summaries);
  if (options.verbose === true) {
    for (let t = 0; t < pipeline.tasks.length; t++) {
      const store = tracking.store(t);
      if (store !== null) {
        observer.notice?.(
          `Task "${pipeline.tasks[t]!.id}": tracking store ${store.path} (${store.mmapKind}${
            store.created ? ", created" : ""
          }${store.resourceTracking ? ", resource tracking" : ""})`,
        );
      }
    }
  }
  let remote: RemoteWorkers | null = null;
  try {
    remote = await openRemoteWorkers(pipeline, options, tracking.runId, notice);
  } catch (error) {
    await outputs.close();
    tracking.close(null, null);
    console.close();
    events?.close();
    await started.dashboard?.close();
    throw error;
  }
  stop.setHardExit((code) => {
    remote?.abort();
    // Recorded as interrupted by the first signal, with the code the process exits with.
    tracking.close(null, code, undefined, stop.reason() ?? "SIGINT");
    console.close();
    events?.close();
    process.stderr.write(
      `Stopped at once: blocks in flight were killed, the finished ones are recorded${
        options.trackingDir === undefined ? "" : ` (blockwise status ${options.trackingDir})`
      }; exit ${code}\n`,
    );
  });
  for (let t = 0; t < masks.length; t++) {
    const mask = masks[t];
    if (mask !== null && mask !== undefined) {
      observer.notice?.(
        `Task "${pipeline.tasks[t]!.id}": skip mask ${mask.source} skips ${mask.skipCount} of ${
          graph.layouts[t]!.blockCount
        } blocks`,
      );
    }
  }
  const common = {
    observer: combineObservers(observer, errorsLog),
    sink: outputs,
    precheck: (t: number) =>
      combinePrechecks(outputs.precheck(t, tracking.precheck(t), forced), masks[t] ?? null),
    alreadyDone: (t: number) => outputs.fullyFresh(t, (u) => tracking.fullyDone(u), forced),
    resume: started.plan,
    outputs: outputs.plans,
    runId: tracking.runId,
    temporaryStats: (t: number) => outputs.temporaryStats(t),
  };
  stop.setPhase(null);
  const watch = started.gpu.watch(SYSTEM_CLOCK, (t) => tracking.measures(t), notice);
  const factory = remote?.factory(localExecutorFactory) ?? localExecutorFactory;
  let result: RunResult;
  try {
    result = options.serial === true
      ? await runSerial(pipeline, graph, {
        ...common,
        stopRequested: stop.reason,
        ...(options.embeddedBlock === undefined ? {} : { embeddedBlock: options.embeddedBlock }),
      })
      : await runParallel(pipeline, graph, {
        ...common,
        resources: options.resources ?? null,
        onStopRequest: stop.onStop,
        measure: (t) => tracking.measures(t),
        preferDownstream: pipeline.tasks.some((t) => t.temporary),
        ...(options.grace === undefined ? {} : { graceSeconds: options.grace }),
        executorFactory: watch?.factory(factory) ?? factory,
        ...(watch === null ? {} : { gpu: watch }),
        output: console.output,
        ...(started.devices === null ? {} : { devices: started.devices }),
        ...(started.dashboard === null ? {} : { onStarted: started.dashboard.attach }),
      });
  } catch (error) {
    await remote?.close();
    await outputs.close();
    tracking.close(null, null);
    await started.dashboard?.close();
    throw error;
  } finally {
    watch?.close();
    console.close();
  }
  await remote?.close();
  await outputs.close();
  // Deletions that fell due with the last blocks happen in close(): report what is left.
  result = {
    ...result,
    tasks: result.tasks.map((r) => {
      const temporary = outputs.temporaryStats(pipeline.tasks.findIndex((t) => t.id === r.id));
      return temporary === null ? r : { ...r, temporary };
    }),
  };
  const code = exitCodeForOutcome(result.outcome);
  tracking.close(result, code, (t) => {
    const mask = masks[t];
    return mask === null || mask === undefined
      ? null
      : { source: mask.source, skipped: mask.skipCount };
  });
  events?.finish(result, code);
  events?.close();
  await started.dashboard?.close();
  const locations: RunLocations = {
    stores: pipeline.tasks.map((task, t) => ({
      task: task.id,
      path: tracking.store(t)?.path ?? null,
    })),
    events: options.events === undefined ? null : resolve(options.events),
    logDir: options.logDir === undefined ? null : resolve(options.logDir),
    ...workerLogLocation(remote, pipeline, options.launcher),
  };
  process.stderr.write(finalText(result, color, code, locations));
  return code;
}
