/**
 * Plain fs reads of a store's chunk files, for readers that must not map them (`status` runs
 * beside a live run and never maps; see TRACKING_STORE.md). The validator has already checked
 * each file's size; these reads check it again, since a file can change under a reader.
 */

import * as fs from "node:fs";
import { deleteToStartFresh, messageOf, StoreError } from "../errors.ts";
import { HOST_LITTLE_ENDIAN } from "../zarr/mod.ts";
import { itemSize, type TrackingArraySpec } from "./arrays.ts";
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
  const file = chunkPath(meta, spec.name);
  const size = itemSize(spec.dtype);
  const expected = meta.layout.trackingCellCount * size;
  const fail = (what: string) => damaged(meta, file, spec, what);
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (error) {
    throw fail(`cannot be read (${messageOf(error)})`);
  }
  try {
    const actual = fs.fstatSync(fd).size;
    if (actual !== expected) throw fail(`has ${actual} bytes, expected ${expected}`);
    const window = Math.floor(buffer.byteLength / size) * size;
    for (let offset = 0; offset < expected;) {
      const want = Math.min(window, expected - offset);
      const bytes = new Uint8Array(buffer, 0, want);
      let got = 0;
      while (got < want) {
        const n = fs.readSync(fd, bytes, got, want - got, offset + got);
        if (n <= 0) throw fail(`ended early, at byte ${offset + got} of ${expected}`);
        got += n;
      }
      visit(bytes, offset / size, want / size);
      offset += want;
    }
  } catch (error) {
    if (error instanceof StoreError) throw error;
    throw fail(`cannot be read (${messageOf(error)})`);
  } finally {
    fs.closeSync(fd);
  }
}
