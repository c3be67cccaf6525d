/**
 * How much of a task's total write ROI no block writes. With daisy's default `fit: "valid"` a
 * total ROI that the write blocks do not divide loses its far edge on every such axis (250 with
 * 64-wide blocks: 3 blocks, 58 left); daisy's geometry stays, and `plan` and `run` say so.
 */

import type { TaskLayout } from "./layout.ts";

/** What the blocks of a layout leave unwritten of its total write ROI. */
export interface Coverage {
  /** The total write ROI's shape. */
  readonly total: readonly number[];
  /** Per axis, how much of the far edge no block writes (0 where the blocks reach the end). */
  readonly unwritten: readonly number[];
  /** The unwritten fraction of the total write ROI's volume, 0 to 1. */
  readonly fraction: number;
}

/**
 * What the blocks leave unwritten of the total write ROI, or null when they write all of it or
 * when there are no blocks at all (that is an error of its own, `layoutWarnings`).
 */
export function coverageOf(layout: TaskLayout): Coverage | null {
  if (layout.blockCount === 0) return null;
  const total = layout.totalWriteRoi.shape;
  const w = layout.writeRoi.shape;
  const unwritten = total.map((t, d) => Math.max(0, t - layout.gridShape[d]! * w[d]!));
  if (unwritten.every((u) => u === 0)) return null;
  let written = 1;
  for (let d = 0; d < total.length; d++) written *= (total[d]! - unwritten[d]!) / total[d]!;
  return { total, unwritten, fraction: 1 - written };
}

/** A fraction as a percentage to read: whole above 10 %, one decimal below, never "0". */
export function formatPercent(fraction: number): string {
  const p = fraction * 100;
  if (p >= 10) return `${Math.round(p)} %`;
  if (p >= 0.1) return `${p.toFixed(1)} %`;
  return "less than 0.1 %";
}

/**
 * The notice for a task whose blocks leave part of its total write ROI unwritten, or null:
 * `Task "t": fit "valid" leaves 41 % of the total write ROI (250×250) unwritten: 58 of 250 on
 * axis 0, 58 of 250 on axis 1, at the far end; fit "shrink" or "overhang" covers it ...`.
 */
export function coverageNotice(taskId: string, layout: TaskLayout): string | null {
  const c = coverageOf(layout);
  if (c === null) return null;
  const axes = c.unwritten.flatMap((u, d) => u === 0 ? [] : [`${u} of ${c.total[d]} on axis ${d}`]);
  return `Task "${taskId}": fit "${layout.fit}" leaves ${
    formatPercent(c.fraction)
  } of the total write ROI (${c.total.join("×")}) unwritten: ${
    axes.join(", ")
  }, at the far end, where the write blocks (${
    layout.writeRoi.shape.join("×")
  }) do not divide it; fit "shrink" (crops the last blocks) or "overhang" (keeps them whole, past the end) covers it, or make the total write ROI a multiple of the write ROI`;
}
