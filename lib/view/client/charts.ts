/**
 * ECharts, tree-shaken: only the chart types and components the page uses are registered, so
 * the inlined bundle stays well under the size of the full library.
 */

import { type ComposeOption, type ECharts, init, use } from "echarts/core";
import {
  BarChart,
  type BarSeriesOption,
  BoxplotChart,
  type BoxplotSeriesOption,
  CustomChart,
  type CustomSeriesOption,
  LineChart,
  type LineSeriesOption,
} from "echarts/charts";
import {
  DataZoomComponent,
  type DataZoomComponentOption,
  GridComponent,
  type GridComponentOption,
  LegendComponent,
  type LegendComponentOption,
  TitleComponent,
  type TitleComponentOption,
  TooltipComponent,
  type TooltipComponentOption,
} from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";
import { h } from "./dom.ts";

use([
  BarChart,
  BoxplotChart,
  CustomChart,
  LineChart,
  DataZoomComponent,
  GridComponent,
  LegendComponent,
  TitleComponent,
  TooltipComponent,
  CanvasRenderer,
]);

export type ChartOption = ComposeOption<
  | BarSeriesOption
  | BoxplotSeriesOption
  | CustomSeriesOption
  | LineSeriesOption
  | DataZoomComponentOption
  | GridComponentOption
  | LegendComponentOption
  | TitleComponentOption
  | TooltipComponentOption
>;

export type RenderItem = NonNullable<CustomSeriesOption["renderItem"]>;
export type RenderApi = Parameters<RenderItem>[1];
export type RenderParams = Parameters<RenderItem>[0];

const charts = new Set<ChartBox>();

/**
 * A chart in a box of fixed height. ECharts measures its container when it starts, so the
 * instance is made on the first `set`, once the box is on the page.
 */
export class ChartBox {
  readonly el: HTMLDivElement;
  private chart: ECharts | null = null;

  constructor(height: number, key: string) {
    this.el = h("div", { class: "chart", attrs: { "data-chart": key } });
    this.el.style.height = `${height}px`;
    charts.add(this);
  }

  /**
   * Draw `option`. `keepZoom`: a redraw of the same chart with new data keeps the user's zoom
   * (only the series are replaced).
   */
  set(option: ChartOption, height?: number, keepZoom = false): void {
    if (height !== undefined) this.el.style.height = `${height}px`;
    const fresh = this.chart === null;
    if (this.chart === null) this.chart = init(this.el, null, { renderer: "canvas" });
    else if (height !== undefined) this.chart.resize();
    if (keepZoom && !fresh) this.chart.setOption(option, { replaceMerge: ["series"] });
    else this.chart.setOption(option, { notMerge: true });
  }

  resize(): void {
    this.chart?.resize();
  }

  dispose(): void {
    this.chart?.dispose();
    this.chart = null;
    charts.delete(this);
  }
}

export function resizeCharts(): void {
  for (const c of charts) c.resize();
}

/** Text for a tooltip (ECharts renders formatter strings as HTML). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export const AXIS_TEXT = { color: "#555", fontSize: 11 } as const;
export const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
