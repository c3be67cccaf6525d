/**
 * A tiny synchronous Zarr v3 writer and reader for regular-chunked arrays on local disk, with
 * `node:fs` only. It writes exactly what `reference/zarr-v3-facts.md` recommends: the 8
 * mandatory keys (plus `attributes` and `dimension_names`), the `bytes` codec in little endian,
 * the default chunk key encoding with "/", fill values as JSON numbers or the strings "NaN",
 * "Infinity", "-Infinity", and every chunk file at full size (edge chunks padded with the fill
 * value), so zarr-python, tensorstore and zarrita read the arrays.
 *
 * Every file is written to a temporary name in the same folder and renamed into place, so a
 * reader never sees a partial chunk or metadata document, and two writers of the same chunk
 * leave one complete version. `ensureArray`/`ensureGroup` create a document only if it is
 * missing (a hard link, which fails when the target exists), so several workers may call them
 * at once.
 */

import { isRecord } from "../errors.ts";
import {
  closeSync,
  fstatSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { randomUUID } from "node:crypto";

export type ZarrDtype = "uint8" | "uint16" | "uint32" | "float32";
export type ZarrTypedArray = Uint8Array | Uint16Array | Uint32Array | Float32Array;

export interface CreateArrayOptions {
  readonly shape: readonly number[];
  readonly chunkShape: readonly number[];
  readonly dtype: ZarrDtype;
  /** NaN and ±Infinity are allowed for float32 (written as the strings "NaN", ...). */
  readonly fillValue: number;
  readonly attributes?: Readonly<Record<string, unknown>>;
  readonly dimensionNames?: readonly string[];
}

/** What the reader and writer need to know about an array; `createArray` returns it. */
export interface ArrayMeta {
  readonly shape: readonly number[];
  readonly chunkShape: readonly number[];
  readonly dtype: ZarrDtype;
  readonly fillValue: number;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly dimensionNames?: readonly string[];
}

const ITEM_SIZE: Record<ZarrDtype, number> = { uint8: 1, uint16: 2, uint32: 4, float32: 4 };
const INT_MAX: Record<Exclude<ZarrDtype, "float32">, number> = {
  uint8: 0xff,
  uint16: 0xffff,
  uint32: 0xffffffff,
};

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function itemSize(dtype: ZarrDtype): number {
  return ITEM_SIZE[dtype];
}

/** The dtype a typed array holds. */
export function dtypeOf(data: ZarrTypedArray): ZarrDtype {
  if (data instanceof Uint8Array) return "uint8";
  if (data instanceof Uint16Array) return "uint16";
  if (data instanceof Uint32Array) return "uint32";
  return "float32";
}

export function allocate(dtype: ZarrDtype, length: number): ZarrTypedArray {
  switch (dtype) {
    case "uint8":
      return new Uint8Array(length);
    case "uint16":
      return new Uint16Array(length);
    case "uint32":
      return new Uint32Array(length);
    case "float32":
      return new Float32Array(length);
  }
}

function product(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Number of chunks per axis: `ceil(shape / chunkShape)`. */
export function chunkGridShape(meta: ArrayMeta): number[] {
  return meta.shape.map((s, d) => Math.ceil(s / meta.chunkShape[d]!));
}

/** The chunk file of `chunkCoords`: `<dir>/c/i/j/k` (`<dir>/c` for a 0-d array). */
export function chunkPath(dir: string, chunkCoords: readonly number[]): string {
  return join(dir, "c", ...chunkCoords.map(String));
}

function validateOptions(dir: string, o: CreateArrayOptions): void {
  const where = `Zarr array ${dir}`;
  const rank = o.shape.length;
  if (o.chunkShape.length !== rank) {
    throw new RangeError(
      `${where}: chunkShape [${o.chunkShape}] has ${o.chunkShape.length} axes but shape [${o.shape}] has ${rank}`,
    );
  }
  if (o.shape.some((s) => !Number.isInteger(s) || s < 0)) {
    throw new RangeError(`${where}: shape [${o.shape}] must be non-negative integers`);
  }
  if (o.chunkShape.some((s) => !Number.isInteger(s) || s <= 0)) {
    throw new RangeError(`${where}: chunkShape [${o.chunkShape}] must be positive integers`);
  }
  if (!(o.dtype in ITEM_SIZE)) {
    throw new RangeError(`${where}: dtype "${o.dtype}" is not one of ${Object.keys(ITEM_SIZE)}`);
  }
  if (o.dtype !== "float32") {
    const max = INT_MAX[o.dtype];
    if (!Number.isInteger(o.fillValue) || o.fillValue < 0 || o.fillValue > max) {
      throw new RangeError(
        `${where}: fillValue ${o.fillValue} is not a ${o.dtype} (an integer from 0 to ${max})`,
      );
    }
  }
  if (o.dimensionNames !== undefined && o.dimensionNames.length !== rank) {
    throw new RangeError(
      `${where}: dimensionNames [${o.dimensionNames}] must have one name per axis (${rank})`,
    );
  }
}

function fillValueToJson(value: number): number | string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "Infinity";
  if (value === -Infinity) return "-Infinity";
  return value;
}

function fillValueFromJson(value: unknown, where: string): number {
  if (typeof value === "number") return value;
  if (value === "NaN") return NaN;
  if (value === "Infinity") return Infinity;
  if (value === "-Infinity") return -Infinity;
  throw new TypeError(`${where}: unsupported fill_value ${JSON.stringify(value)}`);
}

/** The array's `zarr.json` document as a JSON string (2-space indented, trailing newline). */
export function arrayMetadataJson(o: CreateArrayOptions): string {
  const doc: Record<string, unknown> = {
    zarr_format: 3,
    node_type: "array",
    shape: [...o.shape],
    data_type: o.dtype,
    chunk_grid: { name: "regular", configuration: { chunk_shape: [...o.chunkShape] } },
    chunk_key_encoding: { name: "default", configuration: { separator: "/" } },
    fill_value: fillValueToJson(o.fillValue),
    codecs: [{ name: "bytes", configuration: { endian: "little" } }],
    attributes: { ...(o.attributes ?? {}) },
  };
  if (o.dimensionNames !== undefined) doc.dimension_names = [...o.dimensionNames];
  return `${JSON.stringify(doc, null, 2)}\n`;
}

function metaOf(o: CreateArrayOptions): ArrayMeta {
  const meta = {
    shape: [...o.shape],
    chunkShape: [...o.chunkShape],
    dtype: o.dtype,
    fillValue: o.fillValue,
    attributes: { ...(o.attributes ?? {}) },
  };
  return o.dimensionNames === undefined ? meta : { ...meta, dimensionNames: [...o.dimensionNames] };
}

function tempName(path: string): string {
  return join(dirname(path), `.${path.split(/[\\/]/).pop()}.tmp-${randomUUID()}`);
}

/** Write a file completely under a temporary name, then rename it over `path`. */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  mkdirSync(dirname(path), { recursive: true });
  const temp = tempName(path);
  try {
    writeFileSync(temp, data);
    renameSync(temp, path);
  } catch (error) {
    try {
      unlinkSync(temp);
    } catch {
      // already renamed or never written
    }
    throw error;
  }
}

/**
 * Publish `data` at `path` only if nothing is there yet; returns false when it already existed.
 * The file appears complete or not at all (a hard link of a finished temporary file), and of
 * several concurrent callers exactly one wins. On a filesystem without hard links it falls back
 * to an exclusive create, which still has one winner but may briefly show a partial file.
 */
export function writeFileIfMissing(path: string, data: string | Uint8Array): boolean {
  mkdirSync(dirname(path), { recursive: true });
  const temp = tempName(path);
  writeFileSync(temp, data);
  try {
    linkSync(temp, path);
    return true;
  } catch (error) {
    const code = errorCode(error);
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "ENOSYS" && code !== "EOPNOTSUPP") {
      throw error;
    }
  } finally {
    unlinkSync(temp);
  }
  try {
    writeFileSync(path, data, { flag: "wx" });
    return true;
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    throw error;
  }
}

function errorCode(error: unknown): string | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}

/** Create (or replace) an array's `zarr.json`. Existing chunks are left alone. */
export function createArray(dir: string, options: CreateArrayOptions): ArrayMeta {
  validateOptions(dir, options);
  writeFileAtomic(join(dir, "zarr.json"), arrayMetadataJson(options));
  return metaOf(options);
}

/**
 * Create the array unless its `zarr.json` exists; then open it and check that it is the array
 * asked for (shape, chunk shape, dtype, fill value), with an actionable error otherwise.
 */
export function ensureArray(dir: string, options: CreateArrayOptions): ArrayMeta {
  validateOptions(dir, options);
  if (writeFileIfMissing(join(dir, "zarr.json"), arrayMetadataJson(options))) {
    return metaOf(options);
  }
  const meta = openArray(dir);
  const same = meta.dtype === options.dtype &&
    sameCoords(meta.shape, options.shape) &&
    sameCoords(meta.chunkShape, options.chunkShape) &&
    Object.is(meta.fillValue, options.fillValue);
  if (!same) {
    throw new Error(
      `Zarr array ${dir} already exists as ${describe(meta)}, not the ${
        describe(metaOf(options))
      } asked for; remove it (rm -rf ${dir}) or use another directory`,
    );
  }
  return meta;
}

function describe(m: ArrayMeta): string {
  return `${m.dtype} array of shape [${m.shape}] in chunks [${m.chunkShape}] with fill ${m.fillValue}`;
}

function sameCoords(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function groupJson(attributes: Readonly<Record<string, unknown>>): string {
  return `${JSON.stringify({ zarr_format: 3, node_type: "group", attributes }, null, 2)}\n`;
}

/** Write (or replace) a group's `zarr.json`. */
export function createGroup(dir: string, attributes: Readonly<Record<string, unknown>> = {}): void {
  writeFileAtomic(join(dir, "zarr.json"), groupJson(attributes));
}

/** Write a group's `zarr.json` unless one exists; returns whether it was created. */
export function ensureGroup(
  dir: string,
  attributes: Readonly<Record<string, unknown>> = {},
): boolean {
  return writeFileIfMissing(join(dir, "zarr.json"), groupJson(attributes));
}

function intArray(value: unknown): number[] | null {
  return Array.isArray(value) && value.every((v) => Number.isInteger(v)) ? value as number[] : null;
}

/** Read an array's `zarr.json`; only the layout this module writes is accepted. */
export function openArray(dir: string): ArrayMeta {
  const path = join(dir, "zarr.json");
  const where = `Zarr array metadata ${path}`;
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new Error(`${where} cannot be read: ${error instanceof Error ? error.message : error}`);
  }
  if (!isRecord(doc) || doc.zarr_format !== 3 || doc.node_type !== "array") {
    throw new Error(`${where} is not a Zarr v3 array document`);
  }
  const shape = intArray(doc.shape);
  const grid = doc.chunk_grid;
  const chunkShape = isRecord(grid) && grid.name === "regular" && isRecord(grid.configuration)
    ? intArray(grid.configuration.chunk_shape)
    : null;
  const dtype = doc.data_type;
  if (shape === null || chunkShape === null || chunkShape.length !== shape.length) {
    throw new Error(`${where}: needs an integer shape and a regular chunk grid of the same rank`);
  }
  if (typeof dtype !== "string" || !(dtype in ITEM_SIZE)) {
    throw new Error(`${where}: data_type ${JSON.stringify(dtype)} is not supported here`);
  }
  const codecs = doc.codecs;
  const codec = Array.isArray(codecs) && codecs.length === 1 && isRecord(codecs[0])
    ? codecs[0]
    : null;
  const endian = codec !== null && isRecord(codec.configuration)
    ? codec.configuration.endian
    : undefined;
  if (codec === null || codec.name !== "bytes" || (endian !== undefined && endian !== "little")) {
    throw new Error(`${where}: only a single little-endian "bytes" codec is supported`);
  }
  const keys = doc.chunk_key_encoding;
  const separator = isRecord(keys) && isRecord(keys.configuration)
    ? keys.configuration.separator
    : undefined;
  if (
    !isRecord(keys) || keys.name !== "default" || (separator !== undefined && separator !== "/")
  ) {
    throw new Error(`${where}: only the default chunk key encoding with "/" is supported`);
  }
  const meta = {
    shape,
    chunkShape,
    dtype: dtype as ZarrDtype,
    fillValue: fillValueFromJson(doc.fill_value, where),
    attributes: isRecord(doc.attributes) ? doc.attributes : {},
  };
  const names = doc.dimension_names;
  return Array.isArray(names) && names.every((n) => typeof n === "string")
    ? { ...meta, dimensionNames: names as string[] }
    : meta;
}

function toLittleEndianBytes(data: ZarrTypedArray): Uint8Array {
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (LITTLE_ENDIAN || data.BYTES_PER_ELEMENT === 1) return bytes;
  const out = new Uint8Array(bytes.length);
  const n = data.BYTES_PER_ELEMENT;
  for (let i = 0; i < bytes.length; i += n) {
    for (let b = 0; b < n; b++) out[i + b] = bytes[i + n - 1 - b]!;
  }
  return out;
}

function fromLittleEndianBytes(dtype: ZarrDtype, bytes: Uint8Array): ZarrTypedArray {
  const n = ITEM_SIZE[dtype];
  const out = allocate(dtype, bytes.length / n);
  const target = new Uint8Array(out.buffer);
  if (LITTLE_ENDIAN || n === 1) {
    target.set(bytes);
  } else {
    for (let i = 0; i < bytes.length; i += n) {
      for (let b = 0; b < n; b++) target[i + b] = bytes[i + n - 1 - b]!;
    }
  }
  return out;
}

function checkChunkCoords(dir: string, meta: ArrayMeta, chunkCoords: readonly number[]): void {
  const grid = chunkGridShape(meta);
  if (
    chunkCoords.length !== grid.length ||
    chunkCoords.some((c, d) => !Number.isInteger(c) || c < 0 || c >= grid[d]!)
  ) {
    throw new RangeError(
      `Zarr array ${dir}: chunk (${chunkCoords.join(", ")}) is outside the chunk grid [${grid}]`,
    );
  }
}

/**
 * Write one chunk, atomically. `data` holds the full chunk (`prod(chunkShape)` elements in C
 * order); for an edge chunk the part outside the array should hold the fill value.
 */
export function writeChunk(
  dir: string,
  meta: ArrayMeta,
  chunkCoords: readonly number[],
  data: ZarrTypedArray,
): void {
  checkChunkCoords(dir, meta, chunkCoords);
  const expected = product(meta.chunkShape);
  if (data.length !== expected || dtypeOf(data) !== meta.dtype) {
    throw new RangeError(
      `Zarr array ${dir}: chunk (${chunkCoords.join(", ")}) needs a ${meta.dtype} array of ` +
        `${expected} elements (chunk shape [${meta.chunkShape}]), got ${data.constructor.name} of ${data.length}`,
    );
  }
  writeFileAtomic(chunkPath(dir, chunkCoords), toLittleEndianBytes(data));
}

/**
 * Write the region `[offset, offset + shape)` that is exactly one chunk clipped to the array
 * (`data` is `prod(shape)` elements in C order); the rest of the chunk is filled.
 */
export function writeChunkRegion(
  dir: string,
  meta: ArrayMeta,
  offset: readonly number[],
  shape: readonly number[],
  data: ZarrTypedArray,
): void {
  const coords = offset.map((o, d) => o / meta.chunkShape[d]!);
  const aligned = coords.length === meta.shape.length &&
    coords.every((c, d) => {
      const begin = offset[d]!;
      const end = Math.min(begin + meta.chunkShape[d]!, meta.shape[d]!);
      return Number.isInteger(c) && shape[d] === end - begin;
    });
  if (!aligned) {
    throw new RangeError(
      `Zarr array ${dir}: region at [${offset}] of shape [${shape}] is not one chunk of [${meta.chunkShape}] clipped to [${meta.shape}]`,
    );
  }
  if (data.length !== product(shape)) {
    throw new RangeError(
      `Zarr array ${dir}: region of shape [${shape}] needs ${
        product(shape)
      } elements, got ${data.length}`,
    );
  }
  const chunk = allocate(meta.dtype, product(meta.chunkShape));
  if (sameCoords(shape, meta.chunkShape)) {
    chunk.set(data);
  } else {
    chunk.fill(meta.fillValue);
    const origin = new Array<number>(shape.length).fill(0);
    copyBox(data, shape, origin, chunk, meta.chunkShape, origin, shape);
  }
  writeChunk(dir, meta, coords, chunk);
}

/** A chunk's values, or null when its file does not exist. */
export function readChunk(
  dir: string,
  meta: ArrayMeta,
  chunkCoords: readonly number[],
): ZarrTypedArray | null {
  checkChunkCoords(dir, meta, chunkCoords);
  const path = chunkPath(dir, chunkCoords);
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
  try {
    const expected = product(meta.chunkShape) * ITEM_SIZE[meta.dtype];
    const size = fstatSync(fd).size;
    if (size !== expected) {
      throw new Error(
        `Zarr chunk ${path} has ${size} bytes, expected ${expected} (chunk shape [${meta.chunkShape}] of ${meta.dtype}); the array is corrupt`,
      );
    }
    const bytes = new Uint8Array(expected);
    let done = 0;
    while (done < expected) {
      const n = readSync(fd, bytes, done, expected - done, done);
      if (n === 0) throw new Error(`Zarr chunk ${path} ended after ${done} of ${expected} bytes`);
      done += n;
    }
    return fromLittleEndianBytes(meta.dtype, bytes);
  } finally {
    closeSync(fd);
  }
}

/**
 * Copy the box `[srcStart, srcStart + box)` of `src` (C order, shape `srcShape`) to
 * `[dstStart, dstStart + box)` of `dst` (shape `dstShape`), one contiguous row at a time.
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
  if (rank === 0) {
    dst[0] = src[0]!;
    return;
  }
  const srcStrides = stridesOf(srcShape);
  const dstStrides = stridesOf(dstShape);
  const row = box[rank - 1]!;
  const counter = new Array<number>(rank - 1).fill(0);
  while (true) {
    let s = srcStart[rank - 1]!;
    let t = dstStart[rank - 1]!;
    for (let d = 0; d < rank - 1; d++) {
      s += (srcStart[d]! + counter[d]!) * srcStrides[d]!;
      t += (dstStart[d]! + counter[d]!) * dstStrides[d]!;
    }
    dst.set(src.subarray(s, s + row), t);
    let d = rank - 2;
    for (; d >= 0; d--) {
      counter[d]!++;
      if (counter[d]! < box[d]!) break;
      counter[d] = 0;
    }
    if (d < 0) return;
  }
}

function stridesOf(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d]!;
  }
  return strides;
}

/**
 * The voxels `[offset, offset + shape)` in C order, assembled from the chunks. Voxels in a
 * missing chunk or outside the array read as the fill value; `offset` may be negative.
 */
export function readRegion(
  dir: string,
  meta: ArrayMeta,
  offset: readonly number[],
  shape: readonly number[],
): ZarrTypedArray {
  const rank = meta.shape.length;
  if (offset.length !== rank || shape.length !== rank) {
    throw new RangeError(
      `Zarr array ${dir}: region at [${offset}] of shape [${shape}] does not have ${rank} axes`,
    );
  }
  if (shape.some((s) => !Number.isInteger(s) || s < 0)) {
    throw new RangeError(`Zarr array ${dir}: region shape [${shape}] must be non-negative`);
  }
  const out = allocate(meta.dtype, product(shape));
  out.fill(meta.fillValue);
  // The part of the region inside the array, and the chunks it touches.
  const begin = offset.map((o) => Math.max(o, 0));
  const end = offset.map((o, d) => Math.min(o + shape[d]!, meta.shape[d]!));
  if (begin.some((b, d) => b >= end[d]!)) return out;
  const first = begin.map((b, d) => Math.floor(b / meta.chunkShape[d]!));
  const last = end.map((e, d) => Math.floor((e - 1) / meta.chunkShape[d]!));
  const chunk = [...first];
  while (true) {
    const data = readChunk(dir, meta, chunk);
    if (data !== null) {
      const chunkBegin = chunk.map((c, d) => c * meta.chunkShape[d]!);
      const lo = chunkBegin.map((c, d) => Math.max(c, begin[d]!));
      const hi = chunkBegin.map((c, d) => Math.min(c + meta.chunkShape[d]!, end[d]!));
      copyBox(
        data,
        meta.chunkShape,
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
