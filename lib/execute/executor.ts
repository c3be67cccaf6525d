/**
 * What the parallel run loop drives: an executor runs the blocks of one task, a few in flight
 * at a time, in the order it was sent them. Executors are made by an `ExecutorFactory` the run is
 * given, so the loop never names a kind: today a Web Worker running the task's `process`
 * (`worker_executor.ts`), a slot running the task's `command` per block (`command_executor.ts`),
 * or a worker at the other end of a byte stream (`stream_executor.ts`).
 */

import type { TaskLayout } from "../blocks/mod.ts";
import type { OutputPlan } from "../outputs/output_plan.ts";
import type { TaskConfig } from "../pipeline/spec.ts";
import type { StartStage } from "../schedule/mod.ts";
import type { InFlightQueue } from "./in_flight.ts";
import type { ResultsMessage } from "./protocol/messages.ts";
import type { RunClock } from "./run_clock.ts";
import type { ProcessMatch } from "../runtime/nvml.ts";

export type ExecutorState = "starting" | "ready" | "dead";

/** How an executor reports to the run loop. Arrays passed in are valid only during the call. */
export interface ExecutorEvents {
  ready(executor: Executor): void;
  /** Its worker failed to start (`stage`, default "setup"); `stack`: its traceback or stderr. */
  setupFailed(
    executor: Executor,
    message: string,
    stack: string | undefined,
    stage?: StartStage,
  ): void;
  /** Results in the order the blocks ran; the message was validated. */
  results(executor: Executor, results: ResultsMessage): void;
  /** Blocks handed back unstarted after `recall()`, in the order they were sent. */
  returned(executor: Executor, positions: Float64Array, count: number): void;
  /** The executor died unexpectedly; `reason` says how. Nothing fires afterwards. */
  crashed(executor: Executor, reason: string): void;
  output(executor: Executor, stream: "stdout" | "stderr", text: string): void;
  /**
   * The worker takes no more blocks (its batch job nears its walltime): it hands back those not
   * started and finishes the one it runs; the run starts a replacement. Not a crash.
   */
  leaving(executor: Executor, reason: string): void;
}

export interface Executor {
  /** Run-wide worker number (0, 1, 2, ... across all tasks). */
  readonly id: number;
  readonly task: number;
  readonly state: ExecutorState;
  /** Blocks sent and not yet reported, oldest first. */
  readonly inFlight: InFlightQueue;
  /** How many blocks may be in flight at once. */
  window: number;
  /**
   * How many milliseconds of blocks its window should hold (`Dispatcher.resize`); absent:
   * `TARGET_BATCH_MS`. A worker across a network holds more, since each batch is a message.
   */
  readonly batchMs?: number | undefined;
  /** A buffer with room for `pairs` (position, attempt) pairs, to fill and pass to `send`. */
  batchBuffer(pairs: number): Float64Array;
  /** Hand over the first `count` pairs of `batch`, already recorded in `inFlight`. */
  send(batch: Float64Array, count: number): void;
  /** Position of the block running now, or -1 when none is known to run. */
  runningPosition(): number;
  /**
   * Called on every health tick with the run clock's time: an executor whose block ran past the
   * task's timeout ends it (a worker crashes through `crashed`, a command fails the block).
   */
  checkHealth(now: number): void;
  /**
   * Hand back the blocks it has not started; `returned` reports them. `final` (the run is
   * stopping) also makes it start nothing it is sent later.
   */
  recall(final?: boolean): void;
  /** Ask it to finish its blocks and exit. */
  stop(): void;
  /** End it now; no event fires afterwards. */
  kill(): void;
  /** A remote worker whose batch job still waits in the cluster's queue. */
  queued?(): boolean;
  /**
   * Idle, it costs nothing but memory (a local Web Worker), so it may be parked while its
   * task waits for budget instead of exiting (`parked_executors.ts`).
   */
  readonly parkable?: boolean;
  /**
   * A worker that joined the run by hand (`launch: "manual"`): losing it spends no
   * `maxWorkerRestarts` (nobody launched it; it is simply gone) and its place waits for another.
   */
  readonly joined?: boolean;
  /**
   * Settles once its worker process has exited after `stop` or `kill` (absent: nothing outlives
   * the executor). Its GPUs come back then, not before (`device_seats.ts`).
   */
  readonly exited?: Promise<void> | undefined;
  /**
   * Whose device memory is this worker's now, for its GPU figures (docs/design/GPU.md): its
   * process's pid, a command slot's running command group, a matcher of nobody for a worker
   * that has no process of its own (a thread of a shared process), or null while it runs
   * nothing to sample. Absent: not sampled.
   */
  gpuProcess?(): ProcessMatch | null;
}

/** The GPUs a worker holds (`requires.gpu`) and the variables naming them for its process. */
export interface WorkerDevices {
  readonly ids: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** Everything a factory needs to make an executor for a task. */
export interface ExecutorSpec {
  /** Run-wide worker number. */
  readonly id: number;
  readonly task: number;
  readonly config: TaskConfig;
  readonly layout: TaskLayout;
  /** Absolute path of the pipeline module. */
  readonly pipelinePath: string;
  /** Measure CPU, RSS and I/O per block (resource tracking). */
  readonly measure: boolean;
  /** The task's declared outputs, resolved for this run (empty without outputs). */
  readonly outputs: readonly OutputPlan[];
  /** Names this run's staging folders. */
  readonly runId: string;
  readonly clock: RunClock;
  readonly events: ExecutorEvents;
  /**
   * Whether the task could use one more worker now (`worker_demand.ts`): a worker server holds
   * back connections no task needs. Absent: always.
   */
  readonly demand?: TaskDemand;
  /** Its GPUs from the run's pool, when its task requires some here (`device_seats.ts`). */
  readonly devices?: WorkerDevices;
  /**
   * Take a GPU sample now (`gpu_watch.ts`), when the GPU figures are read for this worker: a
   * command slot calls it as a block's command starts and as it ends.
   */
  readonly sampleGpu?: () => void;
}

/** Whether a task could use one more worker now (`worker_demand.ts`). */
export interface TaskDemand {
  wanted(): boolean;
  /** A window has ended since the task's first results: `wanted` rests on a measure. */
  readonly decided: boolean;
  /** The last window's share of its workers' time in blocks (NaN: no verdict), for notices. */
  readonly busyShare: number;
}

export type ExecutorFactory = (spec: ExecutorSpec) => Executor;
