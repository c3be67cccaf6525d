/** The options of the parallel run loop (parallel_runner.ts). */

import type { OutputPlan } from "../outputs/output_plan.ts";
import type { RunObserver, StopReason, TemporaryStats } from "../run/run_types.ts";
import type { Resources } from "../schedule/mod.ts";
import type { Precheck } from "./block_source.ts";
import type { CompletionSink } from "../run/block_report.ts";
import type { ExecutorFactory } from "./executor.ts";
import type { DeviceSeats } from "./device_seats.ts";
import type { GpuWatch } from "./gpu_watch.ts";
import type { ResumePlan } from "./resume_plan.ts";
import type { RunClock } from "./run_clock.ts";
import type { TaskRuntime } from "./task_runtime.ts";

export interface ParallelRunOptions {
  readonly observer?: RunObserver;
  /** Where outcomes are recorded (the tracking store). */
  readonly sink?: CompletionSink;
  readonly resources?: Resources | null;
  /** Measure CPU, RSS and I/O per block. */
  readonly measure?: (task: number) => boolean;
  /** Pre-check per task (done marker, skip mask), run on the main thread. */
  readonly precheck?: (task: number) => Precheck | undefined;
  /** Tasks whose every block is done already (a fully resumed task). */
  readonly alreadyDone?: (task: number) => boolean;
  /** Blocks a resume skips in bulk (`planResume`); the rest are pre-checked one by one. */
  readonly resume?: ResumePlan;
  /** Register for stop requests (signals); the run stops dispatching and drains. */
  readonly onStopRequest?: (listener: (reason: StopReason) => void) => void;
  /** Seconds in-flight blocks get to finish after a stop request before workers are killed. */
  readonly graceSeconds?: number;
  /** Cap on blocks in flight per executor (1 = one message per block; benchmarks only). */
  readonly maxInFlight?: number;
  /** Makes the executors; the default runs Web Workers and command slots on this machine. */
  readonly executorFactory?: ExecutorFactory;
  /** The clock and timers (tests inject a manual one). */
  readonly clock?: RunClock;
  /**
   * Give workers to the most downstream task with blocks and drain upstream executors to make
   * room (pipelines with temporaries: the live temporary data then follows the frontier).
   */
  readonly preferDownstream?: boolean;
  /** Each task's resolved outputs, indexed like the pipeline's tasks (default: none). */
  readonly outputs?: readonly (readonly OutputPlan[])[];
  /** A temporary task's live and deleted outputs, for progress and the summary. */
  readonly temporaryStats?: (task: number) => TemporaryStats | null;
  /** Names this run's staging folders (default "run"). */
  readonly runId?: string;
  /** Where worker output goes. */
  readonly output?: (
    taskId: string,
    workerId: number,
    stream: "stdout" | "stderr",
    text: string,
  ) => void;
  /**
   * Told the tasks' runtimes once the run loop exists, for a live view of the blocks running
   * now and their workers (`run --serve`); it must only read them.
   */
  readonly onStarted?: (tasks: readonly TaskRuntime[]) => void;
  /** GPUs per worker of the tasks that require them on this machine (`device_seats.ts`). */
  readonly devices?: DeviceSeats;
  /** Reads the GPU figures of the workers that hold devices (`gpu_watch.ts`); absent: none. */
  readonly gpu?: GpuWatch;
}
