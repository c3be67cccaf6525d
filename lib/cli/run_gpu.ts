/**
 * GPU figures in `blockwise run` (issue 49 item 3, docs/design/GPU.md "Integration"): NVML is
 * opened once per run, and only when some task that requires GPUs keeps resource figures in a
 * tracking store; the same session is the device pool's last source. Without it the run says
 * once why, and the ledger keeps NaN and 0.
 */

import { GpuWatch } from "../execute/gpu_watch.ts";
import type { RunClock } from "../execute/run_clock.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { NVML_ENV, nvmlDeviceCounter, type NvmlOpen, openNvml } from "../runtime/nvml.ts";
import type { DeviceCounter } from "../schedule/mod.ts";
import { resolveTrackingPath } from "../tracking/mod.ts";

export interface RunGpuOptions {
  readonly resourceTracking?: boolean;
  readonly trackingDir?: string;
  readonly serial?: boolean;
}

/** A run's NVML session, or why there is none. */
export class RunGpu {
  /** The device pool's last source, when NVML is open. */
  readonly counter: DeviceCounter | undefined;
  /** The one line saying why no GPU figures are recorded, or null (or none are wanted). */
  readonly notRecorded: string | null;
  readonly #opened: NvmlOpen | null;

  private constructor(opened: NvmlOpen | null, notRecorded: string | null) {
    this.#opened = opened;
    this.counter = opened?.ok === true ? nvmlDeviceCounter(opened) : undefined;
    this.notRecorded = notRecorded;
  }

  /** No NVML at all: no task needs figures (or it is a test). */
  static readonly NONE = new RunGpu(null, null);

  static async open(
    pipeline: PipelineConfig,
    options: RunGpuOptions,
    env: Readonly<Record<string, string | undefined>>,
  ): Promise<RunGpu> {
    if (!wantsGpuFigures(pipeline, options)) return RunGpu.NONE;
    if (options.serial === true) {
      return new RunGpu(null, `${LINE}--serial runs no worker to read them for`);
    }
    const opened = await openNvml({ env });
    if (opened.ok) return new RunGpu(opened, null);
    const hint = opened.reason.startsWith("cannot load ")
      ? ` (install the NVIDIA driver, or set ${NVML_ENV} to the library's path)`
      : "";
    return new RunGpu(opened, `${LINE}${opened.reason.replace(/\s+/g, " ")}${hint}`);
  }

  /** The watch of this run's GPU workers, or null when NVML is not open. */
  watch(
    clock: RunClock,
    measured: (task: number) => boolean,
    notice: (text: string) => void,
  ): GpuWatch | null {
    if (this.#opened?.ok !== true) return null;
    return new GpuWatch(this.#opened.nvml, clock, notice, { measured });
  }

  /** nvmlShutdown; idempotent. */
  close(): void {
    if (this.#opened?.ok === true) this.#opened.nvml.close();
  }
}

const LINE = "GPU figures: not recorded: ";

/** Some task requires GPUs and keeps resource figures in a tracking store. */
export function wantsGpuFigures(pipeline: PipelineConfig, options: RunGpuOptions): boolean {
  return pipeline.tasks.some((task, t) =>
    (task.requires["gpu"] ?? 0) > 0 &&
    (task.resourceTracking ?? options.resourceTracking === true) &&
    resolveTrackingPath(pipeline, t, options.trackingDir ?? null) !== null
  );
}
