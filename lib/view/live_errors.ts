/**
 * The last errors of the failed blocks a live frame lists (live_map.ts), without reading
 * `errors.jsonl` per frame: an index from block position to the byte offset of its last record
 * line, made by one read of the file at the first frame and extended by reading only what is
 * appended after (this run appends whole lines, between frames). A listed block's record is
 * read from its offset once and kept while the block stays listed; a new line for it drops the
 * kept one. Memory: 16 bytes per block that has a record, never per block of the store.
 *
 * The same records as `failedBlocks` (lib/outputs/errors_log.ts `lastErrorsOf`): the last line
 * whose index is the block's. A line torn by a crash is not a record: when the line at a block's
 * offset does not parse, that block alone is looked up with `lastErrorsOf` (which skips it).
 */

import { Buffer } from "node:buffer";
import * as fs from "node:fs";
import * as path from "node:path";
import type { TaskLayout } from "../blocks/mod.ts";
import {
  type ErrorRecord,
  ERRORS_FILE,
  type FailedBlockReport,
  lastErrorsOf,
} from "../outputs/errors_log.ts";
import { positionOfIndex } from "../tracking/grid_index.ts";
import { indexKey } from "../tracking/manifest.ts";
import type { FailedPositions } from "./live_failures.ts";

/** Bytes read at a time when indexing. */
const CHUNK_BYTES = 1 << 23;
/** Blocks with lines read after the first read kept in a map before they join the index. */
const RECENT_KEPT = 1 << 16;
/** Bytes read first for one record line (a longer one is read again whole). */
const LINE_BYTES = 1 << 14;

const INDEX_FIELD = '"index":[';

/** A record line's grid index key without parsing it (as `lastErrorsOf` finds it), or null. */
function indexKeyOfLine(line: string): string | null {
  const at = line.indexOf(INDEX_FIELD);
  if (at < 0) return null;
  const close = line.indexOf("]", at + INDEX_FIELD.length);
  if (close < 0) return null;
  const key = line.slice(at + INDEX_FIELD.length, close);
  return /^-?\d+(,-?\d+)*$/.test(key) ? key : null;
}

function isRecordOf(r: ErrorRecord, key: string): boolean {
  return Array.isArray(r.index) && typeof r.message === "string" && indexKey(r.index) === key;
}

/** See the module comment. */
export class LiveErrors {
  readonly #dir: string;
  readonly #recentKept: number;
  readonly #file: string;
  /** Bytes of the file indexed (-1: none yet). */
  #consumed = -1;
  /** The first read's index, sorted by position. */
  #positions = new Float64Array(0);
  #offsets = new Float64Array(0);
  /** Lines read since: position -> offset. */
  #recent = new Map<number, number>();
  /** Records of the blocks listed last (null: none on file). */
  #records = new Map<number, ErrorRecord | null>();

  /** `recentKept`: see `RECENT_KEPT` (tests make it small). */
  constructor(storeDir: string, recentKept = RECENT_KEPT) {
    this.#recentKept = recentKept;
    this.#dir = storeDir;
    this.#file = path.join(storeDir, ERRORS_FILE);
  }

  /** The failed blocks' reports, each with its last error as `failedBlocks` gives it. */
  reports(layout: TaskLayout, failed: FailedPositions): FailedBlockReport[] {
    this.#index(layout);
    const records = new Map<number, ErrorRecord | null>();
    const reports = failed.positions.map((position, k) => {
      const index = layout.gridIndexOf(position);
      let r = this.#records.get(position);
      if (r === undefined) r = this.#read(position, indexKey(index));
      records.set(position, r);
      return {
        block: String(layout.blockIdOf(position)),
        index,
        attempts: failed.attempts[k]!,
        last_error: r === null ? null : {
          message: r.message,
          stack: r.stack,
          attempt: r.attempt,
          run_id: r.run_id,
          at: r.at,
        },
      };
    });
    this.#records = records;
    return reports;
  }

  /** Index the lines not indexed yet (the whole file the first time). */
  #index(layout: TaskLayout): void {
    let fd: number;
    try {
      fd = fs.openSync(this.#file, "r");
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
      this.#consumed = Math.max(this.#consumed, 0);
      return;
    }
    const size = fs.fstatSync(fd).size;
    if (size < this.#consumed) {
      // Replaced or cut (never while a run holds the store): index it again.
      fs.closeSync(fd);
      this.#consumed = -1;
      this.#recent.clear();
      this.#records.clear();
      return this.#index(layout);
    }
    const first = this.#consumed < 0;
    const found = first ? new Map<number, number>() : this.#recent;
    try {
      let at = Math.max(this.#consumed, 0);
      let buffer = Buffer.alloc(Math.min(CHUNK_BYTES, Math.max(size - at, 1)));
      while (at < size) {
        const n = fs.readSync(fd, buffer, 0, Math.min(buffer.length, size - at), at);
        if (n <= 0) break;
        // latin1: one character per byte, so string offsets are byte offsets, and the ASCII
        // of the index field is found as is (UTF-8 never puts an ASCII byte inside a character).
        const text = buffer.toString("latin1", 0, n);
        let start = 0;
        for (let end = text.indexOf("\n"); end >= 0; end = text.indexOf("\n", start)) {
          if (end > start) {
            const position = this.#positionOfLine(layout, text, buffer, start, end);
            if (position >= 0) {
              found.set(position, at + start);
              if (!first) this.#records.delete(position);
            }
          }
          start = end + 1;
        }
        if (start === 0) {
          if (at + n >= size) break; // a torn last line: indexed once it ends
          buffer = Buffer.alloc(buffer.length * 2); // a line longer than the buffer
          continue;
        }
        at += start;
      }
      this.#consumed = at;
    } finally {
      fs.closeSync(fd);
    }
    if (first || this.#recent.size > Math.max(this.#recentKept, this.#positions.length)) {
      this.#merge(found);
    }
  }

  /** Merge `found` (position -> offset, newer) into the sorted index; `#recent` is emptied. */
  #merge(found: ReadonlyMap<number, number>): void {
    const added = [...found.keys()].sort((a, b) => a - b);
    const old = this.#positions;
    const positions = new Float64Array(old.length + added.length);
    const offsets = new Float64Array(positions.length);
    let n = 0;
    let i = 0;
    for (const p of added) {
      for (; i < old.length && old[i]! < p; i++, n++) {
        positions[n] = old[i]!;
        offsets[n] = this.#offsets[i]!;
      }
      if (i < old.length && old[i] === p) i++; // the newer line wins
      positions[n] = p;
      offsets[n++] = found.get(p)!;
    }
    for (; i < old.length; i++, n++) {
      positions[n] = old[i]!;
      offsets[n] = this.#offsets[i]!;
    }
    this.#positions = positions.subarray(0, n);
    this.#offsets = offsets.subarray(0, n);
    this.#recent = new Map();
  }

  /** The position of the block a line is a record of, or -1. */
  #positionOfLine(
    layout: TaskLayout,
    text: string,
    bytes: Buffer,
    start: number,
    end: number,
  ): number {
    let key = indexKeyOfLine(text.slice(start, end));
    if (key === null) {
      try {
        const r = JSON.parse(bytes.toString("utf8", start, end)) as ErrorRecord;
        if (!Array.isArray(r.index) || typeof r.message !== "string") return -1;
        key = indexKey(r.index);
      } catch {
        return -1; // a torn or foreign line
      }
    }
    const index = key.split(",").map(Number);
    return index.every(Number.isSafeInteger) ? positionOfIndex(layout, index) : -1;
  }

  /** The byte offset of the last line indexed for `position`, or -1. */
  #offsetOf(position: number): number {
    const recent = this.#recent.get(position);
    if (recent !== undefined) return recent;
    const positions = this.#positions;
    let lo = 0;
    let hi = positions.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (positions[mid]! < position) lo = mid + 1;
      else hi = mid;
    }
    return lo < positions.length && positions[lo] === position ? this.#offsets[lo]! : -1;
  }

  /** The last record of the block at `position` (grid index key `key`), or null. */
  #read(position: number, key: string): ErrorRecord | null {
    const offset = this.#offsetOf(position);
    if (offset < 0) return null;
    const fd = fs.openSync(this.#file, "r");
    let line = "";
    try {
      for (let size = LINE_BYTES;; size *= 2) {
        const bytes = Buffer.alloc(size);
        const n = fs.readSync(fd, bytes, 0, size, offset);
        const end = bytes.subarray(0, n).indexOf(0x0a);
        if (end >= 0 || n < size) {
          line = bytes.toString("utf8", 0, end >= 0 ? end : n);
          break;
        }
      }
    } finally {
      fs.closeSync(fd);
    }
    try {
      const r = JSON.parse(line) as ErrorRecord;
      if (isRecordOf(r, key)) return r;
    } catch {
      // Torn: the record before it, as `lastErrorsOf` finds it.
    }
    return lastErrorsOf(this.#dir, new Set([key])).get(key) ?? null;
  }
}
