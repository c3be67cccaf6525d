/**
 * A task's tiling: how `totalRoi` is cut into blocks, which level each block is in, which
 * blocks of the previous level it conflicts with, its daisy block ID and its tracking cell.
 *
 * Blocks are addressed internally by their *position*: the C-order linear index of the block's
 * grid coordinate `g`, counted from the total write ROI (`g = (write.offset -
 * totalWrite.offset) / write.shape`). The position grid is `blockGridShape`, the skip-mask
 * contract; daisy's grid index (from which the block ID is computed) is `g + indexShift`, where
 * `indexShift = floor(contextBegin / write.shape)` because daisy anchors it at `totalRoi`.
 */

import {
  ceilDiv,
  type Coord,
  euclidMod,
  floorDiv,
  grow,
  type Roi,
  roiToString,
} from "../geometry/mod.ts";
import { LevelCursor, type PositionCursor } from "./position_cursor.ts";
import { type BlockId, cantorNumber, cantorNumberBig, numberIdsAreExact } from "./block_id.ts";

const EMPTY_CURSOR: PositionCursor = { next: () => -1 };

export type Fit = "valid" | "overhang" | "shrink";
export const FITS: readonly Fit[] = ["valid", "overhang", "shrink"];

export interface LayoutSpec {
  readonly totalRoi: Roi;
  readonly readRoi: Roi;
  readonly writeRoi: Roi;
  readonly fit: Fit;
  readonly readWriteConflict: boolean;
}

/** The largest block grid accepted: positions must be exact `number`s and fit typed arrays. */
export const MAX_BLOCKS = 2 ** 40;

export class TaskLayout {
  readonly dims: number;
  readonly totalRoi: Roi;
  readonly readRoi: Roi;
  readonly writeRoi: Roi;
  readonly fit: Fit;
  readonly readWriteConflict: boolean;
  readonly contextBegin: readonly number[];
  readonly contextEnd: readonly number[];
  readonly totalWriteRoi: Roi;
  /** Blocks per axis (`blockGridShape`): `valid` drops a partial trailing block. */
  readonly gridShape: readonly number[];
  /** C-order strides of `gridShape`. */
  readonly gridStrides: readonly number[];
  readonly blockCount: number;
  /** daisy's grid index of position `g` is `g + indexShift`. */
  readonly indexShift: readonly number[];
  /** Level stride in blocks per axis (`levelStride / write.shape`). */
  readonly levelPeriod: readonly number[];
  readonly levelCount: number;
  /** Per level, the position offsets (in blocks) of its upstream conflicts, `dims` per entry. */
  readonly levelConflicts: readonly Int32Array[];
  /** Tracking grid: `ceil(totalRoi.shape / write.shape)`, anchored at `totalRoi`. */
  readonly trackingShape: readonly number[];
  readonly trackingStrides: readonly number[];
  readonly trackingCellCount: number;
  /** True when block IDs of this grid need `bigint` to stay exact. */
  readonly bigIds: boolean;

  private readonly levelPeriodStrides: readonly number[];
  private readonly scratch: number[];
  private readonly idScratch: number[];

  constructor(spec: LayoutSpec) {
    const { totalRoi, readRoi, writeRoi } = spec;
    const dims = totalRoi.offset.length;
    this.dims = dims;
    this.totalRoi = totalRoi;
    this.readRoi = readRoi;
    this.writeRoi = writeRoi;
    this.fit = spec.fit;
    this.readWriteConflict = spec.readWriteConflict;
    const w = writeRoi.shape;
    if (w.some((s) => s <= 0)) {
      throw new RangeError(
        `Write ROI shape must be positive on every axis, got ${roiToString(writeRoi)}`,
      );
    }
    this.contextBegin = writeRoi.offset.map((o, d) => o - readRoi.offset[d]!);
    this.contextEnd = writeRoi.offset.map((o, d) =>
      readRoi.offset[d]! + readRoi.shape[d]! - (o + w[d]!)
    );
    this.totalWriteRoi = grow(
      totalRoi,
      this.contextBegin.map((c) => -c),
      this.contextEnd.map((c) => -c),
    );
    const T = this.totalWriteRoi.shape;
    const valid = spec.fit === "valid";
    this.gridShape = T.map((t, d) => Math.max(0, valid ? floorDiv(t, w[d]!) : ceilDiv(t, w[d]!)));
    this.gridStrides = cOrderStrides(this.gridShape);
    this.blockCount = this.gridShape.reduce((a, b) => a * b, 1);
    if (this.blockCount > MAX_BLOCKS) {
      throw new RangeError(
        `Task layout has ${this.blockCount} blocks, more than the supported ${MAX_BLOCKS}; use a larger write ROI`,
      );
    }
    this.indexShift = this.contextBegin.map((c, d) => floorDiv(c, w[d]!));

    // Level stride (daisy §4.1): the smallest multiple of the write shape that is at least
    // `max context + write shape`, clamped to the rounded total write shape.
    this.levelPeriod = w.map((wd, d) => {
      if (!spec.readWriteConflict) return 1;
      const maxContext = Math.max(this.contextBegin[d]!, this.contextEnd[d]!);
      const minStride = maxContext + wd;
      const stride = (Math.trunc((minStride - 1) / wd) + 1) * wd;
      const t = T[d]!;
      const rounded = valid ? t - euclidMod(t, wd) : t + euclidMod(-t, wd);
      // A task smaller than one block has no blocks; one level keeps it well-formed (daisy
      // panics here, reference §3.6).
      return Math.max(1, Math.min(stride, rounded) / wd);
    });
    this.levelPeriodStrides = cOrderStrides(this.levelPeriod);
    this.levelCount = this.levelPeriod.reduce((a, b) => a * b, 1);
    this.levelConflicts = buildLevelConflicts(this.levelPeriod, this.levelCount);

    this.trackingShape = totalRoi.shape.map((s, d) => Math.max(1, Math.ceil(s / w[d]!)));
    this.trackingStrides = cOrderStrides(this.trackingShape);
    this.trackingCellCount = this.trackingShape.reduce((a, b) => a * b, 1);

    const maxIndex = this.gridShape.map((g, d) => Math.max(0, g - 1 + this.indexShift[d]!));
    this.bigIds = !numberIdsAreExact(maxIndex);
    this.scratch = new Array<number>(dims).fill(0);
    this.idScratch = new Array<number>(dims).fill(0);
  }

  /** Grid coordinate (counted from the total write ROI) of a position. */
  coordsOf(position: number, out: number[] = new Array<number>(this.dims)): number[] {
    let rest = position;
    for (let d = 0; d < this.dims; d++) {
      const s = this.gridStrides[d]!;
      // An int32 when it fits, as the interpreter makes it; optimised code floors into a
      // double, and arrays of doubles are a new shape to the code compiled on the first blocks:
      // written here inline, as a shared helper's was not (CODECS.md, "Two workers on two cores").
      const q = Math.floor(rest / s);
      const g = q <= 0x7fffffff ? q | 0 : q;
      out[d] = g;
      rest -= g * s;
    }
    return out;
  }

  positionOf(coords: Coord): number {
    let p = 0;
    for (let d = 0; d < this.dims; d++) p += coords[d]! * this.gridStrides[d]!;
    return p;
  }

  /** Whether a grid coordinate names a block of this task (daisy's fit inclusion test). */
  inGrid(coords: Coord): boolean {
    for (let d = 0; d < this.dims; d++) {
      const g = coords[d]!;
      if (g < 0 || g >= this.gridShape[d]!) return false;
    }
    return true;
  }

  /** daisy's grid index: the coordinate the block ID is computed from. */
  gridIndexOf(position: number): number[] {
    const c = this.coordsOf(position);
    for (let d = 0; d < this.dims; d++) c[d] = Math.max(0, c[d]! + this.indexShift[d]!);
    return c;
  }

  blockIdOf(position: number): BlockId {
    // `gridIndexOf` without its fresh array: this runs for every block of every enumeration.
    const index = this.coordsOf(position, this.idScratch);
    for (let d = 0; d < this.dims; d++) index[d] = Math.max(0, index[d]! + this.indexShift[d]!);
    if (this.bigIds) return cantorNumberBig(index);
    const id = cantorNumber(index); // an int32 when it fits, as in coordsOf
    return id <= 0x7fffffff ? id | 0 : id;
  }

  levelOf(position: number): number {
    const c = this.coordsOf(position, this.scratch);
    let productIndex = 0;
    for (let d = 0; d < this.dims; d++) {
      productIndex += (c[d]! % this.levelPeriod[d]!) * this.levelPeriodStrides[d]!;
    }
    return this.levelCount - 1 - productIndex;
  }

  /** The block's write ROI after fit (shrink clips it to the total write ROI). */
  writeRoiOf(position: number): Roi {
    const c = this.coordsOf(position, this.scratch);
    // Sized up front: growing empty arrays by push costs a block several times the memory.
    const offset = new Array<number>(this.dims);
    const shape = new Array<number>(this.dims);
    for (let d = 0; d < this.dims; d++) {
      const w = this.writeRoi.shape[d]!;
      const begin = this.totalWriteRoi.offset[d]! + c[d]! * w;
      let end = begin + w;
      if (this.fit === "shrink") {
        end = Math.min(end, this.totalWriteRoi.offset[d]! + this.totalWriteRoi.shape[d]!);
      }
      offset[d] = begin;
      shape[d] = end - begin;
    }
    return { offset, shape };
  }

  /** The block's read ROI after fit (shrink clips it to the total ROI). */
  readRoiOf(position: number): Roi {
    const c = this.coordsOf(position, this.scratch);
    // Sized up front: growing empty arrays by push costs a block several times the memory.
    const offset = new Array<number>(this.dims);
    const shape = new Array<number>(this.dims);
    for (let d = 0; d < this.dims; d++) {
      let begin = this.totalRoi.offset[d]! + c[d]! * this.writeRoi.shape[d]!;
      let end = begin + this.readRoi.shape[d]!;
      if (this.fit === "shrink") {
        begin = Math.max(begin, this.totalRoi.offset[d]!);
        end = Math.min(end, this.totalRoi.offset[d]! + this.totalRoi.shape[d]!);
      }
      offset[d] = begin;
      shape[d] = end - begin;
    }
    return { offset, shape };
  }

  /**
   * Tracking cell (C-order over `trackingShape`, anchored at `totalRoi`) of a position, or -1
   * when the block falls outside the tracking grid and is not addressable.
   */
  trackingCellOf(position: number): number {
    const c = this.coordsOf(position, this.scratch);
    let cell = 0;
    for (let d = 0; d < this.dims; d++) {
      const t = c[d]! + this.indexShift[d]!;
      if (t < 0 || t >= this.trackingShape[d]!) return -1;
      cell += t * this.trackingStrides[d]!;
    }
    return cell;
  }

  /** Positions of one level, in daisy's dispatch order (row-major within the level). */
  *levelPositions(level: number): Generator<number> {
    const cursor = this.levelCursor(level);
    for (let p = cursor.next(); p >= 0; p = cursor.next()) yield p;
  }

  /** The same positions as `levelPositions`, through a cursor (no object per position). */
  levelCursor(level: number): PositionCursor {
    if (this.blockCount === 0) return EMPTY_CURSOR;
    const productIndex = this.levelCount - 1 - level;
    const start: number[] = [];
    let rest = productIndex;
    for (let d = 0; d < this.dims; d++) {
      const s = this.levelPeriodStrides[d]!;
      start.push(Math.floor(rest / s));
      rest %= s;
    }
    return new LevelCursor(start, this.levelPeriod, this.gridShape, this.gridStrides);
  }

  /** Every position, level by level: daisy's enumeration order. */
  *allPositions(): Generator<number> {
    for (let level = 0; level < this.levelCount; level++) yield* this.levelPositions(level);
  }

  /** Number of blocks in one level. */
  levelSize(level: number): number {
    if (this.blockCount === 0) return 0;
    let rest = this.levelCount - 1 - level;
    let n = 1;
    for (let d = 0; d < this.dims; d++) {
      const s = this.levelPeriodStrides[d]!;
      const k = Math.floor(rest / s);
      rest %= s;
      const g = this.gridShape[d]!;
      n *= k >= g ? 0 : Math.ceil((g - k) / this.levelPeriod[d]!);
    }
    return n;
  }

  /**
   * Same-task upstream blocks of a position (conflicting blocks of the previous level), written
   * into `out`; returns how many. Order: daisy's conflict order.
   */
  intraUpstream(position: number, out: number[]): number {
    const level = this.levelOf(position);
    return this.neighbours(position, this.levelConflicts[level]!, 1, out);
  }

  /** Same-task downstream blocks of a position (blocks of the next level it conflicts with). */
  intraDownstream(position: number, out: number[]): number {
    const level = this.levelOf(position);
    if (level + 1 >= this.levelCount) return 0;
    return this.neighbours(position, this.levelConflicts[level + 1]!, -1, out);
  }

  intraUpstreamCount(position: number): number {
    const level = this.levelOf(position);
    return this.neighbours(position, this.levelConflicts[level]!, 1, null);
  }

  private neighbours(
    position: number,
    conflicts: Int32Array,
    sign: number,
    out: number[] | null,
  ): number {
    const dims = this.dims;
    if (conflicts.length === 0) return 0;
    const c = this.coordsOf(position, this.scratch);
    let n = 0;
    for (let i = 0; i < conflicts.length; i += dims) {
      let p = 0;
      let inside = true;
      for (let d = 0; d < dims; d++) {
        const q = c[d]! + sign * conflicts[i + d]!;
        if (q < 0 || q >= this.gridShape[d]!) {
          inside = false;
          break;
        }
        p += q * this.gridStrides[d]!;
      }
      if (inside) {
        if (out !== null) out[n] = p;
        n++;
      }
    }
    return n;
  }
}

export function cOrderStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d]!;
  }
  return strides;
}

/**
 * daisy §4.2-4.3: level offsets are the row-major product of `0..period-1` per axis, reversed;
 * level i > 0 conflicts with level i-1 at offsets built per axis from `delta = k[i-1] - k[i]`:
 * `{delta, delta + period}` when negative, `{0}` when zero, `{delta - period, delta}` when
 * positive, combined as a row-major product.
 */
function buildLevelConflicts(period: readonly number[], levelCount: number): Int32Array[] {
  const dims = period.length;
  const strides = cOrderStrides(period);
  const offsetOf = (level: number): number[] => {
    let rest = levelCount - 1 - level;
    return strides.map((s) => {
      const k = Math.floor(rest / s);
      rest %= s;
      return k;
    });
  };
  const result: Int32Array[] = [new Int32Array(0)];
  for (let level = 1; level < levelCount; level++) {
    const previous = offsetOf(level - 1);
    const current = offsetOf(level);
    const perAxis: number[][] = [];
    for (let d = 0; d < dims; d++) {
      const delta = previous[d]! - current[d]!;
      const m = period[d]!;
      perAxis.push(delta < 0 ? [delta, delta + m] : delta === 0 ? [0] : [delta - m, delta]);
    }
    const combos: number[] = [];
    const pick = (d: number, acc: number[]): void => {
      if (d === dims) {
        combos.push(...acc);
        return;
      }
      for (const v of perAxis[d]!) pick(d + 1, [...acc, v]);
    };
    pick(0, []);
    result.push(Int32Array.from(combos));
  }
  return result;
}
