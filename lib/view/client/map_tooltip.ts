/**
 * What the map's tooltip says about one cell: where it is, which block(s) it covers with their
 * IDs and ROIs, the value of every layer there, and the last error of a failed block.
 */

import type { FailedBlockView, TaskView } from "../report_data.ts";
import { CELL_FAILED, CELL_PARTLY_DONE } from "../report_data.ts";
import { blockIndex, blockRois, cantorId, coordsOf, formatCoords, formatRoi } from "./decode.ts";
import { type Child, h } from "./dom.ts";
import { formatIso, formatPercent, formatValue, metricLabel } from "./format.ts";
import { type MapLayers, STATE_NAMES } from "./map_layers.ts";

/** The failed blocks listed in the report, by position, built once per data. */
export function failedByPosition(task: TaskView): Map<number, FailedBlockView> {
  const out = new Map<number, FailedBlockView>();
  for (const b of task.failures.blocks) out.set(b.position, b);
  return out;
}

export function singleBlockCells(task: TaskView): boolean {
  return task.map.cell_shape.every((s) => s === 1);
}

/** The block-grid range a cell covers, per axis `[first, last]` (inclusive). */
export function cellBlockRange(
  task: TaskView,
  cellCoords: readonly number[],
): { readonly first: number[]; readonly last: number[] } {
  const grid = task.layout.block_grid_shape;
  const first = cellCoords.map((c, d) => c * (task.map.cell_shape[d] ?? 1));
  const last = cellCoords.map((c, d) =>
    Math.min((c + 1) * (task.map.cell_shape[d] ?? 1), grid[d] ?? 0) - 1
  );
  return { first, last };
}

const MAX_MESSAGE = 800;

function row(label: string, ...value: readonly Child[]): HTMLElement {
  return h(
    "div",
    { class: "tip-row" },
    h("span", { class: "tip-label" }, label),
    h("span", null, ...value),
  );
}

/** The tooltip's nodes for flat cell `flat`. */
export function tooltipContent(
  task: TaskView,
  layers: MapLayers,
  failed: ReadonlyMap<number, FailedBlockView>,
  flat: number,
): Node[] {
  const cell = coordsOf(flat, task.map.shape);
  const single = singleBlockCells(task);
  const out: Node[] = [];
  const { code, fraction } = layers.stateAt(flat);
  let stateText = STATE_NAMES[code] ?? `code ${code}`;
  if (code === CELL_PARTLY_DONE) stateText += ` (${formatPercent(fraction)} done)`;
  out.push(h("div", { class: "tip-head" }, `cell ${formatCoords(cell)}`, " · ", stateText));
  let failures: FailedBlockView[] = [];
  if (single) {
    const index = blockIndex(task.layout, cell);
    const rois = blockRois(task.layout, cell);
    out.push(row("block", formatCoords(cell)));
    out.push(row("index", formatCoords(index)));
    out.push(row("block ID", cantorId(index).toString()));
    out.push(row("write ROI", formatRoi(rois.write)));
    out.push(row("read ROI", formatRoi(rois.read)));
    const f = failed.get(flat);
    if (f !== undefined) failures = [f];
  } else {
    const { first, last } = cellBlockRange(task, cell);
    let count = 1;
    for (let d = 0; d < first.length; d++) count *= Math.max(0, last[d]! - first[d]! + 1);
    out.push(row("blocks", first.map((a, d) => `${a}–${last[d]}`).join(" × "), ` (${count})`));
    const firstIndex = blockIndex(task.layout, first);
    const lastIndex = blockIndex(task.layout, last);
    out.push(row("indices", `${formatCoords(firstIndex)} to ${formatCoords(lastIndex)}`));
    const a = blockRois(task.layout, first).write;
    const b = blockRois(task.layout, last).write;
    const covered = {
      offset: a.offset,
      shape: a.offset.map((o, d) => b.offset[d]! + b.shape[d]! - o),
    };
    out.push(row("write ROIs", formatRoi(covered)));
    if (code === CELL_FAILED || code === CELL_PARTLY_DONE) {
      failures = task.failures.blocks.filter((fb) =>
        fb.coords.every((c, d) => c >= first[d]! && c <= last[d]!)
      );
    }
  }
  for (const m of layers.metrics) {
    const v = layers.metricAt(m.name, flat);
    const how = single ? "" : ` (${m.aggregate})`;
    out.push(
      row(metricLabel(m.name) + how, v === null ? "no value" : `≈ ${formatValue(v, m.unit)}`),
    );
  }
  if (layers.workers !== null) {
    const w = layers.workerAt(flat);
    out.push(row("worker", w === null ? "none" : String(w)));
  }
  if (failures.length > 0) {
    const f = failures[0]!;
    const more = failures.length > 1 ? ` (and ${failures.length - 1} more failed here)` : "";
    out.push(
      row("failed", `block ${f.id}, ${f.attempts} attempt${f.attempts === 1 ? "" : "s"}${more}`),
    );
    const message = f.message ?? "no error recorded";
    out.push(
      h(
        "pre",
        { class: "message tip-error" },
        message.length > MAX_MESSAGE ? message.slice(0, MAX_MESSAGE) + " …" : message,
      ),
    );
    if (f.at) out.push(row("at", formatIso(f.at)));
  }
  return out;
}
