/**
 * The block map of a report (report_data.ts `BlockMap`): one pass over a store's chunk files,
 * window by window (lib/tracking/chunk_reads.ts), aggregating every block into the cell of a
 * downsampled grid of at most `maxCells` cells. Memory is a few counters per cell, never per
 * block, so a 10^8-block store costs the size of the picture; the reads are plain fs reads, as
 * `status` does, so a live run's store is read without its lock.
 *
 * Resource arrays are read only for a full report; a frame reads `done`, `failures` and
 * `outputs_state`. Blocks with a measured `wall_seconds` are also handed to `BlockStats`
 * (block_stats.ts) in the same pass.
 */

import { trackingArray, type TrackingArraySpec, WORKER_NONE } from "../tracking/arrays.ts";
import { RunWindows } from "../tracking/block_runs.ts";
import { streamChunks } from "../tracking/chunk_reads.ts";
import type { StoreMetadata } from "../tracking/store_metadata.ts";
import type { BlockStats, ResourceWindow } from "./block_stats.ts";
import type { BlockMap, MetricLayer, MetricName } from "./report_data.ts";
import {
  base64,
  cellGridOf,
  countState,
  countStates,
  forEachSegment,
  StateCounts,
  stateLayerOf,
} from "./state_cells.ts";

export { cellShapeFor } from "./state_cells.ts";

/** Cells per window when streaming: 64 Ki cells, a few hundred KiB of buffers per array. */
const WINDOW_CELLS = 1 << 16;

const RESOURCE_ARRAYS = [
  "wall_seconds",
  "cpu_seconds",
  "peak_rss_bytes",
  "io_read_bytes",
  "io_write_bytes",
  "worker_id",
  "sent_at",
  "returned_at",
  "gpu_util_pct",
  "gpu_mem_bytes",
] as const;

/**
 * Per-cell GPU figures, made at the first block with one (a store without GPU figures costs
 * nothing): utilisation summed over the blocks that have it, and the largest device memory.
 */
class GpuCells {
  readonly util: Float64Array;
  readonly utilBlocks: Uint32Array;
  readonly mem: Float64Array;
  readonly memBlocks: Uint32Array;

  constructor(cells: number) {
    this.util = new Float64Array(cells);
    this.utilBlocks = new Uint32Array(cells);
    this.mem = new Float64Array(cells);
    this.memBlocks = new Uint32Array(cells);
  }
}

/** Per-cell accumulators of the resource arrays (full reports only). */
class ResourceCells {
  readonly measured: Uint32Array;
  readonly wall: Float64Array;
  readonly cpu: Float64Array;
  readonly rss: Float64Array;
  readonly ioRead: Float64Array;
  readonly ioWrite: Float64Array;
  readonly returned: Float64Array;
  readonly worker: Uint16Array;
  readonly workers = new Set<number>();
  gpu: GpuCells | null = null;

  constructor(cells: number) {
    this.measured = new Uint32Array(cells);
    this.wall = new Float64Array(cells);
    this.cpu = new Float64Array(cells);
    this.rss = new Float64Array(cells);
    this.ioRead = new Float64Array(cells);
    this.ioWrite = new Float64Array(cells);
    this.returned = new Float64Array(cells).fill(Number.NaN);
    this.worker = new Uint16Array(cells).fill(0xffff);
  }

  add(c: number, w: ResourceWindow, i: number): void {
    this.measured[c]!++;
    this.wall[c]! += w.wall[i]!;
    const cpu = w.cpu[i]!;
    if (cpu === cpu) this.cpu[c]! += cpu;
    const rss = w.rss[2 * i]! + w.rss[2 * i + 1]! * 4294967296;
    if (rss > this.rss[c]!) this.rss[c] = rss;
    this.ioRead[c]! += w.ioRead[2 * i]! + w.ioRead[2 * i + 1]! * 4294967296;
    this.ioWrite[c]! += w.ioWrite[2 * i]! + w.ioWrite[2 * i + 1]! * 4294967296;
    const returned = w.returned[i]!;
    if (returned === returned && !(returned <= this.returned[c]!)) this.returned[c] = returned;
    const worker = w.worker[i]!;
    if (worker !== WORKER_NONE) {
      if (this.worker[c] === 0xffff && worker < 0xffff) this.worker[c] = worker;
      if (this.workers.size < 0xfffe) this.workers.add(worker);
    }
  }

  /**
   * Block `i`'s GPU figures into cell `c`, measured or not (a command task's blocks have GPU
   * figures and no wall time); whether it has one.
   */
  addGpu(c: number, w: ResourceWindow, i: number): boolean {
    const util = w.gpuUtil[i]!;
    const mem = w.gpuMem[2 * i]! + w.gpuMem[2 * i + 1]! * 4294967296;
    if (util !== util && !(mem > 0)) return false;
    const gpu = (this.gpu ??= new GpuCells(this.measured.length));
    if (util === util) {
      gpu.util[c]! += util;
      gpu.utilBlocks[c]!++;
    }
    if (mem > 0) {
      gpu.memBlocks[c]!++;
      if (mem > gpu.mem[c]!) gpu.mem[c] = mem;
    }
    return true;
  }
}

export interface MapBuildOptions {
  readonly maxCells: number;
  /** Read the resource arrays too: metric layers, the worker layer and `stats`. */
  readonly full: boolean;
  readonly stats: BlockStats | null;
  /** Count the states into these (sized for the cell grid) instead of fresh counts. */
  readonly counts?: StateCounts;
  /** Where the windows come from (default: the chunk files, `streamChunks`). */
  readonly windows?: WindowSource;
}

/**
 * Windows of a store's arrays in step, as `streamChunks` gives them: `visit(firstCell, cells,
 * views)` with one byte view per spec, aligned for typed views of its element type.
 */
export type WindowSource = (
  specs: readonly TrackingArraySpec[],
  windowCells: number,
  visit: (firstCell: number, cells: number, views: readonly Uint8Array[]) => void,
) => void;

/** The block map of a store; throws StoreError as the chunk reads do. */
export function buildBlockMap(meta: StoreMetadata, options: MapBuildOptions): BlockMap {
  const layout = meta.layout;
  const cellGrid = cellGridOf(layout.gridShape, options.maxCells);
  const { cellShape, shape, count: cellCount } = cellGrid;
  const counts = options.counts ?? new StateCounts(cellCount);
  const withResources = options.full && meta.resourceTracking;
  const resources = withResources ? new ResourceCells(cellCount) : null;

  const specs: TrackingArraySpec[] = [trackingArray("done"), trackingArray("failures")];
  if (meta.provenance) specs.push(trackingArray("outputs_state"));
  if (withResources) { for (const name of RESOURCE_ARRAYS) specs.push(trackingArray(name)); }
  // A store made before `finished_at` has none: the report then times blocks by `returned_at`.
  const finished = withResources && meta.arrays.some((s) => s.name === "finished_at");
  if (finished) specs.push(trackingArray("finished_at"));
  const dims = layout.dims;
  const lastFactor = dims === 0 ? 1 : cellShape[dims - 1]!;
  const coords = new Array<number>(Math.max(dims, 1)).fill(0);
  const runs = new RunWindows(layout);
  const stats = withResources ? options.stats : null;

  const windows = options.windows ??
    ((specs, windowCells, visit) => streamChunks(meta, specs, windowCells, null, visit));
  windows(specs, WINDOW_CELLS, (first, cells, views) => {
    const doneView = views[0]!;
    const failures = new Uint32Array(views[1]!.buffer, views[1]!.byteOffset, cells);
    const outputs = meta.provenance ? views[2]! : null;
    const window = withResources
      ? resourceWindow(views.slice(meta.provenance ? 3 : 2), cells, finished)
      : null;
    runs.visit(first, cells, (runPosition, runOffset, runLength) => {
      forEachSegment(layout, cellGrid, coords, runPosition, runOffset, runLength, (
        position,
        offset,
        length,
        base,
        x0,
      ) => {
        if (window === null) {
          countStates(counts, doneView, failures, outputs, offset, length, base, x0, lastFactor);
          return;
        }
        for (let i = 0; i < length; i++) {
          const k = offset + i;
          const c = base + (((x0 + i) / lastFactor) | 0);
          countState(counts, doneView, failures, outputs, k, c);
          const gpu = resources!.addGpu(c, window, k);
          if (window.wall[k] === window.wall[k]) {
            resources!.add(c, window, k);
            stats?.visit(position + i, window, k, failures[k]!, doneView[k] === 1);
          } else if (gpu) {
            stats?.visitGpu(position + i, window, k, doneView[k] === 1);
          }
        }
      });
    });
  });

  const metrics: MetricLayer[] = [];
  if (options.full) {
    if (resources !== null) metrics.push(...resourceLayers(resources));
    metrics.push(
      quantise("failures", "count", "sum", counts.failureSum, counts.blocks, false),
    );
  }
  return {
    cell_shape: cellShape,
    shape,
    state: stateLayerOf(counts, cellGrid),
    metrics,
    workers: resources === null ? null : {
      values: base64(new Uint8Array(resources.worker.buffer)),
      workers: [...resources.workers].sort((a, b) => a - b),
    },
  };
}

function resourceWindow(
  views: readonly Uint8Array[],
  cells: number,
  finished: boolean,
): ResourceWindow {
  const f32 = (v: Uint8Array) => new Float32Array(v.buffer, v.byteOffset, cells);
  const f64 = (v: Uint8Array) => new Float64Array(v.buffer, v.byteOffset, cells);
  const u32 = (v: Uint8Array, n: number) => new Uint32Array(v.buffer, v.byteOffset, cells * n);
  return {
    wall: f32(views[0]!),
    cpu: f32(views[1]!),
    rss: u32(views[2]!, 2),
    ioRead: u32(views[3]!, 2),
    ioWrite: u32(views[4]!, 2),
    worker: u32(views[5]!, 1),
    sent: f64(views[6]!),
    returned: f64(views[7]!),
    gpuUtil: f32(views[8]!),
    gpuMem: u32(views[9]!, 2),
    finished: finished ? f64(views[10]!) : null,
  };
}

function resourceLayers(r: ResourceCells): MetricLayer[] {
  const n = r.measured;
  const gpu = r.gpu;
  const layers = [
    quantise("wall_seconds", "s", "mean", r.wall, n, true),
    quantise("cpu_seconds", "s", "mean", r.cpu, n, true),
    quantise("peak_rss_bytes", "bytes", "max", r.rss, n, false),
    quantise("io_read_bytes", "bytes", "mean", r.ioRead, n, true),
    quantise("io_write_bytes", "bytes", "mean", r.ioWrite, n, true),
  ];
  // Each GPU layer only when some block has its figure: a task without GPUs is offered none.
  if (gpu !== null) {
    const util = quantise("gpu_util_pct", "percent", "mean", gpu.util, gpu.utilBlocks, true);
    const mem = quantise("gpu_mem_bytes", "bytes", "max", gpu.mem, gpu.memBlocks, false);
    layers.push(...[util, mem].filter((layer) => layer.measured_cells > 0));
  }
  layers.push(quantise("returned_at", "epoch_s", "max", r.returned, n, false));
  return layers;
}

/**
 * One byte per cell: 0 = no value (no block measured, `counts[c] === 0`), else `1 + k`, k in
 * 0..254 along `lo .. hi`. A log scale when the values span more than two decades and are all
 * positive (seconds and bytes usually do); epoch times, counts and percentages stay linear.
 */
function quantise(
  name: MetricName,
  unit: MetricLayer["unit"],
  aggregate: MetricLayer["aggregate"],
  values: Float64Array,
  counts: Uint32Array,
  mean: boolean,
): MetricLayer {
  const cells = values.length;
  const v = new Float64Array(cells);
  let lo = Infinity;
  let hi = -Infinity;
  let measured = 0;
  for (let c = 0; c < cells; c++) {
    const n = counts[c]!;
    const x = n === 0 ? Number.NaN : mean ? values[c]! / n : values[c]!;
    v[c] = x;
    if (x === x) {
      measured++;
      if (x < lo) lo = x;
      if (x > hi) hi = x;
    }
  }
  if (measured === 0) lo = hi = 0;
  const log = (unit === "s" || unit === "bytes") && lo > 0 && hi / lo > 100;
  const bytes = new Uint8Array(cells);
  const span = log ? Math.log(hi / lo) : hi - lo;
  for (let c = 0; c < cells; c++) {
    const x = v[c]!;
    if (x !== x) continue;
    const t = span <= 0 ? 0 : log ? Math.log(Math.max(x, lo) / lo) / span : (x - lo) / span;
    bytes[c] = 1 + Math.round(254 * Math.min(1, Math.max(0, t)));
  }
  return {
    name,
    unit,
    aggregate,
    values: base64(bytes),
    scale: log ? "log" : "linear",
    lo,
    hi,
    measured_cells: measured,
  };
}
