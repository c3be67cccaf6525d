/**
 * Coordinates and ROIs against daisy's semantics (reference §1; test catalogue 71-78).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  add,
  ceilDiv,
  containsPoint,
  containsRoi,
  type Coord,
  coordEquals,
  coordToString,
  div,
  euclidMod,
  floorDiv,
  grow,
  intersect,
  makeRoi,
  max,
  min,
  mod,
  mul,
  neg,
  product,
  roiDims,
  roiEnd,
  roiEquals,
  roiIsEmpty,
  roiSize,
  roiToJson,
  roiToString,
  scale,
  shift,
  sub,
} from "../lib/geometry/mod.ts";

describe("Coordinate (catalogue 77-78)", () => {
  it("has dims, length, indexing and a list form", () => {
    const c: Coord = [1, 2, 3];
    assert.equal(c.length, 3);
    assert.equal(c[0], 1);
    assert.equal(c[2], 3);
    assert.equal(c[3], undefined);
    assert.deepEqual([...c], [1, 2, 3]);
  });

  it("compares by value", () => {
    assert.equal(coordEquals([1, 2, 3], [1, 2, 3]), true);
    assert.equal(coordEquals([1, 2, 3], [1, 2, 4]), false);
    assert.equal(coordEquals([1, 2], [1, 2, 3]), false);
    assert.equal(coordEquals([], []), true);
  });

  it("does element-wise arithmetic", () => {
    assert.deepEqual(add([1, 2, 3], [10, 20, 30]), [11, 22, 33]);
    assert.deepEqual(sub([1, 2, 3], [10, 20, 30]), [-9, -18, -27]);
    assert.deepEqual(mul([1, 2, 3], [10, 20, 30]), [10, 40, 90]);
    assert.deepEqual(scale([1, -2, 3], 3), [3, -6, 9]);
    assert.deepEqual(neg([1, -2, 3]), [-1, 2, -3]);
    assert.deepEqual(max([1, 5, -3], [2, 4, -4]), [2, 5, -3]);
    assert.deepEqual(min([1, 5, -3], [2, 4, -4]), [1, 4, -4]);
    assert.equal(product([2, 3, 4]), 24);
    assert.equal(product([]), 1);
  });

  it("refuses to combine coordinates of different dimensionality", () => {
    assert.throws(() => add([1, 2], [1, 2, 3]), RangeError);
    assert.throws(() => sub([1], [1, 2]), RangeError);
    assert.throws(() => mul([1], []), RangeError);
    assert.throws(() => div([1, 2], [1]), RangeError);
    assert.throws(() => mod([1, 2], [1]), RangeError);
    assert.throws(() => max([1, 2], [1]), RangeError);
    assert.throws(() => min([1, 2], [1]), RangeError);
  });

  it("divides with floor and takes the Euclidean remainder of negatives", () => {
    assert.equal(floorDiv(-7, 3), -3);
    assert.equal(euclidMod(-7, 3), 2);
    assert.equal(floorDiv(7, 3), 2);
    assert.equal(euclidMod(7, 3), 1);
    assert.equal(floorDiv(-1, 10), -1);
    assert.equal(euclidMod(-1, 10), 9);
    assert.equal(floorDiv(-6, 3), -2);
    assert.equal(floorDiv(0, 3), 0);
    assert.deepEqual(div([-7, 7, -6], [3, 3, 3]), [-3, 2, -2]);
    assert.deepEqual(mod([-7, 7, -1], [3, 3, 10]), [2, 1, 9]);
    // Identity a = b * floor(a / b) + mod(a, b) with 0 <= mod < b, over a range of values.
    for (let a = -50; a <= 50; a++) {
      for (const b of [1, 2, 3, 7, 10]) {
        const q = floorDiv(a, b);
        const r = euclidMod(a, b);
        assert.equal(b * q + r, a, `a=${a} b=${b}`);
        assert.ok(r >= 0 && r < b, `a=${a} b=${b} r=${r}`);
      }
    }
  });

  it("gives +0, never -0, for the remainder of an exact negative multiple", () => {
    // `-6 % 3` is -0 in JavaScript; daisy's remainder is the integer 0. A -0 leaks into
    // deepStrictEqual comparisons and Object.is checks of anything built from `mod`.
    assert.ok(
      Object.is(euclidMod(-6, 3), 0),
      `euclidMod(-6, 3) is ${Object.is(euclidMod(-6, 3), -0) ? "-0" : "not 0"}`,
    );
    assert.deepEqual(mod([-6, -10], [3, 5]), [0, 0]);
  });

  it("rounds up with ceilDiv as -((-a) // b)", () => {
    assert.equal(ceilDiv(7, 3), 3);
    assert.equal(ceilDiv(6, 3), 2);
    assert.equal(ceilDiv(-7, 3), -2);
    assert.equal(ceilDiv(-6, 3), -2);
    assert.equal(ceilDiv(1, 10), 1);
    for (let a = -30; a <= 30; a++) {
      for (const b of [1, 2, 3, 7]) assert.equal(ceilDiv(a, b), -floorDiv(-a, b));
    }
  });

  it("prints as (1, 2, 3), (5) in 1-D and () in 0-D", () => {
    assert.equal(coordToString([1, 2, 3]), "(1, 2, 3)");
    assert.equal(coordToString([5]), "(5)");
    assert.equal(coordToString([]), "()");
    assert.equal(coordToString([-4, 0]), "(-4, 0)");
  });
});

describe("Roi (catalogue 71-76)", () => {
  it("has begin, end, shape and dims (catalogue 71)", () => {
    const roi = makeRoi([10, 20], [30, 40]);
    assert.deepEqual([...roi.offset], [10, 20]);
    assert.deepEqual([...roi.shape], [30, 40]);
    assert.deepEqual(roiEnd(roi), [40, 60]);
    assert.equal(roiDims(roi), 2);
    assert.equal(roiSize(roi), 1200);
  });

  it("copies its inputs and rejects mismatched dimensionality", () => {
    const offset = [1, 2];
    const roi = makeRoi(offset, [3, 4]);
    offset[0] = 100;
    assert.deepEqual([...roi.offset], [1, 2]);
    assert.throws(() => makeRoi([1, 2], [3]), RangeError);
  });

  it("compares offset and shape (catalogue 72)", () => {
    assert.equal(roiEquals(makeRoi([10, 20], [30, 40]), makeRoi([10, 20], [30, 40])), true);
    assert.equal(roiEquals(makeRoi([10, 20], [30, 40]), makeRoi([10, 21], [30, 40])), false);
    assert.equal(roiEquals(makeRoi([10, 20], [30, 40]), makeRoi([10, 20], [30, 41])), false);
    // Two empty ROIs at different offsets are unequal.
    assert.equal(roiEquals(makeRoi([0, 0], [0, 0]), makeRoi([1, 1], [0, 0])), false);
  });

  it("contains a ROI with both ends inclusive (catalogue 73)", () => {
    const outer = makeRoi([0, 0], [100, 100]);
    const inner = makeRoi([10, 10], [20, 20]);
    assert.equal(containsRoi(outer, inner), true);
    assert.equal(containsRoi(inner, outer), false);
    assert.equal(containsRoi(outer, outer), true);
    assert.equal(containsRoi(outer, makeRoi([0, 0], [100, 101])), false);
    assert.equal(containsRoi(outer, makeRoi([-1, 0], [10, 10])), false);
    assert.equal(containsRoi(outer, makeRoi([90, 90], [10, 10])), true);
    assert.equal(containsRoi(outer, makeRoi([91, 90], [10, 10])), false);
  });

  it("contains a zero-shape ROI whose offset lies in [begin, end]", () => {
    const outer = makeRoi([0, 0], [10, 10]);
    assert.equal(containsRoi(outer, makeRoi([0, 0], [0, 0])), true);
    assert.equal(containsRoi(outer, makeRoi([10, 10], [0, 0])), true);
    assert.equal(containsRoi(outer, makeRoi([10, 5], [0, 0])), true);
    assert.equal(containsRoi(outer, makeRoi([11, 5], [0, 0])), false);
    assert.equal(containsRoi(outer, makeRoi([-1, 5], [0, 0])), false);
    assert.throws(() => containsRoi(outer, makeRoi([1], [1])), RangeError);
  });

  it("contains a point half-open (catalogue 74)", () => {
    const roi = makeRoi([10, 20], [30, 40]);
    assert.equal(containsPoint(roi, [10, 20]), true);
    assert.equal(containsPoint(roi, [39, 59]), true);
    assert.equal(containsPoint(roi, [40, 60]), false);
    assert.equal(containsPoint(roi, [40, 59]), false);
    assert.equal(containsPoint(roi, [39, 60]), false);
    assert.equal(containsPoint(roi, [9, 20]), false);
    assert.equal(containsPoint(makeRoi([0], [0]), [0]), false);
    assert.throws(() => containsPoint(roi, [10]), RangeError);
  });

  it("grows without clamping (catalogue 75)", () => {
    const roi = makeRoi([10, 10], [20, 20]);
    assert.ok(roiEquals(grow(roi, [5, 5], [5, 5]), makeRoi([5, 5], [30, 30])));
    assert.ok(roiEquals(grow(roi, [1, 2], [3, 4]), makeRoi([9, 8], [24, 26])));
    assert.ok(roiEquals(grow(roi, [-5, 0], [0, -5]), makeRoi([15, 10], [15, 15])));
    // Negative amounts shrink, and the shape may go negative.
    const shrunk = grow(roi, [-15, -15], [-15, -15]);
    assert.ok(roiEquals(shrunk, makeRoi([25, 25], [-10, -10])), roiToString(shrunk));
    assert.equal(roiIsEmpty(shrunk), true);
    assert.equal(roiSize(shrunk), 0);
    assert.throws(() => grow(roi, [1], [1, 1]), RangeError);
  });

  it("intersects to max(begins), min(ends) (catalogue 76)", () => {
    const a = makeRoi([0, 0], [20, 20]);
    const b = makeRoi([10, 10], [20, 20]);
    assert.ok(roiEquals(intersect(a, b), makeRoi([10, 10], [10, 10])));
    assert.ok(roiEquals(intersect(b, a), makeRoi([10, 10], [10, 10])));
    assert.ok(roiEquals(intersect(a, a), a));
    assert.ok(roiEquals(intersect(a, makeRoi([5, 5], [2, 2])), makeRoi([5, 5], [2, 2])));
    assert.throws(() => intersect(a, makeRoi([0], [1])), RangeError);
  });

  it("intersects disjoint ROIs to a zero shape at max(begins)", () => {
    const i = intersect(makeRoi([0, 0], [5, 5]), makeRoi([10, 20], [5, 5]));
    assert.ok(roiEquals(i, makeRoi([10, 20], [0, 0])), roiToString(i));
    assert.equal(roiIsEmpty(i), true);
    // Disjoint on one axis only: that axis collapses, the other keeps its overlap.
    const j = intersect(makeRoi([0, 0], [5, 10]), makeRoi([7, 2], [5, 3]));
    assert.ok(roiEquals(j, makeRoi([7, 2], [0, 3])), roiToString(j));
    // Touching boxes share no volume.
    const k = intersect(makeRoi([0], [5]), makeRoi([5], [5]));
    assert.ok(roiEquals(k, makeRoi([5], [0])), roiToString(k));
    // The result is never a negative shape, whatever the order.
    const l = intersect(makeRoi([10, 20], [5, 5]), makeRoi([0, 0], [5, 5]));
    assert.ok(roiEquals(l, makeRoi([10, 20], [0, 0])), roiToString(l));
  });

  it("shifts the offset only", () => {
    const roi = makeRoi([1, 2], [3, 4]);
    assert.ok(roiEquals(shift(roi, [10, -5]), makeRoi([11, -3], [3, 4])));
    assert.ok(roiEquals(shift(shift(roi, [10, -5]), [-10, 5]), roi));
    assert.ok(roiEquals(roi, makeRoi([1, 2], [3, 4])), "shift must not mutate its input");
    assert.throws(() => shift(roi, [1]), RangeError);
  });

  it("prints as Roi((10, 20), (30, 40)) and Roi((0), (10)) in 1-D", () => {
    assert.equal(roiToString(makeRoi([10, 20], [30, 40])), "Roi((10, 20), (30, 40))");
    assert.equal(roiToString(makeRoi([0], [10])), "Roi((0), (10))");
    assert.equal(roiToString(makeRoi([], [])), "Roi((), ())");
  });

  it("has a plain JSON form", () => {
    assert.deepEqual(roiToJson(makeRoi([1, 2], [3, 4])), { offset: [1, 2], shape: [3, 4] });
    assert.equal(
      JSON.stringify(roiToJson(makeRoi([-1], [0]))),
      '{"offset":[-1],"shape":[0]}',
    );
  });

  it("is empty exactly when some shape entry is zero or negative", () => {
    assert.equal(roiIsEmpty(makeRoi([0, 0], [1, 1])), false);
    assert.equal(roiIsEmpty(makeRoi([0, 0], [1, 0])), true);
    assert.equal(roiIsEmpty(makeRoi([0, 0], [-1, 5])), true);
    assert.equal(roiSize(makeRoi([0, 0], [-1, 5])), 0);
  });
});
