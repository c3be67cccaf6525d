/**
 * Zarr data types as this project reads and writes them: the numeric core types of Zarr v3
 * (and their Zarr v2 `dtype` strings, see `metadata.ts`), the typed array holding each, fill
 * values in JSON and as element bytes.
 */

import { HOST_LITTLE_ENDIAN } from "./endian.ts";

export type ZarrDtype =
  | "bool"
  | "int8"
  | "uint8"
  | "int16"
  | "uint16"
  | "int32"
  | "uint32"
  | "int64"
  | "uint64"
  | "float32"
  | "float64";

/** The typed array holding a dtype's elements (`bool` as one byte, 0 or 1). */
export type ZarrTypedArray =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | BigInt64Array
  | BigUint64Array
  | Float32Array
  | Float64Array;

const ITEM_SIZE: Readonly<Record<ZarrDtype, number>> = {
  bool: 1,
  int8: 1,
  uint8: 1,
  int16: 2,
  uint16: 2,
  int32: 4,
  uint32: 4,
  int64: 8,
  uint64: 8,
  float32: 4,
  float64: 8,
};

/** Every supported dtype, in the order messages list them. */
export const ZARR_DTYPES: readonly ZarrDtype[] = Object.keys(ITEM_SIZE) as ZarrDtype[];

/** Inclusive integer range of each integer dtype, as numbers (64-bit ranges are approximate). */
const INT_RANGE: Readonly<Partial<Record<ZarrDtype, readonly [number, number]>>> = {
  bool: [0, 1],
  int8: [-0x80, 0x7f],
  uint8: [0, 0xff],
  int16: [-0x8000, 0x7fff],
  uint16: [0, 0xffff],
  int32: [-0x8000_0000, 0x7fff_ffff],
  uint32: [0, 0xffff_ffff],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
};

export function isZarrDtype(value: unknown): value is ZarrDtype {
  return typeof value === "string" && Object.hasOwn(ITEM_SIZE, value);
}

export function itemSize(dtype: ZarrDtype): number {
  return ITEM_SIZE[dtype];
}

export function isFloatDtype(dtype: ZarrDtype): boolean {
  return dtype === "float32" || dtype === "float64";
}

export function allocate(dtype: ZarrDtype, length: number): ZarrTypedArray {
  switch (dtype) {
    case "bool":
    case "uint8":
      return new Uint8Array(length);
    case "int8":
      return new Int8Array(length);
    case "uint16":
      return new Uint16Array(length);
    case "int16":
      return new Int16Array(length);
    case "uint32":
      return new Uint32Array(length);
    case "int32":
      return new Int32Array(length);
    case "uint64":
      return new BigUint64Array(length);
    case "int64":
      return new BigInt64Array(length);
    case "float32":
      return new Float32Array(length);
    case "float64":
      return new Float64Array(length);
  }
}

/** Whether `data` is the typed array that holds `dtype`. */
export function holdsDtype(data: ZarrTypedArray, dtype: ZarrDtype): boolean {
  return data.constructor === allocate(dtype, 0).constructor;
}

/** The bytes of a typed array, without copying. */
export function bytesOf(data: ZarrTypedArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** Set every element of `data` to `value` (BigInt arrays get `BigInt(value)`). */
export function fillTyped(data: ZarrTypedArray, value: number): void {
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
    data.fill(BigInt(value));
  } else {
    data.fill(value);
  }
}

/**
 * Null when `value` is a valid fill value of `dtype`, else why not: integers in range for the
 * integer types, any number (NaN and ±Infinity included) for the floats.
 */
export function fillValueProblem(dtype: ZarrDtype, value: number): string | null {
  const range = INT_RANGE[dtype];
  if (range === undefined) return typeof value === "number" ? null : "not a number";
  if (!Number.isInteger(value) || value < range[0] || value > range[1]) {
    return `not a ${dtype} (an integer from ${range[0]} to ${range[1]})`;
  }
  return null;
}

/** A fill value as Zarr v3 JSON: NaN and ±Infinity as strings, `bool` as true/false. */
export function fillValueToJson(dtype: ZarrDtype, value: number): number | string | boolean {
  if (dtype === "bool") return value !== 0;
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "Infinity";
  if (value === -Infinity) return "-Infinity";
  return value;
}

/**
 * A fill value from Zarr JSON (v2 or v3): a number, true/false, "NaN", "Infinity", "-Infinity",
 * or a float's bit pattern as "0x..." hex. Null when it is none of these.
 */
export function fillValueFromJson(dtype: ZarrDtype, value: unknown): number | null {
  if (typeof value === "number") return value;
  if (typeof value === "boolean") return value ? 1 : 0;
  if (value === "NaN") return NaN;
  if (value === "Infinity") return Infinity;
  if (value === "-Infinity") return -Infinity;
  if (typeof value === "string" && /^0x[0-9a-f]+$/i.test(value) && isFloatDtype(dtype)) {
    const bits = BigInt(value);
    const view = new DataView(new ArrayBuffer(8));
    if (dtype === "float32") {
      view.setUint32(0, Number(bits & 0xffff_ffffn));
      return view.getFloat32(0);
    }
    view.setBigUint64(0, bits & 0xffff_ffff_ffff_ffffn);
    return view.getFloat64(0);
  }
  return null;
}

/** One element holding `value`, as bytes in `order` (default little-endian). */
export function elementBytes(
  dtype: ZarrDtype,
  value: number,
  order: "little" | "big" = "little",
): Uint8Array {
  const bytes = new Uint8Array(itemSize(dtype));
  const view = new DataView(bytes.buffer);
  const little = order === "little";
  switch (dtype) {
    case "bool":
    case "uint8":
      view.setUint8(0, value);
      break;
    case "int8":
      view.setInt8(0, value);
      break;
    case "uint16":
      view.setUint16(0, value, little);
      break;
    case "int16":
      view.setInt16(0, value, little);
      break;
    case "uint32":
      view.setUint32(0, value, little);
      break;
    case "int32":
      view.setInt32(0, value, little);
      break;
    case "uint64":
      view.setBigUint64(0, BigInt(value), little);
      break;
    case "int64":
      view.setBigInt64(0, BigInt(value), little);
      break;
    case "float32":
      view.setFloat32(0, value, little);
      break;
    case "float64":
      view.setFloat64(0, value, little);
      break;
  }
  return bytes;
}

/** `elementBytes` in this host's byte order, for filling typed-array memory directly. */
export function hostElementBytes(dtype: ZarrDtype, value: number): Uint8Array {
  return elementBytes(dtype, value, HOST_LITTLE_ENDIAN ? "little" : "big");
}

/** Fill `target` with a repeated element pattern by doubling (a few copies, not one per cell). */
export function fillWithPattern(target: Uint8Array, pattern: Uint8Array): void {
  if (target.length === 0) return;
  if (pattern.every((b) => b === pattern[0])) {
    target.fill(pattern[0]!);
    return;
  }
  target.set(pattern.subarray(0, Math.min(pattern.length, target.length)), 0);
  for (let filled = pattern.length; filled < target.length; filled *= 2) {
    target.copyWithin(filled, 0, Math.min(filled, target.length - filled));
  }
}
