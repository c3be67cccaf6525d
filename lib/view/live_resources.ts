/**
 * The resource figures of a live map (live_map.ts): per cell of the map, what `status` sums of
 * the resource arrays (lib/tracking/resource_report.ts, by the same rules), so that a cell
 * counted again replaces its figures and the store's are summed over the cells.
 */

import type { ResourceReport } from "../tracking/resource_report.ts";
import { trackingArray } from "../tracking/arrays.ts";
import { RunWindows } from "../tracking/block_runs.ts";
import type { StoreMetadata } from "../tracking/store_metadata.ts";
import type { WindowSource } from "./map_build.ts";
import { type CellGrid, forEachSegment } from "./state_cells.ts";

/** The arrays, in the order of `ResourceArrays`. */
export const RESOURCE_NAMES = [
  "wall_seconds",
  "cpu_seconds",
  "peak_rss_bytes",
  "io_read_bytes",
  "io_write_bytes",
  "sent_at",
  "returned_at",
  "gpu_util_pct",
  "gpu_mem_bytes",
] as const;

/** Cells per window of the first pass. */
const WINDOW_CELLS = 1 << 16;

/** The resource arrays as numbers: uint64 ones as little-endian uint32 pairs. */
export interface ResourceArrays {
  readonly wall: Float32Array;
  readonly cpu: Float32Array;
  readonly rss: Uint32Array;
  readonly ioRead: Uint32Array;
  readonly ioWrite: Uint32Array;
  readonly sent: Float64Array;
  readonly returned: Float64Array;
  readonly gpuUtil: Float32Array;
  readonly gpuMem: Uint32Array;
}

export function resourceArrays(bytes: readonly Uint8Array[], cells: number): ResourceArrays {
  const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, cells);
  const f64 = (b: Uint8Array) => new Float64Array(b.buffer, b.byteOffset, cells);
  const u64 = (b: Uint8Array) => new Uint32Array(b.buffer, b.byteOffset, 2 * cells);
  return {
    wall: f32(bytes[0]!),
    cpu: f32(bytes[1]!),
    rss: u64(bytes[2]!),
    ioRead: u64(bytes[3]!),
    ioWrite: u64(bytes[4]!),
    sent: f64(bytes[5]!),
    returned: f64(bytes[6]!),
    gpuUtil: f32(bytes[7]!),
    gpuMem: u64(bytes[8]!),
  };
}

/**
 * Per cell, what `status` sums of the resource arrays (lib/tracking/resource_report.ts, the same
 * rules): blocks with a wall time, sums of wall and CPU seconds (the values present) and of I/O
 * bytes, the largest peak RSS, the earliest `sent_at` and the latest `returned_at`.
 */
export class ResourceCells {
  readonly measured: Uint32Array;
  readonly wall: Float64Array;
  readonly cpu: Float64Array;
  readonly rss: Float64Array;
  readonly ioRead: Float64Array;
  readonly ioWrite: Float64Array;
  readonly sent: Float64Array;
  readonly returned: Float64Array;
  /** Blocks with a `gpu_util_pct`, their sum, and the largest `gpu_mem_bytes`. */
  readonly gpuBlocks: Uint32Array;
  readonly gpuUtil: Float64Array;
  readonly gpuMem: Float64Array;

  constructor(cells: number) {
    this.measured = new Uint32Array(cells);
    this.wall = new Float64Array(cells);
    this.cpu = new Float64Array(cells);
    this.rss = new Float64Array(cells);
    this.ioRead = new Float64Array(cells);
    this.ioWrite = new Float64Array(cells);
    this.sent = new Float64Array(cells).fill(Infinity);
    this.returned = new Float64Array(cells).fill(-Infinity);
    this.gpuBlocks = new Uint32Array(cells);
    this.gpuUtil = new Float64Array(cells);
    this.gpuMem = new Float64Array(cells);
  }

  /** Cell `c` takes the figures of cell 0 of `from`. */
  set(c: number, from: ResourceCells): void {
    this.measured[c] = from.measured[0]!;
    this.wall[c] = from.wall[0]!;
    this.cpu[c] = from.cpu[0]!;
    this.rss[c] = from.rss[0]!;
    this.ioRead[c] = from.ioRead[0]!;
    this.ioWrite[c] = from.ioWrite[0]!;
    this.sent[c] = from.sent[0]!;
    this.returned[c] = from.returned[0]!;
    this.gpuBlocks[c] = from.gpuBlocks[0]!;
    this.gpuUtil[c] = from.gpuUtil[0]!;
    this.gpuMem[c] = from.gpuMem[0]!;
  }

  report(): ResourceReport {
    let measured = 0;
    let wall = 0;
    let cpu = 0;
    let rss = 0;
    let ioRead = 0;
    let ioWrite = 0;
    let sent = Infinity;
    let returned = -Infinity;
    let gpuBlocks = 0;
    let gpuUtil = 0;
    let gpuMem = 0;
    for (let c = 0; c < this.measured.length; c++) {
      gpuBlocks += this.gpuBlocks[c]!;
      gpuUtil += this.gpuUtil[c]!;
      if (this.gpuMem[c]! > gpuMem) gpuMem = this.gpuMem[c]!;
      measured += this.measured[c]!;
      wall += this.wall[c]!;
      cpu += this.cpu[c]!;
      if (this.rss[c]! > rss) rss = this.rss[c]!;
      ioRead += this.ioRead[c]!;
      ioWrite += this.ioWrite[c]!;
      if (this.sent[c]! < sent) sent = this.sent[c]!;
      if (this.returned[c]! > returned) returned = this.returned[c]!;
    }
    // `status`'s GPU figures, by resource_report.ts's rules: null when no block has one.
    const gpu = {
      gpu: gpuBlocks === 0 && gpuMem === 0 ? null : {
        blocks_measured: gpuBlocks,
        util_pct_mean: gpuBlocks === 0 ? null : gpuUtil / gpuBlocks,
        mem_bytes_max: gpuMem,
      },
    };
    return {
      blocks_measured: measured,
      wall_seconds_total: wall,
      wall_seconds_mean: measured === 0 ? null : wall / measured,
      cpu_seconds_total: cpu,
      peak_rss_bytes_max: measured === 0 ? null : rss,
      io_read_bytes_total: ioRead,
      io_write_bytes_total: ioWrite,
      first_sent_at: isoOrNull(sent),
      last_returned_at: isoOrNull(returned),
      ...gpu,
    };
  }
}

function isoOrNull(seconds: number): string | null {
  if (!Number.isFinite(seconds)) return null;
  const date = new Date(seconds * 1000);
  return Number.isFinite(date.getTime()) ? date.toISOString() : null;
}

/** Add block `k` of the arrays to cell `c`. */
export function addResources(r: ResourceCells, v: ResourceArrays, k: number, c: number): void {
  const wall = v.wall[k]!;
  if (wall === wall) {
    r.measured[c]!++;
    r.wall[c]! += wall;
  }
  const cpu = v.cpu[k]!;
  if (cpu === cpu) r.cpu[c]! += cpu;
  const rss = v.rss[2 * k]! + v.rss[2 * k + 1]! * 4294967296;
  if (rss > r.rss[c]!) r.rss[c] = rss;
  r.ioRead[c]! += v.ioRead[2 * k]! + v.ioRead[2 * k + 1]! * 4294967296;
  r.ioWrite[c]! += v.ioWrite[2 * k]! + v.ioWrite[2 * k + 1]! * 4294967296;
  const sent = v.sent[k]!;
  if (sent < r.sent[c]!) r.sent[c] = sent;
  const returned = v.returned[k]!;
  if (returned > r.returned[c]!) r.returned[c] = returned;
  const util = v.gpuUtil[k]!;
  if (util === util) {
    r.gpuBlocks[c]!++;
    r.gpuUtil[c]! += util;
  }
  const mem = v.gpuMem[2 * k]! + v.gpuMem[2 * k + 1]! * 4294967296;
  if (mem > r.gpuMem[c]!) r.gpuMem[c] = mem;
}

export const EMPTY_RESOURCES = new ResourceCells(1);

/** The resource arrays into the cells of `grid`, one pass. */
export function resourcePass(
  meta: StoreMetadata,
  grid: CellGrid,
  windows: WindowSource,
): ResourceCells {
  const layout = meta.layout;
  const cells = new ResourceCells(grid.count);
  const runs = new RunWindows(layout);
  const coords = new Array<number>(Math.max(layout.dims, 1)).fill(0);
  const factor = layout.dims === 0 ? 1 : grid.cellShape[layout.dims - 1]!;
  const specs = RESOURCE_NAMES.map((name) => trackingArray(name));
  windows(specs, WINDOW_CELLS, (first, n, views) => {
    const v = resourceArrays(views, n);
    runs.visit(first, n, (runPosition, runOffset, runLength) => {
      forEachSegment(layout, grid, coords, runPosition, runOffset, runLength, (
        _position,
        offset,
        length,
        base,
        x0,
      ) => {
        for (let i = 0; i < length; i++) {
          addResources(cells, v, offset + i, base + (((x0 + i) / factor) | 0));
        }
      });
    });
  });
  return cells;
}
