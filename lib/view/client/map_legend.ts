/** The block map's legend: state swatches, a metric's colour bar with its range, workers. */

import type { MetricLayer } from "../report_data.ts";
import { categoricalColor, NO_VALUE_COLOR, viridis } from "./colors.ts";
import { h } from "./dom.ts";
import { formatCount, formatValue, metricLabel } from "./format.ts";
import { type MapLayers, stateSwatches, WORKER_LAYER } from "./map_layers.ts";

const MAX_WORKER_SWATCHES = 24;

function swatch(color: string, label: string, key?: string): HTMLElement {
  const box = h("span", { class: "swatch" });
  box.style.background = color;
  return h("span", { class: "legend-item", attrs: key ? { "data-legend": key } : {} }, box, label);
}

function colorBar(): HTMLCanvasElement {
  const bar = h("canvas", { class: "colorbar" });
  bar.width = 256;
  bar.height = 1;
  const ctx = bar.getContext("2d");
  if (ctx !== null) {
    const img = ctx.createImageData(256, 1);
    for (let x = 0; x < 256; x++) {
      const [r, g, b] = viridis(x / 255);
      img.data.set([r, g, b, 255], 4 * x);
    }
    ctx.putImageData(img, 0, 0);
  }
  return bar;
}

function metricLegend(layer: MetricLayer, aggregated: boolean): HTMLElement {
  const lo = formatValue(layer.lo, layer.unit);
  const hi = formatValue(layer.hi, layer.unit);
  const notes = [
    layer.scale === "log" ? "log scale" : "linear scale",
    aggregated ? `${layer.aggregate} per cell` : null,
    `${formatCount(layer.measured_cells)} cells measured`,
  ].filter((n) => n !== null).join(" · ");
  return h(
    "div",
    { class: "legend" },
    h("span", { class: "legend-title" }, metricLabel(layer.name)),
    h("span", { class: "legend-range", attrs: { "data-range": "lo" } }, lo),
    colorBar(),
    h("span", { class: "legend-range", attrs: { "data-range": "hi" } }, hi),
    swatch(NO_VALUE_COLOR, "no value", "no_value"),
    h("span", { class: "legend-note" }, notes),
  );
}

/** The legend of layer `name`. */
export function legendOf(layers: MapLayers, name: string, present: ReadonlySet<number>): Node {
  const metric = layers.metric(name);
  const aggregated = !layers.data.cell_shape.every((s) => s === 1);
  if (metric !== null) return metricLegend(metric, aggregated);
  if (name === WORKER_LAYER && layers.workers !== null) {
    const workers = layers.workers.workers;
    const shown = workers.slice(0, MAX_WORKER_SWATCHES);
    return h(
      "div",
      { class: "legend" },
      h(
        "span",
        { class: "legend-title" },
        aggregated ? "worker (of a block in the cell)" : "worker",
      ),
      ...shown.map((w, i) => swatch(categoricalColor(i), String(w))),
      workers.length > shown.length ? `and ${workers.length - shown.length} more` : null,
      swatch(NO_VALUE_COLOR, "none", "no_value"),
    );
  }
  return h(
    "div",
    { class: "legend" },
    ...stateSwatches(present).map((s) => swatch(s.color, s.label, s.key)),
  );
}
