/**
 * Loading a mask array from wherever a user keeps it: a `.npy` file, a Zarr v2 or v3 array
 * directory (read with zarrita), or an array written into the pipeline module (flat, flat with a
 * shape, or nested arrays of arrays). Whatever the source and dtype, the result is one byte per
 * element: 1 where the value is nonzero (true), 0 where it is zero (false).
 *
 * NaN has no honest reading as "zero" or "nonzero" (a float mask with NaN usually means
 * "unknown here"), so a float mask containing NaN is refused; replace NaN first, e.g.
 * `numpy.nan_to_num(mask, nan=1)` to skip those places or `nan=0` to keep them.
 */

import { readFile, stat } from "node:fs/promises";
import { basename, dirname, resolve } from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { errorCode, InputError, messageOf } from "../errors.ts";
import { readNpyFile } from "./npy.ts";

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

const SUPPORTED_TEXT = `Supported dtypes: ${SUPPORTED_MASK_DTYPES.join(", ")}`;

/** numpy/Zarr v2 type codes (without the byte order) of the supported dtypes. */
const V2_CODES: Readonly<Record<string, string>> = {
  b1: "bool",
  u1: "uint8",
  u2: "uint16",
  u4: "uint32",
  u8: "uint64",
  i1: "int8",
  i2: "int16",
  i4: "int32",
  i8: "int64",
  f4: "float32",
  f8: "float64",
};

/** Elements read from a Zarr array per request, at most (a slab of whole chunk rows). */
const SLAB_ELEMENTS = 1 << 24;

/**
 * Loads a mask from `source`: a path (relative paths resolve against `baseDir`, the pipeline
 * file's folder) to a `.npy` file or a Zarr v2/v3 array directory, or an in-module array.
 * Every problem with the input is an `InputError` that names the source.
 */
export async function loadMaskArray(source: MaskSource, baseDir: string): Promise<MaskArray> {
  if (typeof source === "string") return await loadMaskFile(resolve(baseDir, source));
  return loadInlineMask(source);
}

/** Loads the `.npy` file or Zarr array directory at `path`. */
export async function loadMaskFile(path: string): Promise<MaskArray> {
  const where = `Cannot read mask "${path}"`;
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    const code = errorCode(error);
    throw new InputError(
      code === "ENOENT" || code === "ENOTDIR"
        ? `${where}: it does not exist. Check the path (relative paths in a pipeline resolve against the pipeline file's folder).`
        : `${where}: ${messageOf(error)}`,
    );
  }
  if (info.isDirectory()) return await loadZarrDirectory(path);
  const name = basename(path);
  if (name === "zarr.json" || name === ".zarray") return await loadZarrDirectory(dirname(path));
  if (path.toLowerCase().endsWith(".npy")) {
    const npy = await readNpyFile(path);
    if (npy.shape.length === 0) {
      throw new InputError(
        `${where}: it is a 0-d array (a scalar). A mask needs one axis per task axis.`,
      );
    }
    return {
      data: nonzeroBytes(npy.data, path, npy.shape),
      shape: [...npy.shape],
      dtype: npy.dtype,
      source: path,
      kind: "npy",
      attributes: {},
      flat: false,
    };
  }
  throw new InputError(
    `${where}: it is neither a .npy file nor a Zarr array directory. ` +
      `Save the mask with numpy.save("mask.npy", mask) or zarr.save_array("mask.zarr", mask).`,
  );
}

async function loadZarrDirectory(dir: string): Promise<MaskArray> {
  const where = `Cannot read mask "${dir}"`;
  const v3 = await readJson(resolve(dir, "zarr.json"), where);
  const v2 = v3 === undefined ? await readJson(resolve(dir, ".zarray"), where) : undefined;
  if (v3 === undefined && v2 === undefined) {
    const group = await readJson(resolve(dir, ".zgroup"), where);
    throw new InputError(
      group === undefined
        ? `${where}: the directory has neither zarr.json (Zarr v3) nor .zarray (Zarr v2), so it is not a Zarr array.`
        : `${where}: it is a Zarr v2 group, not an array. Pass the array inside it, e.g. "${dir}/<name>".`,
    );
  }
  const kind = v3 !== undefined ? "zarr-v3" : "zarr-v2";
  const meta = (v3 ?? v2) as Record<string, unknown>;
  if (kind === "zarr-v3" && meta["node_type"] !== "array") {
    throw new InputError(
      `${where}: its zarr.json describes a ${
        JSON.stringify(meta["node_type"])
      } node, not an array. Pass the array inside the group, e.g. "${dir}/<name>".`,
    );
  }
  const dtype = kind === "zarr-v3"
    ? v3DtypeOf(meta["data_type"], where)
    : v2DtypeOf(meta["dtype"], where);

  const store = new FileSystemStore(dir);
  let array: zarr.Array<zarr.DataType, FileSystemStore>;
  try {
    array = kind === "zarr-v3"
      ? await zarr.open.v3(zarr.root(store), { kind: "array" })
      : await zarr.open.v2(zarr.root(store), { kind: "array" });
  } catch (error) {
    throw new InputError(`${where}: zarrita cannot open it (${messageOf(error)}).`);
  }
  const shape = [...array.shape];
  if (shape.length === 0) {
    throw new InputError(
      `${where}: it is a 0-d array (a scalar). A mask needs one axis per task axis.`,
    );
  }
  const length = shape.reduce((a, b) => a * b, 1);
  const out = new Uint8Array(length);
  if (length > 0) {
    const rowElements = length / shape[0]!;
    const chunkRows = Math.max(1, array.chunks[0] ?? 1);
    const slabRows = chunkRows * Math.max(1, Math.floor(SLAB_ELEMENTS / (rowElements * chunkRows)));
    for (let begin = 0; begin < shape[0]!; begin += slabRows) {
      const end = Math.min(shape[0]!, begin + slabRows);
      const selection = [zarr.slice(begin, end), ...shape.slice(1).map(() => null)];
      let chunk: zarr.Chunk<zarr.DataType>;
      try {
        chunk = await zarr.get(array, selection);
      } catch (error) {
        throw new InputError(
          `${where}: reading rows ${begin}..${end} of axis 0 failed (${messageOf(error)}).`,
        );
      }
      const target = out.subarray(begin * rowElements, end * rowElements);
      const first = begin * rowElements;
      copyNonzero(chunk.data, chunk.shape, chunk.stride, target, dir, (i) => {
        throwNan(dir, shape, first + i);
      });
    }
  }
  return {
    data: out,
    shape,
    dtype,
    source: dir,
    kind,
    attributes: { ...array.attrs },
    flat: false,
  };
}

function v3DtypeOf(value: unknown, where: string): string {
  if (typeof value === "string" && SUPPORTED_MASK_DTYPES.includes(value)) return value;
  throw new InputError(
    `${where}: its dtype ${describeDtype(value)} cannot be a mask. ${SUPPORTED_TEXT}.`,
  );
}

function v2DtypeOf(value: unknown, where: string): string {
  if (typeof value === "string") {
    const match = /^[<>|=]([a-z]\d+)$/.exec(value);
    const dtype = match === null ? undefined : V2_CODES[match[1]!];
    if (dtype !== undefined) return dtype;
  }
  throw new InputError(
    `${where}: its dtype ${describeDtype(value)} cannot be a mask. ${SUPPORTED_TEXT} ` +
      `(Zarr v2: |b1, |u1, <u2, <u4, <u8, |i1, <i2, <i4, <i8, <f4, <f8 and big-endian variants).`,
  );
}

function describeDtype(value: unknown): string {
  if (typeof value === "string") return `"${value}"`;
  if (Array.isArray(value)) return `${JSON.stringify(value)} (a structured record type)`;
  return JSON.stringify(value) ?? String(value);
}

async function readJson(path: string, where: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, "utf-8");
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw new InputError(`${where}: cannot read ${basename(path)} (${messageOf(error)}).`);
  }
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new SyntaxError("not a JSON object");
    }
    return value;
  } catch (error) {
    throw new InputError(
      `${where}: ${basename(path)} is not valid JSON metadata (${messageOf(error)}).`,
    );
  }
}

/** In-module arrays: flat (shape = its length), `{ data, shape }`, or nested arrays. */
function loadInlineMask(source: Exclude<MaskSource, string>): MaskArray {
  const where = `Cannot use the skip mask ${INLINE_SOURCE}`;
  if (isArrayLike(source)) {
    const nested = Array.isArray(source) && source.some((v) => isArrayLike(v));
    if (nested) {
      const shape = nestedShape(source, where);
      const out = new Uint8Array(shape.reduce((a, b) => a * b, 1));
      flattenNested(source, shape, 0, out, 0, [], where);
      return inline(out, shape, "float64", false);
    }
    return inline(
      nonzeroOfList(source, where, "skipMask"),
      [source.length],
      dtypeOfList(source),
      true,
    );
  }
  if (typeof source === "object" && source !== null && "data" in source && "shape" in source) {
    const { data, shape } = source;
    if (
      !Array.isArray(shape) ||
      !shape.every((s: unknown) => Number.isSafeInteger(s) && (s as number) >= 0)
    ) {
      throw new InputError(
        `${where}: "shape" must be an array of integers >= 0; got ${JSON.stringify(shape)}.`,
      );
    }
    if (!isArrayLike(data)) throw new InputError(`${where}: "data" must be an array of numbers.`);
    const length = (shape as number[]).reduce((a, b) => a * b, 1);
    if (data.length !== length) {
      throw new InputError(
        `${where}: "shape" (${
          (shape as number[]).join(", ")
        }) has ${length} cells but "data" has ${data.length} entries. Give exactly one entry per cell, in C order.`,
      );
    }
    return inline(
      nonzeroOfList(data, where, "skipMask.data"),
      [...(shape as number[])],
      dtypeOfList(data),
      false,
    );
  }
  throw new InputError(
    `${where}: give a file path, an array of numbers, nested arrays, or { data, shape }.`,
  );
}

function inline(data: Uint8Array, shape: number[], dtype: string, flat: boolean): MaskArray {
  return { data, shape, dtype, source: INLINE_SOURCE, kind: "inline", attributes: {}, flat };
}

function isArrayLike(value: unknown): value is ArrayLike<unknown> {
  if (Array.isArray(value)) return true;
  return ArrayBuffer.isView(value) && !(value instanceof DataView);
}

function nestedShape(source: ArrayLike<unknown>, where: string): number[] {
  const shape: number[] = [];
  let level: unknown = source;
  while (isArrayLike(level)) {
    shape.push(level.length);
    if (level.length === 0) break;
    level = level[0];
  }
  if (shape.length === 0) throw new InputError(`${where}: it is empty.`);
  return shape;
}

function flattenNested(
  value: ArrayLike<unknown>,
  shape: readonly number[],
  depth: number,
  out: Uint8Array,
  offset: number,
  path: number[],
  where: string,
): number {
  const at = () => path.map((i) => `[${i}]`).join("") || "the outer array";
  if (value.length !== shape[depth]) {
    throw new InputError(
      `${where}: it is ragged: ${at()} has ${value.length} entries where the first has ${
        shape[depth]
      }. ` +
        `Give arrays of equal length on every axis, or { data, shape } with a flat C-order data array.`,
    );
  }
  if (depth === shape.length - 1) {
    for (let i = 0; i < value.length; i++) {
      const v = value[i];
      if (isArrayLike(v)) {
        throw new InputError(
          `${where}: it is ragged: ${at()}[${i}] is an array where a number was expected (axis ${depth} is the last).`,
        );
      }
      out[offset++] = nonzeroOf(v, () => `${at()}[${i}]`, where);
    }
    return offset;
  }
  for (let i = 0; i < value.length; i++) {
    const child = value[i];
    path.push(i);
    if (!isArrayLike(child)) {
      throw new InputError(
        `${where}: it is ragged: ${at()} is ${JSON.stringify(child)} where an array of ${
          shape[depth + 1]
        } entries was expected.`,
      );
    }
    offset = flattenNested(child, shape, depth + 1, out, offset, path, where);
    path.pop();
  }
  return offset;
}

function nonzeroOf(value: unknown, at: () => string, where: string): number {
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "bigint") return value !== 0n ? 1 : 0;
  if (typeof value !== "number") {
    throw new InputError(
      `${where}: ${at()} is ${JSON.stringify(value) ?? String(value)}, not a number.`,
    );
  }
  if (Number.isNaN(value)) {
    throw new InputError(`${where}: ${at()} is NaN. ${NAN_FIX}`);
  }
  return value !== 0 ? 1 : 0;
}

const NAN_FIX =
  `NaN is neither zero nor nonzero; replace it first (numpy.nan_to_num(mask, nan=1) skips those places, nan=0 keeps them).`;

function nonzeroOfList(data: ArrayLike<unknown>, where: string, name: string): Uint8Array {
  if (ArrayBuffer.isView(data)) return nonzeroBytes(data as NumericData, INLINE_SOURCE);
  const out = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = nonzeroOf(data[i], () => `${name}[${i}]`, where);
  return out;
}

function dtypeOfList(data: ArrayLike<unknown>): string {
  if (ArrayBuffer.isView(data)) return typedArrayDtype(data);
  for (let i = 0; i < data.length; i++) if (typeof data[i] !== "boolean") return "float64";
  return data.length === 0 ? "float64" : "bool";
}

function typedArrayDtype(data: ArrayBufferView): string {
  const names: Record<string, string> = {
    Uint8Array: "uint8",
    Uint8ClampedArray: "uint8",
    Int8Array: "int8",
    Uint16Array: "uint16",
    Int16Array: "int16",
    Uint32Array: "uint32",
    Int32Array: "int32",
    BigUint64Array: "uint64",
    BigInt64Array: "int64",
    Float32Array: "float32",
    Float64Array: "float64",
  };
  return names[data.constructor.name] ?? data.constructor.name;
}

type NumericData =
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
function copyNonzero(
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

function throwNan(source: string, shape: readonly number[], flatIndex: number): never {
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
