/**
 * Zarr array and group metadata: reading an array's `zarr.json` (v3) or `.zarray` + `.zattrs`
 * (v2) into one description, and building the v3 documents this project writes.
 *
 * The description is what a chunk writer needs and nothing more: dtype and byte order, shape,
 * chunk shape, the shard shape when the `sharding_indexed` codec packs chunks into shards, the
 * chunk key encoding and its separator, the fill value, and whether chunk files hold the plain
 * elements (C order, no compression) so they can be written as raw bytes. Reading the *values*
 * of arrays other tools wrote is zarrita's job (lib/masks/load_mask.ts); this module never
 * decodes a compressed chunk.
 *
 * Documents written follow `reference/zarr-v3-facts.md`: the 8 mandatory array keys plus
 * `attributes` (and `dimension_names` when given), the `bytes` codec in little endian, the
 * default chunk key encoding with "/", NaN and ±Infinity fill values as strings; a group has
 * only `zarr_format`, `node_type` and `attributes`.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { errorCode, InputError, isRecord, messageOf } from "../errors.ts";
import {
  fillValueFromJson,
  fillValueProblem,
  fillValueToJson,
  isZarrDtype,
  itemSize,
  ZARR_DTYPES,
  type ZarrDtype,
} from "./data_types.ts";

/** How chunk coordinates become chunk keys (file paths relative to the array folder). */
export interface ChunkKeyEncoding {
  /** `default`: `c/1/2` (v3); `v2`: `1.2` (v2 arrays, and v3 arrays that ask for it). */
  readonly name: "default" | "v2";
  readonly separator: "/" | ".";
}

/** One Zarr array, v2 or v3, as the chunk writer and readers see it. */
export interface ZarrArrayMetadata {
  readonly zarrFormat: 2 | 3;
  readonly shape: readonly number[];
  readonly dtype: ZarrDtype;
  /** Byte order of multi-byte elements in chunk files. */
  readonly endian: "little" | "big";
  /** Elements per chunk along each axis (inside a shard when `shardShape` is set). */
  readonly chunkShape: readonly number[];
  /** Elements per shard (one file of several chunks) with `sharding_indexed`; else null. */
  readonly shardShape: readonly number[] | null;
  readonly chunkKeyEncoding: ChunkKeyEncoding;
  /** NaN and ±Infinity for floats; 0/1 for bool. */
  readonly fillValue: number;
  /**
   * Null when every chunk file is the chunk's elements as they are (C order, `endian`, no
   * compression, no shard index): what `writeChunk` writes. Otherwise what encodes them, e.g.
   * `codecs bytes, gzip`, which this project's writer does not do.
   */
  readonly encoding: string | null;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly dimensionNames?: readonly (string | null)[];
}

/** What `arrayDocument` and `createArray` need to describe a v3 array. */
export interface ArrayOptions {
  readonly shape: readonly number[];
  readonly chunkShape: readonly number[];
  readonly dtype: ZarrDtype;
  /** NaN and ±Infinity are allowed for floats (written as the strings "NaN", ...). */
  readonly fillValue: number;
  readonly attributes?: Readonly<Record<string, unknown>>;
  readonly dimensionNames?: readonly string[];
}

/** A Zarr array's metadata cannot be read or is not one this project can write (exit 2). */
export class ZarrMetadataError extends InputError {
  constructor(message: string, readonly path: string) {
    super(message);
  }
}

/** The chunk key encoding of every array this project creates. */
export const DEFAULT_KEY_ENCODING: ChunkKeyEncoding = { name: "default", separator: "/" };

const V3_ARRAY_KEYS = new Set([
  "zarr_format",
  "node_type",
  "shape",
  "data_type",
  "chunk_grid",
  "chunk_key_encoding",
  "fill_value",
  "codecs",
  "attributes",
  "storage_transformers",
  "dimension_names",
]);

function intList(value: unknown, positive: boolean): number[] | null {
  if (!Array.isArray(value)) return null;
  for (const v of value) {
    if (!Number.isSafeInteger(v) || (v as number) < (positive ? 1 : 0)) return null;
  }
  return value as number[];
}

/** Check `options` describe an array; RangeError (a bug in the caller) otherwise. */
export function checkArrayOptions(where: string, o: ArrayOptions): void {
  const rank = o.shape.length;
  if (intList(o.shape, false) === null) {
    throw new RangeError(`${where}: shape [${o.shape}] must be non-negative integers`);
  }
  if (o.chunkShape.length !== rank || intList(o.chunkShape, true) === null) {
    throw new RangeError(
      `${where}: chunkShape [${o.chunkShape}] must be ${rank} positive integers, one per axis of shape [${o.shape}]`,
    );
  }
  if (!isZarrDtype(o.dtype)) {
    throw new RangeError(`${where}: dtype "${o.dtype}" is not one of ${ZARR_DTYPES.join(", ")}`);
  }
  const problem = fillValueProblem(o.dtype, o.fillValue);
  if (problem !== null) throw new RangeError(`${where}: fillValue ${o.fillValue} is ${problem}`);
  if (o.dimensionNames !== undefined && o.dimensionNames.length !== rank) {
    throw new RangeError(
      `${where}: dimensionNames [${o.dimensionNames}] must have one name per axis (${rank})`,
    );
  }
}

/** The v3 `zarr.json` document of an array (regular grid, `bytes` codec, little endian). */
export function arrayDocument(o: ArrayOptions): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    zarr_format: 3,
    node_type: "array",
    shape: [...o.shape],
    data_type: o.dtype,
    chunk_grid: { name: "regular", configuration: { chunk_shape: [...o.chunkShape] } },
    chunk_key_encoding: { name: "default", configuration: { separator: "/" } },
    fill_value: fillValueToJson(o.dtype, o.fillValue),
    codecs: [{ name: "bytes", configuration: { endian: "little" } }],
    attributes: { ...(o.attributes ?? {}) },
  };
  if (o.dimensionNames !== undefined) doc["dimension_names"] = [...o.dimensionNames];
  return doc;
}

/** The description `arrayDocument(o)` stands for, as `openArrayMetadata` would read it back. */
export function metadataOf(o: ArrayOptions): ZarrArrayMetadata {
  const meta: ZarrArrayMetadata = {
    zarrFormat: 3,
    shape: [...o.shape],
    dtype: o.dtype,
    endian: "little",
    chunkShape: [...o.chunkShape],
    shardShape: null,
    chunkKeyEncoding: DEFAULT_KEY_ENCODING,
    fillValue: o.fillValue,
    encoding: null,
    attributes: { ...(o.attributes ?? {}) },
  };
  return o.dimensionNames === undefined ? meta : { ...meta, dimensionNames: [...o.dimensionNames] };
}

/** A v3 group document: only `zarr_format`, `node_type` and `attributes`. */
export function groupDocument(
  attributes: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  return { zarr_format: 3, node_type: "group", attributes: { ...attributes } };
}

/** A metadata document as the bytes written to disk: 2-space JSON and a newline. */
export function documentText(doc: unknown): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

function keyEncodingOf(value: unknown, fail: (why: string) => never): ChunkKeyEncoding {
  if (!isRecord(value) || (value["name"] !== "default" && value["name"] !== "v2")) {
    fail(`has chunk_key_encoding ${JSON.stringify(value)}; expected "default" or "v2"`);
  }
  const name = value["name"] as "default" | "v2";
  const config = value["configuration"];
  const separator = isRecord(config) && config["separator"] !== undefined
    ? config["separator"]
    : name === "default"
    ? "/"
    : ".";
  if (separator !== "/" && separator !== ".") {
    fail(`has the chunk key separator ${JSON.stringify(separator)}; expected "/" or "."`);
  }
  return { name, separator };
}

function fillOf(dtype: ZarrDtype, value: unknown, fail: (why: string) => never): number {
  const fill = fillValueFromJson(dtype, value);
  if (fill === null) fail(`has fill_value ${JSON.stringify(value)}, which is not a ${dtype}`);
  return fill;
}

/** Parse a v3 array `zarr.json` document; `file` names it in errors. */
export function parseV3ArrayMetadata(doc: unknown, file: string): ZarrArrayMetadata {
  const fail = (why: string): never => {
    throw new ZarrMetadataError(`Zarr array metadata ${file} ${why}`, file);
  };
  if (!isRecord(doc) || doc["zarr_format"] !== 3 || doc["node_type"] !== "array") {
    return fail(`is not a Zarr v3 array document (zarr_format 3, node_type "array")`);
  }
  for (const key of Object.keys(doc)) {
    const extra = doc[key];
    if (!V3_ARRAY_KEYS.has(key) && !(isRecord(extra) && extra["must_understand"] === false)) {
      fail(`has the key "${key}", an extension this reader does not understand`);
    }
  }
  const shape = intList(doc["shape"], false) ?? fail("needs a shape of non-negative integers");
  const dtype = doc["data_type"];
  if (!isZarrDtype(dtype)) {
    fail(`has data_type ${JSON.stringify(dtype)}; supported: ${ZARR_DTYPES.join(", ")}`);
  }
  const dt = dtype as ZarrDtype;
  const grid = doc["chunk_grid"];
  const gridShape = isRecord(grid) && grid["name"] === "regular" && isRecord(grid["configuration"])
    ? intList(grid["configuration"]["chunk_shape"], true)
    : null;
  if (gridShape === null || gridShape.length !== shape.length) {
    fail(`needs a regular chunk_grid with one positive chunk size per axis of shape [${shape}]`);
  }
  const transformers = doc["storage_transformers"];
  if (transformers !== undefined && !(Array.isArray(transformers) && transformers.length === 0)) {
    fail("has storage_transformers, which this reader does not support");
  }
  let codecs = doc["codecs"];
  if (!Array.isArray(codecs) || codecs.length === 0 || !codecs.every(isRecord)) {
    return fail("needs a non-empty list of codecs");
  }
  let chunkShape = gridShape!;
  let shardShape: number[] | null = null;
  const first = codecs[0] as Record<string, unknown>;
  if (first["name"] === "sharding_indexed") {
    const config = first["configuration"];
    const inner = isRecord(config) ? intList(config["chunk_shape"], true) : null;
    if (!isRecord(config) || inner === null || inner.length !== shape.length) {
      return fail("has a sharding_indexed codec without an inner chunk_shape of the array's rank");
    }
    if (inner.some((c, d) => gridShape![d]! % c !== 0)) {
      fail(`has shards [${gridShape}] that are not a whole number of chunks [${inner}]`);
    }
    shardShape = gridShape;
    chunkShape = inner;
    codecs = config["codecs"];
    if (!Array.isArray(codecs) || codecs.length === 0 || !codecs.every(isRecord)) {
      return fail("has a sharding_indexed codec without inner codecs");
    }
  }
  const list = codecs as Record<string, unknown>[];
  const bytes = list.find((c) => c["name"] === "bytes");
  if (bytes === undefined) fail(`has no "bytes" codec; its codecs cannot be written as raw bytes`);
  const config = bytes!["configuration"];
  const endian = isRecord(config) ? config["endian"] : undefined;
  if (endian !== undefined && endian !== "little" && endian !== "big") {
    fail(`has a bytes codec with endian ${JSON.stringify(endian)}`);
  }
  if (endian === undefined && itemSize(dt) > 1) {
    fail(`has a bytes codec without endian, which a ${dt} array needs`);
  }
  const names = list.map((c) => String(c["name"]));
  const plain = shardShape === null && list.length === 1;
  const meta: ZarrArrayMetadata = {
    zarrFormat: 3,
    shape,
    dtype: dt,
    endian: endian === "big" ? "big" : "little",
    chunkShape,
    shardShape,
    chunkKeyEncoding: keyEncodingOf(doc["chunk_key_encoding"], fail),
    fillValue: fillOf(dt, doc["fill_value"], fail),
    encoding: plain
      ? null
      : `codecs ${shardShape === null ? "" : "sharding_indexed of "}${names.join(", ")}`,
    attributes: isRecord(doc["attributes"]) ? doc["attributes"] : {},
  };
  const dims = doc["dimension_names"];
  if (dims === undefined || dims === null) return meta;
  if (
    !Array.isArray(dims) || dims.length !== shape.length ||
    !dims.every((n) => typeof n === "string" || n === null)
  ) {
    fail("has dimension_names that are not one name (or null) per axis");
  }
  return { ...meta, dimensionNames: dims as (string | null)[] };
}

const V2_KINDS: Readonly<Record<string, Readonly<Record<number, ZarrDtype>>>> = {
  b: { 1: "bool" },
  i: { 1: "int8", 2: "int16", 4: "int32", 8: "int64" },
  u: { 1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64" },
  f: { 4: "float32", 8: "float64" },
};

/** Parse a v2 `.zarray` document (with the `.zattrs` attributes); `file` names it in errors. */
export function parseV2ArrayMetadata(
  doc: unknown,
  file: string,
  attributes: Readonly<Record<string, unknown>> = {},
): ZarrArrayMetadata {
  const fail = (why: string): never => {
    throw new ZarrMetadataError(`Zarr array metadata ${file} ${why}`, file);
  };
  if (!isRecord(doc) || doc["zarr_format"] !== 2) return fail("is not a Zarr v2 .zarray document");
  const shape = intList(doc["shape"], false) ?? fail("needs a shape of non-negative integers");
  const chunks = intList(doc["chunks"], true);
  if (chunks === null || chunks.length !== shape.length) {
    fail(`needs chunks with one positive size per axis of shape [${shape}]`);
  }
  const text = doc["dtype"];
  const match = typeof text === "string" ? /^([<>|])([biuf])(\d)$/.exec(text) : null;
  const dtype = match === null ? undefined : V2_KINDS[match[2]!]?.[Number(match[3])];
  if (match === null || dtype === undefined) {
    return fail(
      `has dtype ${
        JSON.stringify(text)
      }; supported: |b1, |i1, |u1, <i2..<i8, <u2..<u8, <f4, <f8 and ">" variants`,
    );
  }
  if (doc["order"] !== "C") {
    fail(`has order ${JSON.stringify(doc["order"])}; only C (row-major) order is supported`);
  }
  const separator = doc["dimension_separator"] ?? ".";
  if (separator !== "." && separator !== "/") {
    fail(`has dimension_separator ${JSON.stringify(separator)}; expected "." or "/"`);
  }
  const compressor = doc["compressor"];
  const filters = doc["filters"];
  const encoders = [
    ...(Array.isArray(filters) ? filters : []),
    ...(compressor === null || compressor === undefined ? [] : [compressor]),
  ].map((c) => (isRecord(c) ? String(c["id"]) : JSON.stringify(c)));
  const fill = doc["fill_value"];
  return {
    zarrFormat: 2,
    shape,
    dtype,
    endian: match[1] === ">" ? "big" : "little",
    chunkShape: chunks!,
    shardShape: null,
    chunkKeyEncoding: { name: "v2", separator: separator as "." | "/" },
    // A null fill value leaves missing chunks undefined; zarr-python reads them as 0.
    fillValue: fill === null ? 0 : fillOf(dtype, fill, fail),
    encoding: encoders.length === 0 ? null : `filters/compressor ${encoders.join(", ")}`,
    attributes,
  };
}

function readJsonFile(file: string): { found: false } | { found: true; doc: unknown } {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    const code = errorCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") return { found: false };
    throw new ZarrMetadataError(`Cannot read ${file}: ${messageOf(error)}`, file);
  }
  try {
    return { found: true, doc: JSON.parse(text) };
  } catch (error) {
    throw new ZarrMetadataError(`${file} is not valid JSON (${messageOf(error)})`, file);
  }
}

/**
 * Read the array at `dir`: `zarr.json` (v3), else `.zarray` and `.zattrs` (v2). Throws
 * ZarrMetadataError naming the file and what is wrong with it.
 */
export function openArrayMetadata(dir: string): ZarrArrayMetadata {
  const v3 = path.join(dir, "zarr.json");
  const doc3 = readJsonFile(v3);
  if (doc3.found) return parseV3ArrayMetadata(doc3.doc, v3);
  const v2 = path.join(dir, ".zarray");
  const doc2 = readJsonFile(v2);
  if (!doc2.found) {
    throw new ZarrMetadataError(
      `${dir} is not a Zarr array: it has neither zarr.json (Zarr v3) nor .zarray (Zarr v2)`,
      dir,
    );
  }
  const attrs = readJsonFile(path.join(dir, ".zattrs"));
  return parseV2ArrayMetadata(doc2.doc, v2, attrs.found && isRecord(attrs.doc) ? attrs.doc : {});
}
