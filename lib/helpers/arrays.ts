/**
 * The array helpers of the `blockwise` module: what every pipeline that reads its block from
 * a Zarr array and writes its result to another would otherwise rewrite. Reading and writing
 * are zarrita's (`zarr.get`, `zarr.set`, and for a block that is one chunk its codecs directly:
 * whole_chunks.ts); these turn a block's ROIs into zarrita selections, pad the read context at
 * the volume's edge and pick the write ROI out of a result computed over the read ROI.
 *
 * Placement: `offset` is the array index of coordinate 0 on each axis (default 0), as in a
 * declared `zarr` output or input, so coordinate c is array index c + offset.
 */

import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { registerNativeCodecs } from "../runtime/blosc_native.ts";
import { registerZarrCodecs } from "../zarr/codecs.ts";
import { ChunkFileStore } from "./chunk_files.ts";
import { readWholeChunk, wholeChunkAt, writeWholeChunk } from "./whole_chunks.ts";

/** A box in the pipeline's coordinates: [offset, offset + shape) on each axis. */
export interface RoiLike {
  readonly offset: readonly number[];
  readonly shape: readonly number[];
}

/** The ROIs of the block handed to `process` that these helpers use. */
export interface BlockRois {
  readonly readRoi: RoiLike;
  readonly writeRoi: RoiLike;
}

/** Where an array sits in the pipeline's coordinates. */
export interface Placement {
  /** The array index of coordinate 0 on each axis; default 0 on every axis. */
  readonly offset?: readonly number[];
}

/** Options of `readRoi` and `readBlock`. */
export interface ReadOptions extends Placement {
  /** The value of voxels outside the array; default: the array's fill value, else 0. */
  readonly fill?: number | bigint;
}

/** An array opened from a folder on disk. */
export type ZarrArray = zarr.Array<zarr.DataType, FileSystemStore>;

/** Numeric element arrays (what `readRoi` pads and `writeBlock` writes). */
export type NumericArray =
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array
  | Float32Array
  | Float64Array;

/** Elements with their shape and strides (C order from the readers here), as zarrita uses. */
export interface NumericChunk {
  readonly data: NumericArray;
  readonly shape: readonly number[];
  readonly stride: readonly number[];
}

const openedPaths = new WeakMap<object, string>();

/** Opens the Zarr array (v2 or v3, any codec zarrita reads) in the folder `path`. */
export async function openArray(path: string): Promise<ZarrArray> {
  if (typeof path !== "string" || path === "") {
    throw new TypeError(
      `openArray needs the path of a Zarr array folder; got ${JSON.stringify(path)}`,
    );
  }
  registerZarrCodecs();
  await registerNativeCodecs();
  let array: ZarrArray;
  try {
    array = await zarr.open(new ChunkFileStore(path), { kind: "array" });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `Cannot open the Zarr array "${path}": ${reason}. Give the folder that holds the array's zarr.json (v3) or .zarray (v2).`,
      { cause: error },
    );
  }
  openedPaths.set(array, path);
  return array;
}

/** The zarrita selection (one slice per axis) of `roi` in an array placed at `offset`. */
export function roiSelection(roi: RoiLike, options: Placement = {}): zarr.Slice[] {
  const offset = placementOf(roi.offset.length, options, "roiSelection");
  return roi.offset.map((start, axis) =>
    zarr.slice(start + offset[axis]!, start + offset[axis]! + roi.shape[axis]!)
  );
}

/**
 * Reads `roi` from `array`; voxels outside the array (the read context of a block at the
 * volume's edge) get `fill`. The result is C-ordered with `roi.shape`.
 */
export async function readRoi(
  array: ZarrArray,
  roi: RoiLike,
  options: ReadOptions = {},
): Promise<NumericChunk> {
  const rank = checkRank(array, roi, "readRoi");
  const offset = placementOf(rank, options, "readRoi");
  const box = clip(array, roi, offset);
  if (box.whole) {
    // A block that is one chunk gets the decoded chunk itself, not a copy of it.
    const coords = wholeChunkAt(array, box.start, box.stop);
    if (coords !== null) return numeric(array, await readWholeChunk(array, coords), "readRoi");
    return numeric(array, await zarr.get(array, roiSelection(roi, options)), "readRoi");
  }
  const size = roi.shape.reduce((a, b) => a * b, 1);
  const result = allocate(array, size);
  const fill = options.fill ?? array.fillValue ?? 0;
  fillWith(result, fill);
  const stride = cOrderStrides(roi.shape);
  if (!box.empty) {
    const part = numeric(
      array,
      await zarr.get(array, box.start.map((s, axis) => zarr.slice(s, box.stop[axis]!))),
      "readRoi",
    );
    copyBox(
      part,
      result,
      stride,
      box.start.map((s, axis) => s - roi.offset[axis]! - offset[axis]!),
    );
  }
  return { data: result, shape: [...roi.shape], stride };
}

/** Reads a block's read ROI (its write ROI plus context), padded at the volume's edge. */
export function readBlock(
  array: ZarrArray,
  block: BlockRois,
  options: ReadOptions = {},
): Promise<NumericChunk> {
  return readRoi(array, block.readRoi, options);
}

/**
 * Writes a block's result into `array` at the block's write ROI. `data` is either the write
 * ROI's elements or a result computed over the whole read ROI, of which the write ROI part is
 * written (a typed array in C order, or a chunk with shape and strides). The part of the write
 * ROI outside the array (a border block of fit "overhang") is left out.
 */
export async function writeBlock(
  array: ZarrArray,
  block: BlockRois,
  data: NumericArray | NumericChunk,
  options: Placement = {},
): Promise<void> {
  const rank = checkRank(array, block.writeRoi, "writeBlock");
  const offset = placementOf(rank, options, "writeBlock");
  const chunk = asChunk(data, block);
  const origin = sameShape(chunk.shape, block.writeRoi.shape)
    ? block.writeRoi.offset
    : block.readRoi.offset;
  const box = clip(array, block.writeRoi, offset);
  if (box.empty) return;
  let first = 0;
  for (let axis = 0; axis < rank; axis++) {
    first += (box.start[axis]! - offset[axis]! - origin[axis]!) * chunk.stride[axis]!;
  }
  const view = {
    data: chunk.data.subarray(first),
    shape: box.stop.map((stop, axis) => stop - box.start[axis]!),
    stride: [...chunk.stride],
  };
  const coords = wholeChunkAt(array, box.start, box.stop);
  if (coords !== null && await writeWholeChunk(array, coords, view)) return;
  const selection = box.start.map((s, axis) => zarr.slice(s, box.stop[axis]!));
  await zarr.set(array, selection, view as unknown as zarr.Chunk<zarr.DataType>);
}

function asChunk(data: NumericArray | NumericChunk, block: BlockRois): NumericChunk {
  const write = block.writeRoi.shape;
  const read = block.readRoi.shape;
  const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
  if (ArrayBuffer.isView(data)) {
    const shape = data.length === size(write) ? write : data.length === size(read) ? read : null;
    if (shape === null) {
      throw new RangeError(
        `writeBlock got ${data.length} elements, but the block's write ROI holds ${
          size(write)
        } (shape [${write}]) and its read ROI ${
          size(read)
        } (shape [${read}]); pass the result for one of them`,
      );
    }
    return { data, shape, stride: cOrderStrides(shape) };
  }
  if (!sameShape(data.shape, write) && !sameShape(data.shape, read)) {
    throw new RangeError(
      `writeBlock got a chunk of shape [${data.shape}], but the block's write ROI has shape [${write}] and its read ROI [${read}]; pass the result for one of them`,
    );
  }
  return data;
}

interface Clipped {
  /** Array indices of the part of the ROI inside the array. */
  readonly start: number[];
  readonly stop: number[];
  readonly empty: boolean;
  /** The whole ROI is inside the array. */
  readonly whole: boolean;
}

function clip(array: ZarrArray, roi: RoiLike, offset: readonly number[]): Clipped {
  const start = roi.offset.map((o, axis) => Math.max(0, o + offset[axis]!));
  const stop = roi.offset.map((o, axis) =>
    Math.min(array.shape[axis]!, o + offset[axis]! + roi.shape[axis]!)
  );
  const empty = start.some((s, axis) => s >= stop[axis]!);
  const whole = roi.offset.every((o, axis) =>
    o + offset[axis]! >= 0 && o + offset[axis]! + roi.shape[axis]! <= array.shape[axis]!
  );
  return { start, stop, empty, whole };
}

function checkRank(array: ZarrArray, roi: RoiLike, who: string): number {
  if (roi.offset.length !== array.shape.length || roi.shape.length !== array.shape.length) {
    throw new RangeError(
      `${who}: the ROI has ${roi.offset.length} axes but ${
        nameOf(array)
      } has ${array.shape.length} (shape [${array.shape}]); use an array of the pipeline's dimensionality`,
    );
  }
  return array.shape.length;
}

function placementOf(rank: number, options: Placement, who: string): readonly number[] {
  const offset = options.offset ?? new Array<number>(rank).fill(0);
  if (offset.length !== rank || !offset.every(Number.isInteger)) {
    throw new RangeError(
      `${who}: offset must be ${rank} integers (the array index of coordinate 0 on each axis); got ${
        JSON.stringify(offset)
      }`,
    );
  }
  return offset;
}

function nameOf(array: ZarrArray): string {
  const path = openedPaths.get(array);
  return path === undefined ? "the array" : `the array "${path}"`;
}

function numeric(
  array: ZarrArray,
  chunk: zarr.Chunk<zarr.DataType>,
  who: string,
): NumericChunk {
  const data: unknown = chunk.data;
  if (!ArrayBuffer.isView(data) || data instanceof DataView) {
    throw new TypeError(
      `${who}: ${
        nameOf(array)
      } has dtype ${array.dtype}; these helpers read numeric arrays only, use zarr.get for it`,
    );
  }
  return { data: data as NumericArray, shape: chunk.shape, stride: chunk.stride };
}

const CONSTRUCTORS: Readonly<Record<string, new (size: number) => NumericArray>> = {
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  float32: Float32Array,
  float64: Float64Array,
};

function allocate(array: ZarrArray, size: number): NumericArray {
  const make = CONSTRUCTORS[array.dtype];
  if (make === undefined) {
    throw new TypeError(
      `readRoi: ${
        nameOf(array)
      } has dtype ${array.dtype}, which cannot be padded; read the part inside the array with zarr.get`,
    );
  }
  return new make(size);
}

function fillWith(data: NumericArray, fill: unknown): void {
  const big = data instanceof BigInt64Array || data instanceof BigUint64Array;
  if (typeof fill !== "number" && typeof fill !== "bigint" && typeof fill !== "boolean") {
    throw new TypeError(`readRoi: fill must be a number; got ${JSON.stringify(fill)}`);
  }
  const value = big ? BigInt(fill) : Number(fill);
  if (value === 0 || value === 0n) return;
  if (big) (data as BigInt64Array).fill(value as bigint);
  else (data as Float64Array).fill(value as number);
}

function copyBox(
  part: NumericChunk,
  into: NumericArray,
  intoStride: readonly number[],
  at: readonly number[],
): void {
  const rank = part.shape.length;
  const last = rank - 1;
  const run = part.shape[last]!;
  const index = new Array<number>(rank).fill(0);
  const rows = part.shape.slice(0, last).reduce((a, b) => a * b, 1);
  for (let row = 0; row < rows; row++) {
    let from = 0;
    let to = at[last]! * intoStride[last]!;
    for (let axis = 0; axis < last; axis++) {
      from += index[axis]! * part.stride[axis]!;
      to += (index[axis]! + at[axis]!) * intoStride[axis]!;
    }
    if (part.stride[last] === 1) {
      (into as Float64Array).set((part.data as Float64Array).subarray(from, from + run), to);
    } else {
      for (let i = 0; i < run; i++) {
        (into as Float64Array)[to + i] =
          (part.data as Float64Array)[from + i * part.stride[last]!]!;
      }
    }
    for (let axis = last - 1; axis >= 0; axis--) {
      if (++index[axis]! < part.shape[axis]!) break;
      index[axis] = 0;
    }
  }
}

function cOrderStrides(shape: readonly number[]): number[] {
  const stride = new Array<number>(shape.length).fill(1);
  for (let axis = shape.length - 2; axis >= 0; axis--) {
    stride[axis] = stride[axis + 1]! * shape[axis + 1]!;
  }
  return stride;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
