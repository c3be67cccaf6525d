/**
 * Reducing a voxel mask to a task's block grid: for every block, the mask voxels under its write
 * ROI decide whether it is skipped.
 *
 * Geometry, per axis: mask voxel `i` covers world `[offset + i * size, offset + (i + 1) * size)`;
 * the voxels under a block's write ROI `[begin, end)` are `floor((begin - offset) / size)` up to
 * `ceil((end - offset) / size)` (exclusive), so a voxel straddling a block boundary belongs to
 * both blocks. Voxels of that range outside the mask's extent count as zero; with
 * `outside: "keep"` a block whose range sticks out of the mask is never skipped instead.
 *
 * Cost: every voxel is read once (plus the few straddling a boundary along the last axis, read
 * twice). Each row along the last axis is summed per block, and the row's per-block sums are
 * added to the blocks containing the row along the other axes — integer counts, no loop over
 * blocks × voxels.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { ceilDiv, floorDiv } from "../geometry/mod.ts";

/** When a block is skipped, judged on the nonzero voxels under its write ROI. */
export type SkipRule =
  | { readonly kind: "empty" }
  | { readonly kind: "full" }
  | { readonly kind: "fraction"; readonly below: number };

export interface VoxelReduceOptions {
  /** World units per mask voxel, per axis (positive integers). */
  readonly voxelSize: readonly number[];
  /** World coordinate of the corner of mask voxel 0, per axis (integers). */
  readonly offset: readonly number[];
  readonly rule: SkipRule;
  /** Swap zero and nonzero voxels first (outside the mask still counts as zero). */
  readonly invert: boolean;
  /** `skip`: outside voxels count as zero; `keep`: a block sticking out is never skipped. */
  readonly outside: "skip" | "keep";
}

export interface VoxelReduceResult {
  /** One byte per block position, 1 = skip. */
  readonly cells: Uint8Array;
  readonly skipped: number;
  /** Blocks whose write ROI is not entirely covered by the mask. */
  readonly blocksOutsideMask: number;
}

interface AxisRanges {
  /** Clipped voxel range `[inLo, inHi)` per block along the axis. */
  readonly inLo: Int32Array;
  readonly inHi: Int32Array;
  /** Voxels under the block's write ROI along the axis, inside and outside the mask. */
  readonly total: Float64Array;
  readonly outside: Uint8Array;
}

/** Applies `options.rule` to every block of `layout` over the voxel mask `mask`. */
export function reduceVoxelMask(
  layout: TaskLayout,
  mask: { readonly data: Uint8Array; readonly shape: readonly number[] },
  options: VoxelReduceOptions,
): VoxelReduceResult {
  const dims = layout.dims;
  const grid = layout.gridShape;
  const shape = mask.shape;
  const axes: AxisRanges[] = [];
  for (let d = 0; d < dims; d++) axes.push(axisRanges(layout, d, shape[d]!, options));

  const counts = new Float64Array(layout.blockCount);
  if (layout.blockCount > 0) accumulate(mask.data, shape, grid, layout.gridStrides, axes, counts);

  const cells = new Uint8Array(layout.blockCount);
  let skipped = 0;
  let blocksOutsideMask = 0;
  const coords = new Array<number>(dims).fill(0);
  for (let p = 0; p < layout.blockCount; p++) {
    let inside = 1;
    let total = 1;
    let sticksOut = false;
    for (let d = 0; d < dims; d++) {
      const a = axes[d]!;
      const b = coords[d]!;
      inside *= a.inHi[b]! - a.inLo[b]!;
      total *= a.total[b]!;
      if (a.outside[b] === 1) sticksOut = true;
    }
    if (sticksOut) blocksOutsideMask++;
    const nonzero = options.invert ? inside - counts[p]! : counts[p]!;
    const skip = sticksOut && options.outside === "keep"
      ? false
      : decide(options.rule, nonzero, total);
    if (skip) {
      cells[p] = 1;
      skipped++;
    }
    for (let d = dims - 1; d >= 0; d--) {
      coords[d]!++;
      if (coords[d]! < grid[d]!) break;
      coords[d] = 0;
    }
  }
  return { cells, skipped, blocksOutsideMask };
}

function decide(rule: SkipRule, nonzero: number, total: number): boolean {
  switch (rule.kind) {
    case "empty":
      return nonzero === 0;
    case "full":
      return nonzero === total;
    case "fraction":
      return nonzero < rule.below * total;
  }
}

function axisRanges(
  layout: TaskLayout,
  d: number,
  n: number,
  options: VoxelReduceOptions,
): AxisRanges {
  const g = layout.gridShape[d]!;
  const size = options.voxelSize[d]!;
  const offset = options.offset[d]!;
  const inLo = new Int32Array(g);
  const inHi = new Int32Array(g);
  const total = new Float64Array(g);
  const outside = new Uint8Array(g);
  for (let b = 0; b < g; b++) {
    const roi = layout.writeRoiOf(b * layout.gridStrides[d]!);
    const begin = roi.offset[d]!;
    const end = begin + roi.shape[d]!;
    const lo = floorDiv(begin - offset, size);
    const hi = ceilDiv(end - offset, size);
    total[b] = hi - lo;
    outside[b] = lo < 0 || hi > n ? 1 : 0;
    const clippedLo = Math.min(Math.max(lo, 0), n);
    inLo[b] = clippedLo;
    inHi[b] = Math.max(clippedLo, Math.min(hi, n));
  }
  return { inLo, inHi, total, outside };
}

/**
 * For each voxel index along an axis, the blocks whose clipped range contains it: `[first, end)`.
 * Ranges are monotone in the block index, so two pointers suffice.
 */
function containingBlocks(a: AxisRanges, n: number): { first: Int32Array; end: Int32Array } {
  const g = a.inLo.length;
  const first = new Int32Array(n);
  const end = new Int32Array(n);
  let f = 0;
  let e = 0;
  for (let i = 0; i < n; i++) {
    while (f < g && a.inHi[f]! <= i) f++;
    while (e < g && a.inLo[e]! <= i) e++;
    first[i] = f;
    end[i] = Math.max(f, e);
  }
  return { first, end };
}

function accumulate(
  data: Uint8Array,
  shape: readonly number[],
  grid: readonly number[],
  gridStrides: readonly number[],
  axes: readonly AxisRanges[],
  counts: Float64Array,
): void {
  const dims = shape.length;
  const last = dims - 1;
  const rowLength = shape[last]!;
  const inLo = axes[last]!.inLo;
  const inHi = axes[last]!.inHi;
  const rowCounts = new Float64Array(grid[last]!);
  const outer = axes.slice(0, last).map((a, d) => containingBlocks(a, shape[d]!));
  const rows = shape.slice(0, last).reduce((a, b) => a * b, 1);
  if (rowLength === 0 || rows === 0) return;
  const index = new Array<number>(last).fill(0);
  const combo = new Array<number>(last).fill(0);

  for (let row = 0; row < rows; row++) {
    let covered = true;
    for (let d = 0; d < last; d++) {
      const i = index[d]!;
      if (outer[d]!.first[i]! >= outer[d]!.end[i]!) {
        covered = false;
        break;
      }
    }
    if (covered) {
      if (sumRow(data, row * rowLength, inLo, inHi, rowCounts)) {
        addRow(rowCounts, index, outer, gridStrides, combo, counts);
      }
    }
    for (let d = last - 1; d >= 0; d--) {
      index[d]!++;
      if (index[d]! < shape[d]!) break;
      index[d] = 0;
    }
  }
}

/** Sums one row's voxels per block along the last axis; false when the row is all zero. */
function sumRow(
  data: Uint8Array,
  start: number,
  inLo: Int32Array,
  inHi: Int32Array,
  rowCounts: Float64Array,
): boolean {
  let any = 0;
  for (let b = 0; b < rowCounts.length; b++) {
    let sum = 0;
    const end = start + inHi[b]!;
    for (let k = start + inLo[b]!; k < end; k++) sum += data[k]!;
    rowCounts[b] = sum;
    any |= sum;
  }
  return any !== 0;
}

/** Adds one row's per-block sums to every block containing the row (usually exactly one). */
function addRow(
  rowCounts: Float64Array,
  index: readonly number[],
  outer: readonly { first: Int32Array; end: Int32Array }[],
  gridStrides: readonly number[],
  combo: number[],
  counts: Float64Array,
): void {
  const last = index.length;
  const gLast = rowCounts.length;
  for (let d = 0; d < last; d++) combo[d] = outer[d]!.first[index[d]!]!;
  while (true) {
    let base = 0;
    for (let d = 0; d < last; d++) base += combo[d]! * gridStrides[d]!;
    for (let b = 0; b < gLast; b++) counts[base + b]! += rowCounts[b]!;
    let d = last - 1;
    for (; d >= 0; d--) {
      combo[d]!++;
      if (combo[d]! < outer[d]!.end[index[d]!]!) break;
      combo[d] = outer[d]!.first[index[d]!]!;
    }
    if (d < 0) return;
  }
}
