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

/**
 * The block runs of a layout (as `forEachBlockRun` visits them, in cell order) cut along
 * consecutive windows of tracking cells, for readers that stream a chunk file window by window:
 * call `visit` for windows `[first, first + cells)` in increasing order without gaps.
 */
export class RunWindows {
  readonly #layout: TaskLayout;
  readonly #lo: number[] = [];
  readonly #hi: number[] = [];
  readonly #g: number[] = [];
  /** The current run (position, cell, length), or length 0 when none is left. */
  #position = 0;
  #cell = 0;
  #length = 0;
  #whole = false;

  constructor(layout: TaskLayout) {
    this.#layout = layout;
    const dims = layout.dims;
    if (layout.blockCount === 0) return;
    if (dims === 0) {
      this.#length = 1;
      return;
    }
    let whole = true;
    for (let d = 0; d < dims; d++) {
      const shift = layout.indexShift[d]!;
      const lo = Math.max(-shift, 0);
      const hi = Math.min(layout.trackingShape[d]! - shift, layout.gridShape[d]!);
      if (lo >= hi) return;
      this.#lo.push(lo);
      this.#hi.push(hi);
      whole &&= lo === 0 && hi === layout.gridShape[d] &&
        layout.gridShape[d] === layout.trackingShape[d] && shift === 0;
    }
    this.#whole = whole;
    if (whole) {
      this.#length = layout.blockCount;
      return;
    }
    this.#g.push(...this.#lo);
    this.#load();
  }

  /**
   * Visit the parts of runs inside cells `[first, first + cells)`: `visit(position, offset,
   * length)` covers positions `position ..` and cells `first + offset ..`, `length` of each.
   */
  visit(
    first: number,
    cells: number,
    visit: (position: number, offset: number, length: number) => void,
  ): void {
    const end = first + cells;
    while (this.#length > 0 && this.#cell < end) {
      const start = Math.max(this.#cell, first);
      const stop = Math.min(this.#cell + this.#length, end);
      if (stop > start) visit(this.#position + (start - this.#cell), start - first, stop - start);
      if (this.#cell + this.#length > end) return;
      this.#advance();
    }
  }

  #load(): void {
    const layout = this.#layout;
    const last = layout.dims - 1;
    let position = 0;
    let cell = 0;
    for (let d = 0; d < layout.dims; d++) {
      position += this.#g[d]! * layout.gridStrides[d]!;
      cell += (this.#g[d]! + layout.indexShift[d]!) * layout.trackingStrides[d]!;
    }
    this.#position = position;
    this.#cell = cell;
    this.#length = this.#hi[last]! - this.#lo[last]!;
  }

  #advance(): void {
    if (this.#whole || this.#layout.dims === 0) {
      this.#length = 0;
      return;
    }
    const g = this.#g;
    let d = this.#layout.dims - 2;
    for (; d >= 0; d--) {
      g[d]!++;
      if (g[d]! < this.#hi[d]!) break;
      g[d] = this.#lo[d]!;
    }
    if (d < 0) this.#length = 0;
    else this.#load();
  }
}
