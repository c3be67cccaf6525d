/**
 * The copies `writeBlock` makes of a block before encoding it (lib/helpers/strided_copy.ts,
 * scratch_buffers.ts) and the chunk files it writes (chunk_files.ts): the bits of every value
 * survive (NaN payloads included, which a float copy in JavaScriptCore would canonicalise), a
 * reused scratch buffer never reaches a chunk that was already written, and a chunk's folder
 * is made when it is missing.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { openArray, readBlock, writeBlock } from "../lib/helpers/mod.ts";
import { ChunkFileStore } from "../lib/helpers/chunk_files.ts";
import { giveBackScratch, takeScratch } from "../lib/zarr/scratch_buffers.ts";
import { copyStrided } from "../lib/helpers/strided_copy.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("block-copies");

/** Bit patterns that are NaNs with payloads, for 4- and 8-byte floats. */
const NAN32 = [0x7fc00001, 0xffc12345, 0x7f800001, 0x7fffffff];
const NAN64_HIGH = [0x7ff00000, 0xfff12345, 0x7ff80000];

/** Blocks of one `size` x `size` chunk each (no context), at `offsets`. */
function chunkBlocks(offsets: number[][], size = 4) {
  return offsets.map((offset) => ({
    readRoi: { offset, shape: [size, size] },
    writeRoi: { offset, shape: [size, size] },
  }));
}

/**
 * The `size` x `size` box at an offset of the `side` x `side` `volume`, as a strided view (what
 * writeBlock copies).
 */
function viewIn(volume: Float32Array, side = 8, size = 4) {
  return (o: readonly number[]) => ({
    data: volume.subarray(o[0]! * side + o[1]!),
    shape: [size, size],
    stride: [side, 1],
  });
}

/** A `side` x `side` float32 array of `size` x `size` chunks, filled with 0, at `where`. */
function createSquare(
  where: Parameters<typeof zarr.create>[0],
  side: number,
  size: number,
  codecs?: Parameters<typeof zarr.create>[1]["codecs"],
) {
  return zarr.create(where, {
    shape: [side, side],
    chunkShape: [size, size],
    dtype: "float32",
    fillValue: 0,
    ...(codecs === undefined ? {} : { codecs }),
  });
}

describe("copying a block out of a larger volume", () => {
  for (
    const [name, make, words] of [
      ["float32", Float32Array, 1],
      ["float64", Float64Array, 2],
      ["int16", Int16Array, 0.5],
      ["uint8", Uint8Array, 0.25],
    ] as const
  ) {
    it(`copies ${name} boxes bit for bit, strided and C-ordered`, () => {
      const volumeShape = [5, 6, 7];
      const length = 5 * 6 * 7;
      const volume = new make(length);
      const bits = new Uint8Array(volume.buffer);
      for (let i = 0; i < bits.length; i++) bits[i] = (i * 73 + 11) & 255;
      if (words >= 1) {
        // NaNs with payloads in every element of the first rows.
        const view = new Uint32Array(volume.buffer);
        for (let i = 0; i < 40; i++) {
          view[i] = words === 1 ? NAN32[i % 4]! : i % 2 ? NAN64_HIGH[i % 3]! : i;
        }
      }
      const stride = [42, 7, 1] as const;
      for (
        const [offset, shape, step] of [
          [[0, 0, 0], [2, 3, 4], 1],
          [[1, 2, 3], [4, 4, 4], 1],
          [[0, 0, 0], [5, 6, 7], 1],
          [[0, 1, 0], [3, 2, 3], 2],
        ] as const
      ) {
        const boxStride = [stride[0], stride[1], step] as const;
        const first = offset[0] * 42 + offset[1] * 7 + offset[2];
        const out = new make(shape[0] * shape[1] * shape[2]);
        copyStrided({ data: volume.subarray(first), shape, stride: boxStride }, out);
        const expected = new make(out.length);
        let at = 0;
        for (let z = 0; z < shape[0]; z++) {
          for (let y = 0; y < shape[1]; y++) {
            for (let x = 0; x < shape[2]; x++) {
              const from = first + z * 42 + y * 7 + x * step;
              new Uint8Array(expected.buffer).set(
                bits.subarray(from * make.BYTES_PER_ELEMENT, (from + 1) * make.BYTES_PER_ELEMENT),
                at++ * make.BYTES_PER_ELEMENT,
              );
            }
          }
        }
        assert.deepEqual(
          new Uint8Array(out.buffer),
          new Uint8Array(expected.buffer),
          `${name} box at [${offset}] shape [${shape}] step ${step} of a [${volumeShape}] volume`,
        );
      }
    });
  }

  it("refuses an output of another element size", () => {
    assert.throws(
      () =>
        copyStrided(
          { data: new Float32Array(4), shape: [4], stride: [1] },
          new Float64Array(4),
        ),
      /the output holds 8-byte elements but the source 4-byte ones/,
    );
  });

  it("writes NaN payloads into the chunk file unchanged", async () => {
    const folder = path.join(newDir("nan"), "a.zarr");
    await zarr.create(new FileSystemStore(folder), {
      shape: [4, 4],
      chunkShape: [2, 2],
      dtype: "float64",
      fillValue: 0,
    });
    const volume = new Float64Array(16);
    const words = new Uint32Array(volume.buffer);
    for (let i = 0; i < 32; i++) words[i] = i % 2 ? NAN64_HIGH[i % 3]! : i + 1;
    const array = await openArray(folder);
    const block = {
      readRoi: { offset: [2, 2], shape: [2, 2] },
      writeRoi: { offset: [2, 2], shape: [2, 2] },
    };
    await writeBlock(array, block, { data: volume.subarray(10), shape: [2, 2], stride: [4, 1] });
    const file = new Uint32Array(
      new Uint8Array(fs.readFileSync(path.join(folder, "c", "1", "1"))).buffer,
    );
    assert.deepEqual(Array.from(file), [...words.subarray(20, 24), ...words.subarray(28, 32)]);
  });
});

describe("scratch buffers", () => {
  it("hands a buffer out again only after it is given back", () => {
    const first = takeScratch(Float32Array, 1000);
    const second = takeScratch(Float32Array, 1000);
    assert.notEqual(first, second);
    giveBackScratch(first);
    assert.equal(takeScratch(Float32Array, 1000), first);
    assert.notEqual(takeScratch(Int32Array, 1000) as unknown, first);
    assert.notEqual(takeScratch(Float32Array, 999).length, 1000);
  });

  it("never reuses a copy a store kept, and keeps overlapping writes apart", async () => {
    // zarrita's Map store keeps the bytes it is given: a copy encoded by the bytes codec is a
    // view of the scratch buffer, so a reused buffer would rewrite chunks already stored.
    const memory = new Map<string, Uint8Array>();
    const inMemory = await createSquare(zarr.root(memory).resolve("a"), 8, 4);
    const folder = path.join(newDir("overlap"), "a.zarr");
    await createSquare(new FileSystemStore(folder), 8, 4);
    const onDisk = await openArray(folder);
    const volume = new Float32Array(64).map((_, i) => i + 0.25);
    const blocks = chunkBlocks([[0, 0], [0, 4], [4, 0], [4, 4]]);
    const view = viewIn(volume);
    const arrays = [inMemory as unknown as typeof onDisk, onDisk];
    for (const array of arrays) {
      for (const b of blocks) await writeBlock(array, b, view(b.writeRoi.offset));
      const got = await zarr.get(array, null);
      assert.deepEqual(Array.from(got.data as Float32Array), Array.from(volume));
    }
    volume.reverse();
    for (const array of arrays) {
      await Promise.all(blocks.map((b) => writeBlock(array, b, view(b.writeRoi.offset))));
      const got = await zarr.get(array, null);
      assert.deepEqual(Array.from(got.data as Float32Array), Array.from(volume));
    }
  });
});

describe("encoded frames in reused buffers", () => {
  for (
    const [label, codec] of [
      ["Blosc lz4", {
        name: "blosc",
        configuration: { cname: "lz4", clevel: 5, shuffle: "shuffle" },
      }],
      ["zstd 3", { name: "zstd", configuration: { level: 3, checksum: false } }],
    ] as const
  ) {
    it(`keeps every ${label} frame a store kept, and reuses those written to files`, async () => {
      const codecs = [{ name: "bytes", configuration: { endian: "little" } }, codec];
      const memory = new Map<string, Uint8Array>();
      const inMemory = await createSquare(zarr.root(memory).resolve("a"), 64, 32, codecs);
      const folder = path.join(newDir(`frames-${label}`), "a.zarr");
      await createSquare(new FileSystemStore(folder), 64, 32, codecs);
      const onDisk = await openArray(folder);
      const volume = new Float32Array(64 * 64).map((_, i) => Math.sin(i / 50) * 100);
      const blocks = chunkBlocks([[0, 0], [0, 32], [32, 0], [32, 32]], 32);
      const view = viewIn(volume, 64, 32);
      for (const array of [inMemory as unknown as typeof onDisk, onDisk]) {
        for (const b of blocks) await writeBlock(array, b, view(b.writeRoi.offset));
        const got = await zarr.get(array, null);
        assert.deepEqual(Array.from(got.data as Float32Array), Array.from(volume), label);
      }
      // Each frame the Map store holds is its own memory.
      const frames = [...memory.entries()].filter(([key]) => key.includes("/c/"));
      assert.equal(frames.length, 4);
      assert.equal(new Set(frames.map(([, bytes]) => bytes.buffer)).size, 4);
    });
  }

  it("never takes back the memory of a block returned as a view of its file", async () => {
    const folder = path.join(newDir("kept-view"), "a.zarr");
    // 32 x 32 float32 chunks are 4 KiB files, read into 4 KiB buffers: a chunk read is a view
    // of the whole buffer, so writing it encodes that very memory.
    await createSquare(new FileSystemStore(folder), 64, 32);
    const array = await openArray(folder);
    const volume = new Float32Array(64 * 64).map((_, i) => i + 0.5);
    const blocks = chunkBlocks([[0, 0], [0, 32], [32, 0], [32, 32]], 32);
    const view = viewIn(volume, 64, 32);
    for (const b of blocks) await writeBlock(array, b, view(b.writeRoi.offset));
    const first = await readBlock(array, blocks[0]!);
    const before = Array.from(first.data as Float32Array);
    await writeBlock(array, blocks[3]!, first);
    for (const b of [blocks[1]!, blocks[2]!]) {
      await readBlock(array, b);
      assert.deepEqual(Array.from(first.data as Float32Array), before);
    }
  });
});

describe("reading blocks through reused file buffers", () => {
  for (
    const [label, codecs] of [
      ["uncompressed", []],
      ["big-endian", null],
      ["gzip", [{ name: "gzip", configuration: { level: 1 } }]],
    ] as const
  ) {
    it(`keeps every ${label} block it returned intact while reading more`, async () => {
      const folder = path.join(newDir(`read-${label}`), "a.zarr");
      await zarr.create(new FileSystemStore(folder), {
        shape: [8, 8],
        chunkShape: [4, 4],
        dtype: "float32",
        fillValue: 0,
        codecs: [
          { name: "bytes", configuration: { endian: codecs === null ? "big" : "little" } },
          ...(codecs ?? []),
        ],
      });
      const array = await openArray(folder);
      const volume = new Float32Array(64).map((_, i) => i * 1.5 - 7);
      const blocks = chunkBlocks([[0, 0], [0, 4], [4, 0]]);
      const view = viewIn(volume);
      for (const b of blocks) await writeBlock(array, b, view(b.writeRoi.offset));
      const read = [];
      for (let round = 0; round < 3; round++) {
        for (const b of blocks) read.push(await readBlock(array, b));
      }
      // The fourth chunk was never written: it reads as the fill value.
      const missing = await readBlock(array, {
        readRoi: { offset: [4, 4], shape: [4, 4] },
        writeRoi: { offset: [4, 4], shape: [4, 4] },
      });
      assert.deepEqual(Array.from(missing.data as Float32Array), new Array(16).fill(0));
      read.forEach((chunk, i) => {
        const o = blocks[i % 3]!.writeRoi.offset;
        const expected = [];
        for (let y = 0; y < 4; y++) {
          for (let x = 0; x < 4; x++) expected.push(volume[(o[0]! + y) * 8 + o[1]! + x]);
        }
        assert.deepEqual(
          Array.from(chunk.data as Float32Array),
          expected,
          `read ${i} of block [${o}]`,
        );
      });
    });
  }
});

describe("chunk files", () => {
  it("makes a missing chunk folder and writes into existing ones", async () => {
    const root = newDir("files");
    const store = new ChunkFileStore(root);
    await store.set("/c/1/2/3", new Uint8Array([1, 2, 3]));
    await store.set("/c/1/2/4", new Uint8Array([4]));
    assert.deepEqual(Array.from(fs.readFileSync(path.join(root, "c", "1", "2", "3"))), [1, 2, 3]);
    assert.deepEqual(Array.from(fs.readFileSync(path.join(root, "c", "1", "2", "4"))), [4]);
  });

  it("reports a write that fails for another reason than a missing folder", async () => {
    const root = newDir("blocked");
    fs.writeFileSync(path.join(root, "c"), "a file where a folder should be");
    const store = new ChunkFileStore(root);
    await assert.rejects(store.set("/c/0", new Uint8Array([1])), /ENOTDIR|EEXIST/);
  });
});
