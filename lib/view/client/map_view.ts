/**
 * Which 2-D slice of an n-D cell grid the map shows, and where each cell lands on the canvas.
 * Grids of two axes or more show `shape[rowAxis] × shape[colAxis]` cells at fixed indices on
 * the other axes; a 1-D (or 0-D) grid is wrapped into rows, like text, so a long line of
 * blocks still fits the page.
 */

import { cOrderStrides, product } from "./decode.ts";

export interface MapView {
  readonly rowAxis: number;
  readonly colAxis: number;
  /** Per axis, the cell index shown on that axis (ignored on the row and column axes). */
  readonly slice: readonly number[];
}

export interface SliceGeometry {
  readonly rows: number;
  readonly cols: number;
  /** True for a wrapped 1-D grid: display cell `r * cols + c` is grid cell `r * cols + c`. */
  readonly wrapped: boolean;
  /** Flat cell index of display cell (0, 0), and the flat steps along a row and a column. */
  readonly base: number;
  readonly rowStride: number;
  readonly colStride: number;
  /** Cells in the grid (a wrapped grid's last row may be short). */
  readonly cells: number;
  /** CSS pixels per cell side. */
  readonly pixels: number;
}

/** Canvas width the map is fitted to, and the most pixels one cell may take. */
export const MAP_MAX_WIDTH = 900;
const MAP_MAX_HEIGHT = 720;
const MAX_CELL_PIXELS = 48;

/** The last two axes, the first index on every other axis. */
export function defaultView(shape: readonly number[]): MapView {
  const dims = shape.length;
  return {
    rowAxis: Math.max(0, dims - 2),
    colAxis: Math.max(0, dims - 1),
    slice: new Array<number>(dims).fill(0),
  };
}

/** `view` made valid for `shape`: axes distinct and in range, slice indices in range. */
export function clampView(shape: readonly number[], view: MapView): MapView {
  const dims = shape.length;
  if (dims < 2) return defaultView(shape);
  let rowAxis = Number.isInteger(view.rowAxis) && view.rowAxis >= 0 && view.rowAxis < dims
    ? view.rowAxis
    : dims - 2;
  let colAxis = Number.isInteger(view.colAxis) && view.colAxis >= 0 && view.colAxis < dims
    ? view.colAxis
    : dims - 1;
  if (rowAxis === colAxis) {
    rowAxis = dims - 2;
    colAxis = dims - 1;
  }
  const slice = shape.map((s, d) => {
    const v = Math.trunc(view.slice[d] ?? 0);
    return Number.isFinite(v) ? Math.min(Math.max(0, v), Math.max(0, s - 1)) : 0;
  });
  return { rowAxis, colAxis, slice };
}

/** Columns of a wrapped 1-D grid of `n` cells: one row when short, else about twice as wide. */
function wrapColumns(n: number): number {
  if (n <= 100) return Math.max(1, n);
  return Math.min(1000, Math.ceil(Math.sqrt(2 * n) / 10) * 10);
}

export function sliceGeometry(
  shape: readonly number[],
  view: MapView,
  maxWidth: number = MAP_MAX_WIDTH,
): SliceGeometry {
  const cells = product(shape);
  let rows: number;
  let cols: number;
  let base = 0;
  let rowStride: number;
  let colStride = 1;
  const wrapped = shape.length < 2;
  if (wrapped) {
    cols = cells === 0 ? 0 : wrapColumns(cells);
    rows = cols === 0 ? 0 : Math.ceil(cells / cols);
    rowStride = cols;
  } else {
    const strides = cOrderStrides(shape);
    rows = shape[view.rowAxis]!;
    cols = shape[view.colAxis]!;
    rowStride = strides[view.rowAxis]!;
    colStride = strides[view.colAxis]!;
    for (let d = 0; d < shape.length; d++) {
      if (d !== view.rowAxis && d !== view.colAxis) base += (view.slice[d] ?? 0) * strides[d]!;
    }
  }
  let pixels = Math.min(MAX_CELL_PIXELS, Math.floor(maxWidth / Math.max(1, cols)));
  pixels = Math.min(pixels, Math.floor(MAP_MAX_HEIGHT / Math.max(1, rows)));
  pixels = Math.max(1, pixels);
  return { rows, cols, wrapped, base, rowStride, colStride, cells, pixels };
}

/** The flat cell index at display position (r, c), or -1 outside the grid. */
export function cellAtDisplay(g: SliceGeometry, r: number, c: number): number {
  if (r < 0 || c < 0 || r >= g.rows || c >= g.cols) return -1;
  const flat = g.base + r * g.rowStride + c * g.colStride;
  return g.wrapped && flat >= g.cells ? -1 : flat;
}

/** Where cell `coords` is shown, or null when it is not in the current slice. */
export function displayOf(
  shape: readonly number[],
  view: MapView,
  g: SliceGeometry,
  coords: readonly number[],
): { readonly r: number; readonly c: number } | null {
  if (coords.length !== shape.length) return null;
  for (let d = 0; d < shape.length; d++) {
    const x = coords[d]!;
    if (!Number.isInteger(x) || x < 0 || x >= shape[d]!) return null;
  }
  if (g.wrapped) {
    const flat = shape.length === 0 ? 0 : coords[0]!;
    return { r: Math.floor(flat / g.cols), c: flat % g.cols };
  }
  for (let d = 0; d < shape.length; d++) {
    if (d !== view.rowAxis && d !== view.colAxis && coords[d] !== view.slice[d]) return null;
  }
  return { r: coords[view.rowAxis]!, c: coords[view.colAxis]! };
}

/**
 * Fill `out` (rows × cols pixels) with `lut[source[cell]]` for every cell of the slice; a
 * tight loop over typed arrays, so a million cells take a few milliseconds.
 */
export function paintSlice(
  g: SliceGeometry,
  out: Uint32Array,
  source: Uint8Array | Uint16Array,
  lut: Uint32Array,
  empty: number,
  second: Uint8Array | null = null,
): void {
  const { rows, cols, base, rowStride, colStride } = g;
  const limit = Math.min(g.cells, source.length);
  let i = 0;
  for (let r = 0; r < rows; r++) {
    let flat = base + r * rowStride;
    for (let c = 0; c < cols; c++, i++, flat += colStride) {
      if (flat >= limit) out[i] = empty;
      else if (second === null) out[i] = lut[source[flat]!]!;
      else out[i] = lut[(source[flat]! << 8) | second[flat]!]!;
    }
  }
}
