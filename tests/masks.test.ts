import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type Fit, TaskLayout } from "../lib/blocks/mod.ts";
import { InputError } from "../lib/errors.ts";
import {
  allocateNpyData,
  encodeNpy,
  INLINE_SOURCE,
  loadMaskArray,
  loadSkipMask,
  NPY_DTYPES,
  type NpyArray,
  type NpyDtype,
  parseNpy,
  prepareSkipMask,
  readNpyFile,
  writeNpyFile,
} from "../lib/masks/mod.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const FIXTURES = join(REPO, "tests", "fixtures", "masks");

const root = mkdtempSync(join(tmpdir(), "blockwise-masks-"));
after(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
function fresh(name: string): string {
  const dir = join(root, `t${counter++}`);
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}

function layout1d(total: number, write: number, fit: Fit, context = 0): TaskLayout {
  return new TaskLayout({
    totalRoi: { offset: [0], shape: [total] },
    readRoi: { offset: [-context], shape: [write + 2 * context] },
    writeRoi: { offset: [0], shape: [write] },
    fit,
    readWriteConflict: true,
  });
}

function layout3d(total: number[], write: number[], context: number[] = [0, 0, 0]): TaskLayout {
  return new TaskLayout({
    totalRoi: { offset: [0, 0, 0], shape: total },
    readRoi: {
      offset: context.map((c) => -c),
      shape: write.map((w, d) => w + 2 * context[d]!),
    },
    writeRoi: { offset: [0, 0, 0], shape: write },
    fit: "valid",
    readWriteConflict: true,
  });
}

/** Values that exercise each dtype's range, including its extremes. */
function sampleValues(dtype: NpyDtype): (number | bigint)[] {
  switch (dtype) {
    case "bool":
      return [0, 1, 1, 0, 1, 0];
    case "uint8":
      return [0, 1, 127, 128, 255, 7];
    case "int8":
      return [0, -1, 127, -128, 5, -7];
    case "uint16":
      return [0, 1, 0x1234, 0x8000, 0xffff, 300];
    case "int16":
      return [0, -1, 0x1234, -0x8000, 0x7fff, -300];
    case "uint32":
      return [0, 1, 0x12345678, 0x80000000, 0xffffffff, 70000];
    case "int32":
      return [0, -1, 0x12345678, -0x80000000, 0x7fffffff, -70000];
    case "uint64":
      return [0n, 1n, 0x123456789abcdef0n, 2n ** 63n, 2n ** 64n - 1n, 5n];
    case "int64":
      return [0n, -1n, 0x123456789abcdef0n, -(2n ** 63n), 2n ** 63n - 1n, -5n];
    case "float32":
      return [0, -0.5, 1.5, 3.4e38, -1e-30, Infinity];
    case "float64":
      return [0, -0.5, 1e300, -1e-300, Math.PI, -Infinity];
  }
}

function arrayOf(dtype: NpyDtype, shape: number[]): NpyArray {
  const values = sampleValues(dtype);
  const data = allocateNpyData(dtype, values.length);
  for (let i = 0; i < values.length; i++) {
    (data as unknown as (number | bigint)[])[i] = dtype === "float32"
      ? Math.fround(values[i] as number)
      : values[i]!;
  }
  return { dtype, shape, data };
}

function npyWithHeader(header: string, dataBytes: number): Uint8Array {
  const dict = new TextEncoder().encode(header);
  const pad = (64 - ((10 + dict.length + 1) % 64)) % 64;
  const length = dict.length + pad + 1;
  const out = new Uint8Array(10 + length + dataBytes);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0], 0);
  new DataView(out.buffer).setUint16(8, length, true);
  out.set(dict, 10);
  out.fill(0x20, 10 + dict.length, 10 + length - 1);
  out[10 + length - 1] = 0x0a;
  return out;
}

async function rejectsInput(
  promise: Promise<unknown> | (() => unknown),
  parts: readonly (string | RegExp)[],
): Promise<void> {
  let error: unknown = null;
  try {
    if (typeof promise === "function") await promise();
    else await promise;
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof InputError, `expected an InputError, got ${String(error)}`);
  for (const part of parts) {
    if (typeof part === "string") {
      assert.ok(error.message.includes(part), `"${error.message}" lacks "${part}"`);
    } else assert.match(error.message, part);
  }
}

describe("npy files", () => {
  for (const dtype of NPY_DTYPES) {
    for (const endian of ["<", ">"] as const) {
      for (const version of [1, 2, 3] as const) {
        test(`${dtype} ${endian} v${version}.0 round trip`, () => {
          const array = arrayOf(dtype, [2, 3]);
          const bytes = encodeNpy(array, { endian, version });
          assert.equal(bytes[6], version);
          const headerEnd = version === 1 ? 10 : 12;
          const headerLength = version === 1
            ? new DataView(bytes.buffer).getUint16(8, true)
            : new DataView(bytes.buffer).getUint32(8, true);
          assert.equal((headerEnd + headerLength) % 64, 0, "data starts on a 64-byte boundary");
          const header = new TextDecoder().decode(
            bytes.subarray(headerEnd, headerEnd + headerLength),
          );
          const code = dtype === "bool" ? "b1" : header.match(/'descr': '.(..)'/)![1]!;
          const order = dtype === "bool" || dtype.endsWith("int8") ? "|" : endian;
          assert.ok(header.includes(`'descr': '${order}${code}'`), header);
          const back = parseNpy(bytes);
          assert.equal(back.dtype, dtype);
          assert.deepEqual(back.shape, [2, 3]);
          assert.deepEqual(
            Array.from(back.data as ArrayLike<unknown>),
            Array.from(array.data as ArrayLike<unknown>),
          );
        });
      }
    }
  }

  test("big-endian data is stored big-endian", () => {
    const bytes = encodeNpy({ dtype: "uint16", shape: [1], data: new Uint16Array([0x0102]) }, {
      endian: ">",
    });
    assert.deepEqual(Array.from(bytes.subarray(bytes.length - 2)), [1, 2]);
  });

  test("reads the numpy-written fixture header", async () => {
    const npy = await readNpyFile(join(FIXTURES, "tissue.npy"));
    assert.equal(npy.dtype, "uint8");
    assert.deepEqual(npy.shape, [64, 96, 128]);
    assert.equal(npy.data.length, 64 * 96 * 128);
  });

  test("a 1-d shape is written as a one-element tuple and files round trip on disk", async () => {
    const path = fresh("a.npy");
    writeNpyFile(path, { dtype: "int32", shape: [3], data: new Int32Array([1, -2, 3]) });
    const back = await readNpyFile(path);
    assert.deepEqual(back.shape, [3]);
    assert.deepEqual(Array.from(back.data as Int32Array), [1, -2, 3]);
  });

  test("fortran order is refused with the fix", async () => {
    const bytes = npyWithHeader(
      "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }",
      6,
    );
    await rejectsInput(() => parseNpy(bytes, "f.npy"), [
      '"f.npy"',
      "Fortran order",
      "numpy.ascontiguousarray",
    ]);
  });

  test("unsupported dtypes are refused, naming the dtype and the supported ones", async () => {
    for (const descr of ["<c8", "<U5", "|S3", "|O", "<M8[ns]", "<f2"]) {
      const bytes = npyWithHeader(
        `{'descr': '${descr}', 'fortran_order': False, 'shape': (1,), }`,
        16,
      );
      await rejectsInput(() => parseNpy(bytes), [`"${descr}"`, "|b1", "<f8", "<i8"]);
    }
    const structured = npyWithHeader(
      "{'descr': [('a', '<u1'), ('b', '<f4')], 'fortran_order': False, 'shape': (1,), }",
      5,
    );
    await rejectsInput(() => parseNpy(structured), ["structured", "|u1"]);
  });

  test("truncated and foreign files are refused", async () => {
    await rejectsInput(() => parseNpy(new Uint8Array([1, 2, 3]), "x.npy"), ["magic"]);
    const bytes = npyWithHeader("{'descr': '<u2', 'fortran_order': False, 'shape': (4,), }", 3);
    await rejectsInput(() => parseNpy(bytes), ["truncated", "8 data bytes"]);
  });
});

describe("block grid shape per fit mode", () => {
  test("valid drops a partial trailing block, overhang and shrink keep it", () => {
    assert.deepEqual(layout1d(100, 30, "valid").gridShape, [3]);
    assert.deepEqual(layout1d(100, 30, "overhang").gridShape, [4]);
    assert.deepEqual(layout1d(100, 30, "shrink").gridShape, [4]);
    const mask3 = { data: new Uint8Array([0, 1, 0]), shape: [3], source: "m3.npy" };
    const mask4 = { data: new Uint8Array([0, 1, 0, 1]), shape: [4], source: "m4.npy" };
    assert.equal(prepareSkipMask(layout1d(100, 30, "valid"), mask3, "t").skipCount, 1);
    for (const fit of ["overhang", "shrink"] as const) {
      const mask = prepareSkipMask(layout1d(100, 30, fit), mask4, "t");
      assert.equal(mask.skipCount, 2);
      assert.equal(mask.isMasked(3), true);
      assert.throws(
        () => prepareSkipMask(layout1d(100, 30, fit), mask3, "t"),
        (e: Error) =>
          e instanceof InputError &&
          e.message.includes(`has shape (3,) but the task's block grid is (4,)`) &&
          e.message.includes(`fit "${fit}"`),
      );
    }
    assert.throws(
      () => prepareSkipMask(layout1d(100, 30, "valid"), mask4, "t"),
      /has shape \(4,\) but the task's block grid is \(3,\) \(blocks per axis for fit "valid"\)/,
    );
  });
});

describe("cell anchor", () => {
  test("under a context at least one block wide the first block is cell (0, 0, 0), not its tracking cell", () => {
    // 160³ total, 16³ write blocks, 16 voxels of context: the total write ROI starts at 16.
    const layout = layout3d([160, 160, 160], [16, 16, 16], [16, 16, 16]);
    assert.deepEqual(layout.gridShape, [8, 8, 8]);
    assert.deepEqual(layout.totalWriteRoi.offset, [16, 16, 16]);
    const first = layout.writeRoiOf(0);
    assert.deepEqual(first.offset, [16, 16, 16]);
    // The seed's cell rule: (write.offset - total_write_roi.offset) // write.shape.
    const cell = first.offset.map((o, d) => (o - layout.totalWriteRoi.offset[d]!) / 16);
    assert.deepEqual(cell, [0, 0, 0]);
    // The tracking grid is anchored at totalRoi: the same block is tracking cell (1, 1, 1).
    const trackingCell = layout.trackingCellOf(0);
    assert.equal(trackingCell, 1 * 100 + 1 * 10 + 1);
    assert.notEqual(trackingCell, 0);

    const data = new Uint8Array(512);
    data[0] = 1; // cell (0, 0, 0)
    const mask = prepareSkipMask(layout, { data, shape: [8, 8, 8], source: "m.npy" }, "extract");
    assert.equal(mask.isMasked(0), true);
    assert.equal(mask.skipCount, 1);
    for (let p = 1; p < layout.blockCount; p++) assert.equal(mask.isMasked(p), false);
    // A mask shaped like the tracking grid is refused, and the message says why.
    assert.throws(
      () =>
        prepareSkipMask(layout, {
          data: new Uint8Array(1000),
          shape: [10, 10, 10],
          source: "t.npy",
        }, "extract"),
      /has shape \(10, 10, 10\) but the task's block grid is \(8, 8, 8\).*tracking grid/,
    );
  });

  test("every position's cell is its C-order grid coordinate from the total write ROI", () => {
    const layout = layout3d([100, 70, 90], [20, 10, 30], [25, 5, 0]);
    const [g0, g1, g2] = layout.gridShape as [number, number, number];
    for (let p = 0; p < layout.blockCount; p++) {
      const w = layout.writeRoiOf(p);
      const c = w.offset.map((o, d) =>
        (o - layout.totalWriteRoi.offset[d]!) / layout.writeRoi.shape[d]!
      );
      assert.equal(c[0]! * g1 * g2 + c[1]! * g2 + c[2]!, p);
      assert.ok(c[0]! < g0);
    }
  });
});

describe("wrong shapes", () => {
  test("the message names both shapes, the fit and the fix", async () => {
    const layout = layout3d([512, 768, 1024], [64, 64, 64]);
    await rejectsInput(
      () =>
        prepareSkipMask(layout, {
          data: new Uint8Array(8 * 12 * 15),
          shape: [8, 12, 15],
          source: "/data/mask.npy",
        }, "extract"),
      [
        `Task "extract": skip mask "/data/mask.npy" has shape (8, 12, 15) but the task's block grid is (8, 12, 16) (blocks per axis for fit "valid"); regenerate it with blockwise mask import`,
      ],
    );
    await rejectsInput(
      () => prepareSkipMask(layout, { data: new Uint8Array(96), shape: [8, 12], source: "x" }, "e"),
      ["(8, 12)", "(8, 12, 16)"],
    );
  });

  test("loadSkipMask prefixes loading errors with the task", async () => {
    const layout = layout1d(10, 5, "valid");
    await rejectsInput(loadSkipMask(layout, "missing.npy", "extract", root), [
      'Task "extract"',
      "does not exist",
      join(root, "missing.npy"),
    ]);
  });
});

describe("dtype handling", () => {
  const values = [0, 2, 0, -1, 0.5, 0];
  const expected = [0, 1, 0, 1, 1, 0];

  test("npy masks of every dtype: nonzero is 1", async () => {
    for (const dtype of NPY_DTYPES) {
      const data = allocateNpyData(dtype, 6);
      for (let i = 0; i < 6; i++) {
        const v = values[i]!;
        const stored = dtype === "bool"
          ? (v !== 0 ? 1 : 0)
          : dtype.startsWith("uint")
          ? Math.abs(Math.ceil(v))
          : dtype.startsWith("int")
          ? Math.ceil(v) || (v !== 0 ? 1 : 0)
          : v;
        (data as unknown as (number | bigint)[])[i] = dtype.endsWith("64") && dtype !== "float64"
          ? BigInt(stored)
          : stored;
      }
      const path = fresh(`${dtype}.npy`);
      writeFileSync(path, encodeNpy({ dtype, shape: [2, 3], data }, { endian: ">" }));
      const mask = await loadMaskArray(path, "/");
      assert.equal(mask.dtype, dtype);
      assert.deepEqual(mask.shape, [2, 3]);
      assert.deepEqual(Array.from(mask.data), expected, dtype);
      assert.equal(mask.kind, "npy");
    }
  });

  test("in-module typed arrays and booleans", async () => {
    const cases: [ArrayLike<number> | ArrayLike<boolean>, string][] = [
      [new Uint8Array([0, 5, 0, 1, 9, 0]), "uint8"],
      [new Int16Array([0, 5, 0, -1, 9, 0]), "int16"],
      [new Float32Array(values), "float32"],
      [values, "float64"],
      [[false, true, false, true, true, false], "bool"],
    ];
    for (const [data, dtype] of cases) {
      const mask = await loadMaskArray({ data, shape: [2, 3] }, "/");
      assert.equal(mask.dtype, dtype);
      assert.deepEqual(Array.from(mask.data), expected);
      assert.equal(mask.source, INLINE_SOURCE);
    }
  });

  test("NaN is refused, with where it is and how to fix it", async () => {
    await rejectsInput(loadMaskArray([0, NaN, 1], "/"), ["skipMask[1] is NaN", "nan_to_num"]);
    const path = fresh("nan.npy");
    const data = new Float32Array([0, 1, 0, 0, NaN, 0]);
    writeFileSync(path, encodeNpy({ dtype: "float32", shape: [2, 3], data }));
    await rejectsInput(loadMaskArray(path, "/"), ["contains NaN", "(1, 1)", "nan_to_num"]);
  });

  test("Zarr v3 arrays of several dtypes, with missing chunks at the fill value", async () => {
    const shape = [5, 7];
    const chunks = [2, 3];
    const dense = Array.from({ length: 35 }, (_, i) => (i % 4 === 0 ? 0 : i % 3));
    for (const dtype of ["bool", "uint8", "int16", "uint64", "float32", "float64"]) {
      const dir = fresh(`${dtype}.zarr`);
      writeZarr(dir, 3, dtype, shape, chunks, dense, (c) => !(c[0] === 1 && c[1] === 1), 0);
      const mask = await loadMaskArray(dir, "/");
      assert.equal(mask.kind, "zarr-v3");
      assert.equal(mask.dtype, dtype);
      assert.deepEqual(mask.shape, shape);
      const want = dense.map((v, i) => {
        const [y, x] = [Math.floor(i / 7), i % 7];
        const missing = Math.floor(y / 2) === 1 && Math.floor(x / 3) === 1;
        return missing ? 0 : v !== 0 ? 1 : 0;
      });
      assert.deepEqual(Array.from(mask.data), want, dtype);
      assert.deepEqual(mask.attributes, { note: dtype });
    }
  });

  test("Zarr v2 arrays, C and Fortran order, big endian", async () => {
    const shape = [4, 5];
    const dense = Array.from({ length: 20 }, (_, i) => (i % 3 === 0 ? 0 : i));
    const want = dense.map((v) => (v !== 0 ? 1 : 0));
    for (const order of ["C", "F"] as const) {
      for (const dtype of [">u2", "<i4", "|u1", "<f8"]) {
        const dir = fresh(`v2_${order}.zarr`);
        writeZarr(dir, 2, dtype, shape, [3, 2], dense, () => true, 0, order);
        const mask = await loadMaskArray(dir, "/");
        assert.equal(mask.kind, "zarr-v2");
        assert.deepEqual(Array.from(mask.data), want, `${dtype} ${order}`);
      }
    }
  });

  test("unsupported Zarr dtypes are refused, naming the dtype and the supported ones", async () => {
    for (const dtype of ["complex64", "string", "r16", "float16"]) {
      const dir = fresh("bad.zarr");
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "zarr.json"), JSON.stringify(v3Meta(dtype, [2], [2], 0)));
      await rejectsInput(loadMaskArray(dir, "/"), [`"${dtype}"`, "bool, uint8", "float64"]);
    }
    for (const dtype of ["<c8", "<U4", "|O"]) {
      const dir = fresh("bad2.zarr");
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, ".zarray"), JSON.stringify(v2Meta(dtype, [2], [2], 0, "C")));
      await rejectsInput(loadMaskArray(dir, "/"), [`"${dtype}"`, "bool, uint8"]);
    }
    const dir = fresh("structured.zarr");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, ".zarray"),
      JSON.stringify({ ...v2Meta("|u1", [2], [2], 0, "C"), dtype: [["a", "<u1"]] }),
    );
    await rejectsInput(loadMaskArray(dir, "/"), ["structured"]);
  });

  test("paths that are not masks are refused with a fix", async () => {
    const group = fresh("group.zarr");
    mkdirSync(group, { recursive: true });
    writeFileSync(join(group, "zarr.json"), '{"zarr_format": 3, "node_type": "group"}');
    await rejectsInput(loadMaskArray(group, "/"), ['"group"', "not an array"]);
    const empty = fresh("empty.zarr");
    mkdirSync(empty, { recursive: true });
    await rejectsInput(loadMaskArray(empty, "/"), ["neither zarr.json", ".zarray"]);
    const text = fresh("mask.txt");
    writeFileSync(text, "0 1");
    await rejectsInput(loadMaskArray(text, "/"), ["neither a .npy file nor a Zarr array"]);
  });

  test("relative paths resolve against the base folder", async () => {
    const path = fresh("rel.npy");
    writeFileSync(path, encodeNpy({ dtype: "uint8", shape: [2], data: new Uint8Array([0, 3]) }));
    const mask = await loadMaskArray("rel.npy", dirname(path));
    assert.equal(mask.source, path);
    assert.deepEqual(Array.from(mask.data), [0, 1]);
  });
});

describe("in-module arrays", () => {
  const layout = layout3d([4, 6, 8], [2, 2, 2]); // grid (2, 3, 4)

  test("flat with a shape", async () => {
    const data = Array.from({ length: 24 }, (_, i) => (i % 5 === 0 ? 1 : 0));
    const mask = prepareSkipMask(layout, await loadMaskArray({ data, shape: [2, 3, 4] }, "/"), "t");
    assert.equal(mask.skipCount, 5);
    assert.equal(mask.isMasked(5), true);
    assert.equal(mask.isMasked(6), false);
    await rejectsInput(loadMaskArray({ data, shape: [2, 3, 5] }, "/"), [
      "(2, 3, 5) has 30 cells",
      "24 entries",
    ]);
  });

  test("flat without a shape: one entry per block, C order", async () => {
    const data = new Array<number>(24).fill(0);
    data[23] = 1;
    const loaded = await loadMaskArray(data, "/");
    assert.equal(loaded.flat, true);
    const mask = prepareSkipMask(layout, loaded, "t");
    assert.equal(mask.isMasked(23), true);
    await rejectsInput(
      async () => prepareSkipMask(layout, await loadMaskArray([0, 1], "/"), "t"),
      ["has 2 cells", "(2, 3, 4)", "24 blocks"],
    );
  });

  test("nested arrays: shape inferred", async () => {
    const nested = [
      [[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, true]],
      [[0, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 0, 0]],
    ];
    const loaded = await loadMaskArray(nested, "/");
    assert.deepEqual(loaded.shape, [2, 3, 4]);
    const mask = prepareSkipMask(layout, loaded, "t");
    assert.equal(mask.skipCount, 3);
    assert.deepEqual(
      Array.from({ length: 24 }, (_, p) => p).filter((p) => mask.isMasked(p)),
      [0, 11, 17],
    );
    const typedRows = [new Uint8Array([0, 1]), new Uint8Array([1, 1])];
    assert.deepEqual((await loadMaskArray(typedRows, "/")).shape, [2, 2]);
  });

  test("ragged nested arrays are refused, naming the element", async () => {
    await rejectsInput(loadMaskArray([[0, 1], [0, 1, 1]], "/"), ["ragged", "[1] has 3 entries"]);
    await rejectsInput(loadMaskArray([[0, 1], 1], "/"), ["ragged", "[1] is 1"]);
    await rejectsInput(loadMaskArray([[0, [1]], [0, 1]], "/"), ["ragged", "[0][1] is an array"]);
    await rejectsInput(loadMaskArray([[0, "x"]] as unknown as number[][], "/"), [
      '[0][1] is "x"',
    ]);
  });
});

// --- a small Zarr writer for the tests (v2 and v3, bytes codec / no compressor) ---

function v3Meta(dtype: string, shape: number[], chunks: number[], fill: number) {
  return {
    zarr_format: 3,
    node_type: "array",
    shape,
    data_type: dtype,
    chunk_grid: { name: "regular", configuration: { chunk_shape: chunks } },
    chunk_key_encoding: { name: "default", configuration: { separator: "/" } },
    fill_value: dtype === "bool" ? false : fill,
    codecs: [{ name: "bytes", configuration: { endian: "little" } }],
    attributes: { note: dtype },
  };
}

function v2Meta(dtype: string, shape: number[], chunks: number[], fill: number, order: "C" | "F") {
  return {
    zarr_format: 2,
    shape,
    chunks,
    dtype,
    fill_value: fill,
    order,
    filters: null,
    compressor: null,
    dimension_separator: ".",
  };
}

const V2_TO_NPY: Record<string, NpyDtype> = {
  b1: "bool",
  u1: "uint8",
  u2: "uint16",
  i2: "int16",
  i4: "int32",
  u8: "uint64",
  f4: "float32",
  f8: "float64",
};

function writeZarr(
  dir: string,
  format: 2 | 3,
  dtype: string,
  shape: number[],
  chunks: number[],
  dense: number[],
  present: (chunk: number[]) => boolean,
  fill: number,
  order: "C" | "F" = "C",
): void {
  mkdirSync(dir, { recursive: true });
  const npyDtype: NpyDtype = format === 3 ? dtype as NpyDtype : V2_TO_NPY[dtype.slice(1)]!;
  const endian = format === 2 && dtype.startsWith(">") ? ">" : "<";
  if (format === 3) {
    writeFileSync(join(dir, "zarr.json"), JSON.stringify(v3Meta(dtype, shape, chunks, fill)));
  } else {writeFileSync(
      join(dir, ".zarray"),
      JSON.stringify(v2Meta(dtype, shape, chunks, fill, order)),
    );}
  const grid = shape.map((s, d) => Math.ceil(s / chunks[d]!));
  const chunkSize = chunks.reduce((a, b) => a * b, 1);
  for (let c0 = 0; c0 < grid[0]!; c0++) {
    for (let c1 = 0; c1 < grid[1]!; c1++) {
      if (!present([c0, c1])) continue;
      const data = allocateNpyData(npyDtype, chunkSize);
      for (let i = 0; i < chunks[0]!; i++) {
        for (let j = 0; j < chunks[1]!; j++) {
          const y = c0 * chunks[0]! + i;
          const x = c1 * chunks[1]! + j;
          const v = y < shape[0]! && x < shape[1]! ? dense[y * shape[1]! + x]! : fill;
          const k = order === "C" ? i * chunks[1]! + j : j * chunks[0]! + i;
          (data as unknown as (number | bigint)[])[k] = npyDtype.endsWith("64") &&
              npyDtype !== "float64"
            ? BigInt(v)
            : npyDtype === "bool"
            ? (v !== 0 ? 1 : 0)
            : v;
        }
      }
      const encoded = encodeNpy({ dtype: npyDtype, shape: [chunkSize], data }, { endian });
      const body = encoded.subarray(encoded.length - data.byteLength);
      const key = format === 3 ? join(dir, "c", String(c0), String(c1)) : join(dir, `${c0}.${c1}`);
      mkdirSync(dirname(key), { recursive: true });
      writeFileSync(key, body);
    }
  }
}
