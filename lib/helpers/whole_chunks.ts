/**
 * Reading and writing a block that is exactly one chunk of its array (the layout the guide
 * recommends: block = chunk) without zarrita's general `get`/`set`, which allocate a second
 * chunk-sized array and copy element runs between the two. Reading returns the decoded chunk
 * itself (its file read into a reused buffer, decoded by the array's codecs); writing encodes the block's own array when it is a whole buffer in C
 * order, else one row-by-row copy of it. Measured in docs/design/CODECS.md ("Fewer copies"):
 * an uncompressed 64^3 float32 chunk read 0.70 -> 0.48 ms and written 0.50 -> 0.20 ms.
 *
 * Writing needs the array's codec pipeline, which zarrita 0.7 keeps under a private symbol; an
 * array without it (another zarrita's) takes the general path.
 */

import type * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { readChunkFile } from "./chunk_files.ts";
import { disownScratch, giveBackScratch, takeScratch } from "../zarr/scratch_buffers.ts";
import { copyStrided } from "./strided_copy.ts";

/** The elements of a chunk with their shape and C-order strides, as zarrita passes them. */
interface Elements {
  readonly data: ArrayBufferView & { readonly length: number };
  readonly shape: readonly number[];
  readonly stride: readonly number[];
}

/** The part of zarrita's private array context used here. */
interface ArrayContext {
  readonly kind: string;
  readonly codec: {
    encode(chunk: Elements): Promise<Uint8Array>;
    decode(bytes: Uint8Array): Promise<Elements>;
  };
  encodeChunkKey(coords: number[]): string;
  readonly TypedArray: new (size: number) => ArrayBufferView & { readonly length: number };
}

interface ChunkedArray {
  readonly shape: readonly number[];
  readonly chunks: readonly number[];
  readonly store: object & { set?(key: string, value: Uint8Array): Promise<void> | void };
  resolve(path: string): { readonly path: string };
}

/**
 * The chunk coordinates of the box `start`..`stop` (array indices) when it is exactly one
 * whole chunk of `array` inside its shape, else null.
 */
export function wholeChunkAt(
  array: { readonly shape: readonly number[]; readonly chunks: readonly number[] },
  start: readonly number[],
  stop: readonly number[],
): number[] | null {
  const rank = array.shape.length;
  for (let axis = 0; axis < rank; axis++) {
    const size = array.chunks[axis]!;
    const s = start[axis]!;
    if (s % size !== 0 || stop[axis]! - s !== size || stop[axis]! > array.shape[axis]!) return null;
  }
  // Made in one go, of int32s when they fit (as TaskLayout.coordsOf makes them): an array grown
  // by push, or of doubles, changed shape between calls for the code compiled for it.
  return start.map((s, axis) => {
    const coord = s / array.chunks[axis]!;
    return coord <= 0x7fffffff ? coord | 0 : coord;
  });
}

/** zarrita's context of `array`, or null when it has none this code knows. */
function contextOf(array: object): ArrayContext | null {
  const marker = Object.getOwnPropertySymbols(array).find((s) =>
    s.description === "zarrita.context"
  );
  if (marker === undefined) return null;
  const context = (array as Record<symbol, unknown>)[marker] as Partial<ArrayContext> | undefined;
  if (
    context === undefined || typeof context.codec?.encode !== "function" ||
    typeof context.encodeChunkKey !== "function" || typeof context.TypedArray !== "function"
  ) {
    return null;
  }
  return context as ArrayContext;
}

/**
 * `data` as a whole buffer of the chunk's elements: itself when it already is one (zarrita's
 * bytes codec encodes the whole buffer of what it is given), else a copy into a scratch buffer
 * (`scratch`: true) or a new one, one contiguous run of the last axis at a time.
 */
function standalone(
  source: Elements,
  context: ArrayContext,
  shape: readonly number[],
  reuse: boolean,
): { readonly chunk: Elements; readonly scratch: boolean } {
  const size = shape.reduce((a, b) => a * b, 1);
  const data = source.data;
  const stride = shape.map((_, axis) => shape.slice(axis + 1).reduce((a, b) => a * b, 1));
  const contiguous = source.stride.every((s, axis) => s === stride[axis]);
  if (
    contiguous && data.constructor === context.TypedArray && data.length === size &&
    data.byteOffset === 0 &&
    data.byteLength === data.buffer.byteLength
  ) {
    return { chunk: { data, shape, stride: source.stride }, scratch: false };
  }
  const out = reuse ? takeScratch(context.TypedArray, size) : new context.TypedArray(size);
  if (data.constructor === context.TypedArray && "BYTES_PER_ELEMENT" in data) {
    copyStrided({ data, shape, stride: source.stride }, out);
  } else {
    convertStrided(source, out, shape);
  }
  return { chunk: { data: out, shape, stride }, scratch: reuse };
}

/** The element loop of a copy that converts (a Float64Array result into a float32 array). */
function convertStrided(source: Elements, target: Elements["data"], shape: readonly number[]) {
  const out = target as unknown as { [i: number]: number | bigint };
  const from = source.data as unknown as { readonly [i: number]: number | bigint };
  const size = shape.reduce((a, b) => a * b, 1);
  const rank = shape.length;
  const row = shape[rank - 1]!;
  const step = source.stride[rank - 1]!;
  const index = new Array<number>(rank - 1).fill(0);
  for (let at = 0; at < size; at += row) {
    let first = 0;
    for (let axis = 0; axis < rank - 1; axis++) first += index[axis]! * source.stride[axis]!;
    for (let i = 0; i < row; i++) out[at + i] = from[first + i * step]!;
    for (let axis = rank - 2; axis >= 0; axis--) {
      if (++index[axis]! < shape[axis]!) break;
      index[axis] = 0;
    }
  }
}

/**
 * Writes `source` (the chunk's elements, any strides) as the chunk at `coords`; false when the
 * array is not one this path can write (sharded, or not zarrita 0.7's), so the caller uses
 * `zarr.set`.
 */
export async function writeWholeChunk(
  array: zarr.Array<zarr.DataType, zarr.Readable>,
  coords: number[],
  source: Elements,
): Promise<boolean> {
  const context = contextOf(array);
  const chunked = array as unknown as ChunkedArray;
  if (context === null || context.kind === "sharded" || typeof chunked.store.set !== "function") {
    return false;
  }
  // A file store writes the bytes out, so the copy can go back to the pool afterwards; a store
  // that keeps what it is given (zarrita's Map store) gets a buffer of its own.
  const fileStore = chunked.store instanceof FileSystemStore;
  const { chunk, scratch } = standalone(source, context, chunked.chunks, fileStore);
  try {
    const bytes = await context.codec.encode(chunk);
    await chunked.store.set(chunked.resolve(context.encodeChunkKey(coords)).path, bytes);
    // The file holds the frame now: a native encoder's scratch buffer goes back to the pool.
    if (fileStore) giveBackScratch(bytes);
  } finally {
    if (scratch) giveBackScratch(chunk.data);
  }
  return true;
}

/**
 * The chunk at `coords` of `array`, decoded: its file read into a scratch buffer, which goes
 * back to the pool unless the decoded elements are a view of it (an uncompressed chunk). An
 * array this path cannot read (not a local folder, sharded, another zarrita's) and a missing
 * chunk go through `array.getChunk`.
 */
export async function readWholeChunk(
  array: zarr.Array<zarr.DataType, zarr.Readable>,
  coords: number[],
): Promise<zarr.Chunk<zarr.DataType>> {
  const context = contextOf(array);
  const chunked = array as unknown as ChunkedArray;
  if (
    context === null || context.kind === "sharded" || !(chunked.store instanceof FileSystemStore)
  ) {
    return array.getChunk(coords);
  }
  const file = readChunkFile(chunked.store, chunked.resolve(context.encodeChunkKey(coords)).path);
  if (file === undefined) return array.getChunk(coords);
  let kept = false;
  try {
    const chunk = await context.codec.decode(file.bytes);
    kept = chunk.data.buffer === file.buffer.buffer;
    return chunk as unknown as zarr.Chunk<zarr.DataType>;
  } finally {
    if (kept) disownScratch(file.buffer);
    else giveBackScratch(file.buffer);
  }
}
