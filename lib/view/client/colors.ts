/**
 * Colours of the block map: fixed state colours, a viridis ramp for metrics (perceptually
 * uniform and readable by colour-blind people) and a categorical palette for workers. Lookup
 * tables hold colours packed for a Uint32Array view of ImageData, so a cell costs one store.
 */

import {
  CELL_DELETED_TEMPORARY,
  CELL_DONE,
  CELL_EMPTY,
  CELL_FAILED,
  CELL_NEVER_RUN,
  CELL_PARTLY_DONE,
} from "../report_data.ts";

export const STATE_COLORS = {
  done: "#2e9e44",
  failed: "#d62728",
  never_run: "#d9d9d9",
  deleted_temporary: "#8fa7bf",
} as const;

/** A cell without a value on a metric layer, and an empty cell. */
export const NO_VALUE_COLOR = "#f0f0f0";
export const EMPTY_COLOR = "#ffffff";

export type Rgb = readonly [number, number, number];

export function hexToRgb(hex: string): Rgb {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

export function rgbToHex(rgb: Rgb): string {
  return `#${rgb.map((c) => Math.round(c).toString(16).padStart(2, "0")).join("")}`;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** An opaque colour as one Uint32 in ImageData's byte order (RGBA in memory). */
export function pack(rgb: Rgb): number {
  const [r, g, b] = rgb;
  return LITTLE_ENDIAN
    ? ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0
    : ((r << 24) | (g << 16) | (b << 8) | 255) >>> 0;
}

function round(c: Rgb): Rgb {
  return [Math.round(c[0]), Math.round(c[1]), Math.round(c[2])];
}

function mix(a: Rgb, b: Rgb, t: number): Rgb {
  return [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t];
}

/** matplotlib's viridis at 9 evenly spaced stops; interpolated between them. */
const VIRIDIS_STOPS: readonly Rgb[] = [
  [68, 1, 84],
  [71, 44, 122],
  [59, 81, 139],
  [44, 113, 142],
  [33, 144, 141],
  [39, 173, 129],
  [92, 200, 99],
  [170, 220, 50],
  [253, 231, 37],
];

/** Viridis at `t` in [0, 1]. */
export function viridis(t: number): Rgb {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS_STOPS.length - 1);
  const i = Math.min(VIRIDIS_STOPS.length - 2, Math.floor(x));
  return round(mix(VIRIDIS_STOPS[i]!, VIRIDIS_STOPS[i + 1]!, x - i));
}

/** Lookup for a metric layer's bytes: 0 → no value, 1 + k → viridis(k / 254). */
export function metricLut(): Uint32Array {
  const lut = new Uint32Array(256);
  lut[0] = pack(hexToRgb(NO_VALUE_COLOR));
  for (let b = 1; b < 256; b++) lut[b] = pack(viridis((b - 1) / 254));
  return lut;
}

export function stateColorOf(code: number, fraction: number): Rgb {
  switch (code) {
    case CELL_NEVER_RUN:
      return hexToRgb(STATE_COLORS.never_run);
    case CELL_DONE:
      return hexToRgb(STATE_COLORS.done);
    case CELL_FAILED:
      return hexToRgb(STATE_COLORS.failed);
    case CELL_DELETED_TEMPORARY:
      return hexToRgb(STATE_COLORS.deleted_temporary);
    case CELL_PARTLY_DONE:
      // Partly done shades from grey to green, never all the way (that reads as done).
      return round(
        mix(hexToRgb(STATE_COLORS.never_run), hexToRgb(STATE_COLORS.done), 0.15 + 0.7 * fraction),
      );
    case CELL_EMPTY:
      return hexToRgb(EMPTY_COLOR);
    default:
      return hexToRgb("#000000");
  }
}

/** A block's state colour (partly done and empty cells count as done and never run). */
export function stateHex(code: number): string {
  switch (code) {
    case CELL_DONE:
    case CELL_PARTLY_DONE:
      return STATE_COLORS.done;
    case CELL_FAILED:
      return STATE_COLORS.failed;
    case CELL_DELETED_TEMPORARY:
      return STATE_COLORS.deleted_temporary;
    default:
      return STATE_COLORS.never_run;
  }
}

/** Lookup over `code * 256 + fraction byte` (the fraction only matters for partly done). */
export function stateLut(): Uint32Array {
  const lut = new Uint32Array(256 * 256);
  for (let code = 0; code < 256; code++) {
    if (code === CELL_PARTLY_DONE) {
      for (let f = 0; f < 256; f++) lut[code * 256 + f] = pack(stateColorOf(code, f / 255));
    } else lut.fill(pack(stateColorOf(code, 0)), code * 256, code * 256 + 256);
  }
  return lut;
}

/** Tableau's 10 colours, then golden-angle hues: distinct for the first few workers. */
const CATEGORICAL = [
  "#4e79a7",
  "#f28e2b",
  "#e15759",
  "#76b7b2",
  "#59a14f",
  "#edc948",
  "#b07aa1",
  "#ff9da7",
  "#9c755f",
  "#bab0ac",
];

function hslToRgb(h: number, s: number, l: number): Rgb {
  const k = (n: number) => (n + h / 30) % 12;
  const a = s * Math.min(l, 1 - l);
  const f = (n: number) => l - a * Math.max(-1, Math.min(k(n) - 3, Math.min(9 - k(n), 1)));
  return [Math.round(f(0) * 255), Math.round(f(8) * 255), Math.round(f(4) * 255)];
}

/** The colour of the `i`-th worker (by rank among the workers seen). */
export function categoricalColor(i: number): string {
  if (i < CATEGORICAL.length) return CATEGORICAL[i]!;
  const hue = (i * 137.508) % 360;
  return rgbToHex(hslToRgb(hue, 0.55, 0.5 + 0.15 * ((i % 3) - 1)));
}

/** Lookup over the 16-bit worker numbers; 65535 (none) and unseen numbers are "no value". */
export function workerLut(workers: readonly number[]): Uint32Array {
  const lut = new Uint32Array(65536).fill(pack(hexToRgb(NO_VALUE_COLOR)));
  workers.forEach((w, i) => {
    if (w >= 0 && w < 65535) lut[w] = pack(hexToRgb(categoricalColor(i)));
  });
  return lut;
}
