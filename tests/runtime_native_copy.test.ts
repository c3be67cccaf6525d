/**
 * The block copy through memcpy (lib/runtime/native_copy.ts): under Bun it is compiled and
 * used by copyStrided for boxes big enough, bit for bit (NaN payloads included) in every rank
 * and element size, outer axes included; a box reaching past its view falls
 * back to JavaScript's copy instead of reading foreign memory; under Deno, and with
 * BLOCKWISE_NATIVE_COPY=off, JavaScript's copy runs; a setting that is neither on nor off, or
 * `on` where there is no compiler, is an error naming it and the fix.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InputError } from "../lib/errors.ts";
import { runtimeName } from "../lib/runtime/detect.ts";
import {
  loadNativeCopy,
  NATIVE_COPY_ENV,
  nativeBoxCopy,
  registerNativeCopy,
} from "../lib/runtime/native_copy.ts";
import { copyStrided } from "../lib/helpers/strided_copy.ts";

type Make =
  | Float32ArrayConstructor
  | Float64ArrayConstructor
  | Int16ArrayConstructor
  | Uint8ArrayConstructor;

/** The box's bytes in C order, read one element at a time: what every copy must produce. */
function expectedBytes(
  bits: Uint8Array,
  elementBytes: number,
  first: number,
  shape: readonly number[],
  stride: readonly number[],
): Uint8Array {
  const count = shape.reduce((a, b) => a * b, 1);
  const out = new Uint8Array(count * elementBytes);
  const index = new Array<number>(shape.length).fill(0);
  for (let at = 0; at < count; at++) {
    const from = first + index.reduce((sum, i, axis) => sum + i * stride[axis]!, 0);
    out.set(bits.subarray(from * elementBytes, (from + 1) * elementBytes), at * elementBytes);
    for (let axis = shape.length - 1; axis >= 0; axis--) {
      if (++index[axis]! < shape[axis]!) break;
      index[axis] = 0;
    }
  }
  return out;
}

/** A volume of `length` elements whose bytes all differ from their neighbours, NaNs first. */
function patterned(make: Make, length: number) {
  const volume = new make(length);
  const bits = new Uint8Array(volume.buffer);
  for (let i = 0; i < bits.length; i++) bits[i] = (i * 73 + 11) & 255;
  const words = new Uint32Array(volume.buffer, 0, Math.floor(bits.length / 4));
  const nans = [0x7fc00001, 0xffc12345, 0x7f800001, 0x7ff00001];
  for (let i = 0; i < Math.min(256, words.length); i++) words[i] = nans[i % 4]!;
  return { volume, bits };
}

describe("the native block copy", () => {
  it("is compiled under Bun and left to JavaScript under Deno", async () => {
    const status = await registerNativeCopy();
    if (runtimeName() === "bun") {
      assert.equal(status.description, "memcpy (Bun's cc)", status.reason);
      assert.notEqual(nativeBoxCopy(), null);
    } else {
      assert.equal(status.description, "JavaScript");
      assert.match(status.reason, /no built-in C compiler in deno/);
      assert.equal(nativeBoxCopy(), null);
    }
  });

  for (
    const [name, make] of [
      ["float32", Float32Array],
      ["float64", Float64Array],
      ["int16", Int16Array],
      ["uint8", Uint8Array],
    ] as const
  ) {
    it(`copies big ${name} boxes bit for bit in every rank`, async () => {
      await registerNativeCopy();
      const cases: {
        shape: number[];
        stride: number[];
        first: number;
        length: number;
      }[] = [
        // A 3-D block out of a bigger volume, as writeBlock copies it.
        {
          shape: [20, 24, 40],
          stride: [64 * 48, 64, 1],
          first: 3 * 64 * 48 + 5 * 64 + 7,
          length: 64 * 48 * 32,
        },
        // 4-D: an outer axis looped around the native call.
        {
          shape: [3, 6, 10, 50],
          stride: [8 * 16 * 64, 16 * 64, 64, 1],
          first: 70,
          length: 4 * 8 * 16 * 64,
        },
        // 2-D and 1-D.
        { shape: [100, 90], stride: [128, 1], first: 11, length: 128 * 104 },
        { shape: [6000], stride: [1], first: 9, length: 6100 },
      ];
      for (const { shape, stride, first, length } of cases) {
        const { volume, bits } = patterned(make, length);
        const count = shape.reduce((a, b) => a * b, 1);
        const out = new make(count);
        copyStrided({ data: volume.subarray(first), shape, stride }, out);
        assert.deepEqual(
          new Uint8Array(out.buffer),
          expectedBytes(bits, make.BYTES_PER_ELEMENT, first, shape, stride),
          `${name} box [${shape}] strides [${stride}] from ${first}`,
        );
      }
    });
  }

  it("leaves a box that reaches past its view to JavaScript's copy (zeros, no foreign bytes)", async () => {
    await registerNativeCopy();
    const volume = new Float32Array(64 * 64);
    volume.fill(1);
    const view = volume.subarray(0, 64 * 40); // the box below needs 64 rows of 64
    const out = new Float32Array(64 * 64).fill(7);
    copyStrided({ data: view, shape: [64, 64], stride: [64, 1] }, out);
    assert.deepEqual(Array.from(out.subarray(0, 64 * 40)), new Array(64 * 40).fill(1));
    assert.deepEqual(Array.from(out.subarray(64 * 40)), new Array(64 * 24).fill(0));
  });

  it(`keeps JavaScript's copy with ${NATIVE_COPY_ENV}=off`, async () => {
    const status = await loadNativeCopy({ [NATIVE_COPY_ENV]: "off" });
    assert.equal(status.impl, null);
    assert.equal(status.reason, `${NATIVE_COPY_ENV}=off`);
  });

  it("refuses a setting that is neither on nor off, naming it and the fix", async () => {
    await assert.rejects(
      loadNativeCopy({ [NATIVE_COPY_ENV]: "fast" }),
      (error: unknown) =>
        error instanceof InputError &&
        error.message.includes(`${NATIVE_COPY_ENV}: "fast" is neither "on" nor "off"`) &&
        error.message.includes('Fix: set it to "off"'),
    );
  });

  it("makes `on` an error where the copy cannot be compiled, and honours it where it can", async () => {
    const asked = loadNativeCopy({ [NATIVE_COPY_ENV]: "on" });
    if (runtimeName() === "bun") {
      assert.notEqual((await asked).impl, null);
    } else {
      await assert.rejects(
        asked,
        (error: unknown) =>
          error instanceof InputError &&
          /BLOCKWISE_NATIVE_COPY=on: the native block copy cannot be used: no built-in C compiler in deno/
            .test(error.message) &&
          error.message.includes("Fix: run under Bun"),
      );
    }
  });
});
