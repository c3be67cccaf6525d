/**
 * Turning the report's compact encodings back into values: base64 layers into byte arrays,
 * quantised bytes into approximate values, block-grid coordinates into daisy's index, block ID
 * and ROIs (the same arithmetic as TaskLayout in lib/blocks/layout.ts, redone here on the
 * report's `MapLayout`, since the page has no TaskLayout; the block ID is the scheduler's own
 * function, bundled into the page).
 */

import { cantorNumberBig } from "../../blocks/block_id.ts";
import type { MapLayout, MetricLayer } from "../report_data.ts";

/** The bytes of a base64 string (atob gives one char per byte). */
export function base64Bytes(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** Two little-endian bytes per value, as the worker layer stores them. */
export function u16le(bytes: Uint8Array): Uint16Array {
  const n = bytes.length >> 1;
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = bytes[2 * i]! | (bytes[2 * i + 1]! << 8);
  return out;
}

/** The value a quantised byte stands for, or null for 0 (no value). */
export function dequantise(
  layer: Pick<MetricLayer, "scale" | "lo" | "hi">,
  byte: number,
): number | null {
  if (byte === 0) return null;
  const t = (byte - 1) / 254;
  if (layer.scale === "log" && layer.lo > 0 && layer.hi > 0) {
    return layer.lo * (layer.hi / layer.lo) ** t;
  }
  return layer.lo + (layer.hi - layer.lo) * t;
}

export function product(shape: readonly number[]): number {
  let n = 1;
  for (const s of shape) n *= s;
  return n;
}

/** C-order strides of `shape`. */
export function cOrderStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length).fill(1);
  for (let d = shape.length - 2; d >= 0; d--) strides[d] = strides[d + 1]! * shape[d + 1]!;
  return strides;
}

/** The coordinates of C-order position `flat` in `shape`. */
export function coordsOf(flat: number, shape: readonly number[]): number[] {
  const strides = cOrderStrides(shape);
  let rest = flat;
  return strides.map((s) => {
    const c = Math.floor(rest / s);
    rest -= c * s;
    return c;
  });
}

export function flatOf(coords: readonly number[], shape: readonly number[]): number {
  const strides = cOrderStrides(shape);
  let p = 0;
  for (let d = 0; d < strides.length; d++) p += coords[d]! * strides[d]!;
  return p;
}

/**
 * daisy's block ID of a grid index, in BigInt so it is exact at any size: the scheduler's own
 * function (lib/blocks/block_id.ts), bundled into the page.
 */
export const cantorId: (index: readonly number[]) => bigint = cantorNumberBig;

/** daisy's grid index of block-grid coordinate `coords` (clamped at 0, as TaskLayout does). */
export function blockIndex(layout: MapLayout, coords: readonly number[]): number[] {
  return coords.map((c, d) => Math.max(0, c + (layout.index_shift[d] ?? 0)));
}

export interface Roi {
  readonly offset: readonly number[];
  readonly shape: readonly number[];
}

/** A block's write and read ROIs after fit ("shrink" cuts them at the total ROI). */
export function blockRois(
  layout: MapLayout,
  coords: readonly number[],
): { readonly write: Roi; readonly read: Roi } {
  const shrink = layout.fit === "shrink";
  const wOff: number[] = [];
  const wShape: number[] = [];
  const rOff: number[] = [];
  const rShape: number[] = [];
  for (let d = 0; d < coords.length; d++) {
    const w = layout.write_shape[d] ?? 1;
    const cb = layout.context_begin[d] ?? 0;
    const ce = layout.context_end[d] ?? 0;
    const totalBegin = layout.total_write_offset[d] ?? 0;
    const totalEnd = totalBegin + (layout.total_write_shape[d] ?? 0);
    const begin = totalBegin + coords[d]! * w;
    let end = begin + w;
    let readBegin = begin - cb;
    let readEnd = end + ce;
    if (shrink) {
      end = Math.min(end, totalEnd);
      readBegin = Math.max(readBegin, totalBegin - cb);
      readEnd = Math.min(readEnd, totalEnd + ce);
    }
    wOff.push(begin);
    wShape.push(end - begin);
    rOff.push(readBegin);
    rShape.push(readEnd - readBegin);
  }
  return { write: { offset: wOff, shape: wShape }, read: { offset: rOff, shape: rShape } };
}

/** `[a, b) × [c, d)`: the half-open range of each axis. */
export function formatRoi(roi: Roi): string {
  return roi.offset.map((o, d) => `[${o}, ${o + roi.shape[d]!})`).join(" × ");
}

/** Coordinates as `(a, b, c)`. */
export function formatCoords(coords: readonly number[]): string {
  return `(${coords.join(", ")})`;
}
