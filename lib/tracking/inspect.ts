/**
 * Read-only inspection of tracking stores, for `blockwise status` (DESIGN.md sections 6 and 8).
 *
 * Nothing here takes the store lock, maps a file or writes anything: the metadata and each chunk
 * file are read once with plain fs reads, so `status` answers while a run holds the store (the
 * figures may then be a mix of old and new values, as for any Zarr reader during a run). The
 * task's `TaskLayout` is rebuilt from `attributes.blockwise.layout`, so counts are of blocks,
 * not of tracking cells: cells no block maps to are ignored.
 *
 * `StoreReport` is also the object `blockwise status --json` prints for each store, inside
 * `{"stores": [StoreReport, ...]}`. Its keys are stable (fields may be added, none renamed):
 *
 * ```
 * {
 *   path: string,                 // absolute path of the store folder
 *   task: string,                 // attributes.blockwise.task_id
 *   task_hash: string,            // attributes.blockwise.task_hash (64 hex)
 *   format: string,               // attributes.blockwise.format, e.g. "blockwise-tracking/1"
 *   grid_shape: number[],         // tracking grid (the arrays' shape), anchored at totalRoi
 *   block_grid_shape: number[],   // blocks per axis, anchored at the total write ROI
 *   layout: StoredLayout,         // attributes.blockwise.layout as stored
 *   blocks: number,               // blocks with a tracking cell
 *   untracked_blocks: number,     // blocks without one (only with a negative context; usually 0)
 *   done: number,                 // blocks whose done mark is 1
 *   failed: number,               // blocks not done with failures > 0
 *   pending: number,              // blocks - done - failed
 *   percent_done: number,         // 100 * done / blocks, rounded down to 2 decimals (100 if 0 blocks)
 *   failed_attempts: number,      // sum of the failures counts over all blocks
 *   runs: number,                 // runs.jsonl records of kind "run"
 *   torn_lines: number,           // runs.jsonl lines that are not JSON objects (skipped)
 *   last_run: null | { started_at: string | null, ended_at: string | null,
 *                      seconds: number | null, outcome: string | null, exit_code: number | null,
 *                      tracking_io: string | null,     // the run's adapter: bun-ffi, deno-ffi, fs
 *                      skip_mask: null | { source: string, skipped: number } },  // that run's mask
 *   lock: null | { pid, host, started_at, command,   // the lock file's holder
 *                  alive: true | false | "unknown" },  // "unknown": holder on another host
 *   resource_tracking: boolean,   // the resource arrays are present
 *   resources: null | {           // null without resource tracking
 *     blocks_measured: number,            // blocks with a recorded wall time
 *     wall_seconds_total: number, wall_seconds_mean: number | null,
 *     cpu_seconds_total: number,
 *     peak_rss_bytes_max: number | null,  // null when no block was measured
 *     io_read_bytes_total: number, io_write_bytes_total: number,
 *     first_sent_at: string | null,       // ISO 8601, earliest sent_at of any block
 *     last_returned_at: string | null },  // ISO 8601, latest returned_at of any block
 *   io: "fs"                      // how the store was read: status never maps
 * }
 * ```
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { type Fit, FITS, TaskLayout } from "../blocks/mod.ts";
import { errorCode, InputError, isRecord, messageOf, StoreError } from "../errors.ts";
import { chunkKey, itemSize, TRACKING_ARRAYS, type TrackingArraySpec } from "./arrays.ts";
import { isHolderAlive, readStoreLock } from "./lock.ts";
import { readRunRecords } from "./runs_log.ts";
import type { StoredLayout } from "./store_layout.ts";

/** Per-block state codes of `StoreInspection.states`. */
export const BLOCK_PENDING = 0;
export const BLOCK_DONE = 1;
export const BLOCK_FAILED = 2;

export interface LastRunReport {
  readonly started_at: string | null;
  readonly ended_at: string | null;
  readonly seconds: number | null;
  readonly outcome: string | null;
  readonly exit_code: number | null;
  /** How that run accessed the store: "bun-ffi" or "deno-ffi" (mmap), or "fs". */
  readonly tracking_io: string | null;
  /** The skip mask that run used (masked blocks are never recorded), or null. */
  readonly skip_mask: { readonly source: string; readonly skipped: number } | null;
}

export interface LockReport {
  readonly pid: number;
  readonly host: string;
  readonly started_at: string;
  readonly command: string;
  readonly alive: boolean | "unknown";
}

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
}

export interface StoreReport {
  readonly path: string;
  readonly task: string;
  readonly task_hash: string;
  readonly format: string;
  readonly grid_shape: readonly number[];
  readonly block_grid_shape: readonly number[];
  readonly layout: StoredLayout;
  readonly blocks: number;
  readonly untracked_blocks: number;
  readonly done: number;
  readonly failed: number;
  readonly pending: number;
  readonly percent_done: number;
  readonly failed_attempts: number;
  readonly runs: number;
  readonly torn_lines: number;
  readonly last_run: LastRunReport | null;
  readonly lock: LockReport | null;
  readonly resource_tracking: boolean;
  readonly resources: ResourceReport | null;
  readonly io: "fs";
}

/** A report plus one state code per block position (C order over `block_grid_shape`). */
export interface StoreInspection {
  readonly report: StoreReport;
  readonly states: Uint8Array;
}

/** What a store's metadata says, checked, with the task layout rebuilt from it. */
export interface StoreMetadata {
  /** Absolute path of the store folder. */
  readonly path: string;
  readonly format: string;
  readonly taskId: string;
  readonly taskHash: string;
  readonly storedLayout: StoredLayout;
  readonly layout: TaskLayout;
  /** Every resource array is present (whatever `attributes.blockwise.resource_tracking` says). */
  readonly resourceTracking: boolean;
  /** The arrays present in the store, in `TRACKING_ARRAYS` order. */
  readonly arrays: readonly TrackingArraySpec[];
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function rmHint(dir: string): string {
  return `If it is beyond repair, delete it to start fresh:\n    rm -rf ${dir}`;
}

const EXPECTED_STORE = "a tracking store (a folder whose zarr.json is a Zarr v3 group with " +
  "attributes.blockwise) or a tracking directory (a folder whose immediate subfolders are " +
  "tracking stores, as `blockwise run --tracking-dir DIR` writes)";

type MetaProbe =
  | { readonly kind: "missing" }
  | { readonly kind: "store"; readonly blockwise: Record<string, unknown> }
  | { readonly kind: "unreadable"; readonly reason: string }
  | { readonly kind: "other"; readonly meta: Record<string, unknown> };

/** What `<dir>/zarr.json` is. */
function probeMeta(dir: string): MetaProbe {
  const file = path.join(dir, "zarr.json");
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") return { kind: "missing" };
    return { kind: "unreadable", reason: messageOf(error) };
  }
  let meta: unknown;
  try {
    meta = JSON.parse(text);
  } catch (error) {
    return { kind: "unreadable", reason: `not valid JSON (${messageOf(error)})` };
  }
  if (!isRecord(meta)) return { kind: "unreadable", reason: "not a JSON object" };
  const attributes = meta["attributes"];
  const blockwise = isRecord(attributes) ? attributes["blockwise"] : undefined;
  if (meta["node_type"] === "group" && isRecord(blockwise)) return { kind: "store", blockwise };
  return { kind: "other", meta };
}

function notAStore(dir: string, probe: MetaProbe & { kind: "other" }): StoreError {
  const meta = probe.meta;
  if (meta["node_type"] === "array") {
    return new StoreError(
      `${dir} holds the old bare-array done-marker layout (a Zarr array, not a group), which ` +
        `this version does not read. ${rmHint(dir)}`,
      dir,
    );
  }
  return new StoreError(
    `${dir} has a zarr.json without attributes.blockwise, so it is not a blockwise tracking ` +
      `store; expected ${EXPECTED_STORE}`,
    dir,
  );
}

/**
 * The stores PATH names: PATH itself when it is a store (or its `zarr.json`), else the
 * immediate subfolders of PATH that are stores (or whose zarr.json cannot be read, so that a
 * damaged store is reported rather than skipped), sorted by name. Folders starting with "."
 * (a store being created) are skipped.
 *
 * Errors: a PATH that does not exist is a usage error (InputError, exit 2); a PATH that exists
 * but is neither a store nor a tracking directory, or whose metadata cannot be read, is a
 * StoreError (exit 3) saying what was expected.
 */
export function findStores(target: string): string[] {
  let abs = path.resolve(target);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(abs);
  } catch (error) {
    if (errorCode(error) === "ENOENT") {
      throw new InputError(`${abs} does not exist; expected ${EXPECTED_STORE}`);
    }
    throw new StoreError(`Cannot read ${abs}: ${messageOf(error)}`, abs);
  }
  if (stat.isFile() && path.basename(abs) === "zarr.json") {
    abs = path.dirname(abs);
  } else if (!stat.isDirectory()) {
    throw new StoreError(`${abs} is a file; expected ${EXPECTED_STORE}`, abs);
  }
  const probe = probeMeta(abs);
  if (probe.kind === "store") return [abs];
  if (probe.kind === "unreadable") {
    throw new StoreError(
      `Tracking store metadata ${path.join(abs, "zarr.json")} cannot be read: ${probe.reason}. ` +
        rmHint(abs),
      abs,
    );
  }
  if (probe.kind === "other") throw notAStore(abs, probe);
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(abs, { withFileTypes: true });
  } catch (error) {
    throw new StoreError(`Cannot list ${abs}: ${messageOf(error)}`, abs);
  }
  const stores: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const dir = path.join(abs, entry.name);
    const sub = probeMeta(dir);
    if (sub.kind === "store" || sub.kind === "unreadable") stores.push(dir);
  }
  if (stores.length === 0) {
    throw new StoreError(
      `${abs} is neither a tracking store nor a tracking directory holding any: expected ${EXPECTED_STORE}`,
      abs,
    );
  }
  return stores.sort();
}

function intArray(value: unknown, dims: number | null): number[] | null {
  if (!Array.isArray(value)) return null;
  if (dims !== null && value.length !== dims) return null;
  for (const v of value) if (typeof v !== "number" || !Number.isSafeInteger(v)) return null;
  return value as number[];
}

function roiOf(value: unknown, dims: number | null): { offset: number[]; shape: number[] } | null {
  if (!isRecord(value)) return null;
  const offset = intArray(value["offset"], dims);
  const shape = intArray(value["shape"], offset === null ? dims : offset.length);
  return offset === null || shape === null ? null : { offset, shape };
}

/** Read and check a store's metadata and rebuild its task layout. StoreError when damaged. */
export function readStoreMetadata(dir: string): StoreMetadata {
  const abs = path.resolve(dir);
  const metaFile = path.join(abs, "zarr.json");
  const probe = probeMeta(abs);
  if (probe.kind === "missing") {
    throw new StoreError(`${abs} has no zarr.json; expected ${EXPECTED_STORE}`, abs);
  }
  if (probe.kind === "unreadable") {
    throw new StoreError(
      `Tracking store metadata ${metaFile} cannot be read: ${probe.reason}. ${rmHint(abs)}`,
      abs,
    );
  }
  if (probe.kind === "other") throw notAStore(abs, probe);
  const b = probe.blockwise;
  const invalid = (what: string) =>
    new StoreError(
      `Tracking store metadata ${metaFile} is invalid: attributes.blockwise.${what}. ${
        rmHint(abs)
      }`,
      abs,
    );
  const taskHash = b["task_hash"];
  if (typeof taskHash !== "string") throw invalid("task_hash is missing or not a string");
  const taskId = typeof b["task_id"] === "string" ? b["task_id"] : path.basename(abs);
  const format = typeof b["format"] === "string" ? b["format"] : "unknown";
  const stored = b["layout"];
  if (!isRecord(stored)) throw invalid("layout is missing or not an object");
  const totalRoi = roiOf(stored["total_roi"], null);
  if (totalRoi === null) throw invalid("layout.total_roi is not an {offset, shape} of integers");
  const dims = totalRoi.offset.length;
  const readRoi = roiOf(stored["read_roi"], dims);
  const writeRoi = roiOf(stored["write_roi"], dims);
  if (readRoi === null || writeRoi === null) {
    throw invalid(`layout.read_roi / write_roi is not an {offset, shape} of ${dims} integers`);
  }
  const fit = stored["fit"];
  if (typeof fit !== "string" || !(FITS as readonly string[]).includes(fit)) {
    throw invalid(`layout.fit is ${JSON.stringify(fit)}, expected one of ${FITS.join(", ")}`);
  }
  let layout: TaskLayout;
  try {
    // readWriteConflict only decides the levels, which inspection never uses; `false` keeps
    // the constructor from building per-level conflict tables.
    layout = new TaskLayout({
      totalRoi,
      readRoi,
      writeRoi,
      fit: fit as Fit,
      readWriteConflict: false,
    });
  } catch (error) {
    throw invalid(`layout describes no valid tiling: ${messageOf(error)}`);
  }
  const gridShape = intArray(stored["grid_shape"], dims);
  if (gridShape === null || gridShape.some((s, d) => s !== layout.trackingShape[d])) {
    throw invalid(
      `layout.grid_shape ${JSON.stringify(stored["grid_shape"])} does not match the tracking ` +
        `grid [${layout.trackingShape.join(", ")}] of its ROIs`,
    );
  }
  const arrays: TrackingArraySpec[] = [];
  let resourceArrays = 0;
  let resourceTotal = 0;
  for (const spec of TRACKING_ARRAYS) {
    if (spec.resourceTracking) resourceTotal++;
    const present = fs.existsSync(path.join(abs, spec.name, "zarr.json"));
    if (!present) {
      if (!spec.resourceTracking) {
        throw new StoreError(
          `Tracking store at ${abs} is damaged: the array "${spec.name}" (${spec.name}/zarr.json) is missing. ${
            rmHint(abs)
          }`,
          abs,
        );
      }
      continue;
    }
    checkArrayMetadata(abs, spec, layout.trackingShape);
    arrays.push(spec);
    if (spec.resourceTracking) resourceArrays++;
  }
  const resourceTracking = resourceArrays === resourceTotal;
  if (!resourceTracking && (resourceArrays > 0 || b["resource_tracking"] === true)) {
    const missing = TRACKING_ARRAYS.filter((s) => s.resourceTracking && !arrays.includes(s))
      .map((s) => s.name);
    throw new StoreError(
      `Tracking store at ${abs} is damaged: resource tracking arrays are missing (${
        missing.join(", ")
      }). A run with --resource-tracking adds them. ${rmHint(abs)}`,
      abs,
    );
  }
  return {
    path: abs,
    format,
    taskId,
    taskHash,
    storedLayout: stored as unknown as StoredLayout,
    layout,
    resourceTracking,
    arrays,
  };
}

function checkArrayMetadata(dir: string, spec: TrackingArraySpec, shape: readonly number[]): void {
  const file = path.join(dir, spec.name, "zarr.json");
  let meta: unknown;
  try {
    meta = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (error) {
    throw new StoreError(
      `Tracking store at ${dir} is damaged: ${file} cannot be read: ${messageOf(error)}. ${
        rmHint(dir)
      }`,
      dir,
    );
  }
  const m = isRecord(meta) ? meta : {};
  const got = intArray(m["shape"], shape.length);
  if (m["data_type"] !== spec.dtype || got === null || got.some((s, d) => s !== shape[d])) {
    throw new StoreError(
      `Tracking store at ${dir} is damaged: ${file} describes ${
        JSON.stringify(m["data_type"])
      } of shape ${JSON.stringify(m["shape"])}, expected "${spec.dtype}" of shape [${
        shape.join(", ")
      }]. ${rmHint(dir)}`,
      dir,
    );
  }
}

/** The path of an array's single chunk file. */
export function chunkPath(meta: StoreMetadata, name: string): string {
  return path.join(meta.path, name, chunkKey(meta.layout.dims));
}

/** Read an array's chunk file whole (plain fs read); StoreError when missing or mis-sized. */
export function readChunk(meta: StoreMetadata, spec: TrackingArraySpec): Uint8Array {
  const file = chunkPath(meta, spec.name);
  const expected = meta.layout.trackingCellCount * itemSize(spec.dtype);
  let bytes: Uint8Array;
  try {
    bytes = fs.readFileSync(file);
  } catch (error) {
    throw new StoreError(
      `Tracking store at ${meta.path} is damaged: the chunk file ${file} of array "${spec.name}" cannot be read (${
        messageOf(error)
      }). ${rmHint(meta.path)}`,
      meta.path,
    );
  }
  if (bytes.byteLength !== expected) {
    throw new StoreError(
      `Tracking store at ${meta.path} is damaged: the chunk file ${file} of array "${spec.name}" has ${bytes.byteLength} bytes, expected ${expected}. ${
        rmHint(meta.path)
      }`,
      meta.path,
    );
  }
  if (bytes.byteOffset % 8 !== 0) bytes = bytes.slice();
  return bytes;
}

/** A box of block-grid coordinates, `[lo, hi)` per axis. */
export interface GridBox {
  readonly lo: readonly number[];
  readonly hi: readonly number[];
}

/**
 * Visit every block that has a tracking cell, one run of consecutive blocks along the last axis
 * at a time: `visit(position, cell, length)` covers positions `position .. position+length-1`
 * and cells `cell .. cell+length-1` (both have stride 1 on the last axis). Only blocks inside
 * `box` (block-grid coordinates) when given. Returns how many blocks were visited.
 */
export function forEachBlockRun(
  layout: TaskLayout,
  visit: (position: number, cell: number, length: number) => void,
  box?: GridBox,
): number {
  if (layout.blockCount === 0) return 0;
  const dims = layout.dims;
  if (dims === 0) {
    visit(0, 0, 1);
    return 1;
  }
  const lo: number[] = [];
  const hi: number[] = [];
  for (let d = 0; d < dims; d++) {
    const shift = layout.indexShift[d]!;
    lo.push(Math.max(box?.lo[d] ?? 0, -shift, 0));
    hi.push(
      Math.min(
        box?.hi[d] ?? layout.gridShape[d]!,
        layout.trackingShape[d]! - shift,
        layout.gridShape[d]!,
      ),
    );
    if (lo[d]! >= hi[d]!) return 0;
  }
  const last = dims - 1;
  let whole = true;
  for (let d = 0; d < dims && whole; d++) {
    whole = lo[d] === 0 && hi[d] === layout.gridShape[d] &&
      layout.gridShape[d] === layout.trackingShape[d] && layout.indexShift[d] === 0;
  }
  if (whole) {
    // The block grid and the tracking grid coincide: position = cell, one run.
    visit(0, 0, layout.blockCount);
    return layout.blockCount;
  }
  const length = hi[last]! - lo[last]!;
  const g = lo.slice();
  let visited = 0;
  for (;;) {
    let position = 0;
    let cell = 0;
    for (let d = 0; d < dims; d++) {
      position += g[d]! * layout.gridStrides[d]!;
      cell += (g[d]! + layout.indexShift[d]!) * layout.trackingStrides[d]!;
    }
    visit(position, cell, length);
    visited += length;
    let d = last - 1;
    for (; d >= 0; d--) {
      g[d]!++;
      if (g[d]! < hi[d]!) break;
      g[d] = lo[d]!;
    }
    if (d < 0) return visited;
  }
}

function isoOrNull(seconds: number): string | null {
  if (!Number.isFinite(seconds)) return null;
  const date = new Date(seconds * 1000);
  return Number.isFinite(date.getTime()) ? date.toISOString() : null;
}

function stringOrNull(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}

function numberOrNull(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function specNamed(name: string): TrackingArraySpec {
  const spec = TRACKING_ARRAYS.find((s) => s.name === name);
  if (spec === undefined) throw new Error(`no tracking array named ${name}`);
  return spec;
}

/** Cells per read when streaming a chunk file: 2 MiB buffers for 8-byte elements. */
const STREAM_CELLS = 1 << 18;

/**
 * Read an array's chunk file window by window into one reused buffer (no allocation the size
 * of the array, whose fresh pages cost more than the read itself), calling `visit` with the
 * window's bytes and its first cell. StoreError when missing or mis-sized.
 */
function streamChunk(
  meta: StoreMetadata,
  spec: TrackingArraySpec,
  buffer: ArrayBuffer,
  visit: (bytes: Uint8Array, firstCell: number, cells: number) => void,
): void {
  const file = chunkPath(meta, spec.name);
  const size = itemSize(spec.dtype);
  const expected = meta.layout.trackingCellCount * size;
  const damaged = (what: string) =>
    new StoreError(
      `Tracking store at ${meta.path} is damaged: the chunk file ${file} of array "${spec.name}" ${what}. ${
        rmHint(meta.path)
      }`,
      meta.path,
    );
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (error) {
    throw damaged(`cannot be read (${messageOf(error)})`);
  }
  try {
    const actual = fs.fstatSync(fd).size;
    if (actual !== expected) throw damaged(`has ${actual} bytes, expected ${expected}`);
    const window = Math.floor(buffer.byteLength / size) * size;
    for (let offset = 0; offset < expected;) {
      const want = Math.min(window, expected - offset);
      const bytes = new Uint8Array(buffer, 0, want);
      let got = 0;
      while (got < want) {
        const n = fs.readSync(fd, bytes, got, want - got, offset + got);
        if (n <= 0) throw damaged(`ended early, at byte ${offset + got} of ${expected}`);
        got += n;
      }
      visit(bytes, offset / size, want / size);
      offset += want;
    }
  } catch (error) {
    if (error instanceof StoreError) throw error;
    throw damaged(`cannot be read (${messageOf(error)})`);
  } finally {
    fs.closeSync(fd);
  }
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

function resourceReport(meta: StoreMetadata, blocks: number): ResourceReport {
  const mask = blockCellMask(meta.layout, blocks);
  const buffer = new ArrayBuffer(STREAM_CELLS * 8);
  const stream = (
    name: string,
    kernel: (bytes: Uint8Array, first: number, acc: Float64Array) => void,
    start = 0,
  ): Float64Array => {
    const acc = new Float64Array([0, start]);
    streamChunk(meta, specNamed(name), buffer, (bytes, first) => kernel(bytes, first, acc));
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
  };
}

/** Inspect one store: see `StoreReport`. Read-only, lock-free, no mmap. */
export function inspectStore(dir: string): StoreReport {
  return inspect(dir, false).report;
}

/** `inspectStore` plus each block's state (`BLOCK_PENDING` / `BLOCK_DONE` / `BLOCK_FAILED`). */
export function inspectStoreStates(dir: string): StoreInspection {
  return inspect(dir, true);
}

function inspect(dir: string, withStates: boolean): StoreInspection {
  if (!LITTLE_ENDIAN) {
    throw new StoreError(
      `Cannot read the tracking store at ${dir}: its chunk files are little-endian and this host is big-endian`,
      dir,
    );
  }
  const meta = readStoreMetadata(dir);
  const layout = meta.layout;
  const doneBytes = readChunk(meta, specNamed("done"));
  const failureBytes = readChunk(meta, specNamed("failures"));
  const done = doneBytes;
  const failures = new Uint32Array(
    failureBytes.buffer,
    failureBytes.byteOffset,
    failureBytes.byteLength / 4,
  );
  const states = new Uint8Array(withStates ? layout.blockCount : 0);
  let nDone = 0;
  let nFailed = 0;
  let attempts = 0;
  const blocks = forEachBlockRun(layout, (position, start, length) => {
    for (let i = 0; i < length; i++) {
      const c = start + i;
      const f = failures[c]!;
      attempts += f;
      let state = BLOCK_PENDING;
      if (done[c] === 1) {
        nDone++;
        state = BLOCK_DONE;
      } else if (f > 0) {
        nFailed++;
        state = BLOCK_FAILED;
      }
      if (withStates) states[position + i] = state;
    }
  });
  const { records, tornLines } = readRunRecords(meta.path);
  let runs = 0;
  let last: Record<string, unknown> | null = null;
  for (const r of records) {
    if (r["kind"] !== "run") continue;
    runs++;
    last = r;
  }
  const holder = readStoreLock(meta.path);
  const report: StoreReport = {
    path: meta.path,
    task: meta.taskId,
    task_hash: meta.taskHash,
    format: meta.format,
    grid_shape: [...layout.trackingShape],
    block_grid_shape: [...layout.gridShape],
    layout: meta.storedLayout,
    blocks,
    untracked_blocks: layout.blockCount - blocks,
    done: nDone,
    failed: nFailed,
    pending: blocks - nDone - nFailed,
    percent_done: blocks === 0 ? 100 : Math.floor((nDone * 10000) / blocks) / 100,
    failed_attempts: attempts,
    runs,
    torn_lines: tornLines,
    last_run: last === null ? null : {
      started_at: stringOrNull(last["started_at"]),
      ended_at: stringOrNull(last["ended_at"]),
      seconds: numberOrNull(last["seconds"]),
      outcome: stringOrNull(last["outcome"]),
      exit_code: numberOrNull(last["exit_code"]),
      tracking_io: stringOrNull(last["tracking_io"]),
      skip_mask: skipMaskOf(last["skip_mask"]),
    },
    lock: holder === null ? null : { ...holder, alive: isHolderAlive(holder) },
    resource_tracking: meta.resourceTracking,
    resources: meta.resourceTracking ? resourceReport(meta, blocks) : null,
    io: "fs",
  };
  return { report, states };
}

function skipMaskOf(value: unknown): { source: string; skipped: number } | null {
  if (!isRecord(value)) return null;
  const source = value["source"];
  const skipped = value["skipped"];
  return typeof source === "string" && typeof skipped === "number" ? { source, skipped } : null;
}
