/**
 * Counting a store's done markers at the start of a run, window by window through plain fs
 * reads into one reused buffer: the mapped array is never swept, so a billion-cell store costs
 * its page cache, not a gigabyte of this process's resident memory, and the run loop's caller
 * gets control back between windows (to print progress and answer signals).
 *
 * The scan can also list the blocks that are not done and that `keep` accepts (the blocks a
 * resume must run), up to `limit` of them: the resume plan skips everything else in bulk.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import type { TaskLayout } from "../blocks/mod.ts";
import { messageOf, StoreError } from "../errors.ts";
import { chunkKey } from "./arrays.ts";
import { RunWindows } from "./block_runs.ts";
import type { TrackingStore } from "./store.ts";

/** Cells per window: 4 MiB of done bytes. */
export const SCAN_WINDOW_CELLS = 1 << 22;

/** Where the done bytes come from: a chunk file read with fs, or an array in memory. */
export type DoneBytes =
  | { readonly file: string }
  | { readonly array: Uint8Array };

export interface DoneScanOptions {
  /** Blocks not done that `keep` accepts are listed in `kept` (default: none are). */
  readonly keep?: ((position: number) => boolean) | null;
  /** List at most this many; past it `kept` is null (the count goes on). */
  readonly limit?: number;
  /** Awaited between windows: yield to the event loop, and throw to stop the scan. */
  readonly pause?: () => Promise<void>;
  readonly windowCells?: number;
}

export interface DoneScan {
  /** Blocks with a tracking cell. */
  readonly blocks: number;
  /** Blocks whose done byte is 1. */
  readonly done: number;
  /** Blocks not done that `keep` accepted (once past `limit`, no more are counted). */
  readonly keptCount: number;
  /** Their positions in increasing order; null when `keep` was not given or `limit` was passed. */
  readonly kept: Float64Array | null;
}

/**
 * Where a windowed reader finds a store's done bytes: the chunk file (a mapping writes through
 * to it at once), or with the fs fallback the array in memory, ahead of the file until a flush.
 */
export function doneBytesOf(
  store: Pick<TrackingStore, "mmapKind" | "done" | "path" | "layout">,
): DoneBytes {
  if (store.mmapKind === "fs") return { array: store.done };
  return { file: path.join(store.path, "done", chunkKey(store.layout.dims)) };
}

/** Count the done markers of a task's store (see the module comment). */
export async function scanDoneMarkers(
  source: DoneBytes,
  layout: TaskLayout,
  options: DoneScanOptions = {},
): Promise<DoneScan> {
  const keep = options.keep ?? null;
  const limit = options.limit ?? Infinity;
  const windowCells = options.windowCells ?? SCAN_WINDOW_CELLS;
  const cells = layout.trackingCellCount;
  const runs = new RunWindows(layout);
  const reader = openReader(source, cells);
  const buffer = new Uint8Array(Math.min(windowCells, cells));
  let kept: Float64Array | null = keep === null ? null : new Float64Array(64);
  let keptCount = 0;
  let blocks = 0;
  let done = 0;
  let window: Uint8Array = buffer;
  const visit = (position: number, offset: number, length: number): void => {
    blocks += length;
    if (keep === null || kept === null) {
      done += countOnes(window, offset, offset + length);
      return;
    }
    const end = offset + length;
    for (let i = offset; i < end; i++) {
      if (window[i] === 1) {
        done++;
        continue;
      }
      const list: Float64Array | null = kept; // null once the limit was passed
      if (list === null || !keep(position + i - offset)) continue;
      keptCount++;
      if (keptCount > limit) {
        kept = null;
        continue;
      }
      let target: Float64Array = list;
      if (keptCount > list.length) {
        target = new Float64Array(Math.min(2 * list.length, Math.max(limit, 64)));
        target.set(list);
        kept = target;
      }
      target[keptCount - 1] = position + i - offset;
    }
  };
  try {
    for (let first = 0; first < cells; first += buffer.length) {
      const n = Math.min(buffer.length, cells - first);
      window = reader.read(first, n, buffer);
      runs.visit(first, n, visit);
      if (options.pause !== undefined && first + n < cells) await options.pause();
    }
  } finally {
    reader.close();
  }
  return {
    blocks,
    done,
    keptCount,
    kept: kept === null ? null : kept.subarray(0, keptCount),
  };
}

/** How many bytes of `bytes[start..end)` are 1: four at a time where the view allows. */
function countOnes(bytes: Uint8Array, start: number, end: number): number {
  let n = 0;
  let i = start;
  if (bytes.byteOffset % 4 === 0) {
    for (; i < end && (i & 3) !== 0; i++) if (bytes[i] === 1) n++;
    const count = Math.max(0, (end - i) >> 2);
    if (count > 0) {
      const words = new Uint32Array(bytes.buffer, bytes.byteOffset + i, count);
      for (let w = 0; w < count; w++) {
        const x = words[w]!;
        if (x === 0x01010101) n += 4;
        else if (x !== 0) {
          n += ((x & 0xff) === 1 ? 1 : 0) + (((x >>> 8) & 0xff) === 1 ? 1 : 0) +
            (((x >>> 16) & 0xff) === 1 ? 1 : 0) + ((x >>> 24) === 1 ? 1 : 0);
        }
      }
      i += count * 4;
    }
  }
  for (; i < end; i++) if (bytes[i] === 1) n++;
  return n;
}

interface WindowReader {
  /** The bytes of cells `[first, first + cells)`, in `buffer` or a view of the array. */
  read(first: number, cells: number, buffer: Uint8Array): Uint8Array;
  close(): void;
}

function openReader(source: DoneBytes, cells: number): WindowReader {
  if ("array" in source) {
    const array = source.array;
    return { read: (first, n) => array.subarray(first, first + n), close: () => {} };
  }
  const file = source.file;
  const fail = (what: string) =>
    new StoreError(`Cannot read the done markers in ${file}: ${what}`, file);
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (error) {
    throw fail(messageOf(error));
  }
  return {
    read(first, n, buffer) {
      const bytes = buffer.subarray(0, n);
      let got = 0;
      while (got < n) {
        let read: number;
        try {
          read = fs.readSync(fd, bytes, got, n - got, first + got);
        } catch (error) {
          throw fail(messageOf(error));
        }
        if (read <= 0) throw fail(`the file ends at byte ${first + got} of ${cells}`);
        got += read;
      }
      return bytes;
    },
    close: () => fs.closeSync(fd),
  };
}
