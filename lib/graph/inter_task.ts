/**
 * Block dependencies across tasks. A block `d` of a downstream task depends on every block `u`
 * of an upstream task whose write ROI (after fit) overlaps `d`'s read ROI (after fit) with
 * positive volume. Both directions are computed from this one relation, so `u` is upstream of
 * `d` exactly when `d` is downstream of `u`. daisy grows the upstream write ROI by the
 * downstream context in the wrong order (reference §4.4), which strands blocks when the
 * downstream context is asymmetric; this module does not.
 *
 * Because blocks tile a regular grid, both sets are boxes in grid coordinates: `lo[d]..hi[d]`.
 */

import { ceilDiv, floorDiv } from "../geometry/mod.ts";
import type { TaskLayout } from "../blocks/mod.ts";

/** Upstream blocks in `up` of position `dPos` of `down`; returns false when the box is empty. */
export function upstreamBox(
  down: TaskLayout,
  dPos: number,
  up: TaskLayout,
  coords: number[],
  lo: number[],
  hi: number[],
): boolean {
  if (up.blockCount === 0) return false;
  down.coordsOf(dPos, coords);
  for (let d = 0; d < down.dims; d++) {
    let r0 = down.totalRoi.offset[d]! + coords[d]! * down.writeRoi.shape[d]!;
    let r1 = r0 + down.readRoi.shape[d]!;
    if (down.fit === "shrink") {
      r0 = Math.max(r0, down.totalRoi.offset[d]!);
      r1 = Math.min(r1, down.totalRoi.offset[d]! + down.totalRoi.shape[d]!);
    }
    const tw0 = up.totalWriteRoi.offset[d]!;
    if (up.fit === "shrink") r1 = Math.min(r1, tw0 + up.totalWriteRoi.shape[d]!);
    if (r0 >= r1) return false;
    const w = up.writeRoi.shape[d]!;
    const a = Math.max(0, floorDiv(r0 - tw0, w));
    const b = Math.min(up.gridShape[d]!, ceilDiv(r1 - tw0, w));
    if (a >= b) return false;
    lo[d] = a;
    hi[d] = b;
  }
  return true;
}

/** Downstream blocks in `down` of position `uPos` of `up`; returns false when empty. */
export function downstreamBox(
  up: TaskLayout,
  uPos: number,
  down: TaskLayout,
  coords: number[],
  lo: number[],
  hi: number[],
): boolean {
  if (down.blockCount === 0) return false;
  up.coordsOf(uPos, coords);
  for (let d = 0; d < up.dims; d++) {
    const w = up.writeRoi.shape[d]!;
    let a = up.totalWriteRoi.offset[d]! + coords[d]! * w;
    let b = a + w;
    if (up.fit === "shrink") {
      b = Math.min(b, up.totalWriteRoi.offset[d]! + up.totalWriteRoi.shape[d]!);
    }
    const t0 = down.totalRoi.offset[d]!;
    if (down.fit === "shrink") {
      a = Math.max(a, t0);
      b = Math.min(b, t0 + down.totalRoi.shape[d]!);
    }
    if (a >= b) return false;
    const wd = down.writeRoi.shape[d]!;
    const qLo = Math.max(0, floorDiv(a - t0 - down.readRoi.shape[d]!, wd) + 1);
    const qHi = Math.min(down.gridShape[d]!, ceilDiv(b - t0, wd));
    if (qLo >= qHi) return false;
    lo[d] = qLo;
    hi[d] = qHi;
  }
  return true;
}

export function boxSize(lo: readonly number[], hi: readonly number[], dims: number): number {
  let n = 1;
  for (let d = 0; d < dims; d++) n *= hi[d]! - lo[d]!;
  return n;
}

/** Move `coords` to the next cell of the box in row-major order; false after the last one. */
function nextInBox(
  coords: number[],
  lo: readonly number[],
  hi: readonly number[],
  dims: number,
): boolean {
  for (let d = dims - 1; d >= 0; d--) {
    coords[d]! += 1;
    if (coords[d]! < hi[d]!) return true;
    coords[d] = lo[d]!;
  }
  return false;
}

/** Calls `visit` with every position in the box, in row-major order. */
export function forEachInBox(
  layout: TaskLayout,
  lo: readonly number[],
  hi: readonly number[],
  coords: number[],
  task: number,
  visit: (task: number, position: number) => void,
): void {
  const dims = layout.dims;
  for (let d = 0; d < dims; d++) coords[d] = lo[d]!;
  while (true) {
    visit(task, layout.positionOf(coords));
    if (!nextInBox(coords, lo, hi, dims)) return;
  }
}

/** Positions of one task, reused from call to call (no garbage per call). */
export class PositionList {
  positions = new Float64Array(64);
  length = 0;
}

/** Write every position in the box into `out`, in row-major order. */
export function collectBox(
  layout: TaskLayout,
  lo: readonly number[],
  hi: readonly number[],
  coords: number[],
  out: PositionList,
): void {
  const dims = layout.dims;
  const n = boxSize(lo, hi, dims);
  if (out.positions.length < n) {
    out.positions = new Float64Array(Math.max(n, 2 * out.positions.length));
  }
  out.length = 0;
  for (let d = 0; d < dims; d++) coords[d] = lo[d]!;
  while (true) {
    out.positions[out.length++] = layout.positionOf(coords);
    if (!nextInBox(coords, lo, hi, dims)) return;
  }
}
