/** The ECharts options of the page's charts, built from the report's data. */

import type { Distribution, MapLayout, RunView, Timeline } from "../report_data.ts";
import {
  AXIS_TEXT,
  type ChartOption,
  escapeHtml,
  FONT,
  type RenderApi,
  type RenderItem,
  type RenderParams,
} from "./charts.ts";
import { STATE_COLORS } from "./colors.ts";
import {
  formatAxisValue,
  formatCount,
  formatIso,
  formatValue,
  metricLabel,
  timeAxisLabel,
} from "./format.ts";
import { laneChartFrame } from "./lane_chart.ts";

const BASE = { textStyle: { fontFamily: FONT }, animation: false } as const;

/** Blocks completed (and failed) per run, oldest first. */
export function runsOption(runs: readonly RunView[]): ChartOption {
  const labels = runs.map((_run, i) => `#${i + 1}`);
  return {
    ...BASE,
    grid: { left: 56, right: 16, top: 30, bottom: 28 },
    legend: { top: 0, data: ["completed", "failed"] },
    tooltip: {
      trigger: "axis",
      formatter: (params: unknown) => {
        const list = Array.isArray(params) ? params : [params];
        const first = list[0] as { dataIndex?: number } | undefined;
        const run = runs[first?.dataIndex ?? 0];
        if (run === undefined) return "";
        return [
          `run ${escapeHtml(run.run_id ?? "?")}`,
          `started ${escapeHtml(formatIso(run.started_at))}`,
          `completed ${formatCount(run.blocks_completed ?? 0)} (skipped ${
            formatCount(run.blocks_skipped ?? 0)
          }), failed ${formatCount(run.blocks_failed ?? 0)}`,
        ].join("<br>");
      },
    },
    xAxis: { type: "category", data: labels, axisLabel: AXIS_TEXT },
    yAxis: { type: "value", name: "blocks", axisLabel: AXIS_TEXT, minInterval: 1 },
    series: [
      {
        type: "bar",
        name: "completed",
        data: runs.map((r) => r.blocks_completed ?? 0),
        itemStyle: { color: STATE_COLORS.done },
      },
      {
        type: "bar",
        name: "failed",
        data: runs.map((r) => r.blocks_failed ?? 0),
        itemStyle: { color: STATE_COLORS.failed },
      },
    ],
  };
}

/** Seconds and bytes spanning more than two decades are drawn on a log axis. */
export function wantsLogAxis(d: Distribution): boolean {
  return (d.unit === "s" || d.unit === "bytes") && d.min > 0 && d.max / d.min > 100;
}

/** A histogram of one resource array with its box plot (min, quartiles, max) beneath. */
export function distributionOption(d: Distribution): ChartOption {
  const log = wantsLogAxis(d);
  const edges = d.histogram.edges;
  const lo = log ? d.min : (edges[0] ?? d.min);
  const hi = edges[edges.length - 1] ?? d.max;
  const bins = d.histogram.counts.map((count, i) => [
    Math.max(lo, edges[i] ?? lo),
    Math.min(hi, edges[i + 1] ?? hi),
    count,
  ]);
  // Values close together (all blocks read 32 KiB, give or take) get exact labels.
  const narrow = hi - lo < 0.05 * Math.abs(hi) && (d.unit === "bytes" || d.unit === "s");
  const fmt = (v: number) =>
    !narrow
      ? formatAxisValue(v, d.unit)
      : d.unit === "bytes"
      ? `${formatCount(Math.round(v))} B`
      : `${Number(v.toPrecision(6))} s`;
  const axisType = log ? "log" : "value";
  const range = hi > lo ? { min: lo, max: hi } : {};
  const renderBin: RenderItem = (_params: RenderParams, api: RenderApi) => {
    const a = api.coord([api.value(0), api.value(2)]);
    const b = api.coord([api.value(1), 0]);
    const x0 = a[0] ?? 0;
    const x1 = b[0] ?? 0;
    return {
      type: "rect",
      shape: {
        x: x0,
        y: a[1] ?? 0,
        width: Math.max(1, x1 - x0 - 1),
        height: (b[1] ?? 0) - (a[1] ?? 0),
      },
      style: { fill: "#4e79a7" },
    };
  };
  return {
    ...BASE,
    title: {
      text: metricLabel(d.name),
      subtext: `${formatCount(d.count)} blocks (bars: blocks per bin) · median ${
        fmt(d.median)
      } · mean ${fmt(d.mean)}${log ? " · log axis" : ""}`,
      left: 0,
      textStyle: { fontSize: 13 },
      subtextStyle: { fontSize: 11 },
    },
    grid: [
      { left: 56, right: 18, top: 52, height: 130 },
      { left: 56, right: 18, top: 186, height: 30 },
    ],
    tooltip: { trigger: "item", confine: true },
    xAxis: [
      // The box plot's axis, beneath, carries the labels of both.
      { type: axisType, gridIndex: 0, ...range, axisLabel: { show: false } },
      {
        type: axisType,
        gridIndex: 1,
        ...range,
        axisLabel: { ...AXIS_TEXT, formatter: fmt, hideOverlap: true },
        splitLine: { show: false },
      },
    ],
    yAxis: [
      { type: "value", gridIndex: 0, minInterval: 1, axisLabel: AXIS_TEXT },
      { type: "category", gridIndex: 1, data: [""], axisTick: { show: false } },
    ],
    series: [
      {
        type: "custom",
        name: "histogram",
        xAxisIndex: 0,
        yAxisIndex: 0,
        renderItem: renderBin,
        encode: { x: [0, 1], y: 2 },
        data: bins,
        tooltip: {
          formatter: (p: unknown) => {
            const v = (p as { value?: number[] }).value ?? [];
            return `${escapeHtml(fmt(v[0] ?? 0))} to ${escapeHtml(fmt(v[1] ?? 0))}: ${
              formatCount(v[2] ?? 0)
            } blocks`;
          },
        },
      },
      {
        type: "boxplot",
        name: "quartiles",
        xAxisIndex: 1,
        yAxisIndex: 1,
        data: [[d.min, d.q1, d.median, d.q3, d.max]],
        itemStyle: { color: "#dfe8f3", borderColor: "#4e79a7" },
        tooltip: {
          formatter: () =>
            [
              ["min", d.min],
              ["q1", d.q1],
              ["median", d.median],
              ["q3", d.q3],
              ["max", d.max],
            ].map(([k, v]) => `${k} ${escapeHtml(formatValue(Number(v), d.unit))}`).join("<br>"),
        },
      },
    ],
  };
}

/**
 * One lane per worker, a bar per block from when it was sent to when it returned, coloured by
 * `colorOf(position)` (the block's state now).
 */
export function timelineOption(
  timeline: Timeline,
  layout: MapLayout,
  colorOf: (position: number) => string,
): ChartOption {
  const colors = timeline.bars.map((b) => colorOf(b[3]));
  const label = timeAxisLabel(timeline.t0, timeline.t1 - timeline.t0);
  const renderBar: RenderItem = (params: RenderParams, api: RenderApi) => {
    const lane = Number(api.value(0));
    const a = api.coord([api.value(1), lane]);
    const b = api.coord([api.value(2), lane]);
    const band = api.size?.([0, 1]);
    const height = Math.max(1, (Array.isArray(band) ? band[1] ?? 8 : 8) * 0.7);
    const x0 = a[0] ?? 0;
    return {
      type: "rect",
      shape: { x: x0, y: (a[1] ?? 0) - height / 2, width: Math.max(1, (b[0] ?? 0) - x0), height },
      // A hairline between touching bars keeps consecutive blocks apart.
      style: { fill: colors[params.dataIndex] ?? "#4e79a7", stroke: "#ffffff", lineWidth: 0.5 },
    };
  };
  return {
    ...laneChartFrame(timeline, layout, {
      gridLeft: 64,
      laneName: "worker",
      laneLabels: timeline.workers.map(String),
      label,
      gpu: timeline.gpu,
      barOf: (_value, dataIndex) => dataIndex,
    }),
    series: [
      {
        type: "custom",
        name: "blocks",
        renderItem: renderBar,
        encode: { x: [1, 2], y: 0 },
        data: timeline.bars.map((b) => [...b]),
        clip: true,
      },
    ],
  };
}

/** A line over time: blocks completed, or blocks running. */
export function overTimeOption(
  timeline: Timeline,
  points: readonly (readonly [number, number])[],
  name: string,
  color: string,
  step: boolean,
): ChartOption {
  const label = timeAxisLabel(timeline.t0, timeline.t1 - timeline.t0);
  return {
    ...BASE,
    title: { text: name, left: 0, textStyle: { fontSize: 13 } },
    grid: { left: 64, right: 20, top: 36, bottom: 28 },
    tooltip: {
      trigger: "axis",
      formatter: (params: unknown) => {
        const list = Array.isArray(params) ? params : [params];
        const v = (list[0] as { value?: number[] } | undefined)?.value ?? [];
        return `${label(v[0] ?? 0)}: ${formatCount(Math.round((v[1] ?? 0) * 10) / 10)} ${
          escapeHtml(name)
        }`;
      },
    },
    xAxis: {
      type: "value",
      min: 0,
      max: Math.max(timeline.t1 - timeline.t0, 1e-3),
      axisLabel: { ...AXIS_TEXT, formatter: label, hideOverlap: true },
    },
    yAxis: { type: "value", axisLabel: AXIS_TEXT, minInterval: 1 },
    series: [
      {
        type: "line",
        name,
        data: points.map((p) => [p[0], p[1]]),
        showSymbol: false,
        step: step ? "end" : false,
        lineStyle: { color, width: 1.5 },
        itemStyle: { color },
        areaStyle: { color, opacity: 0.12 },
      },
    ],
  };
}
