/**
 * A terminal picture of a task's block grid (`blockwise status --map`).
 *
 * - 1-D: one row; 2-D: rows = axis 0, columns = axis 1.
 * - 3-D and more: a projection along `axis` (default 0), each character showing the state of
 *   the whole column of blocks behind it; or, with `slice`, the one slice `axis = slice`. When
 *   more than two axes remain, the leading ones are projected too.
 * - Each character covers one block, or several when the grid is wider than `width` or taller
 *   than `maxRows` (40): the grid is downsampled and the legend line says the scale.
 *
 * A character aggregates the blocks it covers: any failed → ✗ (red, the worst state wins);
 * all done → █ (green); none done → · (dim); otherwise the done fraction: ░ under 1/3, ▒ under
 * 2/3, ▓ above (yellow).
 */

import { cOrderStrides } from "../blocks/mod.ts";
import { InputError } from "../errors.ts";
import { BLOCK_DONE, BLOCK_FAILED } from "./inspect.ts";

export interface GridMapInput {
  /** Blocks per axis, C order. */
  readonly block_grid_shape: readonly number[];
  /** One state per block position (`BLOCK_PENDING` / `BLOCK_DONE` / `BLOCK_FAILED`). */
  readonly states: Uint8Array;
}

export interface GridMapOptions {
  /** Terminal columns available, row labels included. */
  readonly width: number;
  /** ANSI colours. */
  readonly color: boolean;
  /** The axis to project along (default 0), or to slice with `slice`. */
  readonly axis?: number;
  /** Show only the slice `axis = slice` instead of a projection. */
  readonly slice?: number;
  /** Rows before the grid is downsampled vertically; default 40. */
  readonly maxRows?: number;
}

const GREEN = "\x1b[32m";
const RED = "\x1b[31m";
const YELLOW = "\x1b[33m";
const DIM = "\x1b[2m";
const RESET = "\x1b[0m";

const GLYPH_DONE = "█";
const GLYPH_FAILED = "✗";
const GLYPH_PENDING = "·";

function styleOf(glyph: string): string {
  if (glyph === GLYPH_DONE) return GREEN;
  if (glyph === GLYPH_FAILED) return RED;
  if (glyph === GLYPH_PENDING) return DIM;
  return YELLOW;
}

function glyphOf(total: number, done: number, failed: number): string {
  if (total === 0) return " ";
  if (failed > 0) return GLYPH_FAILED;
  if (done === total) return GLYPH_DONE;
  if (done === 0) return GLYPH_PENDING;
  const f = done / total;
  return f < 1 / 3 ? "░" : f < 2 / 3 ? "▒" : "▓";
}

/** Colour a line of glyphs, one escape per run of equal glyphs. */
function paint(glyphs: readonly string[], color: boolean): string {
  if (!color) return glyphs.join("");
  let out = "";
  let i = 0;
  while (i < glyphs.length) {
    const g = glyphs[i]!;
    let j = i + 1;
    while (j < glyphs.length && glyphs[j] === g) j++;
    out += g === " " ? " ".repeat(j - i) : `${styleOf(g)}${g.repeat(j - i)}${RESET}`;
    i = j;
  }
  return out;
}

function checkIndex(name: string, value: number, limit: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0 || value >= limit) {
    throw new InputError(
      `${name} ${value} is out of range: expected ${what} from 0 to ${limit - 1}`,
    );
  }
}

/** The map as text lines joined with "\n" (no trailing newline). */
export function renderGridMap(input: GridMapInput, options: GridMapOptions): string {
  const shape = input.block_grid_shape.length === 0 ? [1] : [...input.block_grid_shape];
  const dims = shape.length;
  const total = shape.reduce((a, b) => a * b, 1);
  const grid = shape.join("×");
  if (total === 0) return `block grid ${grid}: no blocks`;
  if (input.states.length < total) {
    throw new RangeError(`renderGridMap: ${input.states.length} states for ${total} blocks`);
  }
  const { axis, slice } = options;
  if (dims === 1 && (axis !== undefined || slice !== undefined)) {
    throw new InputError(
      `--axis and --slice need a block grid of at least 2 dimensions; this one is ${grid}`,
    );
  }
  if (axis !== undefined) checkIndex("--axis", axis, dims, `an axis of the ${dims}-D block grid`);
  const chosen = axis ?? 0;
  if (slice !== undefined) {
    checkIndex("--slice", slice, shape[chosen]!, `a block index along axis ${chosen} (${grid})`);
  }

  // Which axes are shown, fixed (a slice) or projected.
  const fixed = slice === undefined ? -1 : chosen;
  const projected: number[] = [];
  if (slice === undefined && (dims >= 3 || axis !== undefined)) projected.push(chosen);
  const remaining: number[] = [];
  for (let d = 0; d < dims; d++) if (d !== fixed && !projected.includes(d)) remaining.push(d);
  while (remaining.length > 2) projected.push(remaining.shift()!);
  projected.sort((a, b) => a - b);
  const rowAxis = remaining.length === 2 ? remaining[0]! : -1;
  const colAxis = remaining[remaining.length - 1]!;
  const rows = rowAxis < 0 ? 1 : shape[rowAxis]!;
  const cols = shape[colAxis]!;

  const maxRows = Math.max(1, options.maxRows ?? 40);
  const labelWidth = String(Math.max(0, rows - 1)).length;
  const available = Math.max(8, Math.floor(options.width) - labelWidth - 1);
  const fx = Math.ceil(cols / available);
  const fy = Math.ceil(rows / maxRows);
  const mapCols = Math.ceil(cols / fx);
  const mapRows = Math.ceil(rows / fy);
  const cellTotal = new Float64Array(mapRows * mapCols);
  const cellDone = new Float64Array(mapRows * mapCols);
  const cellFailed = new Float64Array(mapRows * mapCols);

  // One pass over the blocks shown: an odometer over every axis but the last, whose blocks are
  // consecutive positions.
  const strides = cOrderStrides(shape);
  const lo = shape.map((_, d) => (d === fixed ? slice! : 0));
  const hi = shape.map((s, d) => (d === fixed ? slice! + 1 : s));
  const last = dims - 1;
  const g = lo.slice();
  const states = input.states;
  for (;;) {
    let base = 0;
    for (let d = 0; d < last; d++) base += g[d]! * strides[d]!;
    const r = rowAxis < 0 || rowAxis === last ? 0 : Math.floor(g[rowAxis]! / fy);
    const cFixed = colAxis === last ? 0 : Math.floor(g[colAxis]! / fx);
    for (let k = lo[last]!; k < hi[last]!; k++) {
      const row = rowAxis === last ? Math.floor(k / fy) : r;
      const col = colAxis === last ? Math.floor(k / fx) : cFixed;
      const m = row * mapCols + col;
      const state = states[base + k];
      cellTotal[m]!++;
      if (state === BLOCK_DONE) cellDone[m]!++;
      else if (state === BLOCK_FAILED) cellFailed[m]!++;
    }
    let d = last - 1;
    for (; d >= 0; d--) {
      g[d]!++;
      if (g[d]! < hi[d]!) break;
      g[d] = lo[d]!;
    }
    if (d < 0) break;
  }

  const lines: string[] = [];
  const axes = rowAxis < 0
    ? `columns = axis ${colAxis}`
    : `rows = axis ${rowAxis}, columns = axis ${colAxis}`;
  let view = `block grid ${grid}`;
  if (fixed >= 0) view += `, slice ${slice} of axis ${fixed}`;
  if (projected.length > 0) {
    const depth = projected.reduce((n, d) => n * shape[d]!, 1);
    view += `, projected along axis ${projected.join(" and ")} (${depth} blocks per column)`;
  }
  lines.push(`${view}: ${axes}`);
  for (let r = 0; r < mapRows; r++) {
    const glyphs: string[] = [];
    for (let c = 0; c < mapCols; c++) {
      const m = r * mapCols + c;
      glyphs.push(glyphOf(cellTotal[m]!, cellDone[m]!, cellFailed[m]!));
    }
    lines.push(`${String(r * fy).padStart(labelWidth)} ${paint(glyphs, options.color)}`);
  }
  const key = (glyph: string, text: string) =>
    `${options.color ? `${styleOf(glyph)}${glyph}${RESET}` : glyph} ${text}`;
  const shades = options.color ? `${YELLOW}▓▒░${RESET}` : "▓▒░";
  const scale = fx === 1 && fy === 1
    ? "1 char = 1 block"
    : `1 char = ${fy}×${fx} blocks (rows×columns), downsampled`;
  lines.push(
    `${key(GLYPH_DONE, "done")}  ${shades} partly done  ${key(GLYPH_FAILED, "failed")}  ${
      key(GLYPH_PENDING, "pending")
    }   scale: ${scale}${projected.length > 0 ? ", each a column of blocks" : ""}`,
  );
  return lines.join("\n");
}
