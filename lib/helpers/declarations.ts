/**
 * The declarations of the `blockwise` helper module, appended by `blockwise types` to the
 * pipeline types. Standalone like them (no zarrita types needed: an array is described by what
 * the helpers and a pipeline read of it); tests/types_declarations.test.ts checks that they
 * agree with lib/helpers/arrays.ts.
 */

export const HELPER_DECLARATIONS: string = `
/*
 * The blockwise module: helpers for reading a block from a Zarr array and writing its result,
 * importable from a pipeline file with nothing installed (blockwise carries it, and zarrita):
 *
 *   import { openArray, readBlock, writeBlock } from "blockwise";
 *
 * For an editor, map "blockwise" to this file (tsconfig.json "paths", or deno.json "imports").
 * An array's offset is the array index of coordinate 0 on each axis (default 0), as in a
 * declared zarr output.
 */

/** A Zarr array opened by openArray (a zarrita Array: zarr.get and zarr.set take it). */
export interface ZarrArray {
  readonly shape: number[];
  readonly chunks: number[];
  /** e.g. "uint8", "float32". */
  readonly dtype: string;
  readonly attrs: Record<string, unknown>;
}

/** Numeric element arrays: what readRoi returns and writeBlock takes. */
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

/** Elements with their shape and strides (C order from readRoi), as zarrita uses them. */
export interface NumericChunk {
  readonly data: NumericArray;
  readonly shape: readonly number[];
  readonly stride: readonly number[];
}

/** Where an array sits in the pipeline's coordinates. */
export interface Placement {
  /** The array index of coordinate 0 on each axis; default 0 on every axis. */
  readonly offset?: readonly number[];
}

/** Options of readRoi and readBlock. */
export interface ReadOptions extends Placement {
  /** The value of voxels outside the array; default: the array's fill value, else 0. */
  readonly fill?: number | bigint;
}

/** A zarrita slice (what zarr.slice returns). */
export interface Slice {
  start: number | null;
  stop: number | null;
  step: number | null;
}

/** Opens the Zarr array (v2 or v3; gzip, zlib, zstd, blosc, lz4) in the folder path. */
export declare function openArray(path: string): Promise<ZarrArray>;

/** The zarrita selection of roi in an array placed at options.offset: zarr.get(array, it). */
export declare function roiSelection(roi: Roi, options?: Placement): Slice[];

/** Reads roi; voxels outside the array get options.fill. C order, shape roi.shape. */
export declare function readRoi(
  array: ZarrArray,
  roi: Roi,
  options?: ReadOptions,
): Promise<NumericChunk>;

/** Reads the block's read ROI (write ROI plus context), padded at the volume's edge. */
export declare function readBlock(
  array: ZarrArray,
  block: Pick<Block, "readRoi" | "writeRoi">,
  options?: ReadOptions,
): Promise<NumericChunk>;

/**
 * Writes the block's write ROI: data is the write ROI's elements, or a result computed over the
 * whole read ROI (its write ROI part is written); C order, or a chunk with shape and strides.
 */
export declare function writeBlock(
  array: ZarrArray,
  block: Pick<Block, "readRoi" | "writeRoi">,
  data: NumericArray | NumericChunk,
  options?: Placement,
): Promise<void>;
`;
