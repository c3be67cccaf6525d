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

import { Buffer } from "node:buffer";
import { cOrderStrides } from "../blocks/mod.ts";
import { trackingArray, type TrackingArraySpec, WORKER_NONE } from "../tracking/arrays.ts";
import { RunWindows } from "../tracking/block_runs.ts";
import { streamChunks } from "../tracking/chunk_reads.ts";
import type { StoreMetadata } from "../tracking/store_metadata.ts";
import type { BlockStats, ResourceWindow } from "./block_stats.ts";
import {
  type BlockMap,
  CELL_DELETED_TEMPORARY,
  CELL_DONE,
  CELL_EMPTY,
  CELL_FAILED,
  CELL_NEVER_RUN,
  CELL_PARTLY_DONE,
  type MetricLayer,
  type MetricName,
} from "./report_data.ts";

/** Cells per window when streaming: 64 Ki cells, a few hundred KiB of buffers per array. */
const WINDOW_CELLS = 1 << 16;

/**
 * Blocks per cell along each axis so that the cell grid has at most `maxCells` cells: the axis
 * with the most cells is coarsened first, so a long thin grid keeps its short axis exact.
 */
export function cellShapeFor(gridShape: readonly number[], maxCells: number): number[] {
  const factors = gridShape.map(() => 1);
  const cells = () => gridShape.reduce((n, g, d) => n * Math.ceil(g / factors[d]!), 1);
  while (cells() > maxCells) {
    let widest = 0;
    for (let d = 1; d < gridShape.length; d++) {
      if (
        Math.ceil(gridShape[d]! / factors[d]!) > Math.ceil(gridShape[widest]! / factors[widest]!)
      ) {
        widest = d;
      }
    }
    // Jump straight to the next factor that changes the cell count of that axis.
    const now = Math.ceil(gridShape[widest]! / factors[widest]!);
    factors[widest] = Math.ceil(gridShape[widest]! / (now - 1));
  }
  return factors;
}

const RESOURCE_ARRAYS = [
  "wall_seconds",
  "cpu_seconds",
  "peak_rss_bytes",
  "io_read_bytes",
  "io_write_bytes",
  "worker_id",
  "sent_at",
  "returned_at",
] as const;

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
}

export interface MapBuildOptions {
  readonly maxCells: number;
  /** Read the resource arrays too: metric layers, the worker layer and `stats`. */
  readonly full: boolean;
  readonly stats: BlockStats | null;
}

/** The block map of a store; throws StoreError as the chunk reads do. */
export function buildBlockMap(meta: StoreMetadata, options: MapBuildOptions): BlockMap {
  const layout = meta.layout;
  const grid = layout.gridShape;
  const cellShape = cellShapeFor(grid, options.maxCells);
  const shape = grid.map((g, d) => Math.max(1, Math.ceil(g / cellShape[d]!)));
  const cellStrides = cOrderStrides(shape);
  const cellCount = shape.reduce((a, b) => a * b, 1);
  const counts = new StateCounts(cellCount);
  const { blocks, done, failed, deleted, failureSum } = counts;
  const withResources = options.full && meta.resourceTracking;
  const resources = withResources ? new ResourceCells(cellCount) : null;

  const specs: TrackingArraySpec[] = [trackingArray("done"), trackingArray("failures")];
  if (meta.provenance) specs.push(trackingArray("outputs_state"));
  if (withResources) { for (const name of RESOURCE_ARRAYS) specs.push(trackingArray(name)); }
  // A store made before `finished_at` has none: the report then times blocks by `returned_at`.
  const finished = withResources && meta.arrays.some((s) => s.name === "finished_at");
  if (finished) specs.push(trackingArray("finished_at"));
  const dims = layout.dims;
  const last = dims - 1;
  const lastFactor = dims === 0 ? 1 : cellShape[last]!;
  const coords = new Array<number>(Math.max(dims, 1)).fill(0);
  const runs = new RunWindows(layout);
  const stats = withResources ? options.stats : null;

  streamChunks(meta, specs, WINDOW_CELLS, null, (first, cells, views) => {
    const doneView = views[0]!;
    const failures = new Uint32Array(views[1]!.buffer, views[1]!.byteOffset, cells);
    const outputs = meta.provenance ? views[2]! : null;
    const window = withResources
      ? resourceWindow(views.slice(meta.provenance ? 3 : 2), cells, finished)
      : null;
    runs.visit(first, cells, (runPosition, runOffset, runLength) => {
      // A run may span rows (when the block and tracking grids coincide it is the whole
      // window): cut it into segments along the last axis, each in one row of cells.
      let visited = 0;
      while (visited < runLength) {
        const position = runPosition + visited;
        const offset = runOffset + visited;
        let base = 0;
        let x0 = 0;
        let length = runLength - visited;
        if (dims > 0) {
          layout.coordsOf(position, coords);
          for (let d = 0; d < last; d++) {
            base += ((coords[d]! / cellShape[d]!) | 0) * cellStrides[d]!;
          }
          x0 = coords[last]!;
          length = Math.min(length, grid[last]! - x0);
        }
        visited += length;
        if (window === null) {
          countStates(counts, doneView, failures, outputs, offset, length, base, x0, lastFactor);
          continue;
        }
        for (let i = 0; i < length; i++) {
          const k = offset + i;
          const c = base + (((x0 + i) / lastFactor) | 0);
          countState(counts, doneView, failures, outputs, k, c);
          if (window.wall[k] === window.wall[k]) {
            resources!.add(c, window, k);
            stats?.visit(position + i, window, k, failures[k]!, doneView[k] === 1);
          }
        }
      }
    });
  });

  const codes = new Uint8Array(cellCount);
  const single = cellShape.every((f) => f === 1);
  const fraction = single ? null : new Uint8Array(cellCount);
  for (let c = 0; c < cellCount; c++) {
    const n = blocks[c]!;
    if (fraction !== null) fraction[c] = n === 0 ? 0 : Math.round((255 * done[c]!) / n);
    codes[c] = n === 0
      ? CELL_EMPTY
      : failed[c]! > 0
      ? CELL_FAILED
      : done[c] === n
      ? (deleted[c] === n ? CELL_DELETED_TEMPORARY : CELL_DONE)
      : done[c] === 0
      ? CELL_NEVER_RUN
      : CELL_PARTLY_DONE;
  }
  const metrics: MetricLayer[] = [];
  if (options.full) {
    if (resources !== null) metrics.push(...resourceLayers(resources));
    metrics.push(quantise("failures", "count", "sum", failureSum, blocks, false));
  }
  return {
    cell_shape: cellShape,
    shape,
    state: {
      codes: base64(codes),
      done_fraction: fraction === null ? null : base64(fraction),
    },
    metrics,
    workers: resources === null ? null : {
      values: base64(new Uint8Array(resources.worker.buffer)),
      workers: [...resources.workers].sort((a, b) => a - b),
    },
  };
}

/** Per-cell block counts by state, and the sum of their failed attempts. */
class StateCounts {
  readonly blocks: Uint32Array;
  readonly done: Uint32Array;
  readonly failed: Uint32Array;
  readonly deleted: Uint32Array;
  readonly failureSum: Float64Array;

  constructor(cells: number) {
    this.blocks = new Uint32Array(cells);
    this.done = new Uint32Array(cells);
    this.failed = new Uint32Array(cells);
    this.deleted = new Uint32Array(cells);
    this.failureSum = new Float64Array(cells);
  }
}

function countState(
  s: StateCounts,
  done: Uint8Array,
  failures: Uint32Array,
  outputs: Uint8Array | null,
  k: number,
  c: number,
): void {
  s.blocks[c]!++;
  const f = failures[k]!;
  if (f !== 0) s.failureSum[c]! += f;
  if (done[k] === 1) {
    s.done[c]!++;
    if (outputs !== null && outputs[k] === 2) s.deleted[c]!++;
  } else if (f !== 0) {
    s.failed[c]!++;
  }
}

/**
 * The hot loop of a frame: a run of blocks along the last axis into their cells. A top-level
 * function with every array an argument (no closure), integer cell arithmetic throughout: an
 * engine keeps it optimised for 10^8 blocks (a closure with `Math.floor` was deoptimised to
 * 7 times slower after its first call).
 */
function countStates(
  s: StateCounts,
  done: Uint8Array,
  failures: Uint32Array,
  outputs: Uint8Array | null,
  offset: number,
  length: number,
  base: number,
  x0: number,
  factor: number,
): void {
  if (factor === 1) {
    for (let i = 0; i < length; i++) {
      countState(s, done, failures, outputs, offset + i, base + x0 + i);
    }
    return;
  }
  for (let i = 0; i < length; i++) {
    countState(s, done, failures, outputs, offset + i, base + (((x0 + i) / factor) | 0));
  }
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
    finished: finished ? f64(views[8]!) : null,
  };
}

function resourceLayers(r: ResourceCells): MetricLayer[] {
  const n = r.measured;
  return [
    quantise("wall_seconds", "s", "mean", r.wall, n, true),
    quantise("cpu_seconds", "s", "mean", r.cpu, n, true),
    quantise("peak_rss_bytes", "bytes", "max", r.rss, n, false),
    quantise("io_read_bytes", "bytes", "mean", r.ioRead, n, true),
    quantise("io_write_bytes", "bytes", "mean", r.ioWrite, n, true),
    quantise("returned_at", "epoch_s", "max", r.returned, n, false),
  ];
}

/**
 * One byte per cell: 0 = no value (no block measured, `counts[c] === 0`), else `1 + k`, k in
 * 0..254 along `lo .. hi`. A log scale when the values span more than two decades and are all
 * positive (seconds and bytes usually do); epoch times and counts stay linear.
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
  const log = unit !== "epoch_s" && unit !== "count" && lo > 0 && hi / lo > 100;
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

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}
