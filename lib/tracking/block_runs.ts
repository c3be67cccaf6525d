/**
 * Walking a task's blocks in tracking-cell order, one run of consecutive blocks along the last
 * axis at a time, so a reader of a million-block store touches each cell once with a tight loop
 * (`status` counts, `reset` clears, both through this).
 */

import type { TaskLayout } from "../blocks/mod.ts";

/** A box of block-grid coordinates, `[lo, hi)` per axis. */
export interface GridBox {
  readonly lo: readonly number[];
  readonly hi: readonly number[];
}

/**
 * Visit every block that has a tracking cell, one run of consecutive blocks along the last axis
 * at a time: `visit(position, cell, length)` covers positions `position .. position+length-1`
 * and cells `cell .. cell+length-1` (both have stride 1 on the last axis). Only blocks inside
 * `box` (block-grid coordinates) when given. Returns how many blocks were visited.
 */
export function forEachBlockRun(
  layout: TaskLayout,
  visit: (position: number, cell: number, length: number) => void,
  box?: GridBox,
): number {
  if (layout.blockCount === 0) return 0;
  const dims = layout.dims;
  if (dims === 0) {
    visit(0, 0, 1);
    return 1;
  }
  const lo: number[] = [];
  const hi: number[] = [];
  for (let d = 0; d < dims; d++) {
    const shift = layout.indexShift[d]!;
    lo.push(Math.max(box?.lo[d] ?? 0, -shift, 0));
    hi.push(
      Math.min(
        box?.hi[d] ?? layout.gridShape[d]!,
        layout.trackingShape[d]! - shift,
        layout.gridShape[d]!,
      ),
    );
    if (lo[d]! >= hi[d]!) return 0;
  }
  const last = dims - 1;
  let whole = true;
  for (let d = 0; d < dims && whole; d++) {
    whole = lo[d] === 0 && hi[d] === layout.gridShape[d] &&
      layout.gridShape[d] === layout.trackingShape[d] && layout.indexShift[d] === 0;
  }
  if (whole) {
    // The block grid and the tracking grid coincide: position = cell, one run.
    visit(0, 0, layout.blockCount);
    return layout.blockCount;
  }
  const length = hi[last]! - lo[last]!;
  const g = lo.slice();
  let visited = 0;
  for (;;) {
    let position = 0;
    let cell = 0;
    for (let d = 0; d < dims; d++) {
      position += g[d]! * layout.gridStrides[d]!;
      cell += (g[d]! + layout.indexShift[d]!) * layout.trackingStrides[d]!;
    }
    visit(position, cell, length);
    visited += length;
    let d = last - 1;
    for (; d >= 0; d--) {
      g[d]!++;
      if (g[d]! < hi[d]!) break;
      g[d] = lo[d]!;
    }
    if (d < 0) return visited;
  }
}
