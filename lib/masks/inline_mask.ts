/**
 * Skip masks written inside the pipeline module: a flat or typed array (shape = its length),
 * `{ data, shape }`, or nested arrays of numbers or booleans.
 */

import { InputError } from "../errors.ts";
import {
  INLINE_SOURCE,
  type MaskArray,
  type MaskSource,
  NAN_FIX,
  nonzeroBytes,
  type NumericData,
} from "./mask_values.ts";

/** In-module arrays: flat (shape = its length), `{ data, shape }`, or nested arrays. */
export function loadInlineMask(source: Exclude<MaskSource, string>): MaskArray {
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
