/**
 * Mask values as one nonzero byte per cell, from any numeric or boolean array a mask source
 * gives (typed arrays, zarrita's arrays, plain lists), refusing NaN with the cell that holds it.
 */

import * as zarr from "zarrita";
import { InputError } from "../errors.ts";

/** One byte per mask element (1 = nonzero), with where it came from. */
export interface MaskArray {
  /** 1 where the source value is nonzero (or true), 0 elsewhere; C order over `shape`. */
  readonly data: Uint8Array;
  readonly shape: number[];
  /** The source's element type: `bool`, `uint8` ... `float64`, as numpy and Zarr v3 name them. */
  readonly dtype: string;
  /** The absolute path of the file or Zarr array, or `INLINE_SOURCE` for an in-module array. */
  readonly source: string;
  readonly kind: "npy" | "zarr-v2" | "zarr-v3" | "inline";
  /** The Zarr array's attributes (`.zattrs` or `zarr.json` `attributes`); `{}` otherwise. */
  readonly attributes: Record<string, unknown>;
  /** True for an in-module flat array given without a shape: its shape is just its length. */
  readonly flat: boolean;
}

/** Arrays of arrays of numbers or booleans, as a pipeline module may write a mask. */
export type NestedMask = readonly (number | boolean | NestedMask | ArrayLike<number>)[];

export type MaskSource =
  | string
  | ArrayLike<number>
  | ArrayLike<boolean>
  | { readonly data: ArrayLike<number> | ArrayLike<boolean>; readonly shape: readonly number[] }
  | NestedMask;

export const INLINE_SOURCE = "<array in the pipeline module>";

/** Element types a mask may have. */
export const SUPPORTED_MASK_DTYPES: readonly string[] = [
  "bool",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "int8",
  "int16",
  "int32",
  "int64",
  "float32",
  "float64",
];

export const SUPPORTED_TEXT = `Supported dtypes: ${SUPPORTED_MASK_DTYPES.join(", ")}`;

export const NAN_FIX =
  `NaN is neither zero nor nonzero; replace it first (numpy.nan_to_num(mask, nan=1) skips those places, nan=0 keeps them).`;

export type NumericData =
  | Uint8Array
  | Uint8ClampedArray
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigUint64Array
  | BigInt64Array;

/** 1 where `data` is nonzero; refuses NaN. */
export function nonzeroBytes(
  data: NumericData,
  source: string,
  shape: readonly number[] = [data.length],
): Uint8Array {
  const out = new Uint8Array(data.length);
  copyNonzero(data, [data.length], [1], out, source, (i) => throwNan(source, shape, i));
  return out;
}

/**
 * Writes 1/0 for each element of the strided `data` (shape `shape`, element strides `stride`)
 * into `out` in C order. `data` is a typed array, or zarrita's `BoolArray`.
 */
export function copyNonzero(
  data: unknown,
  shape: readonly number[],
  stride: readonly number[],
  out: Uint8Array,
  source: string,
  nanAt: (index: number) => void,
): void {
  const values = numericView(data, source);
  const n = out.length;
  const dims = shape.length;
  let contiguous = true;
  for (let d = dims - 1, s = 1; d >= 0; d--) {
    if (shape[d]! > 1 && stride[d] !== s) contiguous = false;
    s *= shape[d]!;
  }
  const float = values instanceof Float32Array || values instanceof Float64Array;
  if (contiguous) {
    if (values instanceof BigInt64Array || values instanceof BigUint64Array) {
      for (let i = 0; i < n; i++) out[i] = values[i] !== 0n ? 1 : 0;
    } else {
      for (let i = 0; i < n; i++) {
        const v = values[i]!;
        out[i] = v !== 0 ? 1 : 0;
        if (float && v !== v) nanAt(i);
      }
    }
    return;
  }
  // Strided (Fortran-order chunks, transposed codecs): walk C order, map to the source index.
  const index = new Array<number>(dims).fill(0);
  let from = 0;
  for (let i = 0; i < n; i++) {
    const v = values[from]!;
    if (typeof v === "bigint") out[i] = v !== 0n ? 1 : 0;
    else {
      out[i] = v !== 0 ? 1 : 0;
      if (float && v !== v) nanAt(i);
    }
    for (let d = dims - 1; d >= 0; d--) {
      index[d]!++;
      from += stride[d]!;
      if (index[d]! < shape[d]!) break;
      from -= stride[d]! * index[d]!;
      index[d] = 0;
    }
  }
}

function numericView(data: unknown, source: string): NumericData {
  if (data instanceof zarr.BoolArray) {
    return new Uint8Array(data.buffer, data.byteOffset, data.length);
  }
  if (ArrayBuffer.isView(data) && !(data instanceof DataView)) return data as NumericData;
  throw new InputError(
    `Cannot read mask "${source}": its values are not numbers. ${SUPPORTED_TEXT}.`,
  );
}

export function throwNan(source: string, shape: readonly number[], flatIndex: number): never {
  const at: number[] = [];
  let rest = flatIndex;
  for (let d = shape.length - 1; d >= 0; d--) {
    at.unshift(rest % shape[d]!);
    rest = Math.floor(rest / shape[d]!);
  }
  throw new InputError(
    `Cannot use mask ${
      source === INLINE_SOURCE ? source : `"${source}"`
    }: it contains NaN (first at element ${
      at.length > 1 ? `(${at.join(", ")})` : at[0]
    }). ${NAN_FIX}`,
  );
}
