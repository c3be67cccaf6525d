/**
 * The `blockwise` helper module a pipeline imports: opening an array, the zarrita selection of
 * a ROI with the array's offset, reading a block's read ROI padded at the volume's edge, and
 * writing the write ROI out of a result computed over the read ROI.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as path from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { openArray, readBlock, readRoi, roiSelection, writeBlock } from "../lib/helpers/mod.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("helpers");

/** A 6x8 int32 array holding 10 * row + column, zstd-compressed in 4x4 chunks. */
async function makeArray(label: string, fill = 0): Promise<string> {
  const folder = path.join(newDir(label), "a.zarr");
  const array = await zarr.create(new FileSystemStore(folder), {
    shape: [6, 8],
    chunkShape: [4, 4],
    dtype: "int32",
    fillValue: fill,
    codecs: [
      { name: "bytes", configuration: { endian: "little" } },
      { name: "zstd", configuration: { level: 1, checksum: false } },
    ],
  });
  const data = Int32Array.from({ length: 48 }, (_, i) => 10 * Math.floor(i / 8) + (i % 8));
  await zarr.set(array, null, { data, shape: [6, 8], stride: [8, 1] });
  return folder;
}

function rows(chunk: { data: ArrayLike<number | bigint>; shape: readonly number[] }): number[][] {
  const out: number[][] = [];
  const values = Array.from(chunk.data, Number);
  for (let r = 0; r < chunk.shape[0]!; r++) {
    out.push(values.slice(r * chunk.shape[1]!, (r + 1) * chunk.shape[1]!));
  }
  return out;
}

describe("roiSelection", () => {
  it("turns a ROI into one zarrita slice per axis, shifted by the array's offset", () => {
    const roi = { offset: [-2, 3], shape: [4, 5] };
    assert.deepEqual(roiSelection(roi), [zarr.slice(-2, 2), zarr.slice(3, 8)]);
    assert.deepEqual(roiSelection(roi, { offset: [2, -3] }), [zarr.slice(0, 4), zarr.slice(0, 5)]);
  });

  it("refuses an offset of the wrong length, naming it", () => {
    assert.throws(
      () => roiSelection({ offset: [0, 0], shape: [1, 1] }, { offset: [1] }),
      /roiSelection: offset must be 2 integers \(the array index of coordinate 0 on each axis\); got \[1\]/,
    );
  });
});

describe("readRoi and readBlock", () => {
  it("read a ROI inside the array as zarr.get would", async () => {
    const array = await openArray(await makeArray("inside"));
    const chunk = await readRoi(array, { offset: [1, 2], shape: [2, 3] });
    assert.deepEqual(chunk.shape, [2, 3]);
    assert.deepEqual(rows(chunk), [[12, 13, 14], [22, 23, 24]]);
  });

  it("pad the read context outside the array with fill", async () => {
    const array = await openArray(await makeArray("edge"));
    const block = {
      readRoi: { offset: [-1, 6], shape: [3, 4] },
      writeRoi: { offset: [0, 7], shape: [1, 2] },
    };
    const chunk = await readBlock(array, block, { fill: -1 });
    assert.deepEqual(chunk.shape, [3, 4]);
    assert.deepEqual(chunk.stride, [4, 1]);
    assert.deepEqual(rows(chunk), [[-1, -1, -1, -1], [6, 7, -1, -1], [16, 17, -1, -1]]);
  });

  it("pad with the array's fill value by default, and place the array by offset", async () => {
    const array = await openArray(await makeArray("fill", 7));
    // Coordinate 0 is array index 2 on the first axis: coordinates -3..-1 are indices -1..1.
    const chunk = await readRoi(array, { offset: [-3, 0], shape: [3, 2] }, { offset: [2, 0] });
    assert.deepEqual(rows(chunk), [[7, 7], [0, 1], [10, 11]]);
  });

  it("return only fill for a ROI wholly outside the array", async () => {
    const array = await openArray(await makeArray("outside"));
    const chunk = await readRoi(array, { offset: [10, 10], shape: [2, 2] }, { fill: 3 });
    assert.deepEqual(Array.from(chunk.data, Number), [3, 3, 3, 3]);
    assert.ok(chunk.data instanceof Int32Array);
  });

  it("refuse a ROI of another dimensionality, naming the array", async () => {
    const folder = await makeArray("rank");
    const array = await openArray(folder);
    await assert.rejects(
      readRoi(array, { offset: [0, 0, 0], shape: [1, 1, 1] }),
      new RegExp(
        `readRoi: the ROI has 3 axes but the array "${folder}" has 2 \\(shape \\[6,8\\]\\)`,
      ),
    );
  });
});

describe("writeBlock", () => {
  it("writes the write ROI out of a result computed over the read ROI", async () => {
    const folder = await makeArray("write-read");
    const array = await openArray(folder);
    const block = {
      readRoi: { offset: [0, 0], shape: [4, 4] },
      writeRoi: { offset: [1, 1], shape: [2, 2] },
    };
    const input = await readBlock(array, block);
    await writeBlock(array, block, Int32Array.from(Array.from(input.data, Number), (v) => -v));
    const after = await zarr.get(await openArray(folder), [zarr.slice(0, 4), zarr.slice(0, 4)]);
    assert.deepEqual(rows(after as { data: Int32Array; shape: number[] }), [
      [0, 1, 2, 3],
      [10, -11, -12, 13],
      [20, -21, -22, 23],
      [30, 31, 32, 33],
    ]);
  });

  it("writes a write-ROI-shaped chunk, leaving out the part outside the array", async () => {
    const folder = await makeArray("overhang");
    const array = await openArray(folder);
    const block = {
      readRoi: { offset: [4, 6], shape: [4, 4] },
      writeRoi: { offset: [4, 6], shape: [4, 4] },
    };
    await writeBlock(array, block, {
      data: new Int32Array(16).fill(99),
      shape: [4, 4],
      stride: [4, 1],
    });
    const after = await zarr.get(await openArray(folder), [zarr.slice(4, 6), zarr.slice(5, 8)]);
    assert.deepEqual(rows(after as { data: Int32Array; shape: number[] }), [[45, 99, 99], [
      55,
      99,
      99,
    ]]);
  });

  it("refuses data that fits neither ROI, with both sizes and the fix", async () => {
    const array = await openArray(await makeArray("wrong-size"));
    const block = {
      readRoi: { offset: [0, 0], shape: [4, 4] },
      writeRoi: { offset: [1, 1], shape: [2, 2] },
    };
    await assert.rejects(
      writeBlock(array, block, new Int32Array(5)),
      /writeBlock got 5 elements, but the block's write ROI holds 4 \(shape \[2,2\]\) and its read ROI 16 \(shape \[4,4\]\); pass the result for one of them/,
    );
  });
});

describe("openArray", () => {
  it("names the folder and what it needs when there is no array", async () => {
    const folder = path.join(newDir("missing"), "nothing.zarr");
    await assert.rejects(
      openArray(folder),
      new RegExp(
        `Cannot open the Zarr array "${folder}": .*zarr\\.json \\(v3\\) or \\.zarray \\(v2\\)`,
      ),
    );
  });
});
