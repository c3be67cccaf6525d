/**
 * `blockwise plan --blocks --json` reproduces daisy's worked examples (reference §3.3, §4.3):
 * IDs, ROIs, levels and upstream sets, for all three fit modes, through the real CLI.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describeRun, removeDir, runCli, tempDir } from "./fixtures/tracking/harness.ts";

interface PlannedBlock {
  task: string;
  id: number;
  index: number[];
  level: number;
  read_roi: { offset: number[]; shape: number[] };
  write_roi: { offset: number[]; shape: number[] };
  upstream: { task: string; id: number }[];
}

async function plan(dir: string, name: string, tasks: string): Promise<PlannedBlock[]> {
  const file = path.join(dir, `${name}.mjs`);
  fs.writeFileSync(file, `export default { tasks: [${tasks}] };\n`);
  const r = await runCli(["plan", file, "--blocks", "--json"]);
  assert.equal(r.code, 0, describeRun(r));
  return r.stdout.trim().split("\n").map((l) => JSON.parse(l) as PlannedBlock);
}

const oneD = (fit: string) =>
  `{ id: "t", totalRoi: { offset: [0], shape: [50] }, readRoi: { offset: [0], shape: [12] },
     writeRoi: { offset: [1], shape: [10] }, fit: "${fit}", process() {} }`;

describe("plan --blocks --json against daisy's worked examples", () => {
  it("1-D, conflicts on: valid, overhang and shrink (reference §3.3 and §4.3 example 1)", async () => {
    const dir = tempDir("blockwise-plan-daisy-");
    // In dispatch order: level 0 (#1, #3), then level 1 (#0, #2[, #4]).
    const expected = {
      valid: [
        [1, 1, 0, [11, 10], [10, 12], []],
        [3, 3, 0, [31, 10], [30, 12], []],
        [0, 0, 1, [1, 10], [0, 12], [1]],
        [2, 2, 1, [21, 10], [20, 12], [1, 3]],
      ],
      overhang: [
        [1, 1, 0, [11, 10], [10, 12], []],
        [3, 3, 0, [31, 10], [30, 12], []],
        [0, 0, 1, [1, 10], [0, 12], [1]],
        [2, 2, 1, [21, 10], [20, 12], [1, 3]],
        [4, 4, 1, [41, 10], [40, 12], [3]],
      ],
      shrink: [
        [1, 1, 0, [11, 10], [10, 12], []],
        [3, 3, 0, [31, 10], [30, 12], []],
        [0, 0, 1, [1, 10], [0, 12], [1]],
        [2, 2, 1, [21, 10], [20, 12], [1, 3]],
        [4, 4, 1, [41, 8], [40, 10], [3]],
      ],
    } as const;
    for (const [fit, rows] of Object.entries(expected)) {
      const blocks = await plan(dir, fit, oneD(fit));
      assert.deepEqual(
        blocks.map((b) => [
          b.id,
          b.index[0],
          b.level,
          [b.write_roi.offset[0], b.write_roi.shape[0]],
          [b.read_roi.offset[0], b.read_roi.shape[0]],
          b.upstream.map((u) => u.id),
        ]),
        rows,
        `fit ${fit}`,
      );
    }
    removeDir(dir);
  });

  it("2-D, no conflicts: the IDs of every grid index and the shrunk edge shapes (reference §3.3)", async () => {
    const dir = tempDir("blockwise-plan-daisy-2d-");
    const task = (fit: string) =>
      `{ id: "t", totalRoi: { offset: [0, 0], shape: [25, 35] }, readRoi: { offset: [0, 0], shape: [10, 10] },
         writeRoi: { offset: [0, 0], shape: [10, 10] }, readWriteConflict: false, fit: "${fit}", process() {} }`;
    const ids = (blocks: PlannedBlock[]) =>
      Object.fromEntries(blocks.map((b) => [b.index.join(","), b.id]));
    assert.deepEqual(ids(await plan(dir, "valid", task("valid"))), {
      "0,0": 0,
      "0,1": 1,
      "0,2": 3,
      "1,0": 2,
      "1,1": 4,
      "1,2": 7,
    });
    const overhang = ids(await plan(dir, "overhang", task("overhang")));
    assert.deepEqual(overhang, {
      "0,0": 0,
      "0,1": 1,
      "0,2": 3,
      "0,3": 6,
      "1,0": 2,
      "1,1": 4,
      "1,2": 7,
      "1,3": 11,
      "2,0": 5,
      "2,1": 8,
      "2,2": 12,
      "2,3": 17,
    });
    const shrink = await plan(dir, "shrink", task("shrink"));
    assert.deepEqual(ids(shrink), overhang);
    const shape = (index: string) =>
      shrink.find((b) => b.index.join(",") === index)!.write_roi.shape;
    assert.deepEqual(shape("0,3"), [10, 5]);
    assert.deepEqual(shape("2,0"), [5, 10]);
    assert.deepEqual(shape("2,3"), [5, 5]);
    removeDir(dir);
  });

  it("chained tasks: the upstream set of second's block at (3, 3) is first's 3×3 window (reference §4.4)", async () => {
    const dir = tempDir("blockwise-plan-daisy-chain-");
    const blocks = await plan(
      dir,
      "chain",
      `{ id: "first", totalRoi: { offset: [0, 0], shape: [6, 6] }, readRoi: { offset: [0, 0], shape: [3, 3] },
         writeRoi: { offset: [1, 1], shape: [1, 1] }, process() {} },
       { id: "second", upstream: ["first"], totalRoi: { offset: [1, 1], shape: [4, 4] },
         readRoi: { offset: [0, 0], shape: [3, 3] }, writeRoi: { offset: [1, 1], shape: [1, 1] }, process() {} }`,
    );
    const first = blocks.filter((b) => b.task === "first");
    assert.deepEqual(
      [0, 1, 2, 3].map((level) => first.filter((b) => b.level === level).map((b) => b.id)),
      [[12, 23, 25, 40], [8, 17, 19, 32], [7, 16, 18, 31], [4, 11, 13, 24]],
    );
    const b33 = blocks.find((b) =>
      b.task === "second" && b.write_roi.offset[0] === 3 && b.write_roi.offset[1] === 3
    )!;
    assert.deepEqual(
      b33.upstream.filter((u) => u.task === "first").map((u) => u.id).sort((x, y) => x - y),
      [12, 17, 18, 23, 24, 25, 31, 32, 40],
    );
    removeDir(dir);
  });
});
