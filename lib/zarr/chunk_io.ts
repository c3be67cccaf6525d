/**
 * Raw chunk files: writing one chunk (atomically and durably, see `atomic_write.ts`) and
 * reading chunks and regions back, for arrays whose chunks are the plain elements
 * (`meta.encoding === null`: no compression, no shards). Every chunk file is written at full
 * size, an edge chunk padded with the fill value, as Zarr requires. Elements are swapped to and
 * from the array's byte order, so v2 big-endian arrays work too.
 */

import * as fs from "node:fs";
import { cOrderStrides } from "../blocks/layout.ts";
import { errorCode, InputError } from "../errors.ts";
import {
  allocate,
  bytesOf,
  fillTyped,
  holdsDtype,
  itemSize,
  type ZarrTypedArray,
} from "./data_types.ts";
import { needsSwap, swapBytes } from "./endian.ts";
import { writeFileAtomic } from "./atomic_write.ts";
import {
  chunkAt,
  chunkFile,
  chunkGridShape,
  isChunkCoord,
  storedChunkShape,
} from "./chunk_grid.ts";
import type { ZarrArrayMetadata } from "./metadata.ts";

function product(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function where(dir: string): string {
  return `Zarr array ${dir}`;
}

/** Refuse arrays whose chunk files are not the plain elements (compressed, sharded). */
function checkRaw(dir: string, meta: ZarrArrayMetadata, action: string): void {
  if (meta.encoding === null) return;
  throw new InputError(
    `Cannot ${action} ${where(dir)}: its chunks are encoded (${meta.encoding}), and blockwise ` +
      `writes and reads only plain chunks (a single "bytes" codec, or a v2 array without ` +
      `compressor and filters). Create the array without compression or sharding.`,
  );
}

function checkCoords(dir: string, meta: ZarrArrayMetadata, coords: readonly number[]): void {
  if (!isChunkCoord(meta, coords)) {
    throw new RangeError(
      `${where(dir)}: chunk (${coords.join(", ")}) is outside the chunk grid [${
        chunkGridShape(meta)
      }]`,
    );
  }
}

/** The elements' bytes in the array's byte order (a copy only when they must be swapped). */
function encode(meta: ZarrArrayMetadata, data: ZarrTypedArray): Uint8Array {
  const bytes = bytesOf(data);
  const size = itemSize(meta.dtype);
  if (!needsSwap(meta.endian, size)) return bytes;
  const out = bytes.slice();
  swapBytes(out, size);
  return out;
}

/**
 * Write one chunk, atomically and durably. `data` holds the full chunk (`prod(chunkShape)`
 * elements in C order); for an edge chunk the part outside the array should hold the fill value.
 */
export function writeChunk(
  dir: string,
  meta: ZarrArrayMetadata,
  coords: readonly number[],
  data: ZarrTypedArray,
): void {
  checkRaw(dir, meta, "write a chunk of");
  checkCoords(dir, meta, coords);
  const expected = product(meta.chunkShape);
  if (data.length !== expected || !holdsDtype(data, meta.dtype)) {
    throw new RangeError(
      `${where(dir)}: chunk (${coords.join(", ")}) needs a ${meta.dtype} array of ` +
        `${expected} elements (chunk shape [${meta.chunkShape}]), got ${data.constructor.name} of ${data.length}`,
    );
  }
  writeFileAtomic(chunkFile(dir, meta, coords), encode(meta, data));
}

/**
 * Write the region `[offset, offset + shape)` that is exactly one chunk clipped to the array
 * (`data` is `prod(shape)` elements in C order); the rest of the chunk is filled.
 */
export function writeChunkRegion(
  dir: string,
  meta: ZarrArrayMetadata,
  offset: readonly number[],
  shape: readonly number[],
  data: ZarrTypedArray,
): void {
  const coords = chunkAt(meta, { offset, shape });
  if (coords === null) {
    throw new RangeError(
      `${where(dir)}: region at [${offset}] of shape [${shape}] is not one chunk of [${
        storedChunkShape(meta)
      }] clipped to [${meta.shape}]`,
    );
  }
  if (data.length !== product(shape)) {
    throw new RangeError(
      `${where(dir)}: region of shape [${shape}] needs ${
        product(shape)
      } elements, got ${data.length}`,
    );
  }
  const chunk = allocate(meta.dtype, product(meta.chunkShape));
  if (shape.every((s, d) => s === meta.chunkShape[d])) {
    bytesOf(chunk).set(bytesOf(data));
  } else {
    fillTyped(chunk, meta.fillValue);
    const origin = new Array<number>(shape.length).fill(0);
    copyBox(data, shape, origin, chunk, meta.chunkShape, origin, shape);
  }
  writeChunk(dir, meta, coords, chunk);
}

/** A chunk's values, or null when its file does not exist. */
export function readChunk(
  dir: string,
  meta: ZarrArrayMetadata,
  coords: readonly number[],
): ZarrTypedArray | null {
  checkRaw(dir, meta, "read a chunk of");
  checkCoords(dir, meta, coords);
  const file = chunkFile(dir, meta, coords);
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
  try {
    const size = itemSize(meta.dtype);
    const expected = product(meta.chunkShape) * size;
    const actual = fs.fstatSync(fd).size;
    if (actual !== expected) {
      throw new InputError(
        `Zarr chunk ${file} has ${actual} bytes, expected ${expected} (chunk shape [${meta.chunkShape}] of ${meta.dtype}); the array is corrupt. Rewrite the chunk or the array.`,
      );
    }
    const out = allocate(meta.dtype, product(meta.chunkShape));
    const bytes = bytesOf(out);
    for (let done = 0; done < expected;) {
      const n = fs.readSync(fd, bytes, done, expected - done, done);
      if (n === 0) {
        throw new InputError(`Zarr chunk ${file} ended after ${done} of ${expected} bytes`);
      }
      done += n;
    }
    if (needsSwap(meta.endian, size)) swapBytes(bytes, size);
    return out;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Copy the box `[srcStart, srcStart + box)` of `src` (C order, shape `srcShape`) to
 * `[dstStart, dstStart + box)` of `dst` (shape `dstShape`, same element type), one contiguous
 * row at a time.
 */
function copyBox(
  src: ZarrTypedArray,
  srcShape: readonly number[],
  srcStart: readonly number[],
  dst: ZarrTypedArray,
  dstShape: readonly number[],
  dstStart: readonly number[],
  box: readonly number[],
): void {
  const rank = box.length;
  if (box.some((b) => b <= 0)) return;
  const from = bytesOf(src);
  const to = bytesOf(dst);
  const size = src.BYTES_PER_ELEMENT;
  if (rank === 0) {
    to.set(from.subarray(0, size));
    return;
  }
  const srcStrides = cOrderStrides(srcShape);
  const dstStrides = cOrderStrides(dstShape);
  const row = box[rank - 1]! * size;
  const counter = new Array<number>(rank - 1).fill(0);
  for (;;) {
    let s = srcStart[rank - 1]!;
    let t = dstStart[rank - 1]!;
    for (let d = 0; d < rank - 1; d++) {
      s += (srcStart[d]! + counter[d]!) * srcStrides[d]!;
      t += (dstStart[d]! + counter[d]!) * dstStrides[d]!;
    }
    to.set(from.subarray(s * size, s * size + row), t * size);
    let d = rank - 2;
    for (; d >= 0; d--) {
      counter[d]!++;
      if (counter[d]! < box[d]!) break;
      counter[d] = 0;
    }
    if (d < 0) return;
  }
}

/**
 * The elements `[offset, offset + shape)` in C order, assembled from the chunks. Elements in a
 * missing chunk or outside the array read as the fill value; `offset` may be negative.
 */
export function readRegion(
  dir: string,
  meta: ZarrArrayMetadata,
  offset: readonly number[],
  shape: readonly number[],
): ZarrTypedArray {
  const rank = meta.shape.length;
  if (offset.length !== rank || shape.length !== rank) {
    throw new RangeError(
      `${where(dir)}: region at [${offset}] of shape [${shape}] does not have ${rank} axes`,
    );
  }
  if (shape.some((s) => !Number.isInteger(s) || s < 0)) {
    throw new RangeError(`${where(dir)}: region shape [${shape}] must be non-negative`);
  }
  const out = allocate(meta.dtype, product(shape));
  fillTyped(out, meta.fillValue);
  const begin = offset.map((o) => Math.max(o, 0));
  const end = offset.map((o, d) => Math.min(o + shape[d]!, meta.shape[d]!));
  if (begin.some((b, d) => b >= end[d]!)) return out;
  const unit = meta.chunkShape;
  const first = begin.map((b, d) => Math.floor(b / unit[d]!));
  const last = end.map((e, d) => Math.floor((e - 1) / unit[d]!));
  const chunk = [...first];
  for (;;) {
    const data = readChunk(dir, meta, chunk);
    if (data !== null) {
      const chunkBegin = chunk.map((c, d) => c * unit[d]!);
      const lo = chunkBegin.map((c, d) => Math.max(c, begin[d]!));
      const hi = chunkBegin.map((c, d) => Math.min(c + unit[d]!, end[d]!));
      copyBox(
        data,
        unit,
        lo.map((l, d) => l - chunkBegin[d]!),
        out,
        shape,
        lo.map((l, d) => l - offset[d]!),
        hi.map((h, d) => h - lo[d]!),
      );
    }
    let d = rank - 1;
    for (; d >= 0; d--) {
      chunk[d]!++;
      if (chunk[d]! <= last[d]!) break;
      chunk[d] = first[d]!;
    }
    if (d < 0) return out;
  }
}
