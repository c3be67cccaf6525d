/**
 * What the two charts with a lane per worker share (the timeline and its GPU track): the font,
 * a block's hover text, the zoom sliders, the time axis and the lanes' axis. Each adds its own
 * series (how a block's bar is drawn) and says which GPU figures a bar's hover text shows.
 */

import type { MapLayout, Timeline, TimelineGpu } from "../report_data.ts";
import { AXIS_TEXT, type ChartOption, escapeHtml, FONT } from "./charts.ts";
import { blockIndex, cantorId, coordsOf, formatCoords } from "./decode.ts";
import { formatBytes, formatCount, formatPercentValue, formatSeconds } from "./format.ts";

/** More lanes than this get a vertical zoom slider. */
const MANY_LANES = 30;

/** The GPU figures of bar `k`, as lines of hover text (none without GPU figures). */
export function gpuLines(gpu: TimelineGpu | null, k: number): string[] {
  if (gpu === null) return [];
  const util = gpu.util_pct[k] ?? null;
  const mem = gpu.mem_bytes[k] ?? null;
  return [
    `GPU utilisation ${util === null ? "not recorded" : formatPercentValue(util)}`,
    `GPU memory ${mem === null ? "not recorded" : `${formatBytes(mem)} (${formatCount(mem)} B)`}`,
  ];
}

/** How one lane chart differs from the other, apart from its series. */
export interface LaneChartParts {
  /** Room left of the plot for the lanes' labels, in pixels. */
  readonly gridLeft: number;
  /** The lanes' axis: its name and one label per worker. */
  readonly laneName: string;
  readonly laneLabels: readonly string[];
  /** The time axis' labels (`timeAxisLabel` of the timeline's span). */
  readonly label: (seconds: number) => string;
  /** The GPU figures a bar's hover text shows, and the index of its bar among them. */
  readonly gpu: TimelineGpu | null;
  readonly barOf: (value: readonly number[], dataIndex: number) => number;
}

/**
 * Everything of a lane chart's option but its series. A bar's value starts with its lane, its
 * start and end (seconds on the time axis) and its block's position.
 */
export function laneChartFrame(
  timeline: Timeline,
  layout: MapLayout,
  parts: LaneChartParts,
): Omit<ChartOption, "series"> {
  const { label } = parts;
  const manyLanes = timeline.workers.length > MANY_LANES;
  return {
    textStyle: { fontFamily: FONT },
    animation: false,
    grid: { left: parts.gridLeft, right: manyLanes ? 48 : 20, top: 16, bottom: 64 },
    tooltip: {
      trigger: "item",
      confine: true,
      formatter: (p: unknown) => {
        const v = (p as { value?: number[] }).value ?? [];
        const coords = coordsOf(v[3] ?? 0, layout.block_grid_shape);
        const index = blockIndex(layout, coords);
        const bar = parts.barOf(v, (p as { dataIndex?: number }).dataIndex ?? 0);
        return [
          `block ${cantorId(index).toString()} ${escapeHtml(formatCoords(index))}`,
          `worker ${timeline.workers[v[0] ?? 0] ?? "?"}`,
          `${label(v[1] ?? 0)} → ${label(v[2] ?? 0)} (${
            escapeHtml(formatSeconds((v[2] ?? 0) - (v[1] ?? 0)))
          })`,
          ...gpuLines(parts.gpu, bar).map(escapeHtml),
        ].join("<br>");
      },
    },
    dataZoom: [
      { type: "inside", xAxisIndex: 0, filterMode: "weakFilter" },
      { type: "slider", xAxisIndex: 0, filterMode: "weakFilter", height: 18, bottom: 8 },
      ...(manyLanes
        ? [{
          type: "slider" as const,
          yAxisIndex: 0,
          width: 14,
          right: 8,
          filterMode: "empty" as const,
        }]
        : []),
    ],
    xAxis: {
      type: "value",
      min: 0,
      max: Math.max(timeline.t1 - timeline.t0, 1e-3),
      axisLabel: { ...AXIS_TEXT, formatter: label, hideOverlap: true },
    },
    yAxis: {
      type: "category",
      name: parts.laneName,
      data: [...parts.laneLabels],
      axisLabel: AXIS_TEXT,
    },
  };
}
