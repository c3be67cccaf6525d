/**
 * The ready queue draws a task's initial blocks through a cursor instead of a generator: the
 * cursor must hand out exactly the blocks of a level, in row-major order, and then only -1.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { cursorOf, type Fit, type PositionCursor, TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import { ReadyQueue } from "../lib/schedule/ready_queue.ts";
import { Rng } from "./fixtures/rng.ts";

function drain(cursor: PositionCursor): number[] {
  const out: number[] = [];
  for (let p = cursor.next(); p >= 0; p = cursor.next()) out.push(p);
  return out;
}

/** A random layout of 0 to 3 axes: context of 0 to 2 blocks' worth, any fit. */
function randomLayout(rng: Rng): TaskLayout {
  const dims = rng.int(4);
  const write = Array.from({ length: dims }, () => 1 + rng.int(3));
  const context = write.map((w) => rng.int(2 * w + 1));
  const read = write.map((w, d) => w + 2 * context[d]!);
  const total = write.map((w, d) => read[d]! + rng.int(9) * w + rng.int(w));
  const fits: Fit[] = ["valid", "overhang", "shrink"];
  return new TaskLayout({
    totalRoi: makeRoi(total.map(() => 0), total),
    readRoi: makeRoi(total.map(() => 0), read),
    writeRoi: makeRoi(context, write),
    fit: fits[rng.int(3)]!,
    readWriteConflict: rng.chance(0.8),
  });
}

/** A line of `length` voxels cut into blocks of 2 (none when shorter than a block). */
function lineOf(length: number): TaskLayout {
  return new TaskLayout({
    totalRoi: makeRoi([0], [length]),
    readRoi: makeRoi([0], [2]),
    writeRoi: makeRoi([0], [2]),
    fit: "valid",
    readWriteConflict: false,
  });
}

describe("position cursors", () => {
  it("hand out each level's blocks in ascending position order, on random layouts", () => {
    const rng = new Rng(20261206);
    let levelsSeen = 0;
    for (let trial = 0; trial < 300; trial++) {
      const layout = randomLayout(rng);
      const all = Array.from({ length: layout.blockCount }, (_, p) => p);
      let total = 0;
      for (let level = 0; level < layout.levelCount; level++) {
        // Row-major within a level is ascending position order over the C-order grid.
        const expected = all.filter((p) => layout.levelOf(p) === level);
        const got = drain(layout.levelCursor(level));
        assert.deepEqual(got, expected, `trial ${trial}, level ${level}`);
        assert.equal(got.length, layout.levelSize(level));
        assert.deepEqual([...layout.levelPositions(level)], expected);
        total += got.length;
        levelsSeen++;
      }
      assert.equal(total, layout.blockCount, `trial ${trial}: every block in one level`);
    }
    assert.ok(levelsSeen > 300, `only ${levelsSeen} levels were tried`);
  });

  it("keep answering -1 once they are done", () => {
    const cursor = lineOf(4).levelCursor(0);
    assert.deepEqual([cursor.next(), cursor.next(), cursor.next(), cursor.next()], [0, 1, -1, -1]);
    const empty = lineOf(1);
    assert.equal(empty.blockCount, 0);
    assert.equal(empty.levelCursor(0).next(), -1);
    const wrapped = cursorOf([5, 7]);
    assert.deepEqual([wrapped.next(), wrapped.next(), wrapped.next(), wrapped.next()], [
      5,
      7,
      -1,
      -1,
    ]);
  });

  it("feed a ready queue the same blocks as the iterable they replace", () => {
    const rng = new Rng(7);
    for (const byPosition of [false, true]) {
      const layout = randomLayout(rng);
      const initial = [...layout.levelPositions(0)];
      const fromCursor = new ReadyQueue(layout.levelCursor(0), initial.length, byPosition);
      const fromArray = new ReadyQueue(initial, initial.length, byPosition);
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i <= initial.length; i++) {
        assert.equal(fromCursor.length, fromArray.length);
        a.push(fromCursor.shift());
        b.push(fromArray.shift());
      }
      assert.deepEqual(a, b);
      assert.deepEqual(a, [...initial, -1]);
      assert.equal(fromCursor.length, 0);
    }
  });
});
