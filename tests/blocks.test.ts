/**
 * Tiling, fit modes, block IDs, levels and tracking cells against daisy's semantics
 * (reference §3-§4.3; test catalogue 4).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type BlockId,
  blockIdToJson,
  cantorNumber,
  cantorNumberBig,
  compareBlockIds,
  type Fit,
  FITS,
  numberIdsAreExact,
  TaskLayout,
} from "../lib/blocks/mod.ts";
import { makeRoi, type Roi, roiToString } from "../lib/geometry/mod.ts";
import { Rng } from "./fixtures/rng.ts";

type Box = readonly [readonly number[], readonly number[]];

function layout(
  total: Box,
  read: Box,
  write: Box,
  fit: Fit = "valid",
  readWriteConflict = true,
): TaskLayout {
  return new TaskLayout({
    totalRoi: makeRoi(total[0], total[1]),
    readRoi: makeRoi(read[0], read[1]),
    writeRoi: makeRoi(write[0], write[1]),
    fit,
    readWriteConflict,
  });
}

function roi(r: Roi): string {
  return roiToString(r);
}

function R(offset: readonly number[], shape: readonly number[]): string {
  return roiToString(makeRoi(offset, shape));
}

/** Every position, in enumeration order, with its write ROI, read ROI and ID. */
function blocksOf(l: TaskLayout): { write: string; read: string; id: BlockId; level: number }[] {
  const out: { write: string; read: string; id: BlockId; level: number }[] = [];
  for (let level = 0; level < l.levelCount; level++) {
    for (const p of l.levelPositions(level)) {
      out.push({
        write: roi(l.writeRoiOf(p)),
        read: roi(l.readRoiOf(p)),
        id: l.blockIdOf(p),
        level,
      });
    }
  }
  return out;
}

function sortedIds(l: TaskLayout): BlockId[] {
  return [...l.allPositions()].map((p) => l.blockIdOf(p)).sort(compareBlockIds);
}

/** A seeded PRNG; `rand(n)` is an integer in `[0, n)`. */
function prng(seed: number): (n: number) => number {
  const rng = new Rng(seed);
  return (n: number) => rng.int(n);
}

// ---------------------------------------------------------------------------------------------
// An independent model of daisy's enumeration (reference §3.2-§3.4, §4.1-§4.2), in voxel units,
// written from the specification rather than from lib/.

function euclid(a: number, b: number): number {
  return ((a % b) + b) % b;
}

function binomial(n: bigint, k: bigint): bigint {
  if (k < 0n || n < k) return 0n;
  let num = 1n;
  let den = 1n;
  for (let i = 0n; i < k; i++) {
    num *= n - i;
    den *= i + 1n;
  }
  return num / den;
}

/** Closed form `id(x) = sum over k = 1..n of C(x1 + ... + xk + k - 1, k)`. */
function closedFormId(index: readonly (number | bigint)[]): bigint {
  let id = 0n;
  let sum = 0n;
  for (let k = 1; k <= index.length; k++) {
    sum += BigInt(index[k - 1]!);
    id += binomial(sum + BigInt(k) - 1n, BigInt(k));
  }
  return id;
}

interface ModelBlock {
  write: string;
  read: string;
  id: bigint;
  level: number;
}

function product<T>(axes: readonly (readonly T[])[]): T[][] {
  let out: T[][] = [[]];
  for (const axis of axes) out = out.flatMap((prefix) => axis.map((v) => [...prefix, v]));
  return out;
}

/** daisy's blocks level by level, or null when daisy has zero levels (it would panic). */
function daisyModel(
  total: Box,
  read: Box,
  write: Box,
  fit: Fit,
  conflict: boolean,
): { levels: ModelBlock[][]; stride: number[] } | null {
  const w = write[1];
  const cb = write[0].map((o, d) => o - read[0][d]!);
  const ce = write[0].map((o, d) => read[0][d]! + read[1][d]! - (o + w[d]!));
  const tw0 = total[0].map((o, d) => o + cb[d]!);
  const T = total[1].map((s, d) => s - cb[d]! - ce[d]!);
  const stride = w.map((wd, d) => {
    if (!conflict) return wd;
    const minStride = Math.max(cb[d]!, ce[d]!) + wd;
    const s = (Math.trunc((minStride - 1) / wd) + 1) * wd;
    const t = T[d]!;
    const rounded = fit === "valid" ? t - euclid(t, wd) : t + euclid(-t, wd);
    return Math.min(s, rounded);
  });
  if (stride.some((s) => s <= 0)) return null;
  const perAxis = stride.map((s, d) => {
    const offs: number[] = [];
    for (let o = 0; o < s; o += w[d]!) offs.push(o);
    return offs;
  });
  const levelOffsets = product(perAxis).reverse();
  const Rterm = w.map((wd) => (fit === "valid" ? wd : 1));
  const levels: ModelBlock[][] = [];
  levelOffsets.forEach((o, level) => {
    const rel = o.map((od, d) => {
      const vals: number[] = [];
      for (let p = od; p < T[d]! + 1 - Rterm[d]!; p += stride[d]!) vals.push(p);
      return vals;
    });
    const blocks: ModelBlock[] = [];
    for (const p of product(rel)) {
      const wOff = p.map((pd, d) => tw0[d]! + pd);
      let wShape = [...w];
      let rOff = p.map((pd, d) => total[0][d]! + pd);
      let rShape = [...read[1]];
      // Inclusion test.
      const inside = fit === "valid"
        ? wOff.every((b, d) => b >= tw0[d]! && b + w[d]! <= tw0[d]! + T[d]!)
        : wOff.every((b, d) => b >= tw0[d]! && b < tw0[d]! + T[d]!);
      if (!inside) continue;
      const index = wOff.map((b, d) => Math.max(0, Math.floor((b - total[0][d]!) / w[d]!)));
      if (fit === "shrink") {
        const wEnd = wOff.map((b, d) => Math.min(b + w[d]!, tw0[d]! + T[d]!));
        const rBegin = rOff.map((b, d) => Math.max(b, total[0][d]!));
        const rEnd = rOff.map((b, d) => Math.min(b + read[1][d]!, total[0][d]! + total[1][d]!));
        wShape = wEnd.map((e, d) => e - wOff[d]!);
        rShape = rEnd.map((e, d) => e - rBegin[d]!);
        rOff = rBegin;
      }
      blocks.push({
        write: R(wOff, wShape),
        read: R(rOff, rShape),
        id: closedFormId(index),
        level,
      });
    }
    levels.push(blocks);
  });
  return { levels, stride };
}

// ---------------------------------------------------------------------------------------------

describe("fit modes", () => {
  const total: Box = [[0], [50]];
  const read: Box = [[0], [12]];
  const write: Box = [[1], [10]];

  it("derives the context and the total write ROI (§2.3)", () => {
    const l = layout(total, read, write);
    assert.deepEqual([...l.contextBegin], [1]);
    assert.deepEqual([...l.contextEnd], [1]);
    assert.equal(roi(l.totalWriteRoi), R([1], [48]));
  });

  it("valid keeps the four blocks inside the total write ROI", () => {
    const l = layout(total, read, write, "valid");
    assert.equal(l.blockCount, 4);
    const byId = [...l.allPositions()].sort((a, b) => a - b).map((p) => ({
      id: l.blockIdOf(p),
      write: roi(l.writeRoiOf(p)),
      read: roi(l.readRoiOf(p)),
    }));
    assert.deepEqual(byId, [
      { id: 0, write: R([1], [10]), read: R([0], [12]) },
      { id: 1, write: R([11], [10]), read: R([10], [12]) },
      { id: 2, write: R([21], [10]), read: R([20], [12]) },
      { id: 3, write: R([31], [10]), read: R([30], [12]) },
    ]);
  });

  it("overhang adds block #4 whose ROIs stick out of the total ROI", () => {
    const l = layout(total, read, write, "overhang");
    assert.equal(l.blockCount, 5);
    assert.equal(l.blockIdOf(4), 4);
    assert.equal(roi(l.writeRoiOf(4)), R([41], [10]));
    assert.equal(roi(l.readRoiOf(4)), R([40], [12]));
    assert.equal(roi(l.writeRoiOf(3)), R([31], [10]));
  });

  it("shrink clips block #4 to the total ROIs but keeps its ID", () => {
    const l = layout(total, read, write, "shrink");
    assert.equal(l.blockCount, 5);
    assert.equal(l.blockIdOf(4), 4);
    assert.equal(roi(l.writeRoiOf(4)), R([41], [8]));
    assert.equal(roi(l.readRoiOf(4)), R([40], [10]));
    for (let p = 0; p < 4; p++) {
      assert.equal(roi(l.writeRoiOf(p)), R([1 + 10 * p], [10]));
      assert.equal(roi(l.readRoiOf(p)), R([10 * p], [12]));
    }
  });

  describe("the test_dependency_graph fixture (catalogue 4)", () => {
    const fixture: [string, Box, Fit, number][] = [
      ["small_valid", [[2], [1]], "valid", 8],
      ["medium_valid", [[1], [3]], "valid", 3],
      ["small_overhang", [[2], [1]], "overhang", 8],
      ["medium_overhang", [[1], [3]], "overhang", 4],
      ["small_shrink", [[2], [1]], "shrink", 8],
      ["medium_shrink", [[1], [3]], "shrink", 4],
    ];
    for (const [name, w, fit, count] of fixture) {
      it(`${name} has ${count} blocks`, () => {
        const l = layout([[0], [12]], [[0], [5]], w, fit);
        assert.equal(l.blockCount, count);
        assert.equal([...l.allPositions()].length, count);
        let sum = 0;
        for (let level = 0; level < l.levelCount; level++) sum += l.levelSize(level);
        assert.equal(sum, count);
      });
    }

    it("medium blocks cover [1,10), [1,13) and [1,11)", () => {
      const last = (fit: Fit) => {
        const l = layout([[0], [12]], [[0], [5]], [[1], [3]], fit);
        const writes = [...l.allPositions()].sort((a, b) => a - b).map((p) => l.writeRoiOf(p));
        return writes.map((r) => roi(r));
      };
      assert.deepEqual(last("valid"), [R([1], [3]), R([4], [3]), R([7], [3])]);
      assert.deepEqual(last("overhang"), [R([1], [3]), R([4], [3]), R([7], [3]), R([10], [3])]);
      assert.deepEqual(last("shrink"), [R([1], [3]), R([4], [3]), R([7], [3]), R([10], [1])]);
    });
  });

  describe("the 2-D worked example (§3.3)", () => {
    const total: Box = [[0, 0], [25, 35]];
    const rw: Box = [[0, 0], [10, 10]];
    const idOfGrid = (l: TaskLayout, i: number, j: number) => l.blockIdOf(l.positionOf([i, j]));

    it("valid has 2x3 blocks with daisy's IDs", () => {
      const l = layout(total, rw, rw, "valid", false);
      assert.deepEqual([...l.gridShape], [2, 3]);
      assert.equal(l.blockCount, 6);
      const expected: [number, number, number][] = [
        [0, 0, 0],
        [0, 1, 1],
        [0, 2, 3],
        [1, 0, 2],
        [1, 1, 4],
        [1, 2, 7],
      ];
      for (const [i, j, id] of expected) assert.equal(idOfGrid(l, i, j), id, `(${i}, ${j})`);
    });

    for (const fit of ["overhang", "shrink"] as const) {
      it(`${fit} has 3x4 blocks with daisy's IDs`, () => {
        const l = layout(total, rw, rw, fit, false);
        assert.deepEqual([...l.gridShape], [3, 4]);
        assert.equal(l.blockCount, 12);
        const expected: [number, number, number][] = [
          [0, 0, 0],
          [0, 1, 1],
          [0, 2, 3],
          [1, 0, 2],
          [1, 1, 4],
          [1, 2, 7],
          [0, 3, 6],
          [1, 3, 11],
          [2, 0, 5],
          [2, 1, 8],
          [2, 2, 12],
          [2, 3, 17],
        ];
        for (const [i, j, id] of expected) assert.equal(idOfGrid(l, i, j), id, `(${i}, ${j})`);
      });
    }

    it("shrink clips the last column, the last row and the corner", () => {
      const l = layout(total, rw, rw, "shrink", false);
      const shapeAt = (i: number, j: number) => [...l.writeRoiOf(l.positionOf([i, j])).shape];
      assert.deepEqual(shapeAt(0, 0), [10, 10]);
      assert.deepEqual(shapeAt(1, 2), [10, 10]);
      for (let i = 0; i < 2; i++) assert.deepEqual(shapeAt(i, 3), [10, 5]);
      for (let j = 0; j < 3; j++) assert.deepEqual(shapeAt(2, j), [5, 10]);
      assert.deepEqual(shapeAt(2, 3), [5, 5]);
      assert.equal(roi(l.readRoiOf(l.positionOf([2, 3]))), R([20, 30], [5, 5]));
    });

    it("overhang does not clip", () => {
      const l = layout(total, rw, rw, "overhang", false);
      assert.equal(roi(l.writeRoiOf(l.positionOf([2, 3]))), R([20, 30], [10, 10]));
      assert.equal(roi(l.readRoiOf(l.positionOf([2, 3]))), R([20, 30], [10, 10]));
    });
  });

  it("blockGridShape drops a partial trailing block only for valid", () => {
    const shapeFor = (
      fit: Fit,
    ) => [...layout([[0, 0], [25, 30]], [[0, 0], [10, 10]], [[0, 0], [10, 10]], fit).gridShape];
    assert.deepEqual(shapeFor("valid"), [2, 3]);
    assert.deepEqual(shapeFor("overhang"), [3, 3]);
    assert.deepEqual(shapeFor("shrink"), [3, 3]);
    // Strides are C-order.
    const l = layout([[0, 0, 0], [20, 30, 40]], [[0, 0, 0], [10, 10, 10]], [[0, 0, 0], [
      10,
      10,
      10,
    ]]);
    assert.deepEqual([...l.gridShape], [2, 3, 4]);
    assert.deepEqual([...l.gridStrides], [12, 4, 1]);
    assert.equal(l.positionOf([1, 2, 3]), 23);
    assert.deepEqual(l.coordsOf(23), [1, 2, 3]);
  });

  it("matches an independent model of daisy's enumeration on many layouts", () => {
    const rand = prng(12345);
    let checked = 0;
    for (let round = 0; round < 400; round++) {
      const dims = 1 + rand(3);
      const w = Array.from({ length: dims }, () => 1 + rand(4));
      const cb = w.map(() => rand(6));
      const ce = w.map(() => rand(6));
      const readOffset = w.map(() => rand(7) - 3);
      const read: Box = [readOffset, w.map((wd, d) => cb[d]! + wd + ce[d]!)];
      const write: Box = [readOffset.map((o, d) => o + cb[d]!), w];
      const total: Box = [
        w.map(() => rand(9) - 4),
        w.map((wd, d) => cb[d]! + ce[d]! + rand(5 * wd + 3)),
      ];
      const fit = FITS[rand(3)]!;
      const conflict = rand(2) === 0;
      const label = JSON.stringify({ total, read, write, fit, conflict });
      const l = layout(total, read, write, fit, conflict);
      const model = daisyModel(total, read, write, fit, conflict);
      const actual = blocksOf(l);
      if (model === null) {
        // daisy has zero levels here; blockwise has a well-formed layout with no blocks.
        assert.equal(l.blockCount, 0, label);
        assert.equal(actual.length, 0, label);
        continue;
      }
      assert.equal(l.levelCount, model.levels.length, label);
      assert.deepEqual(
        [...l.levelPeriod],
        model.stride.map((s, d) => s / w[d]!),
        label,
      );
      const expected = model.levels.flat();
      assert.equal(l.blockCount, expected.length, label);
      assert.deepEqual(
        actual.map((b) => ({ ...b, id: BigInt(b.id) })),
        expected,
        label,
      );
      for (let level = 0; level < l.levelCount; level++) {
        assert.equal(l.levelSize(level), model.levels[level]!.length, `${label} level ${level}`);
      }
      checked++;
    }
    assert.ok(checked > 200, `only ${checked} layouts had levels`);
  });
});

describe("block IDs (§3.4)", () => {
  it("match daisy's examples in 1-D, 2-D and 3-D", () => {
    assert.equal(cantorNumber([0]), 0);
    assert.equal(cantorNumber([1]), 1);
    assert.equal(cantorNumber([2]), 2);
    assert.equal(cantorNumber([2, 2]), 12);
    assert.equal(cantorNumber([2, 4]), 23);
    assert.equal(cantorNumber([4, 2]), 25);
    assert.equal(cantorNumber([4, 4]), 40);
    assert.equal(cantorNumber([1, 0, 0]), 3);
    assert.equal(cantorNumber([0, 1, 0]), 2);
    assert.equal(cantorNumber([0, 0, 1]), 1);
    assert.equal(cantorNumber([1, 1, 1]), 14);
    assert.equal(cantorNumber([2, 3, 4]), 182);
    assert.equal(cantorNumber([]), 0);
    assert.equal(cantorNumberBig([2, 3, 4]), 182n);
    assert.equal(cantorNumberBig([4, 4]), 40n);
  });

  it("follow the 2-D and 3-D closed forms", () => {
    for (let x = 0; x < 12; x++) {
      for (let y = 0; y < 12; y++) {
        assert.equal(cantorNumber([x, y]), ((x + y) * (x + y + 1)) / 2 + x);
        for (let z = 0; z < 6; z++) {
          const s = x + y + z;
          assert.equal(
            cantorNumber([x, y, z]),
            (s * (s + 1) * (s + 2)) / 6 + ((x + y) * (x + y + 1)) / 2 + x,
          );
        }
      }
    }
  });

  it("are a bijection on small 2-D and 3-D grids", () => {
    const seen2 = new Set<number>();
    for (let x = 0; x < 30; x++) for (let y = 0; y < 30; y++) seen2.add(cantorNumber([x, y]));
    assert.equal(seen2.size, 900);
    // The IDs of all indices with x+y < n are exactly 0 .. n(n+1)/2 - 1.
    const diag: number[] = [];
    for (let x = 0; x < 10; x++) for (let y = 0; x + y < 10; y++) diag.push(cantorNumber([x, y]));
    assert.deepEqual(diag.sort((a, b) => a - b), Array.from({ length: 55 }, (_, i) => i));
  });

  it("give the task_2d matrix", () => {
    const l = layout([[0, 0], [6, 6]], [[0, 0], [3, 3]], [[1, 1], [1, 1]]);
    assert.deepEqual([...l.gridShape], [4, 4]);
    assert.deepEqual([...l.indexShift], [1, 1]);
    const matrix = [
      [4, 7, 11, 16],
      [8, 12, 17, 23],
      [13, 18, 24, 31],
      [19, 25, 32, 40],
    ];
    for (let r = 0; r < 4; r++) {
      for (let c = 0; c < 4; c++) {
        const p = l.positionOf([r, c]);
        assert.equal(l.blockIdOf(p), matrix[r]![c], `(${r}, ${c})`);
        assert.deepEqual(l.gridIndexOf(p), [r + 1, c + 1]);
      }
    }
    assert.equal(l.bigIds, false);
  });

  it("match an independent BigInt closed form C(s+k-1, k) for random indices", () => {
    const rand = prng(99);
    for (let i = 0; i < 2000; i++) {
      const dims = 1 + rand(6);
      const magnitude = [10, 1000, 1_000_000, 2_000_000_000][rand(4)]!;
      const index = Array.from({ length: dims }, () => rand(magnitude));
      const expected = closedFormId(index);
      assert.equal(cantorNumberBig(index), expected, JSON.stringify(index));
      if (numberIdsAreExact(index)) {
        assert.equal(cantorNumber(index), Number(expected), JSON.stringify(index));
      }
    }
  });

  it("switch to exact bigint IDs when the largest ID exceeds 2^53", () => {
    // The write ROI starts 2^27 voxels into the read ROI, so the grid index starts at 2^27 on
    // both axes and IDs are about (2^28)^2 / 2 = 2^55.
    const shift = 2 ** 27;
    const l = layout(
      [[0, 0], [shift + 3, shift + 3]],
      [[0, 0], [shift + 1, shift + 1]],
      [[shift, shift], [1, 1]],
    );
    assert.deepEqual([...l.gridShape], [3, 3]);
    assert.deepEqual([...l.indexShift], [shift, shift]);
    assert.equal(l.bigIds, true);
    const ids = new Set<BlockId>();
    for (const p of l.allPositions()) {
      const id = l.blockIdOf(p);
      assert.equal(typeof id, "bigint");
      const index = l.gridIndexOf(p);
      assert.deepEqual(index, l.coordsOf(p).map((c) => c + shift));
      assert.equal(id, closedFormId(index));
      assert.equal(id, cantorNumberBig(index));
      assert.ok(BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER));
      ids.add(id);
    }
    assert.equal(ids.size, 9);
    // JSON: exact decimal strings, never a rounded number.
    const last = l.blockIdOf(l.positionOf([2, 2]));
    assert.equal(blockIdToJson(last), closedFormId([shift + 2, shift + 2]).toString());
  });

  it("use bigint for a plain 3-D grid whose far corner exceeds 2^53", () => {
    const big = layout([[0, 0, 0], [400_000, 1, 1]], [[0, 0, 0], [1, 1, 1]], [[0, 0, 0], [
      1,
      1,
      1,
    ]]);
    assert.equal(big.bigIds, true);
    const p = big.positionOf([399_999, 0, 0]);
    const id = big.blockIdOf(p);
    assert.equal(typeof id, "bigint");
    assert.equal(id, closedFormId([399_999, 0, 0]));
    assert.ok(BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER));
    assert.equal(big.blockIdOf(0), 0n);

    const small = layout([[0, 0, 0], [1000, 1, 1]], [[0, 0, 0], [1, 1, 1]], [[0, 0, 0], [1, 1, 1]]);
    assert.equal(small.bigIds, false);
    assert.equal(typeof small.blockIdOf(small.positionOf([999, 0, 0])), "number");
    assert.equal(BigInt(small.blockIdOf(small.positionOf([999, 0, 0]))), closedFormId([999, 0, 0]));
  });

  it("keep number IDs and grid coordinates past 2^31 exact", () => {
    // 1-D: the ID is the grid index, here past 2^32.
    const line = layout([[0], [2 ** 33]], [[0], [1]], [[0], [1]]);
    const p = 2 ** 32 + 7;
    assert.deepEqual(line.coordsOf(p), [p]);
    assert.equal(line.blockIdOf(p), p);
    // 2-D: small coordinates, an ID of about 5e9.
    const plane = layout([[0, 0], [60_000, 60_000]], [[0, 0], [1, 1]], [[0, 0], [1, 1]]);
    const q = plane.positionOf([50_000, 50_000]);
    assert.equal(plane.blockIdOf(q), Number(closedFormId([50_000, 50_000])));
    assert.ok((plane.blockIdOf(q) as number) > 2 ** 31);
    assert.deepEqual(plane.gridIndexOf(q), [50_000, 50_000]);
  });

  it("serialise small IDs as numbers and compare across representations", () => {
    assert.equal(blockIdToJson(7), 7);
    assert.equal(blockIdToJson(7n), 7);
    assert.equal(blockIdToJson(2n ** 60n), (2n ** 60n).toString());
    assert.equal(compareBlockIds(1n, 2n), -1);
    assert.equal(compareBlockIds(3n, 2n), 1);
    assert.equal(compareBlockIds(2, 2), 0);
  });
});

describe("levels and conflicts (§4.1-§4.3)", () => {
  it("1-D worked example: stride 20, levels [(10), (0)], conflicts {-10, +10}", () => {
    const l = layout([[0], [50]], [[0], [12]], [[1], [10]]);
    assert.deepEqual([...l.levelPeriod], [2]);
    assert.equal(l.levelCount, 2);
    assert.deepEqual([...l.levelConflicts[0]!], []);
    assert.deepEqual([...l.levelConflicts[1]!], [-1, 1]);
    assert.deepEqual([...l.levelPositions(0)].map((p) => l.blockIdOf(p)), [1, 3]);
    assert.deepEqual([...l.levelPositions(1)].map((p) => l.blockIdOf(p)), [0, 2]);
    assert.equal(l.levelOf(1), 0);
    assert.equal(l.levelOf(0), 1);
    const out: number[] = [];
    assert.equal(l.intraUpstream(0, out), 1);
    assert.deepEqual(out.slice(0, 1), [1]);
    assert.equal(l.intraUpstream(2, out), 2);
    assert.deepEqual(out.slice(0, 2), [1, 3]);
    // daisy's per-task downstream order of #1 is {#2, #0}.
    assert.equal(l.intraDownstream(1, out), 2);
    assert.deepEqual(out.slice(0, 2), [2, 0]);
    assert.equal(l.intraDownstream(3, out), 1);
    assert.deepEqual(out.slice(0, 1), [2]);
    assert.equal(l.intraDownstream(0, out), 0);
    assert.equal(l.intraUpstream(1, out), 0);
  });

  it("overhang adds block #4 to level 1 with upstream {#3}", () => {
    const l = layout([[0], [50]], [[0], [12]], [[1], [10]], "overhang");
    assert.deepEqual([...l.levelPositions(1)].map((p) => l.blockIdOf(p)), [0, 2, 4]);
    const out: number[] = [];
    const n = l.intraUpstream(4, out);
    assert.deepEqual(out.slice(0, n).map((p) => l.blockIdOf(p)), [3]);
  });

  it("2-D task_2d: four levels with daisy's conflicts and dispatch order", () => {
    const l = layout([[0, 0], [6, 6]], [[0, 0], [3, 3]], [[1, 1], [1, 1]]);
    assert.deepEqual([...l.levelPeriod], [2, 2]);
    assert.equal(l.levelCount, 4);
    const pairs = (a: Int32Array) => {
      const out: number[][] = [];
      for (let i = 0; i < a.length; i += 2) out.push([a[i]!, a[i + 1]!]);
      return out;
    };
    assert.deepEqual(pairs(l.levelConflicts[0]!), []);
    assert.deepEqual(pairs(l.levelConflicts[1]!), [[0, -1], [0, 1]]);
    assert.deepEqual(pairs(l.levelConflicts[2]!), [[-1, -1], [-1, 1], [1, -1], [1, 1]]);
    assert.deepEqual(pairs(l.levelConflicts[3]!), [[0, -1], [0, 1]]);
    const levels = [
      [12, 23, 25, 40],
      [8, 17, 19, 32],
      [7, 16, 18, 31],
      [4, 11, 13, 24],
    ];
    levels.forEach((ids, level) => {
      const positions = [...l.levelPositions(level)];
      assert.deepEqual(positions.map((p) => l.blockIdOf(p)), ids, `level ${level}`);
      for (const p of positions) assert.equal(l.levelOf(p), level);
      assert.equal(l.levelSize(level), 4);
    });
  });

  it("2-D level offsets for stride (2,2), w (1,1) are [(1,1), (1,0), (0,1), (0,0)]", () => {
    const l = layout([[0, 0], [6, 6]], [[0, 0], [3, 3]], [[1, 1], [1, 1]]);
    const offsets = [0, 1, 2, 3].map((level) => {
      const first = l.levelPositions(level).next();
      assert.equal(first.done, false);
      return l.coordsOf(first.value as number);
    });
    assert.deepEqual(offsets, [[1, 1], [1, 0], [0, 1], [0, 0]]);
  });

  it("has a single level without conflicts", () => {
    const l = layout([[0, 0], [6, 6]], [[0, 0], [3, 3]], [[1, 1], [1, 1]], "valid", false);
    assert.deepEqual([...l.levelPeriod], [1, 1]);
    assert.equal(l.levelCount, 1);
    assert.equal(l.levelSize(0), 16);
    const out: number[] = [];
    for (const p of l.allPositions()) {
      assert.equal(l.intraUpstream(p, out), 0);
      assert.equal(l.intraDownstream(p, out), 0);
      assert.equal(l.levelOf(p), 0);
    }
  });

  it("clamps the stride to the rounded total write shape", () => {
    // Zero-levels fixture: min stride 5 is clamped to the 2x2 total write ROI.
    const z = layout([[0, 0], [10, 10]], [[0, 0], [9, 9]], [[4, 4], [1, 1]], "overhang");
    assert.equal(roi(z.totalWriteRoi), R([4, 4], [2, 2]));
    assert.deepEqual([...z.levelPeriod], [2, 2]);
    assert.equal(z.levelCount, 4);
    for (let level = 0; level < 4; level++) assert.equal(z.levelSize(level), 1);

    // Total write shape 19, w 10, stride 20: valid rounds 19 down to 10, overhang up to 20.
    const valid = layout([[0], [21]], [[0], [12]], [[1], [10]], "valid");
    assert.deepEqual([...valid.levelPeriod], [1]);
    assert.equal(valid.blockCount, 1);
    const overhang = layout([[0], [21]], [[0], [12]], [[1], [10]], "overhang");
    assert.deepEqual([...overhang.levelPeriod], [2]);
    assert.equal(overhang.blockCount, 2);
    const shrink = layout([[0], [21]], [[0], [12]], [[1], [10]], "shrink");
    assert.deepEqual([...shrink.levelPeriod], [2]);

    // Not clamped: 20 < 40.
    const wide = layout([[0], [50]], [[0], [12]], [[1], [10]]);
    assert.deepEqual([...wide.levelPeriod], [2]);
    // A large context rounds the stride up to a multiple of w: context 15, w 10 -> 30.
    const big = layout([[0], [200]], [[0], [40]], [[15], [10]]);
    assert.deepEqual([...big.levelPeriod], [3]);
  });

  it("levelSize equals the enumerated count of every level", () => {
    for (const fit of FITS) {
      for (const conflict of [true, false]) {
        for (let t = 0; t < 40; t++) {
          const l = layout(
            [[0, 3], [t, 17 + t]],
            [[0, 0], [7, 5]],
            [[2, 1], [2, 3]],
            fit,
            conflict,
          );
          let sum = 0;
          for (let level = 0; level < l.levelCount; level++) {
            const n = [...l.levelPositions(level)].length;
            assert.equal(l.levelSize(level), n, `${fit} ${conflict} t=${t} level ${level}`);
            sum += n;
          }
          assert.equal(sum, l.blockCount);
          const all = [...l.allPositions()].sort((a, b) => a - b);
          assert.deepEqual(all, Array.from({ length: l.blockCount }, (_, i) => i));
        }
      }
    }
  });
});

describe("tracking grid (§3.5)", () => {
  it("total 400x400, write 100: the block at (100, 200) has cell 6 but ID 7", () => {
    const l = layout([[0, 0], [400, 400]], [[0, 0], [100, 100]], [[0, 0], [100, 100]]);
    assert.deepEqual([...l.trackingShape], [4, 4]);
    assert.deepEqual([...l.trackingStrides], [4, 1]);
    assert.equal(l.trackingCellCount, 16);
    const p = l.positionOf([1, 2]);
    assert.equal(roi(l.writeRoiOf(p)), R([100, 200], [100, 100]));
    assert.equal(l.trackingCellOf(p), 6);
    assert.equal(l.blockIdOf(p), 7);
  });

  it("rounds the tracking shape up over the full total ROI, minimum 1", () => {
    const l = layout([[0, 0], [25, 35]], [[0, 0], [10, 10]], [[0, 0], [10, 10]]);
    assert.deepEqual([...l.trackingShape], [3, 4]);
    assert.deepEqual([...l.gridShape], [2, 3]);
    const tiny = layout([[0], [0]], [[0], [10]], [[0], [10]]);
    assert.deepEqual([...tiny.trackingShape], [1]);
  });

  it("anchors cells at the total ROI when the context is at least one block", () => {
    // 1-D: context 100 on each side, w 100: the first block is grid index 1, cell 1, ID 1.
    const l = layout([[0], [400]], [[0], [300]], [[100], [100]]);
    assert.deepEqual([...l.gridShape], [2]);
    assert.deepEqual([...l.indexShift], [1]);
    assert.deepEqual([...l.trackingShape], [4]);
    assert.equal(l.trackingCellOf(0), 1);
    assert.equal(l.trackingCellOf(1), 2);
    assert.equal(l.blockIdOf(0), 1);
    assert.equal(l.blockIdOf(1), 2);
    // Every block has a distinct cell inside the tracking grid.
    const cells = new Set([...l.allPositions()].map((p) => l.trackingCellOf(p)));
    assert.equal(cells.size, l.blockCount);
  });
});

describe("context of at least one block (indexShift)", () => {
  it("shifts the grid index so IDs do not start at 0", () => {
    const l = layout([[0, 0], [50, 50]], [[0, 0], [30, 30]], [[10, 10], [10, 10]], "valid", false);
    assert.equal(roi(l.totalWriteRoi), R([10, 10], [30, 30]));
    assert.deepEqual([...l.gridShape], [3, 3]);
    assert.deepEqual([...l.indexShift], [1, 1]);
    assert.deepEqual(l.gridIndexOf(0), [1, 1]);
    assert.equal(l.blockIdOf(0), 4);
    const ids = sortedIds(l);
    assert.equal(ids[0], 4);
    assert.deepEqual(ids, [4, 7, 8, 11, 12, 13, 17, 18, 24]);
    for (const p of l.allPositions()) {
      const c = l.coordsOf(p);
      assert.equal(roi(l.writeRoiOf(p)), R([10 + 10 * c[0]!, 10 + 10 * c[1]!], [10, 10]));
      assert.equal(roi(l.readRoiOf(p)), R([10 * c[0]!, 10 * c[1]!], [30, 30]));
      assert.equal(l.trackingCellOf(p), (c[0]! + 1) * 5 + c[1]! + 1);
    }
  });

  it("is floor(context / w) for a context that is not a multiple of w", () => {
    const l = layout([[0], [100]], [[0], [35]], [[25], [10]]);
    assert.deepEqual([...l.indexShift], [2]);
    // Grid index = floor((write.offset - total.offset) / w) = floor(25 / 10) = 2.
    assert.equal(l.blockIdOf(0), 2);
    assert.equal(l.blockIdOf(1), 3);
  });
});

describe("tasks smaller than one block (§3.6)", () => {
  it("valid with a total write shape below w has no blocks and one empty level", () => {
    // daisy: zero levels with read_write_conflict, and Scheduler construction panics.
    const l = layout([[0], [5]], [[0], [10]], [[0], [10]], "valid", true);
    assert.equal(l.blockCount, 0);
    assert.deepEqual([...l.gridShape], [0]);
    assert.ok(l.levelCount >= 1);
    assert.deepEqual([...l.allPositions()], []);
    for (let level = 0; level < l.levelCount; level++) {
      assert.equal(l.levelSize(level), 0);
      assert.deepEqual([...l.levelPositions(level)], []);
    }
  });

  it("overhang and shrink with a total write shape <= 0 have no blocks", () => {
    for (const fit of ["overhang", "shrink"] as const) {
      for (const size of [0, 1, 2]) {
        const l = layout([[0, 0], [size, 50]], [[0, 0], [12, 12]], [[1, 1], [10, 10]], fit);
        assert.equal(l.blockCount, 0, `${fit} size ${size}`);
        assert.deepEqual([...l.allPositions()], []);
        assert.equal(l.levelSize(0), 0);
      }
      // One voxel of total write ROI is enough for one block.
      const one = layout([[0], [3]], [[0], [12]], [[1], [10]], fit);
      assert.equal(one.blockCount, 1);
    }
  });

  it("rejects a write shape of 0", () => {
    // daisy: division by zero, a Rust panic.
    assert.throws(() => layout([[0], [10]], [[0], [1]], [[0], [0]]), RangeError);
  });
});
