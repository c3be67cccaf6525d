/**
 * The bytes of a temporary task on disk, as the progress line, the summary and `run_end` report
 * them: a block's files count from the moment its result arrives (they are written in staging
 * and its commit begins), through its commit, while it is live, until its files are removed.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ManifestFile } from "../lib/outputs/manifest.ts";
import { TemporaryBytes } from "../lib/outputs/temporary_files.ts";

const file = (size: number): ManifestFile[] => [["o", `o/${size}.bin`, size, "0".repeat(64)]];

describe("the bytes of a temporary task", () => {
  it("counts a block from its result, once, until its files are removed", () => {
    const bytes = new TemporaryBytes();
    // Three results arrive; their commits begin: 300 bytes on disk, no block live yet.
    for (const p of [0, 1, 2]) bytes.staging(p, file(100));
    assert.deepEqual([bytes.liveBytes, bytes.liveBlocks, bytes.peakBytes], [300, 0, 300]);
    // Block 0's commit ends: it is live, counted once.
    bytes.settled(0);
    bytes.live(file(100), +1);
    assert.deepEqual([bytes.liveBytes, bytes.liveBlocks, bytes.peakBytes], [300, 1, 300]);
    // Block 2's commit fails; its retry writes 150 bytes, replacing what its first attempt had.
    bytes.settled(2);
    bytes.staging(2, file(150));
    assert.equal(bytes.liveBytes, 350);
    bytes.staging(2, file(120));
    assert.equal(bytes.liveBytes, 320, "a new attempt's files replace the last attempt's");
    // Block 0's readers are done and its files are removed.
    bytes.live(file(100), -1);
    bytes.deletedBlocks++;
    assert.deepEqual([bytes.liveBytes, bytes.liveBlocks, bytes.peakBytes], [220, 0, 350]);
    const stats = bytes.stats(3, 4);
    assert.deepEqual(stats, {
      liveBlocks: 0,
      liveBytes: 220,
      peakBytes: 350,
      deletedBlocks: 1,
      deletedBytes: 0,
      regenerated: 3,
      removing: 4,
    });
  });

  it("counts deleted blocks and their bytes, and gives them back when one is regenerated", () => {
    const bytes = new TemporaryBytes();
    bytes.deleted(100, +1);
    bytes.deleted(50, +1);
    bytes.deleted(100, -1);
    assert.deepEqual([bytes.deletedBlocks, bytes.deletedBytes], [1, 50]);
  });

  it("settling a block that never began its commit changes nothing", () => {
    const bytes = new TemporaryBytes();
    bytes.live(file(64), +1);
    bytes.settled(7);
    assert.deepEqual([bytes.liveBytes, bytes.peakBytes], [64, 64]);
  });
});
