/**
 * Regions of interest: the half-open box `[offset, offset + shape)`, with daisy's semantics.
 * Shapes are not clamped by `grow`; `intersect` of disjoint boxes is a zero-shape ROI at
 * `max(begins)`, not a special empty value.
 */

import { type Coord, coordEquals, coordToString } from "./coordinate.ts";

export interface Roi {
  readonly offset: Coord;
  readonly shape: Coord;
}

export function makeRoi(offset: Coord, shape: Coord): Roi {
  if (offset.length !== shape.length) {
    throw new RangeError(
      `Cannot make a ROI from offset ${coordToString(offset)} and shape ${
        coordToString(shape)
      }: they have different dimensionality`,
    );
  }
  return { offset: [...offset], shape: [...shape] };
}

export function roiEnd(roi: Roi): number[] {
  return roi.offset.map((o, i) => o + roi.shape[i]!);
}

export function roiDims(roi: Roi): number {
  return roi.offset.length;
}

export function roiSize(roi: Roi): number {
  let size = 1;
  for (const s of roi.shape) size *= Math.max(0, s);
  return size;
}

/** True when the ROI has no volume (some shape entry is zero or negative). */
export function roiIsEmpty(roi: Roi): boolean {
  return roi.shape.some((s) => s <= 0);
}

function checkDims(a: Roi, b: Roi, op: string): void {
  if (a.offset.length !== b.offset.length) {
    throw new RangeError(
      `Cannot ${op} ROIs of different dimensionality: ${roiToString(a)} and ${roiToString(b)}`,
    );
  }
}

/** `begin = max(begins)`, `end = min(ends)`, `shape = max(end - begin, 0)` per axis. */
export function intersect(a: Roi, b: Roi): Roi {
  checkDims(a, b, "intersect");
  const offset: number[] = [];
  const shape: number[] = [];
  for (let d = 0; d < a.offset.length; d++) {
    const begin = Math.max(a.offset[d]!, b.offset[d]!);
    const end = Math.min(a.offset[d]! + a.shape[d]!, b.offset[d]! + b.shape[d]!);
    offset.push(begin);
    shape.push(Math.max(end - begin, 0));
  }
  return { offset, shape };
}

/** New offset `offset - neg`, new shape `shape + neg + pos`; negative amounts shrink. */
export function grow(roi: Roi, negative: Coord, positive: Coord): Roi {
  if (negative.length !== roi.offset.length || positive.length !== roi.offset.length) {
    throw new RangeError(
      `Cannot grow ${roiToString(roi)} by ${coordToString(negative)} and ${
        coordToString(positive)
      }: dimensionality differs`,
    );
  }
  return {
    offset: roi.offset.map((o, i) => o - negative[i]!),
    shape: roi.shape.map((s, i) => s + negative[i]! + positive[i]!),
  };
}

/** Both ends inclusive: a zero-shape ROI whose offset lies in `[begin, end]` is contained. */
export function containsRoi(outer: Roi, inner: Roi): boolean {
  checkDims(outer, inner, "compare");
  for (let d = 0; d < outer.offset.length; d++) {
    if (inner.offset[d]! < outer.offset[d]!) return false;
    if (inner.offset[d]! + inner.shape[d]! > outer.offset[d]! + outer.shape[d]!) return false;
  }
  return true;
}

/** Half-open: `begin <= point < end` on every axis. */
export function containsPoint(roi: Roi, point: Coord): boolean {
  if (point.length !== roi.offset.length) {
    throw new RangeError(
      `Cannot test whether ${roiToString(roi)} contains ${
        coordToString(point)
      }: dimensionality differs`,
    );
  }
  for (let d = 0; d < point.length; d++) {
    const p = point[d]!;
    if (p < roi.offset[d]! || p >= roi.offset[d]! + roi.shape[d]!) return false;
  }
  return true;
}

/** Translate the offset; the shape is unchanged. */
export function shift(roi: Roi, by: Coord): Roi {
  if (by.length !== roi.offset.length) {
    throw new RangeError(
      `Cannot shift ${roiToString(roi)} by ${coordToString(by)}: dimensionality differs`,
    );
  }
  return { offset: roi.offset.map((o, i) => o + by[i]!), shape: roi.shape };
}

/** Offset and shape equal; two empty ROIs at different offsets are unequal. */
export function roiEquals(a: Roi, b: Roi): boolean {
  return coordEquals(a.offset, b.offset) && coordEquals(a.shape, b.shape);
}

/** daisy's repr: `Roi((10, 20), (30, 40))`. */
export function roiToString(roi: Roi): string {
  return `Roi(${coordToString(roi.offset)}, ${coordToString(roi.shape)})`;
}

/** Plain JSON form used in `--json` outputs. */
export function roiToJson(roi: Roi): { offset: number[]; shape: number[] } {
  return { offset: [...roi.offset], shape: [...roi.shape] };
}
