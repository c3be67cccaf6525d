/**
 * The failed blocks of a live frame (live_map.ts) without a pass over the store: the first
 * `limit` failed blocks in grid order are found through the per-cell failed counts, reading the
 * ledger only in the rows of cells that hold one. Their last errors: live_errors.ts.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import type { CellGrid } from "./state_cells.ts";

/** Failed blocks in grid order: positions and their failed attempts. */
export interface FailedPositions {
  readonly positions: number[];
  readonly attempts: number[];
}

/**
 * The first `limit` blocks (in position order) that are not done and have failed attempts.
 * `cellFailed` counts them per cell of `grid`, `rowFailed` per row of cells (the cells that
 * differ only along the last axis); a block row whose row of cells has none is skipped with all
 * the rows of that row of cells, and in the others only the cells that have one are read.
 */
export function firstFailed(
  layout: TaskLayout,
  grid: CellGrid,
  cellFailed: Uint32Array,
  rowFailed: Uint32Array,
  done: Uint8Array,
  failures: Uint32Array,
  limit: number,
): FailedPositions {
  const found: FailedPositions = { positions: [], attempts: [] };
  if (layout.blockCount === 0 || limit <= 0) return found;
  const dims = layout.dims;
  if (dims === 0) {
    const cell = layout.trackingCellOf(0);
    if (cell >= 0 && failures[cell] !== 0 && done[cell] !== 1) {
      found.positions.push(0);
      found.attempts.push(failures[cell]!);
    }
    return found;
  }
  const last = dims - 1;
  const shape = layout.gridShape;
  const factors = grid.cellShape;
  const perRow = grid.shape[last]!;
  const factor = factors[last]!;
  const rowLength = shape[last]!;
  // The block row: coordinates along every axis but the last.
  const g = new Array<number>(last).fill(0);
  for (;;) {
    let base = 0;
    let rowPosition = 0;
    for (let d = 0; d < last; d++) {
      base += Math.floor(g[d]! / factors[d]!) * grid.strides[d]!;
      rowPosition += g[d]! * layout.gridStrides[d]!;
    }
    if (rowFailed[base / perRow] === 0 && last > 0) {
      // No failed block in this row of cells: on to its next one along axis last - 1.
      const d = last - 1;
      g[d] = Math.min(shape[d]!, (Math.floor(g[d]! / factors[d]!) + 1) * factors[d]!);
    } else {
      for (let j = 0; j < perRow; j++) {
        if (cellFailed[base + j] === 0) continue;
        const end = Math.min((j + 1) * factor, rowLength);
        for (let x = j * factor; x < end; x++) {
          const position = rowPosition + x;
          const cell = layout.trackingCellOf(position);
          if (cell < 0 || failures[cell] === 0 || done[cell] === 1) continue;
          found.positions.push(position);
          found.attempts.push(failures[cell]!);
          if (found.positions.length >= limit) return found;
        }
      }
      if (last === 0) return found;
      g[last - 1]!++;
    }
    if (last === 0) return found;
    let d = last - 1;
    for (; d > 0 && g[d]! >= shape[d]!; d--) {
      g[d] = 0;
      g[d - 1]!++;
    }
    if (g[0]! >= shape[0]!) return found;
  }
}
