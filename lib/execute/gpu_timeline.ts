/**
 * A worker's GPU samples over time, for blocks the scheduler only learns about afterwards
 * (docs/design/GPU.md, "Integration"): workers run blocks in batches, so the scheduler sees a
 * block's window only when its result arrives (`finished_at - wall_seconds .. finished_at`, or
 * sent .. returned for a command block). The timeline samples every `intervalMs` while the worker
 * is busy and answers `figures(t0, t1)` with the same figures GpuBlockSampler gives: the
 * time-weighted mean utilisation and the peak process memory over the window.
 *
 * Samples are kept in a ring of `capacity` (default 10 minutes at 100 ms); a window older than
 * the ring gets the fills (NaN, 0).
 */

import { isNvmlError, type NvmlError, type ProcessMatch } from "../runtime/nvml.ts";
import { GPU_SAMPLE_MS, type GpuBlockFigures, type GpuReader } from "./gpu_sampler.ts";
import type { RunClock } from "./run_clock.ts";

export interface GpuTimelineOptions {
  readonly intervalMs?: number;
  readonly capacity?: number;
  readonly onProblem?: (text: string) => void;
}

export class GpuTimeline {
  readonly devices: readonly number[];
  readonly #reader: GpuReader;
  readonly #pid: () => ProcessMatch | null;
  readonly #clock: RunClock;
  readonly #intervalMs: number;
  readonly #onProblem: (text: string) => void;
  readonly #told = new Set<string>();
  readonly #at: Float64Array;
  readonly #util: Float64Array;
  readonly #mem: Float64Array;
  readonly #problem: (string | null)[];
  /** Samples taken so far; sample k sits at k % capacity. */
  #count = 0;
  #stopTimer: (() => void) | null = null;

  /**
   * `pid()` says whose device memory counts now: the worker's pid, or a matcher such as a command
   * block's process group (null while it has none: nothing is sampled).
   */
  constructor(
    reader: GpuReader,
    devices: readonly number[],
    pid: () => ProcessMatch | null,
    clock: RunClock,
    options: GpuTimelineOptions = {},
  ) {
    this.#reader = reader;
    this.devices = [...devices];
    this.#pid = pid;
    this.#clock = clock;
    this.#intervalMs = options.intervalMs ?? GPU_SAMPLE_MS;
    this.#onProblem = options.onProblem ?? (() => {});
    const capacity = options.capacity ?? Math.ceil(600_000 / this.#intervalMs);
    this.#at = new Float64Array(capacity);
    this.#util = new Float64Array(capacity);
    this.#mem = new Float64Array(capacity);
    this.#problem = new Array<string | null>(capacity).fill(null);
  }

  /** Start sampling (the worker got blocks); takes a sample now. Idempotent. */
  start(): void {
    if (this.#stopTimer !== null) return;
    this.sample();
    this.#stopTimer = this.#clock.every(this.#intervalMs, () => this.sample());
  }

  /** Stop sampling (the worker is idle or gone); takes a last sample first. */
  stop(): void {
    if (this.#stopTimer === null) return;
    this.sample();
    this.#stopTimer();
    this.#stopTimer = null;
  }

  /** One sample of every device (also called by the timer). */
  sample(): void {
    const pid = this.#pid();
    if (pid === null) return;
    let utilSum = 0;
    let utilRead = 0;
    let memSum = 0;
    let memRead = 0;
    let problem: string | null = null;
    for (const device of this.devices) {
      let util: { utilPct: number } | NvmlError;
      let memory: number | NvmlError;
      try {
        util = this.#reader.sample(device);
        memory = this.#reader.processMemory(device, pid);
      } catch (error) {
        util = memory = { error: `reading device ${device} threw: ${String(error)}` };
      }
      if (isNvmlError(util)) problem ??= util.error;
      else {
        utilSum += util.utilPct;
        utilRead++;
      }
      if (isNvmlError(memory)) problem ??= memory.error;
      else {
        memSum += memory;
        memRead++;
      }
    }
    const slot = this.#count % this.#at.length;
    this.#at[slot] = this.#clock.now();
    this.#util[slot] = utilRead > 0 ? utilSum / utilRead : Number.NaN;
    this.#mem[slot] = memRead > 0 ? memSum : Number.NaN;
    this.#problem[slot] = problem;
    this.#count++;
    if (problem !== null && !this.#told.has(problem)) {
      this.#told.add(problem);
      this.#onProblem(problem);
    }
  }

  /**
   * The figures of the window [t0, t1] (run-clock milliseconds). A sample stands for the time
   * since the one before it, clipped to the window; the first sample after t1 covers the
   * window's tail. Memory is the peak of the samples in [t0, t1], or of the sample just after
   * t1 when none fell inside.
   */
  figures(t0: number, t1: number): GpuBlockFigures {
    const capacity = this.#at.length;
    const first = Math.max(0, this.#count - capacity);
    let weighted = 0;
    let weight = 0;
    let plainSum = 0;
    let plainCount = 0;
    let peak = -1;
    let samples = 0;
    let problem: string | null = null;
    let previous = Number.NaN;
    for (let k = first; k < this.#count; k++) {
      const slot = k % capacity;
      const at = this.#at[slot]!;
      const before = previous;
      previous = at;
      if (at < t0) continue;
      const tail = at > t1;
      // A sample covers the time since the one before it; without that one (the first sample,
      // or the ring dropped it), it covers nothing it can vouch for.
      const known = Number.isFinite(before);
      if (tail && !known) break;
      samples++;
      problem ??= this.#problem[slot]!;
      const util = this.#util[slot]!;
      const mem = this.#mem[slot]!;
      if (!Number.isNaN(util)) {
        plainSum += util;
        plainCount++;
        const from = known ? Math.max(before, t0) : t1;
        const to = Math.min(at, t1);
        if (to > from) {
          weighted += util * (to - from);
          weight += to - from;
        }
      }
      if (!Number.isNaN(mem) && (!tail || peak < 0) && mem > peak) peak = mem;
      if (tail) break;
    }
    if (samples === 0) return { utilPct: Number.NaN, memBytes: 0, samples: 0, problem: null };
    return {
      utilPct: weight > 0 ? weighted / weight : plainCount > 0 ? plainSum / plainCount : Number.NaN,
      memBytes: peak < 0 ? 0 : peak,
      samples,
      problem,
    };
  }
}
