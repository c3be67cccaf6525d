/**
 * The cell grid of a block map and its state layer, shared by the map pass of a report
 * (map_build.ts, one pass over the store) and the live map of `run --serve` (live_map.ts, kept
 * up to date from the blocks the run finishes): both count blocks into the same `StateCounts`
 * with `countState` and encode them with `stateLayerOf`, so a live frame and a rescan of the
 * same ledger give the same bytes.
 */

import { Buffer } from "node:buffer";
import { cOrderStrides, type TaskLayout } from "../blocks/mod.ts";
import {
  CELL_DELETED_TEMPORARY,
  CELL_DONE,
  CELL_EMPTY,
  CELL_FAILED,
  CELL_NEVER_RUN,
  CELL_PARTLY_DONE,
  type StateLayer,
} from "./report_data.ts";

/** `outputs_state` of a temporary block whose files were deleted (lib/tracking/store.ts). */
const OUTPUTS_DELETED = 2;

/**
 * Blocks per cell along each axis so that the cell grid has at most `maxCells` cells: the axis
 * with the most cells is coarsened first, so a long thin grid keeps its short axis exact.
 */
export function cellShapeFor(gridShape: readonly number[], maxCells: number): number[] {
  const factors = gridShape.map(() => 1);
  const cells = () => gridShape.reduce((n, g, d) => n * Math.ceil(g / factors[d]!), 1);
  while (cells() > maxCells) {
    let widest = 0;
    for (let d = 1; d < gridShape.length; d++) {
      if (
        Math.ceil(gridShape[d]! / factors[d]!) > Math.ceil(gridShape[widest]! / factors[widest]!)
      ) {
        widest = d;
      }
    }
    // Jump straight to the next factor that changes the cell count of that axis.
    const now = Math.ceil(gridShape[widest]! / factors[widest]!);
    factors[widest] = Math.ceil(gridShape[widest]! / (now - 1));
  }
  return factors;
}

/** The cell grid of a block grid: cell `c` covers `cellShape` blocks per axis. */
export interface CellGrid {
  readonly cellShape: readonly number[];
  /** Cells per axis: `ceil(gridShape / cellShape)` (at least 1). */
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly count: number;
}

export function cellGridOf(gridShape: readonly number[], maxCells: number): CellGrid {
  const cellShape = cellShapeFor(gridShape, maxCells);
  const shape = gridShape.map((g, d) => Math.max(1, Math.ceil(g / cellShape[d]!)));
  return {
    cellShape,
    shape,
    strides: cOrderStrides(shape),
    count: shape.reduce((a, b) => a * b, 1),
  };
}

/**
 * Cut a run of blocks (consecutive positions from `runPosition`, at `runOffset` of a window,
 * possibly over several rows of the grid: when the block and tracking grids coincide it is the
 * whole window) into segments along the last axis, each in one row of cells:
 * `visit(position, offset, length, base, x0)`, where `base` is the cell of the row's first block
 * column and `x0` the segment's first coordinate on the last axis. `coords` is scratch.
 */
export function forEachSegment(
  layout: TaskLayout,
  grid: CellGrid,
  coords: number[],
  runPosition: number,
  runOffset: number,
  runLength: number,
  visit: (position: number, offset: number, length: number, base: number, x0: number) => void,
): void {
  const dims = layout.dims;
  const last = dims - 1;
  let visited = 0;
  while (visited < runLength) {
    const position = runPosition + visited;
    let base = 0;
    let x0 = 0;
    let length = runLength - visited;
    if (dims > 0) {
      layout.coordsOf(position, coords);
      for (let d = 0; d < last; d++) {
        base += ((coords[d]! / grid.cellShape[d]!) | 0) * grid.strides[d]!;
      }
      x0 = coords[last]!;
      length = Math.min(length, layout.gridShape[last]! - x0);
    }
    visit(position, runOffset + visited, length, base, x0);
    visited += length;
  }
}

/** Per-cell block counts by state, and the sum of their failed attempts. */
export class StateCounts {
  readonly blocks: Uint32Array;
  readonly done: Uint32Array;
  readonly failed: Uint32Array;
  readonly deleted: Uint32Array;
  readonly failureSum: Float64Array;

  constructor(cells: number) {
    this.blocks = new Uint32Array(cells);
    this.done = new Uint32Array(cells);
    this.failed = new Uint32Array(cells);
    this.deleted = new Uint32Array(cells);
    this.failureSum = new Float64Array(cells);
  }
}

/** Count block `k` of the arrays (done, failures, outputs_state or null) into cell `c`. */
export function countState(
  s: StateCounts,
  done: Uint8Array,
  failures: Uint32Array,
  outputs: Uint8Array | null,
  k: number,
  c: number,
): void {
  s.blocks[c]!++;
  const f = failures[k]!;
  if (f !== 0) s.failureSum[c]! += f;
  if (done[k] === 1) {
    s.done[c]!++;
    if (outputs !== null && outputs[k] === OUTPUTS_DELETED) s.deleted[c]!++;
  } else if (f !== 0) {
    s.failed[c]!++;
  }
}

/**
 * The hot loop of a frame: a run of blocks along the last axis into their cells. A top-level
 * function with every array an argument (no closure), integer cell arithmetic throughout: an
 * engine keeps it optimised for 10^8 blocks (a closure with `Math.floor` was deoptimised to
 * 7 times slower after its first call).
 */
export function countStates(
  s: StateCounts,
  done: Uint8Array,
  failures: Uint32Array,
  outputs: Uint8Array | null,
  offset: number,
  length: number,
  base: number,
  x0: number,
  factor: number,
): void {
  if (factor === 1) {
    for (let i = 0; i < length; i++) {
      countState(s, done, failures, outputs, offset + i, base + x0 + i);
    }
    return;
  }
  for (let i = 0; i < length; i++) {
    countState(s, done, failures, outputs, offset + i, base + (((x0 + i) / factor) | 0));
  }
}

/** The state layer of the counts: a `CELL_*` code per cell, and done fractions unless single. */
export function stateLayerOf(counts: StateCounts, grid: CellGrid): StateLayer {
  const { blocks, done, failed, deleted } = counts;
  const cellCount = grid.count;
  const codes = new Uint8Array(cellCount);
  const single = grid.cellShape.every((f) => f === 1);
  const fraction = single ? null : new Uint8Array(cellCount);
  for (let c = 0; c < cellCount; c++) {
    const n = blocks[c]!;
    if (fraction !== null) fraction[c] = n === 0 ? 0 : Math.round((255 * done[c]!) / n);
    codes[c] = n === 0
      ? CELL_EMPTY
      : failed[c]! > 0
      ? CELL_FAILED
      : done[c] === n
      ? (deleted[c] === n ? CELL_DELETED_TEMPORARY : CELL_DONE)
      : done[c] === 0
      ? CELL_NEVER_RUN
      : CELL_PARTLY_DONE;
  }
  return { codes: base64(codes), done_fraction: fraction === null ? null : base64(fraction) };
}

export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}
