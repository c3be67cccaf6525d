/**
 * The timeline's GPU part: a device-utilisation track per worker (one lane per worker, as the
 * timeline's, each block drawn over the time it ran as a bar as high as its mean device
 * utilisation, 0-100 % of the lane) and the GPU lines of a block's hover text.
 */

import type { MapLayout, Timeline, TimelineGpu } from "../report_data.ts";
import { type ChartOption, type RenderApi, type RenderItem, type RenderParams } from "./charts.ts";
import { formatPercentValue, timeAxisLabel } from "./format.ts";
import { laneChartFrame } from "./lane_chart.ts";

export const GPU_COLOR = "#7b61c9";
const LANE_COLOR = "#ebe7f5";

/** A worker's lane label: its number and its time-weighted device utilisation. */
export function gpuLaneLabels(timeline: Timeline, gpu: TimelineGpu): string[] {
  return timeline.workers.map((w, i) => {
    const util = gpu.worker_util_pct[i] ?? null;
    return util === null ? String(w) : `${w} · ${formatPercentValue(util)}`;
  });
}

export function gpuTrackOption(
  timeline: Timeline,
  gpu: TimelineGpu,
  layout: MapLayout,
): ChartOption {
  const label = timeAxisLabel(timeline.t0, timeline.t1 - timeline.t0);
  const renderBar: RenderItem = (_params: RenderParams, api: RenderApi) => {
    const lane = Number(api.value(0));
    const util = Number(api.value(4));
    const a = api.coord([api.value(1), lane]);
    const b = api.coord([api.value(2), lane]);
    const band = api.size?.([0, 1]);
    const full = Math.max(2, (Array.isArray(band) ? band[1] ?? 10 : 10) * 0.8);
    const x = a[0] ?? 0;
    const width = Math.max(1, (b[0] ?? 0) - x);
    const bottom = (a[1] ?? 0) + full / 2;
    const height = util >= 0 ? Math.max(1, (full * Math.min(100, util)) / 100) : 0;
    return {
      type: "group",
      children: [
        // The block's time, as high as 100 %; the utilisation fills it from below.
        {
          type: "rect",
          shape: { x, y: bottom - full, width, height: full },
          style: { fill: LANE_COLOR, stroke: "#ffffff", lineWidth: 0.5 },
        },
        {
          type: "rect",
          shape: { x, y: bottom - height, width, height },
          style: { fill: GPU_COLOR, stroke: "#ffffff", lineWidth: 0.5 },
        },
      ],
    };
  };
  return {
    ...laneChartFrame(timeline, layout, {
      gridLeft: 88,
      laneName: "worker · GPU",
      laneLabels: gpuLaneLabels(timeline, gpu),
      label,
      gpu,
      barOf: (value) => value[5] ?? 0,
    }),
    series: [
      {
        type: "custom",
        name: "GPU utilisation",
        renderItem: renderBar,
        encode: { x: [1, 2], y: 0 },
        data: timeline.bars.map((b, k) => [...b, gpu.util_pct[k] ?? -1, k]),
        clip: true,
      },
    ],
  };
}
