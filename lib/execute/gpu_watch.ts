/**
 * The GPU figures of a run's workers (issue 49 item 3, docs/design/GPU.md "Integration"): every
 * executor made with devices from the run's pool gets a `GpuTimeline` of its devices (their NVML
 * indices, from `ExecutorSpec.devices.ids`) and of its process (`Executor.gpuProcess`). One timer
 * samples the workers that hold blocks every `intervalMs`; a command slot also samples as each
 * command starts and ends (`ExecutorSpec.sampleGpu`). `ResultIntake` asks `of(executor)` for the
 * timeline and reads each block's window from it.
 *
 * Made only when the run reads GPU figures (resource tracking of a task that requires GPUs, NVML
 * open): otherwise no factory is wrapped, no timer runs and the run loop pays one null check per
 * batch.
 */

import { isNvmlError } from "../runtime/nvml.ts";
import type { Executor, ExecutorFactory } from "./executor.ts";
import {
  devicesFromVisible,
  GPU_SAMPLE_MS,
  type GpuDirectory,
  type GpuReader,
} from "./gpu_sampler.ts";
import { GpuTimeline } from "./gpu_timeline.ts";
import type { RunClock } from "./run_clock.ts";

export interface GpuWatchOptions {
  /** Whether a task's blocks keep GPU figures (its store has resource tracking). */
  readonly measured: (task: number) => boolean;
  readonly intervalMs?: number;
  /** Ring size of each worker's timeline (default: 10 minutes of samples). */
  readonly capacity?: number;
}

export class GpuWatch {
  readonly #nvml: GpuReader & GpuDirectory;
  readonly #clock: RunClock;
  readonly #notice: (text: string) => void;
  readonly #o: GpuWatchOptions;
  readonly #watched = new Map<Executor, GpuTimeline>();
  readonly #told = new Set<string>();
  #stopTimer: (() => void) | null = null;

  /** `notice` is told each distinct problem once per run, as one line. */
  constructor(
    nvml: GpuReader & GpuDirectory,
    clock: RunClock,
    notice: (text: string) => void,
    options: GpuWatchOptions,
  ) {
    this.#nvml = nvml;
    this.#clock = clock;
    this.#notice = notice;
    this.#o = options;
  }

  /** `base`, with every executor that holds GPUs of a measured task watched. */
  factory(base: ExecutorFactory): ExecutorFactory {
    return (spec) => {
      if (spec.devices === undefined || !this.#o.measured(spec.task)) return base(spec);
      const devices = devicesFromVisible(spec.devices.ids.join(","), this.#nvml);
      if (isNvmlError(devices)) {
        this.#tell(`worker ${spec.id}: ${devices.error}`);
        return base(spec);
      }
      let executor: Executor | null = null;
      const timeline = new GpuTimeline(
        this.#nvml,
        devices,
        () => executor?.gpuProcess?.() ?? null,
        this.#clock,
        {
          intervalMs: this.#o.intervalMs ?? GPU_SAMPLE_MS,
          ...(this.#o.capacity === undefined ? {} : { capacity: this.#o.capacity }),
          onProblem: (text) => this.#tell(text),
        },
      );
      executor = base({ ...spec, sampleGpu: () => timeline.sample() });
      this.#watched.set(executor, timeline);
      this.#stopTimer ??= this.#clock.every(
        this.#o.intervalMs ?? GPU_SAMPLE_MS,
        () => this.#tick(),
      );
      return executor;
    };
  }

  /** The executor's timeline, or null when its figures are not read. */
  of(executor: Executor): GpuTimeline | null {
    return this.#watched.get(executor) ?? null;
  }

  /** Workers watched now (tests). */
  get size(): number {
    return this.#watched.size;
  }

  /** Stop sampling (the run is over). */
  close(): void {
    this.#stopTimer?.();
    this.#stopTimer = null;
    this.#watched.clear();
  }

  #tick(): void {
    for (const [executor, timeline] of this.#watched) {
      if (executor.state === "dead") this.#watched.delete(executor);
      else if (executor.inFlight.size > 0) timeline.sample();
    }
    if (this.#watched.size === 0) {
      this.#stopTimer?.();
      this.#stopTimer = null;
    }
  }

  #tell(text: string): void {
    if (this.#told.has(text)) return;
    this.#told.add(text);
    this.#notice(
      `GPU figures: ${text}; the blocks record what could be read (NaN and 0 when nothing)`,
    );
  }
}
