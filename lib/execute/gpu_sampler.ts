/**
 * A worker's GPU figures per block (issue 49 item 3, docs/design/GPU.md): while a block runs,
 * sample its devices' utilisation and its process's device memory through NVML every
 * `intervalMs` on the run clock, plus once at the start and once at the end, and give
 * `gpu_util_pct` (time-weighted mean utilisation over the block) and `gpu_mem_bytes` (the peak
 * over the samples of the process's device memory, summed over its devices).
 *
 * Nothing here throws into a run: a sample that fails is left out and its reason kept
 * (`problem`); a block none of whose samples could be read gets NaN and 0, the arrays' fills.
 */

import {
  isNvmlError,
  type NvmlError,
  type NvmlSample,
  type ProcessMatch,
} from "../runtime/nvml.ts";
import type { RunClock } from "./run_clock.ts";

/** The part of an open NVML session the sampler reads (tests give a scripted one). */
export interface GpuReader {
  sample(deviceIndex: number): Pick<NvmlSample, "utilPct"> | NvmlError;
  processMemory(deviceIndex: number, pid: ProcessMatch): number | NvmlError;
}

/** What resolving CUDA_VISIBLE_DEVICES needs of NVML. */
export interface GpuDirectory {
  deviceCount(): number | NvmlError;
  uuid(deviceIndex: number): string | NvmlError;
}

export interface GpuBlockFigures {
  /** Time-weighted mean utilisation (percent) of the worker's devices; NaN when none was read. */
  readonly utilPct: number;
  /** Peak device memory of the process (bytes, summed over its devices); 0 when none was read. */
  readonly memBytes: number;
  /** Samples taken during the block (start and end included). */
  readonly samples: number;
  /** The first reason a sample could not be read during the block, or null. */
  readonly problem: string | null;
}

export interface GpuSamplerOptions {
  /** Milliseconds between samples while a block runs (default GPU_SAMPLE_MS). */
  readonly intervalMs?: number;
  /** Told each distinct problem once per sampler (share `onceEach` for once per run). */
  readonly onProblem?: (text: string) => void;
}

export const GPU_SAMPLE_MS = 100;

/** The block figures of a block that was not measured: the arrays' fill values. */
export const NO_GPU_FIGURES: GpuBlockFigures = {
  utilPct: Number.NaN,
  memBytes: 0,
  samples: 0,
  problem: null,
};

/**
 * Per-block accountant for one worker process (`pid`) and its devices (NVML indices). One block
 * at a time: `startBlock` while a block is open starts it again.
 */
export class GpuBlockSampler {
  readonly devices: readonly number[];
  readonly pid: ProcessMatch;
  readonly #reader: GpuReader;
  readonly #clock: RunClock;
  readonly #intervalMs: number;
  readonly #onProblem: (text: string) => void;
  readonly #told = new Set<string>();
  #stopTimer: (() => void) | null = null;
  #open = false;
  #lastAt = 0;
  #weightedSum = 0;
  #weight = 0;
  #plainSum = 0;
  #plainCount = 0;
  #peak = -1;
  #samples = 0;
  #problem: string | null = null;

  constructor(
    reader: GpuReader,
    devices: readonly number[],
    pid: ProcessMatch,
    clock: RunClock,
    options: GpuSamplerOptions = {},
  ) {
    this.#reader = reader;
    this.devices = [...devices];
    this.pid = pid;
    this.#clock = clock;
    this.#intervalMs = options.intervalMs ?? GPU_SAMPLE_MS;
    this.#onProblem = options.onProblem ?? (() => {});
  }

  /** Begin a block: take the first sample and sample every interval until `endBlock`. */
  startBlock(): void {
    this.#stopSampling();
    this.#open = true;
    this.#weightedSum = 0;
    this.#weight = 0;
    this.#plainSum = 0;
    this.#plainCount = 0;
    this.#peak = -1;
    this.#samples = 0;
    this.#problem = null;
    this.#lastAt = this.#clock.now();
    this.#take(true);
    this.#stopTimer = this.#clock.every(this.#intervalMs, () => this.#take(false));
  }

  /** End the block: take the last sample, stop sampling, give the block's figures. */
  endBlock(): GpuBlockFigures {
    if (!this.#open) return NO_GPU_FIGURES;
    this.#take(false);
    this.#stopSampling();
    this.#open = false;
    const utilPct = this.#weight > 0
      ? this.#weightedSum / this.#weight
      : this.#plainCount > 0
      ? this.#plainSum / this.#plainCount
      : Number.NaN;
    return {
      utilPct,
      memBytes: this.#peak < 0 ? 0 : this.#peak,
      samples: this.#samples,
      problem: this.#problem,
    };
  }

  /** Stop sampling without figures (the worker went away mid-block). */
  stop(): void {
    this.#stopSampling();
    this.#open = false;
  }

  #stopSampling(): void {
    this.#stopTimer?.();
    this.#stopTimer = null;
  }

  /**
   * One sample of every device. NVML's utilisation describes the sample period just before the
   * call, so a sample's value stands for the time since the previous sample; the first sample
   * (at the start) only counts when the block took no measurable time.
   */
  #take(first: boolean): void {
    const at = this.#clock.now();
    let utilSum = 0;
    let utilRead = 0;
    let memSum = 0;
    let memRead = 0;
    for (const device of this.devices) {
      let sample: Pick<NvmlSample, "utilPct"> | NvmlError;
      let memory: number | NvmlError;
      try {
        sample = this.#reader.sample(device);
        memory = this.#reader.processMemory(device, this.pid);
      } catch (error) {
        sample = memory = { error: `reading device ${device} threw: ${String(error)}` };
      }
      if (isNvmlError(sample)) this.#note(sample.error);
      else {
        utilSum += sample.utilPct;
        utilRead++;
      }
      if (isNvmlError(memory)) this.#note(memory.error);
      else {
        memSum += memory;
        memRead++;
      }
    }
    this.#samples++;
    if (utilRead > 0) {
      const util = utilSum / utilRead;
      this.#plainSum += util;
      this.#plainCount++;
      if (!first && at > this.#lastAt) {
        this.#weightedSum += util * (at - this.#lastAt);
        this.#weight += at - this.#lastAt;
      }
    }
    if (memRead > 0 && memSum > this.#peak) this.#peak = memSum;
    this.#lastAt = at;
  }

  #note(text: string): void {
    this.#problem ??= text;
    if (this.#told.has(text)) return;
    this.#told.add(text);
    this.#onProblem(text);
  }
}

/** A notice sink that passes on each distinct text once (a run's "says once why"). */
export function onceEach(sink: (text: string) => void): (text: string) => void {
  const seen = new Set<string>();
  return (text) => {
    if (seen.has(text)) return;
    seen.add(text);
    sink(text);
  };
}

/**
 * The NVML indices of the devices a worker was started with, from its CUDA_VISIBLE_DEVICES:
 * indices, or UUIDs ("GPU-...", a unique prefix is enough, as CUDA accepts). An empty value,
 * "-1" or "NoDevFiles" means no device. Indices are NVML's (PCI bus order): a pool that sets
 * indices must also set CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA counts the same way. MIG devices
 * are refused: NVML does not report utilisation per MIG instance.
 */
export function devicesFromVisible(
  visible: string | undefined,
  nvml: GpuDirectory,
): number[] | NvmlError {
  if (visible === undefined) return { error: "the worker has no CUDA_VISIBLE_DEVICES" };
  const entries = visible.split(",").map((e) => e.trim());
  if (visible.trim() === "" || entries[0] === "-1" || entries[0] === "NoDevFiles") return [];
  const count = nvml.deviceCount();
  if (isNvmlError(count)) return count;
  const found: number[] = [];
  let uuids: (string | null)[] | null = null;
  for (const entry of entries) {
    if (/^\d+$/.test(entry)) {
      const index = Number(entry);
      if (index >= count) {
        return { error: `CUDA_VISIBLE_DEVICES names device ${index}; NVML sees ${count}` };
      }
      found.push(index);
      continue;
    }
    if (entry.startsWith("MIG-")) {
      return {
        error: `CUDA_VISIBLE_DEVICES names MIG device ${entry}; GPU figures need whole GPUs`,
      };
    }
    const prefix = entry.startsWith("GPU-") ? entry : `GPU-${entry}`;
    uuids ??= Array.from({ length: count }, (_, i) => {
      const u = nvml.uuid(i);
      return isNvmlError(u) ? null : u;
    });
    const matches = uuids.flatMap((u, i) => u !== null && u.startsWith(prefix) ? [i] : []);
    if (matches.length !== 1) {
      return {
        error: `CUDA_VISIBLE_DEVICES entry ${entry} matches ${matches.length} of NVML's devices`,
      };
    }
    found.push(matches[0]!);
  }
  return found;
}
