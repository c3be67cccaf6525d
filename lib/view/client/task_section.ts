/**
 * One task's section of the page: summary, runs, block map, distributions, slowest blocks,
 * timeline and failures. A live page updates it in place every second, so the map keeps its
 * view and charts are only redrawn when their data changed.
 */

import type { StatusJsonStore } from "../status_json.ts";
import type { ServedLocation, TaskView } from "../report_data.ts";
import { BlockMapPanel } from "./block_map.ts";
import { distributionOption, overTimeOption, runsOption, timelineOption } from "./chart_options.ts";
import { ChartBox } from "./charts.ts";
import { STATE_COLORS, stateHex } from "./colors.ts";
import { coordsOf } from "./decode.ts";
import { type Child, fill, h } from "./dom.ts";
import { formatCount, formatPercentValue } from "./format.ts";
import { gpuTrackOption } from "./gpu_track.ts";
import { failureTables, runsTable, slowestTable } from "./tables.ts";
import { countsView, resourcesView, servedView } from "./task_summary.ts";

function part(title: string, key: string, ...body: readonly Child[]): HTMLElement {
  const details = h(
    "details",
    { class: "part", attrs: { "data-part": key } },
    h("summary", null, title),
    ...body,
  );
  details.open = true;
  return details;
}

export class TaskSection {
  readonly root: HTMLElement;
  readonly map: BlockMapPanel;
  private readonly summary = h("div");
  private readonly resources = h("div");
  private readonly served = h("div");
  private readonly runs = h("div");
  private readonly runsChart = new ChartBox(220, "runs");
  private readonly distributions = h("div", { class: "chart-grid" });
  private distributionCharts: ChartBox[] = [];
  private readonly slowest = h("div");
  private readonly timeline = h("div");
  private readonly timelineNote = h("p", { class: "muted" });
  private readonly timelineChart = new ChartBox(260, "timeline");
  private readonly completedChart = new ChartBox(200, "completed");
  private readonly runningChart = new ChartBox(200, "running");
  private readonly gpuNote = h("p", { class: "muted", attrs: { "data-gpu-track": "" } });
  private readonly gpuChart = new ChartBox(220, "gpu-track");
  private readonly failures = h("div");
  private readonly heading = h("h2");
  private readonly path = h("p", { class: "path" });
  private last: TaskView | null = null;
  private readonly drawn = new Map<string, string>();

  constructor(readonly taskId: string, anchor: string) {
    this.map = new BlockMapPanel(taskId);
    this.root = h(
      "section",
      { class: "task", attrs: { "data-task": taskId, id: anchor } },
      this.heading,
      this.path,
      this.summary,
      this.served,
      part("Resources", "resources", this.resources),
      part("Runs", "runs", this.runs, this.runsChart.el),
      part("Block map", "map", this.map.root),
      part("Distributions", "distributions", this.distributions),
      part("Slowest blocks", "slowest", this.slowest),
      part(
        "Timeline",
        "timeline",
        this.timelineNote,
        this.timeline,
        this.timelineChart.el,
        this.gpuNote,
        this.gpuChart.el,
        this.completedChart.el,
        this.runningChart.el,
      ),
      part("Failures", "failures", this.failures),
    );
  }

  /** Draw `task` (the section must be on the page: charts measure their boxes). */
  update(task: TaskView, store: StatusJsonStore | undefined, served: ServedLocation | null): void {
    const last = this.last;
    this.last = task;
    fill(this.heading, task.task);
    fill(this.path, task.path);
    fill(this.summary, countsView(store));
    fill(this.resources, resourcesView(store));
    fill(this.served, servedView(task, served));
    this.map.update(task);
    if (this.changed("runs", task.runs, last?.runs)) {
      fill(this.runs, runsTable(task.runs));
      this.runsChart.el.hidden = task.runs.length < 2;
      if (task.runs.length >= 2) this.runsChart.set(runsOption(task.runs));
    }
    if (this.changed("distributions", task.distributions, last?.distributions)) {
      this.drawDistributions(task);
    }
    if (this.changed("slowest", task.slowest, last?.slowest)) {
      fill(this.slowest, slowestTable(task.slowest, (coords) => this.map.highlightBlock(coords)));
    }
    if (this.changed("timeline", task.timeline, last?.timeline)) this.drawTimeline(task);
    if (this.changed("failures", task.failures, last?.failures)) {
      fill(this.failures, failureTables(task.failures));
    }
  }

  /**
   * Whether a part's data differs from what is drawn. A live page gets new objects every
   * second, mostly equal: redrawing them would reset zooms and flicker, so they are compared.
   */
  private changed(part: string, now: unknown, before: unknown): boolean {
    if (now === before && this.drawn.has(part)) return false;
    const key = JSON.stringify(now);
    if (this.drawn.get(part) === key) return false;
    this.drawn.set(part, key);
    return true;
  }

  private drawDistributions(task: TaskView): void {
    for (const c of this.distributionCharts) c.dispose();
    this.distributionCharts = [];
    if (task.distributions.length === 0) {
      fill(this.distributions, h("p", { class: "muted" }, "No resource figures recorded."));
      return;
    }
    fill(this.distributions);
    for (const d of task.distributions) {
      const chart = new ChartBox(250, `distribution:${d.name}`);
      this.distributions.appendChild(chart.el);
      chart.set(distributionOption(d));
      this.distributionCharts.push(chart);
    }
  }

  private drawTimeline(task: TaskView): void {
    const t = task.timeline;
    const charts = [this.timelineChart, this.completedChart, this.runningChart];
    const gpu = t?.gpu ?? null;
    this.gpuNote.hidden = this.gpuChart.el.hidden = gpu === null;
    if (t === null || t.blocks === 0) {
      for (const c of charts) c.el.hidden = true;
      fill(this.timelineNote, "No timeline: no block was timed (resource tracking off or no run).");
      return;
    }
    for (const c of charts) c.el.hidden = false;
    fill(
      this.timelineNote,
      t.bars.length < t.blocks
        ? `showing ${formatCount(t.bars.length)} of ${formatCount(t.blocks)} blocks (sampled)`
        : `${formatCount(t.blocks)} blocks on ${formatCount(t.workers.length)} worker${
          t.workers.length === 1 ? "" : "s"
        }`,
      "; each block's last successful attempt, coloured by its state now.",
    );
    const lanes = t.workers.length;
    const height = Math.min(560, Math.max(180, 90 + Math.min(lanes, 30) * 18));
    const grid = task.layout.block_grid_shape;
    const colorOf = (position: number) => stateHex(this.map.stateOfBlock(coordsOf(position, grid)));
    this.timelineChart.set(timelineOption(t, task.layout, colorOf), height, true);
    if (gpu !== null) {
      const means = t.workers.flatMap((w, i) => {
        const util = gpu.worker_util_pct[i] ?? null;
        return util === null ? [] : [`worker ${w} ${formatPercentValue(util)}`];
      });
      fill(
        this.gpuNote,
        h("strong", null, "GPU utilisation per worker"),
        ": each block's mean device utilisation over the time it ran (bar height, 0 to 100%)",
        means.length > 0 ? `; over all its blocks, time-weighted: ${means.join(", ")}.` : ".",
      );
      this.gpuChart.set(gpuTrackOption(t, gpu, task.layout), height, true);
    }
    this.completedChart.set(
      overTimeOption(t, t.completed, "blocks completed", STATE_COLORS.done, false),
      undefined,
      true,
    );
    this.runningChart.set(
      overTimeOption(t, t.running, "blocks running", "#4e79a7", true),
      undefined,
      true,
    );
  }
}
