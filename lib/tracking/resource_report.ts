/**
 * The resource figures of a store (`status`'s `resources`): totals, means and extremes of the
 * per-block arrays over the blocks that have a cell, read window by window with plain fs reads
 * into one reused buffer. The kernels are free of closures so the engines keep their
 * accumulators in registers; a million-block store's arrays take a few milliseconds.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { trackingArray } from "./arrays.ts";
import { forEachBlockRun } from "./block_runs.ts";
import { STREAM_CELLS, streamChunk } from "./chunk_reads.ts";
import type { StoreMetadata } from "./store_metadata.ts";

/** `StoreReport.resources`: see lib/tracking/inspect.ts for the JSON schema. */
export interface ResourceReport {
  readonly blocks_measured: number;
  readonly wall_seconds_total: number;
  readonly wall_seconds_mean: number | null;
  readonly cpu_seconds_total: number;
  readonly peak_rss_bytes_max: number | null;
  readonly io_read_bytes_total: number;
  readonly io_write_bytes_total: number;
  readonly first_sent_at: string | null;
  readonly last_returned_at: string | null;
  /** The GPU figures (docs/design/GPU.md), or null when no block has one (absent: not read). */
  readonly gpu?: GpuReport | null;
}

/** `ResourceReport.gpu`: over the blocks whose GPU figures were read. */
export interface GpuReport {
  /** Blocks with a utilisation figure. */
  readonly blocks_measured: number;
  /** Mean of the blocks' `gpu_util_pct` (each block counts once), or null. */
  readonly util_pct_mean: number | null;
  /** Largest `gpu_mem_bytes` of any block. */
  readonly mem_bytes_max: number;
}

function isoOrNull(seconds: number): string | null {
  if (!Number.isFinite(seconds)) return null;
  const date = new Date(seconds * 1000);
  return Number.isFinite(date.getTime()) ? date.toISOString() : null;
}

/** Which tracking cells a block maps to, or null when every cell does. */
function blockCellMask(layout: TaskLayout, blocks: number): Uint8Array | null {
  if (blocks === layout.trackingCellCount) return null;
  const mask = new Uint8Array(layout.trackingCellCount);
  forEachBlockRun(layout, (_position, cell, length) => mask.fill(1, cell, cell + length));
  return mask;
}

// Per-window kernels, free of closures so the engines keep their accumulators in registers.
// `acc` is [count, value]; `mask` (or null for every cell) says which cells hold a block.

/** Count and sum the non-NaN values (float32 or float64). */
function sumFinite(
  v: Float32Array | Float64Array,
  mask: Uint8Array | null,
  first: number,
  acc: Float64Array,
): void {
  let n = 0;
  let sum = 0;
  const cells = v.length;
  if (mask === null) {
    for (let i = 0; i < cells; i++) {
      const x = v[i]!;
      if (x === x) {
        n++;
        sum += x;
      }
    }
  } else {
    for (let i = 0; i < cells; i++) {
      const x = v[i]!;
      if (x === x && mask[first + i] === 1) {
        n++;
        sum += x;
      }
    }
  }
  acc[0]! += n;
  acc[1]! += sum;
}

/** Sum (or `max`) uint64 values given as (lo, hi) uint32 pairs. */
function sumU64(
  v: Uint32Array,
  mask: Uint8Array | null,
  first: number,
  max: boolean,
  acc: Float64Array,
): void {
  const cells = v.length >> 1;
  let sum = 0;
  let top = acc[1]!;
  for (let i = 0; i < cells; i++) {
    if (mask !== null && mask[first + i] !== 1) continue;
    const x = v[2 * i]! + v[2 * i + 1]! * 4294967296;
    sum += x;
    if (x > top) top = x;
  }
  if (max) acc[1] = top;
  else acc[1]! += sum;
}

/** Smallest (or with `largest`, largest) non-NaN value; acc[1] starts at ±Infinity. */
function extreme(
  v: Float64Array,
  mask: Uint8Array | null,
  first: number,
  largest: boolean,
  acc: Float64Array,
): void {
  let best = acc[1]!;
  const cells = v.length;
  for (let i = 0; i < cells; i++) {
    const x = v[i]!;
    if (mask !== null && mask[first + i] !== 1) continue;
    if (largest ? x > best : x < best) best = x;
  }
  acc[1] = best;
}

/** The resource figures of the store's `blocks` blocks (all its arrays must be present). */
export function resourceReport(meta: StoreMetadata, blocks: number): ResourceReport {
  const mask = blockCellMask(meta.layout, blocks);
  const buffer = new ArrayBuffer(STREAM_CELLS * 8);
  const stream = (
    name: string,
    kernel: (bytes: Uint8Array, first: number, acc: Float64Array) => void,
    start = 0,
  ): Float64Array => {
    const acc = new Float64Array([0, start]);
    streamChunk(meta, trackingArray(name), buffer, (bytes, first) => kernel(bytes, first, acc));
    return acc;
  };
  const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  const f64 = (b: Uint8Array) => new Float64Array(b.buffer, b.byteOffset, b.byteLength / 8);
  // uint64 as (lo, hi) uint32 pairs: much faster than BigInt conversions.
  const u64 = (b: Uint8Array) => new Uint32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  const wall = stream("wall_seconds", (b, first, acc) => sumFinite(f32(b), mask, first, acc));
  const cpu = stream("cpu_seconds", (b, first, acc) => sumFinite(f32(b), mask, first, acc));
  const rss = stream("peak_rss_bytes", (b, first, acc) => sumU64(u64(b), mask, first, true, acc));
  const ioRead = stream("io_read_bytes", (b, f, acc) => sumU64(u64(b), mask, f, false, acc));
  const ioWrite = stream("io_write_bytes", (b, f, acc) => sumU64(u64(b), mask, f, false, acc));
  const sent = stream("sent_at", (b, f, acc) => extreme(f64(b), mask, f, false, acc), Infinity);
  const returned = stream(
    "returned_at",
    (b, f, acc) => extreme(f64(b), mask, f, true, acc),
    -Infinity,
  );
  const util = stream("gpu_util_pct", (b, f, acc) => sumFinite(f32(b), mask, f, acc));
  const mem = stream("gpu_mem_bytes", (b, f, acc) => sumU64(u64(b), mask, f, true, acc));
  const measured = wall[0]!;
  return {
    blocks_measured: measured,
    wall_seconds_total: wall[1]!,
    wall_seconds_mean: measured === 0 ? null : wall[1]! / measured,
    cpu_seconds_total: cpu[1]!,
    peak_rss_bytes_max: measured === 0 ? null : rss[1]!,
    io_read_bytes_total: ioRead[1]!,
    io_write_bytes_total: ioWrite[1]!,
    first_sent_at: isoOrNull(sent[1]!),
    last_returned_at: isoOrNull(returned[1]!),
    gpu: util[0]! === 0 && mem[1]! === 0 ? null : {
      blocks_measured: util[0]!,
      util_pct_mean: util[0]! === 0 ? null : util[1]! / util[0]!,
      mem_bytes_max: mem[1]!,
    },
  };
}
