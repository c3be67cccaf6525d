/**
 * NumPy `.npy` files, read and written without a library (format 1.0, 2.0 and 3.0 headers;
 * https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
 *
 * A file is the magic `\x93NUMPY`, a major and minor version byte, a little-endian header length
 * (2 bytes in 1.0, 4 bytes in 2.0 and 3.0), a Python dict literal such as
 * `{'descr': '<u2', 'fortran_order': False, 'shape': (64, 96), }` padded with spaces and a
 * newline so that the data starts on a 64-byte boundary, then the raw elements. Only C-order
 * arrays of plain numeric and boolean dtypes are supported; both byte orders are read and the
 * data is returned in the host's order.
 */

import { readFile } from "node:fs/promises";
import { errorCode, InputError, isRecord, messageOf } from "../errors.ts";
import { HOST_LITTLE_ENDIAN, swapBytes, writeFileAtomic } from "../zarr/mod.ts";

export type NpyDtype =
  | "bool"
  | "uint8"
  | "int8"
  | "uint16"
  | "int16"
  | "uint32"
  | "int32"
  | "uint64"
  | "int64"
  | "float32"
  | "float64";

export type NpyData =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | BigUint64Array
  | BigInt64Array
  | Float32Array
  | Float64Array;

export interface NpyArray {
  /** The element type; `bool` data is a `Uint8Array` of 0 and 1. */
  readonly dtype: NpyDtype;
  readonly shape: readonly number[];
  /** The elements in C order, in the host's byte order. */
  readonly data: NpyData;
}

export interface NpyWriteOptions {
  /** Byte order of multi-byte elements in the file; default little endian. */
  readonly endian?: "<" | ">";
  /** Header version; default 1.0, or 2.0 when the header does not fit 1.0's 65535 bytes. */
  readonly version?: 1 | 2 | 3;
}

/** The `.npy` type codes (without the byte-order character) of each dtype. */
const CODES: Readonly<Record<NpyDtype, string>> = {
  bool: "b1",
  uint8: "u1",
  int8: "i1",
  uint16: "u2",
  int16: "i2",
  uint32: "u4",
  int32: "i4",
  uint64: "u8",
  int64: "i8",
  float32: "f4",
  float64: "f8",
};

const DTYPE_OF_CODE: ReadonlyMap<string, NpyDtype> = new Map(
  Object.entries(CODES).map(([dtype, code]) => [code, dtype as NpyDtype]),
);

export const NPY_DTYPES: readonly NpyDtype[] = Object.keys(CODES) as NpyDtype[];

/** The `descr` strings accepted, e.g. `|b1`, `<u2`, `>f8`. */
export const SUPPORTED_NPY_DESCRS: readonly string[] = NPY_DTYPES.map((d) => {
  const code = CODES[d];
  return itemSizeOf(d) === 1 ? `|${code}` : `<${code}`;
});

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
export function itemSizeOf(dtype: NpyDtype): number {
  return Number(CODES[dtype].slice(1));
}

/** An empty typed array of `dtype` with `length` elements. */
export function allocateNpyData(dtype: NpyDtype, length: number): NpyData {
  return new (constructorOf(dtype))(length);
}

/** Reads a `.npy` file; every problem is an `InputError` naming the file. */
export async function readNpyFile(path: string): Promise<NpyArray> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (error) {
    const code = errorCode(error);
    throw new InputError(
      code === "ENOENT"
        ? `Cannot read mask "${path}": the file does not exist. Check the path.`
        : `Cannot read mask "${path}": ${messageOf(error)}`,
    );
  }
  return parseNpy(bytes, path);
}

/** Writes `array` as a `.npy` file, atomically and durably (lib/zarr's `writeFileAtomic`). */
export function writeNpyFile(path: string, array: NpyArray, options: NpyWriteOptions = {}): void {
  writeFileAtomic(path, encodeNpy(array, options));
}

/** Decodes the bytes of a `.npy` file; `source` names it in error messages. */
export function parseNpy(bytes: Uint8Array, source = "<npy bytes>"): NpyArray {
  const where = `Cannot read NumPy file "${source}"`;
  if (bytes.length < 10 || MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new InputError(
      `${where}: it does not start with the .npy magic "\\x93NUMPY". Save the mask with numpy.save(path, array).`,
    );
  }
  const major = bytes[6]!;
  const minor = bytes[7]!;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let headerStart: number;
  let headerLength: number;
  if (major === 1) {
    headerLength = view.getUint16(8, true);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    if (bytes.length < 12) throw new InputError(`${where}: the header is truncated.`);
    headerLength = view.getUint32(8, true);
    headerStart = 12;
  } else {
    throw new InputError(
      `${where}: format version ${major}.${minor} is not supported (1.0, 2.0 and 3.0 are).`,
    );
  }
  const dataStart = headerStart + headerLength;
  if (dataStart > bytes.length) throw new InputError(`${where}: the header is truncated.`);
  const headerBytes = bytes.subarray(headerStart, dataStart);
  // 1.0 and 2.0 headers are latin-1, 3.0 headers UTF-8; numpy writes ASCII in every case.
  const headerText = new TextDecoder("utf-8").decode(headerBytes);

  let header: unknown;
  try {
    header = parsePythonLiteral(headerText);
  } catch (error) {
    throw new InputError(
      `${where}: its header ${JSON.stringify(headerText.trim())} cannot be parsed (${
        error instanceof Error ? error.message : String(error)
      }).`,
    );
  }
  if (!isRecord(header)) throw new InputError(`${where}: its header is not a dict.`);
  const descr = header["descr"];
  const fortranOrder = header["fortran_order"];
  const shape = header["shape"];
  if (
    !Array.isArray(shape) || !shape.every((s) => typeof s === "number" && Number.isSafeInteger(s))
  ) {
    throw new InputError(`${where}: its header has no valid "shape" (${headerText.trim()}).`);
  }
  if (fortranOrder === true) {
    throw new InputError(
      `${where}: the array is stored in Fortran order. Save it in C order instead: ` +
        `numpy.save(path, numpy.ascontiguousarray(array)).`,
    );
  }
  if (fortranOrder !== false) {
    throw new InputError(`${where}: its header has no valid "fortran_order".`);
  }
  const { dtype, littleEndian } = dtypeOfDescr(descr, where);
  const dims = shape as number[];
  const length = dims.reduce((a, b) => a * b, 1);
  const itemSize = itemSizeOf(dtype);
  const byteLength = length * itemSize;
  if (bytes.length - dataStart < byteLength) {
    throw new InputError(
      `${where}: shape (${
        dims.join(", ")
      }) of ${descr} needs ${byteLength} data bytes but the file has ${
        bytes.length - dataStart
      }. The file is truncated.`,
    );
  }
  const raw = bytes.subarray(dataStart, dataStart + byteLength);
  return { dtype, shape: dims, data: decodeElements(raw, dtype, littleEndian) };
}

/** Encodes `array` as the bytes of a `.npy` file. */
export function encodeNpy(array: NpyArray, options: NpyWriteOptions = {}): Uint8Array {
  const { dtype, shape, data } = array;
  const length = shape.reduce((a, b) => a * b, 1);
  if (data.length !== length) {
    throw new RangeError(
      `Cannot encode .npy: shape (${
        shape.join(", ")
      }) has ${length} elements, data has ${data.length}`,
    );
  }
  const expected = constructorOf(dtype);
  if (!(data instanceof expected)) {
    throw new TypeError(
      `Cannot encode .npy: dtype "${dtype}" needs a ${expected.name}, got a ${data.constructor.name}`,
    );
  }
  const itemSize = itemSizeOf(dtype);
  const endian = itemSize === 1 ? "|" : options.endian ?? "<";
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`;
  const dict = `{'descr': '${endian}${
    CODES[dtype]
  }', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const dictBytes = new TextEncoder().encode(dict);
  let version = options.version ?? 1;
  if (version === 1 && dictBytes.length + 1 + 10 > 0xffff) version = 2;
  const prefix = version === 1 ? 10 : 12;
  const padding = (64 - ((prefix + dictBytes.length + 1) % 64)) % 64;
  const headerLength = dictBytes.length + padding + 1;
  const out = new Uint8Array(prefix + headerLength + data.byteLength);
  out.set(MAGIC, 0);
  out[6] = version;
  out[7] = 0;
  const view = new DataView(out.buffer);
  if (version === 1) view.setUint16(8, headerLength, true);
  else view.setUint32(8, headerLength, true);
  out.set(dictBytes, prefix);
  out.fill(0x20, prefix + dictBytes.length, prefix + headerLength - 1);
  out[prefix + headerLength - 1] = 0x0a;
  const body = out.subarray(prefix + headerLength);
  body.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  if (itemSize > 1 && (endian === "<") !== HOST_LITTLE_ENDIAN) swapBytes(body, itemSize);
  return out;
}

function dtypeOfDescr(descr: unknown, where: string): { dtype: NpyDtype; littleEndian: boolean } {
  const supported = `Supported dtypes: ${
    SUPPORTED_NPY_DESCRS.join(", ")
  } (and big-endian ">" variants)`;
  if (typeof descr !== "string") {
    throw new InputError(
      `${where}: dtype ${
        Array.isArray(descr) ? "is structured (a record type)" : "is missing or malformed"
      }, which cannot be a mask. ${supported}.`,
    );
  }
  const match = /^([<>|=]?)([a-zA-Z]\d+)$/.exec(descr);
  const dtype = match === null ? undefined : DTYPE_OF_CODE.get(match[2]!);
  if (match === null || dtype === undefined) {
    throw new InputError(`${where}: dtype "${descr}" cannot be a mask. ${supported}.`);
  }
  const order = match[1]!;
  const littleEndian = order === ">" ? false : order === "<" ? true : HOST_LITTLE_ENDIAN;
  return { dtype, littleEndian };
}

function decodeElements(raw: Uint8Array, dtype: NpyDtype, littleEndian: boolean): NpyData {
  const itemSize = itemSizeOf(dtype);
  const Ctor = constructorOf(dtype);
  const length = raw.byteLength / itemSize;
  const swap = itemSize > 1 && littleEndian !== HOST_LITTLE_ENDIAN;
  if (!swap && raw.byteOffset % itemSize === 0) {
    return new Ctor(raw.buffer as ArrayBuffer, raw.byteOffset, length);
  }
  // A copy (not `slice`, which is a view for a Node Buffer), aligned at offset 0.
  const copy = new Uint8Array(raw);
  if (swap) swapBytes(copy, itemSize);
  return new Ctor(copy.buffer, 0, length);
}

type NpyConstructor = {
  new (length: number): NpyData;
  new (buffer: ArrayBuffer, byteOffset: number, length: number): NpyData;
  readonly name: string;
};

function constructorOf(dtype: NpyDtype): NpyConstructor {
  switch (dtype) {
    case "bool":
    case "uint8":
      return Uint8Array;
    case "int8":
      return Int8Array;
    case "uint16":
      return Uint16Array;
    case "int16":
      return Int16Array;
    case "uint32":
      return Uint32Array;
    case "int32":
      return Int32Array;
    case "uint64":
      return BigUint64Array;
    case "int64":
      return BigInt64Array;
    case "float32":
      return Float32Array;
    case "float64":
      return Float64Array;
  }
}

type PyValue = string | number | boolean | null | PyValue[] | { [key: string]: PyValue };

/**
 * Parses the subset of Python literals `.npy` headers use: dicts, tuples, lists, quoted strings,
 * integers, True/False/None. Tuples become arrays.
 */
export function parsePythonLiteral(text: string): PyValue {
  let i = 0;
  const skip = () => {
    while (i < text.length && /\s/.test(text[i]!)) i++;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at character ${i}`);
  };
  const value = (): PyValue => {
    skip();
    const c = text[i];
    if (c === undefined) return fail("unexpected end");
    if (c === "{") {
      i++;
      const out: Record<string, PyValue> = {};
      while (true) {
        skip();
        if (text[i] === "}") {
          i++;
          return out;
        }
        const key = value();
        if (typeof key !== "string") fail("dict key is not a string");
        skip();
        if (text[i] !== ":") fail('expected ":"');
        i++;
        out[key as string] = value();
        skip();
        if (text[i] === ",") i++;
        else if (text[i] !== "}") fail('expected "," or "}"');
      }
    }
    if (c === "(" || c === "[") {
      const close = c === "(" ? ")" : "]";
      i++;
      const out: PyValue[] = [];
      while (true) {
        skip();
        if (text[i] === close) {
          i++;
          return out;
        }
        out.push(value());
        skip();
        if (text[i] === ",") i++;
        else if (text[i] !== close) fail(`expected "," or "${close}"`);
      }
    }
    if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      if (end < 0) fail("unterminated string");
      const s = text.slice(i + 1, end);
      i = end + 1;
      return s;
    }
    const word = /^[A-Za-z_]\w*|^[-+]?\d+L?/.exec(text.slice(i));
    if (word === null) return fail(`unexpected ${JSON.stringify(c)}`);
    i += word[0].length;
    switch (word[0]) {
      case "True":
        return true;
      case "False":
        return false;
      case "None":
        return null;
    }
    if (/^[-+]?\d/.test(word[0])) return Number(word[0].replace(/L$/, ""));
    return fail(`unknown name ${JSON.stringify(word[0])}`);
  };
  const result = value();
  skip();
  if (i !== text.length) fail("trailing text");
  return result;
}
