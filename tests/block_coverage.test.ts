/**
 * What a task's blocks leave unwritten of its total write ROI (lib/blocks/coverage.ts): against
 * the union of every block's write ROI, counted point by point, for every fit; and the notice
 * `plan` and `run` print for daisy's default `fit: "valid"` when the blocks do not divide it.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  coverageNotice,
  coverageOf,
  type Fit,
  FITS,
  formatPercent,
  TaskLayout,
} from "../lib/blocks/mod.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import { Rng } from "./fixtures/rng.ts";

function layout(
  total: [number[], number[]],
  read: [number[], number[]],
  write: [number[], number[]],
  fit: Fit,
): TaskLayout {
  return new TaskLayout({
    totalRoi: makeRoi(total[0], total[1]),
    readRoi: makeRoi(read[0], read[1]),
    writeRoi: makeRoi(write[0], write[1]),
    fit,
    readWriteConflict: true,
  });
}

/** The points of the total write ROI (2-D) that no block's write ROI holds. */
function unwrittenPoints(l: TaskLayout): number {
  const [o0, o1] = l.totalWriteRoi.offset as [number, number];
  const [s0, s1] = l.totalWriteRoi.shape as [number, number];
  const written = new Uint8Array(s0 * s1);
  for (let p = 0; p < l.blockCount; p++) {
    const w = l.writeRoiOf(p);
    for (let i = w.offset[0]!; i < w.offset[0]! + w.shape[0]!; i++) {
      for (let j = w.offset[1]!; j < w.offset[1]! + w.shape[1]!; j++) {
        if (i >= o0 && i < o0 + s0 && j >= o1 && j < o1 + s1) written[(i - o0) * s1 + j - o1] = 1;
      }
    }
  }
  return written.length - written.reduce((a, b) => a + b, 0);
}

describe("coverage of the total write ROI", () => {
  it("250x250 in 64x64 blocks with fit valid: 58 of 250 on each axis, 41 %", () => {
    const l = layout([[0, 0], [250, 250]], [[0, 0], [64, 64]], [[0, 0], [64, 64]], "valid");
    const c = coverageOf(l);
    assert.ok(c !== null);
    assert.deepEqual(c.unwritten, [58, 58]);
    assert.ok(Math.abs(c.fraction - (1 - (192 / 250) ** 2)) < 1e-12);
    assert.equal(
      coverageNotice("t", l),
      'Task "t": fit "valid" leaves 41 % of the total write ROI (250×250) unwritten: 58 of 250 on axis 0, 58 of 250 on axis 1, at the far end, where the write blocks (64×64) do not divide it; fit "shrink" (crops the last blocks) or "overhang" (keeps them whole, past the end) covers it, or make the total write ROI a multiple of the write ROI',
    );
    for (const fit of ["shrink", "overhang"] as const) {
      const covered = layout([[0, 0], [250, 250]], [[0, 0], [64, 64]], [[0, 0], [64, 64]], fit);
      assert.equal(coverageOf(covered), null, fit);
      assert.equal(coverageNotice("t", covered), null, fit);
    }
  });

  it("is null when the blocks divide the total write ROI, and for a task with no blocks", () => {
    // The volume 256x256 grown by 8 of context: 4x4 write blocks of 64 cover it exactly.
    const grown = layout([[-8, -8], [272, 272]], [[-8, -8], [80, 80]], [[0, 0], [64, 64]], "valid");
    assert.equal(coverageOf(grown), null);
    const none = layout([[0, 0], [50, 50]], [[0, 0], [64, 64]], [[0, 0], [64, 64]], "valid");
    assert.equal(none.blockCount, 0);
    assert.equal(coverageOf(none), null);
  });

  it("names only the axes with a gap", () => {
    const l = layout([[0, 0, 0], [64, 100, 128]], [[0, 0, 0], [32, 32, 32]], [
      [0, 0, 0],
      [32, 32, 32],
    ], "valid");
    assert.deepEqual(coverageOf(l)?.unwritten, [0, 4, 0]);
    assert.match(coverageNotice("a", l) ?? "", /unwritten: 4 of 100 on axis 1, at the far end/);
  });

  it("matches the union of the blocks' write ROIs, point by point, for every fit", () => {
    const rng = new Rng(48);
    const int = (lo: number, hi: number) => lo + rng.int(hi - lo);
    let gaps = 0;
    for (let trial = 0; trial < 300; trial++) {
      const fit = rng.pick(FITS);
      const w = [int(1, 9), int(1, 9)];
      const before = [int(0, 4), int(0, 4)];
      const after = [int(0, 4), int(0, 4)];
      const total = [int(1, 40), int(1, 40)];
      const l = layout(
        [[int(-10, 10), int(-10, 10)], total],
        [[-before[0]!, -before[1]!], [
          w[0]! + before[0]! + after[0]!,
          w[1]! + before[1]! + after[1]!,
        ]],
        [[0, 0], w],
        fit,
      );
      if (l.totalWriteRoi.shape.some((s) => s <= 0) || l.blockCount === 0) continue;
      const points = l.totalWriteRoi.shape[0]! * l.totalWriteRoi.shape[1]!;
      const c = coverageOf(l);
      const missing = unwrittenPoints(l);
      const where = `trial ${trial}: ${JSON.stringify({ fit, w, before, after, total })}`;
      if (missing === 0) assert.equal(c, null, where);
      else {
        assert.ok(c !== null, where);
        assert.equal(fit, "valid", where);
        assert.ok(Math.abs(c.fraction * points - missing) < 1e-6, where);
        gaps++;
      }
    }
    assert.ok(gaps >= 30, `only ${gaps} layouts with a gap`);
  });

  it("prints a fraction readably", () => {
    assert.equal(formatPercent(0.4098), "41 %");
    assert.equal(formatPercent(0.0312), "3.1 %");
    assert.equal(formatPercent(0.0004), "less than 0.1 %");
  });
});
