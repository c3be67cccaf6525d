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
import { loadInlineMask } from "./inline_mask.ts";
import {
  copyNonzero,
  type MaskArray,
  type MaskSource,
  nonzeroBytes,
  SUPPORTED_MASK_DTYPES,
  SUPPORTED_TEXT,
  throwNan,
} from "./mask_values.ts";

export {
  INLINE_SOURCE,
  type MaskArray,
  type MaskSource,
  type NestedMask,
  nonzeroBytes,
  SUPPORTED_MASK_DTYPES,
} from "./mask_values.ts";

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
