/**
 * Plain fs reads of a store's chunk files, for readers that must not map them (`status` runs
 * beside a live run and never maps; see TRACKING_STORE.md). The validator has already checked
 * each file's size; these reads check it again, since a file can change under a reader.
 */

import * as fs from "node:fs";
import { deleteToStartFresh, messageOf, StoreError } from "../errors.ts";
import { HOST_LITTLE_ENDIAN } from "../zarr/mod.ts";
import { itemSize, trackingArray, type TrackingArraySpec } from "./arrays.ts";
import { RunWindows } from "./block_runs.ts";
import { fillValueBytes } from "./missing_chunks.ts";
import { chunkPath, type StoreMetadata } from "./store_metadata.ts";

function damaged(
  meta: StoreMetadata,
  file: string,
  spec: TrackingArraySpec,
  what: string,
): StoreError {
  return new StoreError(
    `Tracking store at ${meta.path} is damaged: the chunk file ${file} of array "${spec.name}" ${what}. ${
      deleteToStartFresh(meta.path)
    }`,
    meta.path,
  );
}

/** Refuse to read multi-byte elements as host numbers on a big-endian host. */
export function checkHostByteOrder(dir: string): void {
  if (HOST_LITTLE_ENDIAN) return;
  throw new StoreError(
    `Cannot read the tracking store at ${dir}: its chunk files are little-endian and this host is big-endian`,
    dir,
  );
}

/** Read an array's chunk file whole (plain fs read); StoreError when missing or mis-sized. */
export function readChunk(meta: StoreMetadata, spec: TrackingArraySpec): Uint8Array {
  if (meta.missingChunks.includes(spec.name)) {
    return fillValueBytes(spec, meta.layout.trackingCellCount);
  }
  const file = chunkPath(meta, spec.name);
  const expected = meta.layout.trackingCellCount * itemSize(spec.dtype);
  let bytes: Uint8Array;
  try {
    bytes = fs.readFileSync(file);
  } catch (error) {
    throw damaged(meta, file, spec, `cannot be read (${messageOf(error)})`);
  }
  if (bytes.byteLength !== expected) {
    throw damaged(meta, file, spec, `has ${bytes.byteLength} bytes, expected ${expected}`);
  }
  if (bytes.byteOffset % 8 !== 0) bytes = bytes.slice();
  return bytes;
}

/** Cells per read when streaming a chunk file: 2 MiB buffers for 8-byte elements. */
export const STREAM_CELLS = 1 << 18;

/**
 * Read an array's chunk file window by window into one reused buffer (no allocation the size
 * of the array, whose fresh pages cost more than the read itself), calling `visit` with the
 * window's bytes and its first cell. StoreError when missing or mis-sized.
 */
export function streamChunk(
  meta: StoreMetadata,
  spec: TrackingArraySpec,
  buffer: ArrayBuffer,
  visit: (bytes: Uint8Array, firstCell: number, cells: number) => void,
): void {
  const cells = Math.floor(buffer.byteLength / itemSize(spec.dtype));
  streamChunks(meta, [spec], cells, [buffer], (first, n, views) => visit(views[0]!, first, n));
}

/**
 * Read several arrays' chunk files in step, `windowCells` cells at a time, each into its own
 * reused buffer (given, or allocated once): `visit(firstCell, cells, views)` gets one byte view
 * per array, aligned for typed views of its element type. StoreError when a file is missing or
 * mis-sized.
 */
export function streamChunks(
  meta: StoreMetadata,
  specs: readonly TrackingArraySpec[],
  windowCells: number,
  buffers: readonly ArrayBuffer[] | null,
  visit: (firstCell: number, cells: number, views: readonly Uint8Array[]) => void,
): void {
  const total = meta.layout.trackingCellCount;
  const files = specs.map((spec) => chunkPath(meta, spec.name));
  const fds: number[] = [];
  try {
    specs.forEach((spec, i) => {
      const file = files[i]!;
      const expected = total * itemSize(spec.dtype);
      if (meta.missingChunks.includes(spec.name)) {
        fds.push(-1); // a missing chunk: the fill value, see `fillValueBytes`
        return;
      }
      let fd: number;
      try {
        fd = fs.openSync(file, "r");
      } catch (error) {
        throw damaged(meta, file, spec, `cannot be read (${messageOf(error)})`);
      }
      fds.push(fd);
      const actual = fs.fstatSync(fd).size;
      if (actual !== expected) {
        throw damaged(meta, file, spec, `has ${actual} bytes, expected ${expected}`);
      }
    });
    const window = Math.max(1, Math.min(windowCells, total));
    const owned = specs.map((spec, i) =>
      new Uint8Array(buffers?.[i] ?? new ArrayBuffer(window * itemSize(spec.dtype)))
    );
    const views: Uint8Array[] = specs.map(() => new Uint8Array(0));
    for (let first = 0; first < total; first += window) {
      const n = Math.min(window, total - first);
      specs.forEach((spec, i) => {
        const size = itemSize(spec.dtype);
        const bytes = owned[i]!.subarray(0, n * size);
        if (fds[i] === -1) {
          bytes.set(fillValueBytes(spec, n));
          views[i] = bytes;
          return;
        }
        readFully(
          fds[i]!,
          bytes,
          first * size,
          () => damaged(meta, files[i]!, spec, "ended early"),
        );
        views[i] = bytes;
      });
      visit(first, n, views);
    }
  } catch (error) {
    if (error instanceof StoreError) throw error;
    throw new StoreError(
      `Cannot read the tracking store at ${meta.path}: ${messageOf(error)}. ${
        deleteToStartFresh(meta.path)
      }`,
      meta.path,
    );
  } finally {
    for (const fd of fds) if (fd >= 0) fs.closeSync(fd);
  }
}

function readFully(fd: number, bytes: Uint8Array, at: number, short: () => StoreError): void {
  let got = 0;
  while (got < bytes.byteLength) {
    const n = fs.readSync(fd, bytes, got, bytes.byteLength - got, at + got);
    if (n <= 0) throw short();
    got += n;
  }
}

/** Cells per window when streaming `done` and `failures` together: 1 + 4 MiB of buffers. */
const BLOCK_RUN_WINDOW = 1 << 20;

/**
 * Stream a store's `done` and `failures` chunks together, window by window (never a buffer the
 * size of the store), calling `visit` for every run of blocks, consecutive along the last axis,
 * with the window's views: the run's cells are `offset .. offset + length - 1` of them. Returns
 * how many blocks were visited (those with a tracking cell).
 */
export function streamBlockRuns(
  meta: StoreMetadata,
  visit: (
    position: number,
    length: number,
    done: Uint8Array,
    failures: Uint32Array,
    offset: number,
  ) => void,
  windowCells = BLOCK_RUN_WINDOW,
): number {
  const runs = new RunWindows(meta.layout);
  let blocks = 0;
  streamChunks(
    meta,
    [trackingArray("done"), trackingArray("failures")],
    windowCells,
    null,
    (first, cells, [done, failureBytes]) => {
      const failures = new Uint32Array(failureBytes!.buffer, failureBytes!.byteOffset, cells);
      runs.visit(first, cells, (position, offset, length) => {
        blocks += length;
        visit(position, length, done!, failures, offset);
      });
    },
  );
  return blocks;
}
