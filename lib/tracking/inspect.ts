/**
 * Read-only inspection of tracking stores, for `blockwise status` (DESIGN.md sections 6 and 8).
 *
 * Nothing here takes the store lock, maps a file or writes anything: the metadata is read, and
 * each chunk file streamed once, window by window, with plain fs reads (memory does not grow
 * with the store; `--map` keeps counts per character), so `status` answers while a run holds
 * the store (the
 * figures may then be a mix of old and new values, as for any Zarr reader during a run). The
 * task's `TaskLayout` is rebuilt from `attributes.blockwise.layout`, so counts are of blocks,
 * not of tracking cells: cells no block maps to are ignored.
 *
 * `StoreReport` is also the object `blockwise status --json` prints for each store, inside
 * `{"stores": [StoreReport, ...], "errors": [StoreFailureReport, ...]}` (`errors`: the stores
 * the validator refused, each `{path, error}`). Its keys are stable (fields may be added, none
 * renamed):
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
 *   percent_done: number,         // 100 * done / blocks to 2 decimals (see percentDone)
 *   failed_attempts: number,      // sum of the failures counts over all blocks
 *   runs: number,                 // runs.jsonl records of kind "run"
 *   torn_lines: number,           // runs.jsonl lines that are not JSON objects (skipped)
 *   last_run: null | { started_at: string | null, ended_at: string | null,
 *                      seconds: number | null, outcome: string | null, exit_code: number | null,
 *                      tracking_io: string | null,     // the run's adapter: bun-ffi, deno-ffi, fs
 *                      skip_mask: null | { source: string, skipped: number } },  // that run's mask
 *   lock: null | { pid, host, started_at, command,   // the lock file's holder
 *                  alive: true | false | "unknown" },  // "unknown": holder on another host
 *   lock_unreadable: null | { bytes, modified_at,      // a lock file that is empty or not a
 *                  next_run: "takes it over" | "refuses" },  // lock (then lock is null)
 *   missing_chunks: string[],     // arrays whose chunk file is missing: read as the fill
 *                                 // value; the next run or reset restores the file
 *   resource_tracking: boolean,   // the resource arrays are present
 *   resources: null | {           // null without resource tracking
 *     blocks_measured: number,            // blocks with a recorded wall time
 *     wall_seconds_total: number, wall_seconds_mean: number | null,
 *     cpu_seconds_total: number,
 *     peak_rss_bytes_max: number | null,  // null when no block was measured
 *     io_read_bytes_total: number, io_write_bytes_total: number,
 *     first_sent_at: string | null,       // ISO 8601, earliest sent_at of any block
 *     last_returned_at: string | null,    // ISO 8601, latest returned_at of any block
 *     gpu: null | {                       // GPU figures (docs/design/GPU.md); null: none read
 *       blocks_measured: number,          // blocks with a gpu_util_pct
 *       util_pct_mean: number | null,     // mean of the blocks' gpu_util_pct
 *       mem_bytes_max: number } },        // largest gpu_mem_bytes of any block
 *   outputs: null | OutputReport, // declared outputs: present / deleted-temporary blocks and
 *                                 // bytes (schema in lib/tracking/output_report.ts)
 *   io: "fs"                      // how the store was read: status never maps
 * }
 * ```
 */

import { isRecord, StoreError } from "../errors.ts";
import { checkHostByteOrder, streamBlockRuns } from "./chunk_reads.ts";
import type { GridMap } from "./grid_map.ts";
import { isHolderAlive, readStoreLock, type UnreadableLock, unreadableStoreLock } from "./lock.ts";
import { type ResourceReport, resourceReport } from "./resource_report.ts";
import { type OutputReport, outputReport } from "./output_report.ts";
import { readRunRecords } from "./runs_log.ts";
import type { StoredLayout } from "./store_layout.ts";
import { readStoreMetadata } from "./store_metadata.ts";

export type { ResourceReport } from "./resource_report.ts";
export type { OutputReport } from "./output_report.ts";

export { BLOCK_DONE, BLOCK_FAILED, BLOCK_PENDING } from "./grid_map.ts";

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
  /** The lock file is there but empty or not a lock (`lock` is then null). */
  readonly lock_unreadable: UnreadableLock | null;
  /** Ledger arrays whose chunk file is missing (read as their fill value). */
  readonly missing_chunks: readonly string[];
  readonly resource_tracking: boolean;
  readonly resources: ResourceReport | null;
  readonly outputs: OutputReport | null;
  readonly io: "fs";
}

/** A report, and the map of its block grid when one was asked for. */
export interface StoreInspection {
  readonly report: StoreReport;
  readonly map: GridMap | null;
}

/** Makes the map of a store's block grid (`status --map`), given its shape. */
export type MapMaker = (blockGridShape: readonly number[]) => GridMap;

/**
 * A store `status` could not read: `{path, error}`, the store's folder and the validator's
 * message (what is wrong and how to fix it), in `status --json`'s `errors`.
 */
export interface StoreFailureReport {
  readonly path: string;
  readonly error: string;
}

/** A JSON record's field as a string, or null when it is not one. */
export function stringOrNull(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}

/** A JSON record's field as a finite number, or null when it is not one. */
export function numberOrNull(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Inspect one store: see `StoreReport`. Read-only, lock-free, no mmap. */
export function inspectStore(dir: string): StoreReport {
  return inspect(dir, null, null).report;
}

/**
 * What `status` counts of a store, known without reading it: kept by the run that holds the
 * store (`run --serve`'s live map, lib/view/live_map.ts), equal to what a pass would count.
 */
export interface KnownCounts {
  /** Blocks with a tracking cell. */
  readonly blocks: number;
  readonly done: number;
  readonly failed: number;
  /** The sum of the failures counts. */
  readonly attempts: number;
  /** Null when the store has no resource tracking. */
  readonly resources: ResourceReport | null;
}

/** Counts of one pass over the blocks: done, failed, and failed attempts. */
interface Counts {
  done: number;
  failed: number;
  attempts: number;
}

/** Count one run of blocks (cells `offset ..` of the window), free of closures. */
function countRun(
  done: Uint8Array,
  failures: Uint32Array,
  offset: number,
  length: number,
  counts: Counts,
): void {
  let nDone = 0;
  let nFailed = 0;
  let attempts = 0;
  const end = offset + length;
  for (let c = offset; c < end; c++) {
    const f = failures[c]!;
    attempts += f;
    if (done[c] === 1) nDone++;
    else if (f > 0) nFailed++;
  }
  counts.done += nDone;
  counts.failed += nFailed;
  counts.attempts += attempts;
}

function inspect(
  dir: string,
  makeMap: MapMaker | null,
  known: ((dir: string) => KnownCounts | null) | null,
): StoreInspection {
  checkHostByteOrder(dir);
  const meta = readStoreMetadata(dir);
  const layout = meta.layout;
  const map = makeMap?.(layout.gridShape) ?? null;
  const held = map === null ? known?.(meta.path) ?? null : null;
  const counts: Counts = held === null
    ? { done: 0, failed: 0, attempts: 0 }
    : { done: held.done, failed: held.failed, attempts: held.attempts };
  const blocks = held?.blocks ??
    streamBlockRuns(meta, (position, length, done, failures, offset) => {
      countRun(done, failures, offset, length, counts);
      map?.addRun(position, length, done, failures, offset);
    });
  const nDone = counts.done;
  const nFailed = counts.failed;
  const attempts = counts.attempts;
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
    percent_done: percentDone(nDone, blocks),
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
    lock_unreadable: holder === null ? unreadableStoreLock(meta.path) : null,
    missing_chunks: [...meta.missingChunks],
    resource_tracking: meta.resourceTracking,
    resources: meta.resourceTracking ? held?.resources ?? resourceReport(meta, blocks) : null,
    outputs: outputReport(meta, last?.["temporary"] === true),
    io: "fs",
  };
  return { report, map };
}

function skipMaskOf(value: unknown): { source: string; skipped: number } | null {
  if (!isRecord(value)) return null;
  const source = value["source"];
  const skipped = value["skipped"];
  return typeof source === "string" && typeof skipped === "number" ? { source, skipped } : null;
}

/**
 * Inspect every store of `paths`, each on its own: a store the validator refuses (StoreError)
 * becomes a failure naming it, so the others are still reported. `known` gives the counts of
 * a store (by its absolute path) that need not be read, when no map is made.
 */
export function inspectStores(
  paths: readonly string[],
  makeMap: MapMaker | null = null,
  known: ((dir: string) => KnownCounts | null) | null = null,
): { inspections: StoreInspection[]; failures: StoreFailureReport[] } {
  const inspections: StoreInspection[] = [];
  const failures: StoreFailureReport[] = [];
  for (const dir of paths) {
    try {
      inspections.push(inspect(dir, makeMap, known));
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      failures.push({ path: dir, error: error.message });
    }
  }
  return { inspections, failures };
}

/**
 * `100 * done / blocks`, rounded to the nearest hundredth, except that it reads 100 only when
 * every block is done and 0 only when none is (99.999 % is 99.99, one block of a million is
 * 0.01): a user reading "100.00%" may stop watching. 100 for a store of no blocks.
 */
export function percentDone(done: number, blocks: number): number {
  if (blocks === 0 || done >= blocks) return 100;
  if (done <= 0) return 0;
  const rounded = Math.round((done * 10000) / blocks) / 100;
  return Math.min(99.99, Math.max(0.01, rounded));
}
