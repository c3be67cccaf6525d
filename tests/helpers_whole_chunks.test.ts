/**
 * A block that is exactly one chunk is read as the decoded chunk itself and written by encoding
 * the block's own elements (lib/helpers/whole_chunks.ts), not through zarrita's get/set: the
 * values must be exactly what get/set give, for every way a block's result may arrive (a whole
 * array of the chunk's type, a view into a larger buffer, another element type, the read ROI's
 * result with context around the chunk), for big-endian and compressed arrays, and sharded
 * arrays must still go through zarrita.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { openArray, readBlock, writeBlock } from "../lib/helpers/mod.ts";
import { wholeChunkAt, writeWholeChunk } from "../lib/helpers/whole_chunks.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("whole-chunks");

const SHAPE = [8, 12] as const;
const CHUNK = [4, 6] as const;

/** A float32 array of SHAPE in CHUNK chunks, with `codecs` after `bytes`. */
async function makeArray(label: string, codecs: zarr.CodecMetadata[] = [], endian = "little") {
  const folder = path.join(newDir(label), "a.zarr");
  await zarr.create(new FileSystemStore(folder), {
    shape: [...SHAPE],
    chunkShape: [...CHUNK],
    dtype: "float32",
    fillValue: 0,
    codecs: [{ name: "bytes", configuration: { endian } }, ...codecs],
  });
  return folder;
}

/** 100 * row + column + 0.5 over the chunk at block (1, 1), in C order. */
function chunkValues(): Float32Array {
  const out = new Float32Array(CHUNK[0] * CHUNK[1]);
  for (let r = 0; r < CHUNK[0]; r++) {
    for (let c = 0; c < CHUNK[1]; c++) out[r * CHUNK[1] + c] = 100 * (r + 4) + c + 6 + 0.5;
  }
  return out;
}

const BLOCK = {
  readRoi: { offset: [4, 6], shape: [4, 6] },
  writeRoi: { offset: [4, 6], shape: [4, 6] },
};

/** The whole array as zarrita reads it, in C order. */
async function everything(folder: string): Promise<number[]> {
  const got = await zarr.get(await openArray(folder), null);
  return Array.from(got.data as Float32Array);
}

/** What zarr.set writes for the same chunk, to compare whole arrays with. */
async function expectedArray(label: string, codecs: zarr.CodecMetadata[] = [], endian = "little") {
  const folder = await makeArray(label, codecs, endian);
  const array = await openArray(folder);
  await zarr.set(array, [zarr.slice(4, 8), zarr.slice(6, 12)], {
    data: chunkValues(),
    shape: [...CHUNK],
    stride: [CHUNK[1], 1],
  });
  return everything(folder);
}

describe("a block that is one chunk", () => {
  it("is found only when the box is one whole chunk inside the array", () => {
    const array = { shape: [8, 12], chunks: [4, 6] };
    assert.deepEqual(wholeChunkAt(array, [4, 6], [8, 12]), [1, 1]);
    assert.equal(wholeChunkAt(array, [4, 6], [8, 11]), null); // a part of a chunk
    assert.equal(wholeChunkAt(array, [2, 6], [6, 12]), null); // across two chunks
    assert.equal(wholeChunkAt({ shape: [7, 12], chunks: [4, 6] }, [4, 6], [8, 12]), null); // past the end
    // Chunk coordinates past 2^31 stay exact (they are not forced into 32 bits).
    const far = 2 ** 33 + 5;
    assert.deepEqual(
      wholeChunkAt({ shape: [2 ** 40, 8], chunks: [2, 4] }, [2 * far, 4], [2 * far + 2, 8]),
      [far, 1],
    );
  });

  const ways: [
    string,
    () => Float32Array | Float64Array | { data: Float32Array; shape: number[]; stride: number[] },
  ][] = [
    ["a whole Float32Array", () => chunkValues()],
    ["a view into a larger buffer", () => {
      const big = new Float32Array(100);
      big.set(chunkValues(), 10);
      return big.subarray(10, 10 + 24);
    }],
    ["a Float64Array (converted, not reinterpreted)", () => Float64Array.from(chunkValues())],
    ["a strided chunk (every other element of a wider result)", () => {
      const wide = new Float32Array(48);
      const values = chunkValues();
      for (let i = 0; i < 24; i++) wide[2 * i] = values[i]!;
      return { data: wide, shape: [4, 6], stride: [12, 2] };
    }],
  ];
  for (const [label, make] of ways) {
    it(`writes ${label} as zarr.set does, and reads it back as the chunk`, async () => {
      const folder = await makeArray(`write-${label.split(" ")[1]}`);
      const array = await openArray(folder);
      await writeBlock(array, BLOCK, make());
      assert.deepEqual(
        await everything(folder),
        await expectedArray(`expected-${label.split(" ")[1]}`),
      );
      const read = await readBlock(await openArray(folder), BLOCK);
      assert.deepEqual(Array.from(read.data as Float32Array), Array.from(chunkValues()));
      assert.deepEqual(read.shape, [...CHUNK]);
    });
  }

  it("writes the chunk out of the read ROI's result when the block has context", async () => {
    const folder = await makeArray("context");
    const array = await openArray(folder);
    const block = { readRoi: { offset: [3, 5], shape: [6, 8] }, writeRoi: BLOCK.writeRoi };
    const result = new Float32Array(48).fill(-1);
    const values = chunkValues();
    for (let r = 0; r < 4; r++) {
      for (let c = 0; c < 6; c++) result[(r + 1) * 8 + c + 1] = values[r * 6 + c]!;
    }
    await writeBlock(array, block, result);
    assert.deepEqual(await everything(folder), await expectedArray("context-expected"));
  });

  it("keeps the byte order of a big-endian array and the codec of a compressed one", async () => {
    for (
      const [label, codecs, endian] of [
        ["big-endian", [], "big"],
        ["zstd", [{ name: "zstd", configuration: { level: 3, checksum: false } }], "little"],
        ["blosc", [{
          name: "blosc",
          configuration: { cname: "lz4", clevel: 5, shuffle: "shuffle", typesize: 4, blocksize: 0 },
        }], "little"],
      ] as [string, zarr.CodecMetadata[], string][]
    ) {
      const folder = await makeArray(label, codecs, endian);
      await writeBlock(await openArray(folder), BLOCK, chunkValues());
      const expected = await makeArray(`${label}-expected`, codecs, endian);
      await zarr.set(await openArray(expected), [zarr.slice(4, 8), zarr.slice(6, 12)], {
        data: chunkValues(),
        shape: [...CHUNK],
        stride: [CHUNK[1], 1],
      });
      const file = (root: string) => fs.readFileSync(path.join(root, "c", "1", "1"));
      assert.ok(
        file(folder).equals(file(expected)),
        `${label}: the chunk file differs from zarr.set's`,
      );
      assert.deepEqual(
        Array.from((await readBlock(await openArray(folder), BLOCK)).data as Float32Array),
        Array.from(chunkValues()),
      );
    }
  });

  it("is written without zarrita's set for an unsharded array, and not at all for a sharded one", async () => {
    const plain = await openArray(await makeArray("direct"));
    const elements = { data: chunkValues(), shape: [...CHUNK], stride: [CHUNK[1], 1] };
    assert.equal(await writeWholeChunk(plain, [1, 1], elements), true);
    assert.deepEqual(
      Array.from((await readBlock(plain, BLOCK)).data as Float32Array),
      Array.from(chunkValues()),
    );
    const folder = path.join(newDir("sharded-direct"), "a.zarr");
    await zarr.create(new FileSystemStore(folder), {
      shape: [...SHAPE],
      chunkShape: [...CHUNK],
      dtype: "float32",
      fillValue: 0,
      codecs: [{
        name: "sharding_indexed",
        configuration: {
          chunk_shape: [2, 3],
          codecs: [{ name: "bytes", configuration: { endian: "little" } }],
          index_codecs: [{ name: "bytes", configuration: { endian: "little" } }],
          index_location: "end",
        },
      }],
    });
    assert.equal(await writeWholeChunk(await openArray(folder), [1, 1], elements), false);
  });

  it("reads a missing chunk as the fill value", async () => {
    const read = await readBlock(await openArray(await makeArray("missing")), BLOCK);
    assert.deepEqual(Array.from(read.data as Float32Array), new Array(24).fill(0));
  });

  it("leaves a sharded array to zarrita, which refuses to write it", async () => {
    const folder = path.join(newDir("sharded"), "a.zarr");
    await zarr.create(new FileSystemStore(folder), {
      shape: [...SHAPE],
      chunkShape: [...CHUNK],
      dtype: "float32",
      fillValue: 0,
      codecs: [{
        name: "sharding_indexed",
        configuration: {
          chunk_shape: [2, 3],
          codecs: [{ name: "bytes", configuration: { endian: "little" } }],
          index_codecs: [{ name: "bytes", configuration: { endian: "little" } }],
          index_location: "end",
        },
      }],
    });
    await assert.rejects(writeBlock(await openArray(folder), BLOCK, chunkValues()), /sharded/);
  });
});
