/**
 * What a report says about the blocks measured (resource tracking): per-array distributions,
 * the 20 slowest blocks and the timeline. Fed block by block by the map pass (map_build.ts) so
 * a store is read once; memory is bounded whatever the store's size:
 *
 * - distributions keep every `stride`-th measured block (all of them up to 2^21 blocks), so
 *   quantiles are exact up to there and a systematic sample beyond;
 * - the timeline keeps a uniform random sample of at most `MAX_TIMELINE_BARS` bars (reservoir
 *   sampling with a fixed seed: the same store gives the same picture) and counts every block
 *   into `TIMELINE_BINS` bins for the completed and running curves (the running curve is the
 *   mean number of blocks running over each bin: a block ending a millisecond after the next
 *   one on its worker started is not drawn as one more running).
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { blockIdToJson } from "../blocks/mod.ts";
import { WORKER_NONE } from "../tracking/arrays.ts";
import { float32Figure, GpuStats } from "./gpu_stats.ts";
import {
  type BlockDetail,
  type Distribution,
  MAX_TIMELINE_BARS,
  type MetricName,
  type MetricUnit,
  type Timeline,
  type TimelineBar,
} from "./report_data.ts";

/** The resource arrays of one streamed window (uint64 arrays as pairs of uint32). */
export interface ResourceWindow {
  readonly wall: Float32Array;
  readonly cpu: Float32Array;
  readonly rss: Uint32Array;
  readonly ioRead: Uint32Array;
  readonly ioWrite: Uint32Array;
  readonly worker: Uint32Array;
  readonly sent: Float64Array;
  readonly returned: Float64Array;
  readonly gpuUtil: Float32Array;
  readonly gpuMem: Uint32Array;
  /** `finished_at` (absent from stores made before it). */
  readonly finished: Float64Array | null;
}

const SAMPLE_LIMIT = 1 << 21;
const SLOWEST = 20;
const TIMELINE_BINS = 400;
const HISTOGRAM_BINS = 40;

const DISTRIBUTED: readonly { name: MetricName; unit: Distribution["unit"] }[] = [
  { name: "wall_seconds", unit: "s" },
  { name: "cpu_seconds", unit: "s" },
  { name: "peak_rss_bytes", unit: "bytes" },
  { name: "io_read_bytes", unit: "bytes" },
  { name: "io_write_bytes", unit: "bytes" },
];

interface Measured {
  readonly position: number;
  readonly failures: number;
  readonly done: boolean;
  readonly wall: number;
  readonly cpu: number;
  readonly rss: number;
  readonly ioRead: number;
  readonly ioWrite: number;
  readonly worker: number;
  readonly sent: number;
  readonly returned: number;
  readonly gpuUtil: number;
  readonly gpuMem: number;
}

interface Bar {
  readonly worker: number;
  readonly start: number;
  readonly end: number;
  readonly position: number;
  /** NaN and 0: not recorded. */
  readonly gpuUtil: number;
  readonly gpuMem: number;
}

const u64 = (pairs: Uint32Array, i: number) => pairs[2 * i]! + pairs[2 * i + 1]! * 4294967296;

export class BlockStats {
  readonly #stride: number;
  readonly #samples: Float64Array[];
  #sampled = 0;
  #visited = 0;
  readonly #slowest: Measured[] = [];
  #slowestFloor = -Infinity;
  readonly #t0: number;
  readonly #binWidth: number;
  readonly #completedBins = new Float64Array(TIMELINE_BINS);
  /** Blocks running through whole bins, as differences; and parts of bins, in bin widths. */
  readonly #runningDiff = new Float64Array(TIMELINE_BINS + 1);
  readonly #runningPart = new Float64Array(TIMELINE_BINS);
  readonly #bars: Bar[] = [];
  readonly #gpu: GpuStats;
  #gpuBars = 0;
  readonly #workers = new Set<number>();
  #timed = 0;
  #seed = 1;

  /** `t0`, `t1`: the first `sent_at` and last `returned_at` (epoch seconds), or NaN. */
  constructor(blockCount: number, readonly t0: number, readonly t1: number) {
    this.#stride = Math.max(1, Math.ceil(blockCount / SAMPLE_LIMIT));
    const size = Math.min(blockCount, SAMPLE_LIMIT);
    this.#samples = DISTRIBUTED.map(() => new Float64Array(size));
    this.#gpu = new GpuStats(size, this.#stride);
    this.#t0 = t0;
    this.#binWidth = Number.isFinite(t1 - t0) && t1 > t0 ? (t1 - t0) / TIMELINE_BINS : 0;
  }

  /** One measured block (its `wall_seconds` is a number). */
  visit(position: number, w: ResourceWindow, i: number, failures: number, done: boolean): void {
    const wall = w.wall[i]!;
    if (this.#visited++ % this.#stride === 0 && this.#sampled < this.#samples[0]!.length) {
      const s = this.#sampled++;
      this.#samples[0]![s] = wall;
      this.#samples[1]![s] = w.cpu[i]!;
      this.#samples[2]![s] = u64(w.rss, i);
      this.#samples[3]![s] = u64(w.ioRead, i);
      this.#samples[4]![s] = u64(w.ioWrite, i);
    }
    this.#gpu.sample(w.gpuUtil[i]!, u64(w.gpuMem, i));
    if (wall > this.#slowestFloor || this.#slowest.length < SLOWEST) {
      this.#keepSlow(this.#measured(position, w, i, failures, done));
    }
    const sent = w.sent[i]!;
    const returned = w.returned[i]!;
    if (this.#binWidth > 0 && sent === sent && returned === returned) {
      this.#time(position, w, i, done);
    }
  }

  /**
   * A block with GPU figures and no wall time (a command task's): into the GPU distributions,
   * and into the timeline by its `sent_at`..`returned_at`.
   */
  visitGpu(position: number, w: ResourceWindow, i: number, done: boolean): void {
    this.#gpu.sample(w.gpuUtil[i]!, u64(w.gpuMem, i));
    if (this.#binWidth > 0 && w.sent[i]! === w.sent[i]! && w.returned[i]! === w.returned[i]!) {
      this.#time(position, w, i, done);
    }
  }

  #measured(position: number, w: ResourceWindow, i: number, failures: number, done: boolean) {
    return {
      position,
      failures,
      done,
      wall: w.wall[i]!,
      cpu: w.cpu[i]!,
      rss: u64(w.rss, i),
      ioRead: u64(w.ioRead, i),
      ioWrite: u64(w.ioWrite, i),
      worker: w.worker[i]!,
      sent: w.sent[i]!,
      returned: w.returned[i]!,
      gpuUtil: w.gpuUtil[i]!,
      gpuMem: u64(w.gpuMem, i),
    };
  }

  #keepSlow(m: Measured): void {
    if (this.#slowest.length === SLOWEST) {
      let min = 0;
      for (let k = 1; k < SLOWEST; k++) {
        if (this.#slowest[k]!.wall < this.#slowest[min]!.wall) min = k;
      }
      this.#slowest[min] = m;
    } else {
      this.#slowest.push(m);
    }
    if (this.#slowest.length === SLOWEST) {
      this.#slowestFloor = Math.min(...this.#slowest.map((s) => s.wall));
    }
  }

  #time(position: number, w: ResourceWindow, i: number, done: boolean): void {
    const [start, end] = ranAt(w, i);
    const worker = w.worker[i]!;
    const bins = TIMELINE_BINS;
    const at = (t: number) => (t - this.#t0) / this.#binWidth;
    if (done) this.#completedBins[Math.min(bins - 1, Math.max(0, Math.floor(at(end))))]!++;
    // The time it ran, spread over the bins it covers (whole bins through the differences).
    const a = Math.min(bins, Math.max(0, at(start)));
    const b = Math.min(bins, Math.max(a, at(end)));
    const first = Math.min(bins - 1, Math.floor(a));
    const last = Math.min(bins - 1, Math.floor(b));
    if (first === last) {
      this.#runningPart[first]! += b - a;
    } else {
      this.#runningPart[first]! += first + 1 - a;
      this.#runningPart[last]! += b - last;
      this.#runningDiff[first + 1]!++;
      this.#runningDiff[last]!--;
    }
    if (worker !== WORKER_NONE && this.#workers.size < 0xfffe) this.#workers.add(worker);
    const gpuUtil = w.gpuUtil[i]!;
    const gpuMem = u64(w.gpuMem, i);
    this.#gpu.time(worker, gpuUtil, end - start);
    const bar = { worker, start: start - this.#t0, end: end - this.#t0, position, gpuUtil, gpuMem };
    const seen = ++this.#timed;
    if (this.#bars.length < MAX_TIMELINE_BARS) {
      this.#keepBar(this.#bars.length, bar);
    } else {
      const j = Math.floor(this.#random() * seen);
      if (j < MAX_TIMELINE_BARS) this.#keepBar(j, bar);
    }
  }

  /** Bar `j` of the sample becomes `bar` (counting the bars with a GPU figure). */
  #keepBar(j: number, bar: Bar): void {
    const gpu = (b: Bar | undefined) =>
      b !== undefined && (b.gpuUtil === b.gpuUtil || b.gpuMem > 0);
    this.#gpuBars += (gpu(bar) ? 1 : 0) - (gpu(this.#bars[j]) ? 1 : 0);
    this.#bars[j] = bar;
  }

  /** A fixed-seed generator (mulberry32): the same store always gives the same sample. */
  #random(): number {
    let t = (this.#seed += 0x6d2b79f5);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  distributions(): Distribution[] {
    if (this.#sampled === 0) return this.#gpu.distributions(distribution);
    return [
      ...DISTRIBUTED.map(({ name, unit }, k) =>
        distribution(name, unit, this.#samples[k]!.subarray(0, this.#sampled))
      ),
      ...this.#gpu.distributions(distribution),
    ];
  }

  slowest(layout: TaskLayout): BlockDetail[] {
    return [...this.#slowest]
      .sort((a, b) => b.wall - a.wall || a.position - b.position)
      .map((m) => blockDetail(layout, m));
  }

  timeline(): Timeline | null {
    if (this.#timed === 0) return null;
    const workers = [...this.#workers].sort((a, b) => a - b);
    const lane = new Map(workers.map((w, i) => [w, i]));
    const bars: TimelineBar[] = this.#bars
      .map((b) => [lane.get(b.worker) ?? workers.length, b.start, b.end, b.position] as const);
    const completed: [number, number][] = [[0, 0]];
    const running: [number, number][] = [];
    let done = 0;
    let now = 0;
    for (let j = 0; j < TIMELINE_BINS; j++) {
      done += this.#completedBins[j]!;
      now += this.#runningDiff[j]!;
      completed.push([round3((j + 1) * this.#binWidth), done]);
      running.push([round3((j + 0.5) * this.#binWidth), round3(now + this.#runningPart[j]!)]);
    }
    return {
      t0: this.t0,
      t1: this.t1,
      workers,
      bars,
      blocks: this.#timed,
      completed,
      running,
      gpu: this.#gpuBars === 0 ? null : {
        util_pct: this.#bars.map((
          b,
        ) => (b.gpuUtil === b.gpuUtil ? float32Figure(b.gpuUtil) : null)),
        mem_bytes: this.#bars.map((b) => (b.gpuMem > 0 ? b.gpuMem : null)),
        worker_util_pct: this.#gpu.workerUtil(workers),
      },
    };
  }
}

/** Seconds two clocks may differ by and still be taken for the same (one machine's). */
const SAME_CLOCK = 0.05;

/**
 * When block `i` ran, `[start, end]` in epoch seconds: the `wall_seconds` up to its `finished_at`
 * (the worker's clock, measured at the instant its wall time ended). Not `sent_at`..
 * `returned_at`, which holds the time the block waited in its worker's window too: a worker
 * with two blocks in hand would count as two running. When the worker's clock is off from the
 * scheduler's (`finished_at` outside `sent_at`..`returned_at` by more than `SAME_CLOCK`), or the
 * store was made before `finished_at`, the `wall_seconds` up to `returned_at` (a worker reports
 * a block of 5 ms or more as soon as it ends).
 */
export function ranAt(w: ResourceWindow, i: number): [number, number] {
  const sent = w.sent[i]!;
  const returned = w.returned[i]!;
  const wall = w.wall[i]!;
  if (!(wall >= 0)) return [sent, returned];
  const finished = w.finished?.[i] ?? Number.NaN;
  if (finished - wall >= sent - SAME_CLOCK && finished <= returned + SAME_CLOCK) {
    return [finished - wall, finished];
  }
  return [Math.max(sent, returned - wall), returned];
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
const orNull = (x: number) => (Number.isFinite(x) ? x : null);

function blockDetail(layout: TaskLayout, m: Measured): BlockDetail {
  const write = layout.writeRoiOf(m.position);
  const read = layout.readRoiOf(m.position);
  return {
    position: m.position,
    coords: layout.coordsOf(m.position),
    index: layout.gridIndexOf(m.position),
    id: blockIdToJson(layout.blockIdOf(m.position)),
    write_roi: { offset: [...write.offset], shape: [...write.shape] },
    read_roi: { offset: [...read.offset], shape: [...read.shape] },
    done: m.done,
    failures: m.failures,
    wall_seconds: orNull(m.wall),
    cpu_seconds: orNull(m.cpu),
    peak_rss_bytes: m.rss,
    io_read_bytes: m.ioRead,
    io_write_bytes: m.ioWrite,
    gpu_util_pct: m.gpuUtil === m.gpuUtil ? float32Figure(m.gpuUtil) : null,
    gpu_mem_bytes: m.gpuMem > 0 ? m.gpuMem : null,
    worker_id: m.worker === WORKER_NONE ? null : m.worker,
    sent_at: orNull(m.sent),
    returned_at: orNull(m.returned),
  };
}

/**
 * The k-th smallest of `a[lo..hi]` (in place: afterwards `a[k]` is it, smaller ones are left of
 * it and larger ones right): Hoare's quickselect with a median-of-three pivot, linear on
 * average. Sorting a million values costs Deno's engine close to a second; this, milliseconds.
 */
function select(a: Float64Array, k: number, lo = 0, hi = a.length - 1): number {
  while (hi > lo) {
    const mid = (lo + hi) >>> 1;
    // Median of three into a[mid], then use it as the pivot.
    if (a[mid]! < a[lo]!) swap(a, mid, lo);
    if (a[hi]! < a[lo]!) swap(a, hi, lo);
    if (a[hi]! < a[mid]!) swap(a, hi, mid);
    const pivot = a[mid]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) swap(a, i++, j--);
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k]!;
  }
  return a[k]!;
}

function swap(a: Float64Array, i: number, j: number): void {
  const t = a[i]!;
  a[i] = a[j]!;
  a[j] = t;
}

/**
 * Quantile `q` by linear interpolation between order statistics (numpy's default), found by
 * selection; `a` is reordered.
 */
function quantile(a: Float64Array, q: number): number {
  const at = (a.length - 1) * q;
  const lo = Math.floor(at);
  const low = select(a, lo);
  if (lo + 1 >= a.length || at === lo) return low;
  // After selecting `lo`, the next order statistic is the smallest value right of it.
  let next = Infinity;
  for (let i = lo + 1; i < a.length; i++) if (a[i]! < next) next = a[i]!;
  return low + (next - low) * (at - lo);
}

export function distribution(
  name: MetricName,
  unit: MetricUnit,
  values: Float64Array,
): Distribution {
  // A plain loop, not `filter`: a callback per value is slow on some engines.
  let n = 0;
  const all = new Float64Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (v === v) all[n++] = v;
  }
  const measured = all.subarray(0, n);
  if (n === 0) {
    return {
      name,
      unit,
      count: 0,
      min: 0,
      q1: 0,
      median: 0,
      q3: 0,
      max: 0,
      mean: 0,
      histogram: { edges: [], counts: [] },
    };
  }
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = measured[i]!;
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const log = min > 0 && max / min > 100;
  const edges: number[] = [];
  for (let k = 0; k <= HISTOGRAM_BINS; k++) {
    const t = k / HISTOGRAM_BINS;
    edges.push(log ? min * (max / min) ** t : min + (max - min) * t);
  }
  const counts = new Array<number>(HISTOGRAM_BINS).fill(0);
  const span = log ? Math.log(max / min) : max - min;
  for (let i = 0; i < n; i++) {
    const v = measured[i]!;
    const t = span === 0 ? 0 : log ? Math.log(v / min) / span : (v - min) / span;
    counts[Math.min(HISTOGRAM_BINS - 1, Math.floor(t * HISTOGRAM_BINS))]!++;
  }
  return {
    name,
    unit,
    count: n,
    min,
    q1: quantile(measured, 0.25),
    median: quantile(measured, 0.5),
    q3: quantile(measured, 0.75),
    max,
    mean: sum / n,
    histogram: { edges, counts },
  };
}
