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

/** Per-block state codes of `GridMapInput.states`. */
export const BLOCK_PENDING = 0;
export const BLOCK_DONE = 1;
export const BLOCK_FAILED = 2;

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
  const map = new GridMap(input.block_grid_shape, options);
  if (input.states.length < map.blockCount) {
    throw new RangeError(
      `renderGridMap: ${input.states.length} states for ${map.blockCount} blocks`,
    );
  }
  map.addStates(input.states);
  return map.render();
}

/**
 * A map being built while a store is streamed: it keeps three counts per character, never a
 * state per block, so a billion-block grid costs the size of the picture. Throws InputError
 * for an `axis` or `slice` out of range when made.
 */
export class GridMap {
  readonly blockCount: number;
  readonly #shape: readonly number[];
  readonly #options: GridMapOptions;
  readonly #strides: readonly number[];
  readonly #fixed: number;
  readonly #slice: number;
  readonly #projected: readonly number[];
  readonly #rowAxis: number;
  readonly #colAxis: number;
  readonly #rows: number;
  readonly #fx: number;
  readonly #fy: number;
  readonly #mapCols: number;
  readonly #mapRows: number;
  readonly #labelWidth: number;
  readonly #total: Float64Array;
  readonly #done: Float64Array;
  readonly #failed: Float64Array;
  readonly #g: number[];

  constructor(blockGridShape: readonly number[], options: GridMapOptions) {
    const shape = blockGridShape.length === 0 ? [1] : [...blockGridShape];
    this.#shape = shape;
    this.#options = options;
    const dims = shape.length;
    this.blockCount = shape.reduce((a, b) => a * b, 1);
    const grid = shape.join("×");
    const { axis, slice } = options;
    const chosen = axis ?? 0;
    // An empty grid is drawn as such whatever the options say.
    if (this.blockCount > 0) {
      if (dims === 1 && (axis !== undefined || slice !== undefined)) {
        throw new InputError(
          `--axis and --slice need a block grid of at least 2 dimensions; this one is ${grid}`,
        );
      }
      if (axis !== undefined) {
        checkIndex("--axis", axis, dims, `an axis of the ${dims}-D block grid`);
      }
      if (slice !== undefined) {
        checkIndex(
          "--slice",
          slice,
          shape[chosen]!,
          `a block index along axis ${chosen} (${grid})`,
        );
      }
    }
    // Which axes are shown, fixed (a slice) or projected.
    this.#fixed = slice === undefined ? -1 : chosen;
    this.#slice = slice ?? -1;
    const projected: number[] = [];
    if (slice === undefined && (dims >= 3 || axis !== undefined)) projected.push(chosen);
    const remaining: number[] = [];
    for (let d = 0; d < dims; d++) {
      if (d !== this.#fixed && !projected.includes(d)) remaining.push(d);
    }
    while (remaining.length > 2) projected.push(remaining.shift()!);
    projected.sort((a, b) => a - b);
    this.#projected = projected;
    this.#rowAxis = remaining.length === 2 ? remaining[0]! : -1;
    this.#colAxis = remaining[remaining.length - 1]!;
    this.#rows = this.#rowAxis < 0 ? 1 : shape[this.#rowAxis]!;
    const cols = shape[this.#colAxis]!;
    const maxRows = Math.max(1, options.maxRows ?? 40);
    this.#labelWidth = String(Math.max(0, this.#rows - 1)).length;
    const available = Math.max(8, Math.floor(options.width) - this.#labelWidth - 1);
    this.#fx = Math.max(1, Math.ceil(cols / available));
    this.#fy = Math.max(1, Math.ceil(this.#rows / maxRows));
    this.#mapCols = Math.ceil(cols / this.#fx);
    this.#mapRows = Math.ceil(this.#rows / this.#fy);
    const cells = this.blockCount === 0 ? 0 : this.#mapRows * this.#mapCols;
    this.#total = new Float64Array(cells);
    this.#done = new Float64Array(cells);
    this.#failed = new Float64Array(cells);
    this.#strides = cOrderStrides(shape);
    this.#g = new Array<number>(dims).fill(0);
  }

  /**
   * Blocks `position .. position + length - 1` (consecutive positions, possibly over several
   * rows of the grid): block `i` is done when `done[offset + i]` is 1, else failed when
   * `failures[offset + i]` is above 0, else pending.
   */
  addRun(
    position: number,
    length: number,
    done: Uint8Array,
    failures: Uint32Array,
    offset: number,
  ): void {
    const rowLength = this.#shape[this.#shape.length - 1]!;
    let i = 0;
    while (i < length) {
      const k0 = (position + i) % rowLength;
      const n = Math.min(length - i, rowLength - k0);
      this.#addRow(position + i, k0, n, done, failures, offset + i);
      i += n;
    }
  }

  #addRow(
    position: number,
    k0: number,
    length: number,
    done: Uint8Array,
    failures: Uint32Array,
    offset: number,
  ): void {
    if (this.#fixed === this.#shape.length - 1) {
      // A slice across the last axis takes one block of the row.
      const i = this.#slice - k0;
      if (i < 0 || i >= length) return;
      position += i;
      k0 += i;
      offset += i;
      length = 1;
    }
    const start = this.#rowStart(position);
    if (start === null) return;
    const { col, row, perBlock } = start;
    const mapCols = this.#mapCols;
    const fx = this.#fx;
    const total = this.#total;
    const nDone = this.#done;
    const nFailed = this.#failed;
    for (let i = 0; i < length; i++) {
      const m = perBlock ? row * mapCols + Math.floor((k0 + i) / fx) : row * mapCols + col;
      total[m]!++;
      if (done[offset + i] === 1) nDone[m]!++;
      else if (failures[offset + i]! > 0) nFailed[m]!++;
    }
  }

  /** Every block's state (`BLOCK_PENDING` / `BLOCK_DONE` / `BLOCK_FAILED`), C order. */
  addStates(states: Uint8Array): void {
    const shape = this.#shape;
    const rowLength = shape[shape.length - 1]!;
    const done = new Uint8Array(rowLength);
    const failures = new Uint32Array(rowLength);
    for (let p = 0; p < this.blockCount; p += rowLength) {
      for (let i = 0; i < rowLength; i++) {
        const s = states[p + i];
        done[i] = s === BLOCK_DONE ? 1 : 0;
        failures[i] = s === BLOCK_FAILED ? 1 : 0;
      }
      this.addRun(p, rowLength, done, failures, 0);
    }
  }

  /**
   * Where a row part starting at `position` lands: null when the slice leaves it out; otherwise
   * the map row, the map column unless the columns follow the last axis (`perBlock`).
   */
  #rowStart(position: number): { row: number; col: number; perBlock: boolean } | null {
    const g = this.#g;
    let rest = position;
    for (let d = 0; d < this.#shape.length; d++) {
      const s = this.#strides[d]!;
      g[d] = Math.floor(rest / s);
      rest -= g[d]! * s;
    }
    if (this.#fixed >= 0 && g[this.#fixed] !== this.#slice) return null;
    // The row axis is never the last one: rows and columns are the two last axes shown.
    const last = this.#shape.length - 1;
    const row = this.#rowAxis < 0 ? 0 : Math.floor(g[this.#rowAxis]! / this.#fy);
    const perBlock = this.#colAxis === last;
    const col = perBlock ? 0 : Math.floor(g[this.#colAxis]! / this.#fx);
    return { row, col, perBlock };
  }

  /** The map as text lines joined with "\n" (no trailing newline). */
  render(): string {
    const shape = this.#shape;
    const grid = shape.join("×");
    if (this.blockCount === 0) return `block grid ${grid}: no blocks`;
    const options = this.#options;
    const rowAxis = this.#rowAxis;
    const colAxis = this.#colAxis;
    const lines: string[] = [];
    const axes = rowAxis < 0
      ? `columns = axis ${colAxis}`
      : `rows = axis ${rowAxis}, columns = axis ${colAxis}`;
    let view = `block grid ${grid}`;
    if (this.#fixed >= 0) view += `, slice ${this.#slice} of axis ${this.#fixed}`;
    const projected = this.#projected;
    if (projected.length > 0) {
      const depth = projected.reduce((n, d) => n * shape[d]!, 1);
      view += `, projected along axis ${projected.join(" and ")} (${depth} blocks per column)`;
    }
    lines.push(`${view}: ${axes}`);
    for (let r = 0; r < this.#mapRows; r++) {
      const glyphs: string[] = [];
      for (let c = 0; c < this.#mapCols; c++) {
        const m = r * this.#mapCols + c;
        glyphs.push(glyphOf(this.#total[m]!, this.#done[m]!, this.#failed[m]!));
      }
      lines.push(
        `${String(r * this.#fy).padStart(this.#labelWidth)} ${paint(glyphs, options.color)}`,
      );
    }
    const key = (glyph: string, text: string) =>
      `${options.color ? `${styleOf(glyph)}${glyph}${RESET}` : glyph} ${text}`;
    const shades = options.color ? `${YELLOW}▓▒░${RESET}` : "▓▒░";
    const scale = this.#fx === 1 && this.#fy === 1
      ? "1 char = 1 block"
      : `1 char = ${this.#fy}×${this.#fx} blocks (rows×columns), downsampled`;
    lines.push(
      `${key(GLYPH_DONE, "done")}  ${shades} partly done  ${key(GLYPH_FAILED, "failed")}  ${
        key(GLYPH_PENDING, "pending")
      }   scale: ${scale}${projected.length > 0 ? ", each a column of blocks" : ""}`,
    );
    return lines.join("\n");
  }
}
