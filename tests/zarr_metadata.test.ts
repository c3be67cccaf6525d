/**
 * lib/zarr as a writer of other tools' arrays needs it: v2 and v3 metadata read into one
 * description (dtype and byte order, chunk and shard shapes, key encoding, plain or encoded
 * chunks), chunk keys and the chunks a box covers, raw chunks of v2 and big-endian arrays that
 * zarrita reads back, and the durable atomic writes everything goes through.
 */

import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { InputError } from "../lib/errors.ts";
import {
  chunkAt,
  chunkFile,
  chunkGridShape,
  chunkKey,
  chunksCoveredBy,
  createFilledFile,
  hiddenSibling,
  openArrayMetadata,
  parseV2ArrayMetadata,
  parseV3ArrayMetadata,
  readChunk,
  readRegion,
  writeChunk,
  writeFileAtomic,
  writeJsonAtomic,
  type ZarrArrayMetadata,
  ZarrMetadataError,
} from "../lib/zarr/mod.ts";
import { removeDir, tempDir } from "./fixtures/temp_dirs.ts";

const MASKS = fileURLToPath(new URL("./fixtures/masks/", import.meta.url));
const root = tempDir("zarr-meta");
after(() => removeDir(root));
let counter = 0;
const freshDir = () => {
  const dir = path.join(root, `d${counter++}`);
  fs.mkdirSync(dir);
  return dir;
};

/** A v3 array document with the given changes. */
function v3(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    zarr_format: 3,
    node_type: "array",
    shape: [10, 20],
    data_type: "uint16",
    chunk_grid: { name: "regular", configuration: { chunk_shape: [4, 8] } },
    chunk_key_encoding: { name: "default", configuration: { separator: "/" } },
    fill_value: 0,
    codecs: [{ name: "bytes", configuration: { endian: "little" } }],
    attributes: {},
    ...changes,
  };
}

function v2(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    zarr_format: 2,
    shape: [10, 20],
    chunks: [4, 8],
    dtype: "<u2",
    fill_value: 0,
    order: "C",
    filters: null,
    compressor: null,
    ...changes,
  };
}

function refused(parse: () => unknown, pattern: RegExp): void {
  assert.throws(parse, (error: unknown) => {
    assert.ok(error instanceof ZarrMetadataError, String(error));
    assert.ok(error instanceof InputError, "an input error (exit 2)");
    assert.match(error.message, pattern);
    return true;
  });
}

describe("array metadata, v3", () => {
  test("a plain array: dtype, byte order, chunks, keys, fill, no encoding", () => {
    const m = parseV3ArrayMetadata(v3({ fill_value: 7, dimension_names: ["y", null] }), "a");
    assert.equal(m.zarrFormat, 3);
    assert.equal(m.dtype, "uint16");
    assert.equal(m.endian, "little");
    assert.deepEqual(m.shape, [10, 20]);
    assert.deepEqual(m.chunkShape, [4, 8]);
    assert.equal(m.shardShape, null);
    assert.deepEqual(m.chunkKeyEncoding, { name: "default", separator: "/" });
    assert.equal(m.fillValue, 7);
    assert.equal(m.encoding, null);
    assert.deepEqual(m.dimensionNames, ["y", null]);
  });

  test("sharding_indexed: the grid's chunk is the shard, the codec's the chunk; not plain", () => {
    const m = parseV3ArrayMetadata(
      v3({
        chunk_grid: { name: "regular", configuration: { chunk_shape: [8, 16] } },
        codecs: [{
          name: "sharding_indexed",
          configuration: {
            chunk_shape: [4, 8],
            codecs: [{ name: "bytes", configuration: { endian: "big" } }],
            index_codecs: [{ name: "bytes", configuration: { endian: "little" } }, {
              name: "crc32c",
            }],
          },
        }],
      }),
      "a",
    );
    assert.deepEqual(m.shardShape, [8, 16]);
    assert.deepEqual(m.chunkShape, [4, 8]);
    assert.equal(m.endian, "big");
    assert.match(m.encoding ?? "", /sharding_indexed of bytes/);
    assert.deepEqual(chunkGridShape(m), [2, 2], "stored chunks are shards");
    refused(
      () =>
        parseV3ArrayMetadata(
          v3({
            chunk_grid: { name: "regular", configuration: { chunk_shape: [8, 16] } },
            codecs: [{
              name: "sharding_indexed",
              configuration: { chunk_shape: [3, 8], codecs: [{ name: "bytes" }] },
            }],
          }),
          "s",
        ),
      /shards \[8,16\] that are not a whole number of chunks \[3,8\]/,
    );
  });

  test("compression makes chunks encoded; writing them is refused with the reason", () => {
    const dir = freshDir();
    const doc = v3({
      codecs: [{ name: "bytes", configuration: { endian: "little" } }, { name: "gzip" }],
    });
    fs.writeFileSync(path.join(dir, "zarr.json"), JSON.stringify(doc));
    const m = openArrayMetadata(dir);
    assert.equal(m.encoding, "codecs bytes, gzip");
    assert.throws(
      () => writeChunk(dir, m, [0, 0], new Uint16Array(32)),
      (error: unknown) =>
        error instanceof InputError &&
        /chunks are encoded \(codecs bytes, gzip\).*without compression/.test(error.message),
    );
    assert.deepEqual(fs.readdirSync(dir), ["zarr.json"], "nothing written");
  });

  test("fill values: NaN, ±Infinity, hex bit patterns, booleans", () => {
    const f = (dtype: string, fill: unknown) =>
      parseV3ArrayMetadata(
        v3({
          data_type: dtype,
          fill_value: fill,
          codecs: [{ name: "bytes", configuration: { endian: "little" } }],
        }),
        "f",
      ).fillValue;
    assert.ok(Number.isNaN(f("float32", "NaN")));
    assert.equal(f("float64", "-Infinity"), -Infinity);
    assert.ok(Number.isNaN(f("float32", "0x7fc00000")));
    assert.equal(f("float64", "0x3ff0000000000000"), 1);
    assert.equal(f("bool", true), 1);
    refused(() => f("uint8", "zero"), /fill_value "zero", which is not a uint8/);
  });

  test("refuses what a writer cannot honour, naming it", () => {
    refused(
      () => parseV3ArrayMetadata({}, "/x/zarr.json"),
      /^Zarr array metadata \/x\/zarr\.json is not a Zarr v3 array/,
    );
    refused(
      () => parseV3ArrayMetadata(v3({ data_type: "complex64" }), "a"),
      /data_type "complex64"/,
    );
    refused(
      () => parseV3ArrayMetadata(v3({ chunk_grid: { name: "rectilinear" } }), "a"),
      /regular chunk_grid/,
    );
    refused(
      () => parseV3ArrayMetadata(v3({ codecs: [{ name: "bytes" }] }), "a"),
      /bytes codec without endian, which a uint16 array needs/,
    );
    refused(
      () => parseV3ArrayMetadata(v3({ storage_transformers: [{ name: "x" }] }), "a"),
      /storage_transformers/,
    );
    refused(() => parseV3ArrayMetadata(v3({ extension: { x: 1 } }), "a"), /the key "extension"/);
    // An extension marked must_understand: false may be ignored.
    assert.equal(
      parseV3ArrayMetadata(v3({ extension: { must_understand: false } }), "a").dtype,
      "uint16",
    );
  });
});

describe("array metadata, v2", () => {
  test("dtype strings with byte order, separator, compressor", () => {
    const m = parseV2ArrayMetadata(v2({ dtype: ">f8", fill_value: "NaN" }), "a", { unit: "nm" });
    assert.equal(m.zarrFormat, 2);
    assert.equal(m.dtype, "float64");
    assert.equal(m.endian, "big");
    assert.ok(Number.isNaN(m.fillValue));
    assert.deepEqual(m.chunkKeyEncoding, { name: "v2", separator: "." });
    assert.deepEqual(m.attributes, { unit: "nm" });
    assert.equal(m.encoding, null);
    const packed = parseV2ArrayMetadata(v2({ compressor: { id: "blosc", cname: "lz4" } }), "a");
    assert.equal(packed.encoding, "filters/compressor blosc");
    assert.equal(parseV2ArrayMetadata(v2({ fill_value: null }), "a").fillValue, 0);
    assert.deepEqual(
      parseV2ArrayMetadata(v2({ dimension_separator: "/" }), "a").chunkKeyEncoding,
      { name: "v2", separator: "/" },
    );
    refused(() => parseV2ArrayMetadata(v2({ order: "F" }), "a"), /order "F"; only C/);
    refused(() => parseV2ArrayMetadata(v2({ dtype: "<c8" }), "a"), /dtype "<c8"/);
  });

  test("zarr-python's uncompressed v2 and v3 fixtures open, and read as zarrita reads them", async () => {
    for (const name of ["tissue_v2.zarr", "tissue_v3.zarr"]) {
      const dir = path.join(MASKS, name);
      const m = openArrayMetadata(dir);
      assert.equal(m.zarrFormat, name.includes("v2") ? 2 : 3);
      assert.equal(m.dtype, "uint8");
      assert.deepEqual(m.shape, [64, 96, 128]);
      assert.deepEqual(m.chunkShape, [32, 32, 32]);
      assert.equal(m.encoding, null);
      for (const coords of chunksCoveredBy(m, { offset: [0, 0, 0], shape: m.shape })) {
        assert.ok(fs.existsSync(chunkFile(dir, m, coords)), `${name} chunk ${coords}`);
      }
      const ours = readRegion(dir, m, [0, 0, 0], [...m.shape]);
      const store = new FileSystemStore(dir);
      const array = name.includes("v2")
        ? await zarr.open.v2(zarr.root(store), { kind: "array" })
        : await zarr.open.v3(zarr.root(store), { kind: "array" });
      const theirs = (await zarr.get(array)).data as Uint8Array;
      assert.ok(Buffer.from(ours as Uint8Array).equals(Buffer.from(theirs)), name);
    }
    assert.deepEqual(openArrayMetadata(path.join(MASKS, "tissue_v3.zarr")).attributes, {
      voxel_size: [8, 8, 8],
      offset: [0, 0, 0],
    });
    assert.throws(() => openArrayMetadata(MASKS), /neither zarr\.json \(Zarr v3\) nor \.zarray/);
  });

  test("raw chunks of a big-endian v2 array are written in its byte order; zarrita agrees", async () => {
    const dir = freshDir();
    fs.writeFileSync(
      path.join(dir, ".zarray"),
      JSON.stringify(v2({ dtype: ">u2", fill_value: 9 })),
    );
    const m = openArrayMetadata(dir);
    const values = Uint16Array.from({ length: 32 }, (_, i) => 0x0100 * i + 1);
    writeChunk(dir, m, [1, 2], values);
    assert.equal(chunkFile(dir, m, [1, 2]), path.join(dir, "1.2"));
    const bytes = fs.readFileSync(path.join(dir, "1.2"));
    assert.deepEqual([...bytes.subarray(0, 4)], [0x00, 0x01, 0x01, 0x01], "big-endian");
    assert.deepEqual([...(readChunk(dir, m, [1, 2]) as Uint16Array)], [...values]);
    const array = await zarr.open.v2(zarr.root(new FileSystemStore(dir)), { kind: "array" });
    const region = await zarr.get(array, [zarr.slice(4, 8), zarr.slice(16, 20)]);
    assert.deepEqual([...(region.data as Uint16Array)], [
      ...[0, 1, 2, 3].flatMap((r) => [0, 1, 2, 3].map((c) => values[r * 8 + c]!)),
    ]);
    const outside = await zarr.get(array, [zarr.slice(0, 1), zarr.slice(0, 2)]);
    assert.deepEqual([...(outside.data as Uint16Array)], [9, 9], "missing chunks read as fill");
  });
});

describe("chunk keys and coverage", () => {
  const meta = (changes: Partial<ZarrArrayMetadata> = {}): ZarrArrayMetadata => ({
    ...parseV3ArrayMetadata(v3(), "a"),
    ...changes,
  });

  test("keys of every encoding, and of a 0-d array", () => {
    assert.equal(chunkKey({ name: "default", separator: "/" }, [1, 2]), "c/1/2");
    assert.equal(chunkKey({ name: "default", separator: "." }, [1, 2]), "c.1.2");
    assert.equal(chunkKey({ name: "v2", separator: "." }, [1, 2]), "1.2");
    assert.equal(chunkKey({ name: "v2", separator: "/" }, [1, 2]), "1/2");
    assert.equal(chunkKey({ name: "default", separator: "/" }, []), "c");
    assert.equal(chunkKey({ name: "v2", separator: "." }, []), "0");
    assert.equal(chunkFile("/a", meta(), [2, 0]), path.join("/a", "c", "2", "0"));
  });

  test("chunksCoveredBy lists the chunks a box touches, clipped to the array", () => {
    const m = meta(); // shape [10, 20] in [4, 8]: a 3 x 3 grid
    assert.deepEqual(chunkGridShape(m), [3, 3]);
    assert.deepEqual(chunksCoveredBy(m, { offset: [3, 7], shape: [2, 2] }), [
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ]);
    assert.deepEqual(chunksCoveredBy(m, { offset: [-5, 18], shape: [100, 100] }), [
      [0, 2],
      [1, 2],
      [2, 2],
    ]);
    assert.deepEqual(chunksCoveredBy(m, { offset: [10, 0], shape: [4, 4] }), [], "outside");
    assert.deepEqual(chunksCoveredBy(m, { offset: [0, 0], shape: [0, 4] }), [], "empty");
    assert.throws(() => chunksCoveredBy(m, { offset: [0], shape: [1] }), /2 axes/);
    // A sharded array: the files are shards.
    const sharded = meta({ shardShape: [8, 16] });
    assert.deepEqual(chunksCoveredBy(sharded, { offset: [3, 7], shape: [2, 2] }), [[0, 0]]);
  });

  test("chunkAt: the chunk a box is exactly (clipped at the array's end), else null", () => {
    const m = meta();
    assert.deepEqual(chunkAt(m, { offset: [4, 8], shape: [4, 8] }), [1, 1]);
    assert.deepEqual(chunkAt(m, { offset: [8, 16], shape: [2, 4] }), [2, 2], "edge chunk");
    assert.equal(chunkAt(m, { offset: [8, 16], shape: [4, 8] }), null, "sticks out");
    assert.equal(chunkAt(m, { offset: [2, 8], shape: [4, 8] }), null, "not aligned");
    assert.equal(chunkAt(m, { offset: [4, 8], shape: [2, 8] }), null, "part of a chunk");
    assert.equal(chunkAt(m, { offset: [12, 0], shape: [4, 8] }), null, "outside");
  });
});

describe("durable atomic writes", () => {
  test("writeFileAtomic replaces the file whole, creates the folder, leaves no temporary", () => {
    const dir = path.join(freshDir(), "new", "folder");
    const file = path.join(dir, "doc.json");
    writeJsonAtomic(file, { a: 1 });
    assert.equal(fs.readFileSync(file, "utf8"), '{\n  "a": 1\n}\n');
    writeFileAtomic(file, new Uint8Array([1, 2, 3]));
    assert.deepEqual([...fs.readFileSync(file)], [1, 2, 3]);
    assert.deepEqual(fs.readdirSync(dir), ["doc.json"]);
  });

  test("a failed write leaves the old file and no temporary", () => {
    const dir = freshDir();
    fs.mkdirSync(path.join(dir, "taken"));
    assert.throws(
      () => writeFileAtomic(path.join(dir, "taken"), "x"),
      /EISDIR|EEXIST|ENOTEMPTY|directory/i,
    );
    assert.deepEqual(fs.readdirSync(dir), ["taken"]);
  });

  test("createFilledFile writes the element pattern, sparse zeros as zeros", () => {
    const dir = freshDir();
    createFilledFile(path.join(dir, "a", "c"), 10, new Uint8Array([1, 2]));
    assert.deepEqual([...fs.readFileSync(path.join(dir, "a", "c"))], [
      1,
      2,
      1,
      2,
      1,
      2,
      1,
      2,
      1,
      2,
    ]);
    createFilledFile(path.join(dir, "z"), 3 << 20, new Uint8Array(4));
    const zeros = fs.readFileSync(path.join(dir, "z"));
    assert.equal(zeros.length, 3 << 20);
    assert.ok(zeros.every((b) => b === 0));
    const big = path.join(dir, "big");
    createFilledFile(big, (2 << 20) + 6, new Uint8Array([0, 0, 0xc0, 0x7f]));
    const nan = new Float32Array(
      new Uint8Array(fs.readFileSync(big).subarray(0, (2 << 20) + 4)).buffer,
    );
    assert.ok(nan.every((v) => Number.isNaN(v)));
  });

  test("hiddenSibling names a dot-folder beside the target with the label recovery looks for", () => {
    const sibling = hiddenSibling("/x/tracking/a", "migrating");
    assert.equal(path.dirname(sibling), "/x/tracking");
    assert.ok(path.basename(sibling).startsWith(".a.migrating-"), sibling);
  });
});
