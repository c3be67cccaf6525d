import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import {
  allocate,
  chunkFile,
  chunkGridShape,
  createArray,
  createGroup,
  ensureArray,
  ensureGroup,
  openArrayMetadata as openArray,
  readChunk,
  readRegion,
  writeChunk,
  writeChunkRegion,
  writeFileIfMissing,
  type ZarrArrayMetadata as ArrayMeta,
  type ZarrTypedArray,
} from "../lib/zarr/mod.ts";

/** The dtypes these round trips cover (numbers, not BigInts). */
type ZarrDtype = "uint8" | "uint16" | "uint32" | "float32";

const root = mkdtempSync(join(tmpdir(), "blockwise-zarr-"));
after(() => rmSync(root, { recursive: true, force: true }));

let counter = 0;
function freshDir(): string {
  return join(root, `a${counter++}`);
}

/** A value per voxel that differs everywhere and fits the dtype. */
function valueAt(dtype: ZarrDtype, p: readonly number[]): number {
  const v = p.reduce((a, c) => a * 31 + c + 1, 7);
  switch (dtype) {
    case "uint8":
      return v % 251 + 1;
    case "uint16":
      return v % 65521 + 1;
    case "uint32":
      return (v * 104729) % 4294967291 + 1;
    case "float32":
      return Math.fround(v / 8 - 3.25);
  }
}

function cOrder(shape: readonly number[], visit: (p: number[], i: number) => void): void {
  const n = shape.reduce((a, b) => a * b, 1);
  const p = new Array<number>(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    visit(p, i);
    for (let d = shape.length - 1; d >= 0; d--) {
      p[d]!++;
      if (p[d]! < shape[d]!) break;
      p[d] = 0;
    }
  }
}

/** Write every chunk of the array whose coordinates pass `keep`, with `valueAt` values. */
function writeAll(dir: string, meta: ArrayMeta, keep: (c: readonly number[]) => boolean): void {
  const dtype = meta.dtype as ZarrDtype;
  cOrder(chunkGridShape(meta), (c) => {
    if (!keep(c)) return;
    const begin = c.map((ci, d) => ci * meta.chunkShape[d]!);
    const shape = begin.map((b, d) => Math.min(meta.chunkShape[d]!, meta.shape[d]! - b));
    const data = allocate(dtype, shape.reduce((a, b) => a * b, 1)) as Float32Array;
    cOrder(shape, (q, i) => {
      data[i] = valueAt(dtype, q.map((qd, d) => qd + begin[d]!));
    });
    writeChunkRegion(dir, meta, begin, shape, data);
  });
}

/** What `readRegion` must return, computed voxel by voxel. */
function expectedRegion(
  meta: ArrayMeta,
  offset: readonly number[],
  shape: readonly number[],
  present: (c: readonly number[]) => boolean,
): ZarrTypedArray {
  const out = allocate(meta.dtype, shape.reduce((a, b) => a * b, 1)) as Float32Array;
  cOrder(shape, (q, i) => {
    const p = q.map((qd, d) => qd + offset[d]!);
    const inside = p.every((pd, d) => pd >= 0 && pd < meta.shape[d]!);
    const chunk = p.map((pd, d) => Math.floor(pd / meta.chunkShape[d]!));
    out[i] = inside && present(chunk) ? valueAt(meta.dtype as ZarrDtype, p) : meta.fillValue;
  });
  return out;
}

function sameValues(
  actual: ArrayLike<number | bigint>,
  expected: ArrayLike<number | bigint>,
): void {
  assert.equal(actual.length, expected.length);
  for (let i = 0; i < actual.length; i++) {
    if (!Object.is(actual[i], expected[i])) {
      assert.fail(`element ${i}: got ${actual[i]}, expected ${expected[i]}`);
    }
  }
}

describe("Zarr v3 arrays written by lib/zarr", () => {
  test("array zarr.json has the 8 mandatory keys and the recommended encodings", () => {
    const dir = freshDir();
    createArray(dir, {
      shape: [4, 5],
      chunkShape: [4, 5],
      dtype: "uint8",
      fillValue: 0,
    });
    const doc: unknown = JSON.parse(readFileSync(join(dir, "zarr.json"), "utf8"));
    assert.deepEqual(doc, {
      zarr_format: 3,
      node_type: "array",
      shape: [4, 5],
      data_type: "uint8",
      chunk_grid: { name: "regular", configuration: { chunk_shape: [4, 5] } },
      chunk_key_encoding: { name: "default", configuration: { separator: "/" } },
      fill_value: 0,
      codecs: [{ name: "bytes", configuration: { endian: "little" } }],
      attributes: {},
    });
    // Written through a temporary file: nothing else is left in the folder.
    assert.deepEqual(readdirSync(dir), ["zarr.json"]);
  });

  test('float NaN fill is the string "NaN"; attributes and dimension names round trip', () => {
    const dir = freshDir();
    createArray(dir, {
      shape: [2, 3, 4],
      chunkShape: [2, 3, 4],
      dtype: "float32",
      fillValue: NaN,
      attributes: { unit: "nm" },
      dimensionNames: ["z", "y", "x"],
    });
    const text = readFileSync(join(dir, "zarr.json"), "utf8");
    assert.match(text, /"fill_value": "NaN"/);
    const meta = openArray(dir);
    assert.ok(Number.isNaN(meta.fillValue));
    assert.deepEqual(meta.attributes, { unit: "nm" });
    assert.deepEqual(meta.dimensionNames, ["z", "y", "x"]);
    assert.deepEqual(meta.shape, [2, 3, 4]);
    assert.equal(meta.dtype, "float32");
  });

  test("invalid options are refused with the value at fault", () => {
    const base = { shape: [4, 4], chunkShape: [2, 2], dtype: "uint8" as const, fillValue: 0 };
    assert.throws(() => createArray(freshDir(), { ...base, chunkShape: [2] }), /chunkShape \[2\]/);
    assert.throws(() => createArray(freshDir(), { ...base, chunkShape: [0, 2] }), /positive/);
    assert.throws(() => createArray(freshDir(), { ...base, fillValue: 256 }), /fillValue 256/);
    assert.throws(() => createArray(freshDir(), { ...base, fillValue: NaN }), /fillValue NaN/);
  });

  test("ensureArray creates once, reopens, and refuses a different layout", () => {
    const dir = freshDir();
    const options = { shape: [8, 8], chunkShape: [4, 4], dtype: "uint16" as const, fillValue: 3 };
    const first = ensureArray(dir, options);
    const before = readFileSync(join(dir, "zarr.json"), "utf8");
    const second = ensureArray(dir, { ...options, attributes: { ignored: true } });
    assert.deepEqual(second, first);
    assert.equal(readFileSync(join(dir, "zarr.json"), "utf8"), before);
    assert.throws(
      () => ensureArray(dir, { ...options, shape: [16, 8] }),
      (error: unknown) =>
        error instanceof Error && error.message.includes("shape [8,8]") &&
        error.message.includes(`rm -rf ${dir}`),
    );
  });

  test("groups: create, ensure only if missing", () => {
    const dir = freshDir();
    assert.equal(ensureGroup(dir, { a: 1 }), true);
    assert.equal(ensureGroup(dir, { a: 2 }), false);
    assert.deepEqual(JSON.parse(readFileSync(join(dir, "zarr.json"), "utf8")), {
      zarr_format: 3,
      node_type: "group",
      attributes: { a: 1 },
    });
    createGroup(dir, { b: true });
    assert.deepEqual(JSON.parse(readFileSync(join(dir, "zarr.json"), "utf8")).attributes, {
      b: true,
    });
  });

  test("writeFileIfMissing has one winner and leaves no temporary files", () => {
    const dir = freshDir();
    const path = join(dir, "x.json");
    const results = [1, 2, 3].map((i) => writeFileIfMissing(path, `${i}`));
    assert.deepEqual(results, [true, false, false]);
    assert.equal(readFileSync(path, "utf8"), "1");
    assert.deepEqual(readdirSync(dir), ["x.json"]);
  });
});

describe("raw chunks written and read by lib/zarr", () => {
  test("round trip over every dtype, with whole and partial regions", () => {
    for (const dtype of ["uint8", "uint16", "uint32", "float32"] as const) {
      const dir = freshDir();
      const meta = createArray(dir, {
        shape: [6, 6, 8],
        chunkShape: [3, 2, 4],
        dtype,
        fillValue: 0,
      });
      writeAll(dir, meta, () => true);
      const all = () => true;
      sameValues(
        readRegion(dir, meta, [0, 0, 0], [6, 6, 8]),
        expectedRegion(meta, [0, 0, 0], [6, 6, 8], all),
      );
      sameValues(
        readRegion(dir, meta, [1, 1, 3], [4, 3, 2]),
        expectedRegion(meta, [1, 1, 3], [4, 3, 2], all),
      );
      sameValues(
        readRegion(dir, meta, [5, 5, 7], [1, 1, 1]),
        expectedRegion(meta, [5, 5, 7], [1, 1, 1], all),
      );
      // Chunk files are exactly prod(chunkShape) * itemsize bytes, little endian.
      const bytes = readFileSync(chunkFile(dir, meta, [1, 2, 1]));
      assert.equal(bytes.length, 3 * 2 * 4 * allocate(dtype, 1).BYTES_PER_ELEMENT);
    }
  });

  test("chunk key is c/i/j/k and values are little-endian C order", () => {
    const dir = freshDir();
    const meta = createArray(dir, {
      shape: [2, 2],
      chunkShape: [2, 2],
      dtype: "uint16",
      fillValue: 0,
    });
    writeChunk(dir, meta, [0, 0], Uint16Array.from([0x0102, 0x0304, 0x0506, 0x0708]));
    assert.equal(chunkFile(dir, meta, [0, 0]), join(dir, "c", "0", "0"));
    assert.deepEqual([...readFileSync(join(dir, "c", "0", "0"))], [2, 1, 4, 3, 6, 5, 8, 7]);
  });

  test("edge chunks are written full size, padded with the fill value", () => {
    const dir = freshDir();
    const meta = createArray(dir, {
      shape: [5, 7],
      chunkShape: [4, 4],
      dtype: "uint8",
      fillValue: 9,
    });
    writeAll(dir, meta, () => true);
    for (const [c, rows, cols] of [[[0, 1], 4, 3], [[1, 0], 1, 4], [[1, 1], 1, 3]] as const) {
      const bytes = readFileSync(chunkFile(dir, meta, c));
      assert.equal(bytes.length, 16, `chunk ${c} is full size`);
      for (let r = 0; r < 4; r++) {
        for (let k = 0; k < 4; k++) {
          const inside = r < rows && k < cols;
          const v = bytes[r * 4 + k]!;
          if (inside) assert.equal(v, valueAt("uint8", [c[0] * 4 + r, c[1] * 4 + k]));
          else assert.equal(v, 9, `padding of chunk ${c} at (${r}, ${k})`);
        }
      }
    }
    sameValues(
      readRegion(dir, meta, [0, 0], [5, 7]),
      expectedRegion(meta, [0, 0], [5, 7], () => true),
    );
  });

  test("missing chunks and voxels outside the array read as the fill value", () => {
    const dir = freshDir();
    const meta = createArray(dir, {
      shape: [6, 9],
      chunkShape: [4, 4],
      dtype: "uint32",
      fillValue: 77,
    });
    const present = (c: readonly number[]) => (c[0]! + c[1]!) % 2 === 0;
    writeAll(dir, meta, present);
    assert.equal(existsSync(chunkFile(dir, meta, [0, 1])), false);
    assert.equal(readChunk(dir, meta, [0, 1]), null);
    sameValues(
      readRegion(dir, meta, [0, 0], [6, 9]),
      expectedRegion(meta, [0, 0], [6, 9], present),
    );
    // A region hanging over every side of the array.
    sameValues(
      readRegion(dir, meta, [-3, -2], [12, 14]),
      expectedRegion(meta, [-3, -2], [12, 14], present),
    );
    // Entirely outside.
    sameValues(readRegion(dir, meta, [10, -20], [2, 3]), new Uint32Array(6).fill(77));
    // Empty region.
    assert.equal(readRegion(dir, meta, [1, 1], [0, 4]).length, 0);
  });

  test("NaN fill: missing float chunks read as NaN", () => {
    const dir = freshDir();
    const meta = createArray(dir, {
      shape: [4, 4],
      chunkShape: [2, 2],
      dtype: "float32",
      fillValue: NaN,
    });
    writeAll(dir, meta, (c) => c[0] === 0);
    const region = readRegion(dir, meta, [0, 0], [4, 4]);
    sameValues(region, expectedRegion(meta, [0, 0], [4, 4], (c) => c[0] === 0));
    assert.ok(Number.isNaN(region[15]));
  });

  test("wrong chunk sizes, dtypes and coordinates are refused; corrupt chunks detected", () => {
    const dir = freshDir();
    const meta = createArray(dir, {
      shape: [4, 4],
      chunkShape: [2, 2],
      dtype: "uint16",
      fillValue: 0,
    });
    assert.throws(() => writeChunk(dir, meta, [0, 0], new Uint16Array(3)), /4 elements/);
    assert.throws(() => writeChunk(dir, meta, [0, 0], new Uint8Array(4)), /uint16/);
    assert.throws(
      () => writeChunk(dir, meta, [2, 0], new Uint16Array(4)),
      /outside the chunk grid/,
    );
    assert.throws(
      () => writeChunkRegion(dir, meta, [1, 0], [2, 2], new Uint16Array(4)),
      /not one chunk/,
    );
    writeChunk(dir, meta, [1, 1], new Uint16Array(4));
    writeFileSync(chunkFile(dir, meta, [1, 1]), new Uint8Array(5));
    assert.throws(() => readRegion(dir, meta, [0, 0], [4, 4]), /has 5 bytes, expected 8/);
  });
});

describe("zarrita reads what we write", () => {
  for (const dtype of ["uint8", "uint16", "uint32", "float32"] as const) {
    test(`${dtype}: same values, edge and missing chunks included`, async () => {
      const dir = freshDir();
      const fillValue = dtype === "float32" ? NaN : 5;
      createGroup(dir, { note: "test" });
      const meta = createArray(join(dir, "arr"), {
        shape: [5, 6, 7],
        chunkShape: [2, 4, 3],
        dtype,
        fillValue,
        dimensionNames: ["z", "y", "x"],
      });
      const present = (c: readonly number[]) => (c[0]! + c[1]! + c[2]!) % 3 !== 1;
      writeAll(join(dir, "arr"), meta, present);
      const ours = readRegion(join(dir, "arr"), meta, [0, 0, 0], [5, 6, 7]);

      const store = new FileSystemStore(dir);
      const group = await zarr.open(zarr.root(store), { kind: "group" });
      assert.deepEqual(group.attrs, { note: "test" });
      const arr = await zarr.open(zarr.root(store).resolve("arr"), { kind: "array" });
      assert.equal(arr.dtype, dtype);
      assert.deepEqual(arr.shape, [5, 6, 7]);
      assert.deepEqual(arr.chunks, [2, 4, 3]);
      const { data, shape } = await zarr.get(arr);
      assert.deepEqual(shape, [5, 6, 7]);
      sameValues(data as ArrayLike<number>, ours);
      sameValues(ours, expectedRegion(meta, [0, 0, 0], [5, 6, 7], present));
    });
  }

  test("statSync sanity: every written chunk file is full size", () => {
    const dir = freshDir();
    const meta = createArray(dir, {
      shape: [3, 3],
      chunkShape: [2, 2],
      dtype: "float32",
      fillValue: 0,
    });
    writeAll(dir, meta, () => true);
    cOrder(chunkGridShape(meta), (c) => assert.equal(statSync(chunkFile(dir, meta, c)).size, 16));
  });
});
