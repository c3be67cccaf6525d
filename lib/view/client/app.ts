/**
 * The page: header, live panel, unreadable stores, and one section per task. `render` is
 * called once for a static report and again for every refresh of a live one; sections are
 * kept (and updated in place) while the set of tasks stays the same.
 */

import type { ReportData } from "../report_data.ts";
import { REPORT_FORMAT } from "../report_data.ts";
import { resizeCharts } from "./charts.ts";
import { STATE_COLORS } from "./colors.ts";
import { fill, h, pre } from "./dom.ts";
import { baseName, formatCount, formatIso } from "./format.ts";
import type { ReportHook, ViewRequest } from "./hook.ts";
import { livePanel } from "./live_panel.ts";
import { TaskSection } from "./task_section.ts";

export class ReportApp {
  readonly badge = h("span", { class: "live-badge", attrs: { "data-live-badge": "" } });
  /** A live page's poller: called when the user picks a layer a frame does not carry. */
  onLayerPicked: ((name: string) => void) | null = null;
  readonly hook: ReportHook;

  private readonly title = h("h1");
  private readonly meta = h("p", { class: "meta" });
  private readonly live = h("div");
  private readonly errors = h("div");
  private readonly nav = h("nav", { class: "tasks-nav" });
  private readonly body = h("div");
  private sections = new Map<string, TaskSection>();
  private taskKey = "";

  constructor(mount: HTMLElement) {
    const header = h(
      "header",
      null,
      h("div", { class: "title-row" }, this.title, this.badge),
      this.meta,
    );
    this.badge.hidden = true;
    mount.replaceChildren(header, this.live, this.errors, this.nav, this.body);
    let resizeTimer: ReturnType<typeof setTimeout> | undefined;
    globalThis.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        resizeCharts();
        for (const s of this.sections.values()) s.map.relayout();
      }, 150);
    });
    this.hook = this.makeHook();
  }

  private section(task: string): TaskSection {
    const s = this.sections.get(task);
    if (s === undefined) throw new Error(`no task ${task} in this report`);
    return s;
  }

  private makeHook(): ReportHook {
    return {
      cellRect: (task, coords) => this.section(task).map.cellRect(coords),
      setLayer: (task, layer) => this.section(task).map.setLayer(layer),
      setView: (task, view: ViewRequest) => {
        const { slice, ...axes } = view;
        this.section(task).map.setView(slice === undefined ? axes : { ...axes, slice });
      },
      colors: { ...STATE_COLORS },
      ready: false,
      readyMs: null,
      drawMs: (task) => this.sections.get(task)?.map.lastDrawMs ?? null,
      layers: (task) => this.section(task).map.layerNames(),
    };
  }

  markReady(): void {
    this.hook.ready = true;
    this.hook.readyMs = performance.now();
  }

  render(data: ReportData): void {
    document.title = `blockwise report: ${baseName(data.target)}`;
    fill(this.title, "blockwise report: ", h("span", { class: "target" }, baseName(data.target)));
    const stores = data.status.stores;
    fill(
      this.meta,
      h("span", { attrs: { "data-meta": "target" } }, data.target),
      " · generated ",
      h("span", { attrs: { "data-meta": "generated" } }, formatIso(data.generated_at)),
      // The version string may name the program already ("blockwise 0.1.0 (bun ...)").
      data.blockwise_version.startsWith("blockwise") ? " · " : " · blockwise ",
      h("span", { attrs: { "data-meta": "version" } }, data.blockwise_version),
      ` · ${formatCount(stores.length)} store${stores.length === 1 ? "" : "s"}`,
    );
    fill(this.live, data.live === null ? null : livePanel(data.live));
    this.renderErrors(data);
    const key = JSON.stringify(data.tasks.map((t) => t.task));
    if (key !== this.taskKey) this.rebuild(data, key);
    data.tasks.forEach((task, i) => {
      const section = this.sections.get(task.task);
      if (section === undefined) return;
      try {
        section.update(task, stores[i], data.served);
      } catch (error) {
        // One broken section must not take the rest of the page with it.
        console.error(`blockwise report: task ${task.task}:`, error);
        section.root.appendChild(
          h("p", { class: "warning" }, `This section failed to draw: ${String(error)}`),
        );
      }
    });
  }

  private renderErrors(data: ReportData): void {
    const notes: HTMLElement[] = [];
    if (data.format !== REPORT_FORMAT) {
      notes.push(
        h("p", null, `Unknown report format ${String(data.format)}; expected ${REPORT_FORMAT}.`),
      );
    }
    if (data.status.stores.length === 0) {
      notes.push(h("p", null, `No tracking stores found in ${data.target}.`));
    }
    for (const e of data.status.errors) {
      notes.push(h("div", null, h("strong", null, `Unreadable store ${e.path}`), pre(e.error)));
    }
    fill(
      this.errors,
      notes.length === 0
        ? null
        : h("div", { class: "warning-box", attrs: { "data-errors": "" } }, ...notes),
    );
  }

  private rebuild(data: ReportData, key: string): void {
    this.taskKey = key;
    this.sections = new Map();
    const links: HTMLElement[] = [];
    const sections: HTMLElement[] = [];
    data.tasks.forEach((task, i) => {
      const s = new TaskSection(task.task, `task-${i + 1}`);
      s.map.onLayerPicked = (name) => this.onLayerPicked?.(name);
      this.sections.set(task.task, s);
      sections.push(s.root);
      links.push(h("a", { attrs: { href: `#task-${i + 1}` } }, task.task));
    });
    fill(
      this.nav,
      data.tasks.length > 1 ? h("span", { class: "muted" }, "tasks: ") : null,
      ...(
        data.tasks.length > 1 ? links : []
      ),
    );
    // On the page before drawing: charts and the map measure their boxes.
    this.body.replaceChildren(...sections);
  }

  setBadge(text: string, state: "ok" | "lost" | "finished"): void {
    this.badge.hidden = false;
    this.badge.textContent = text;
    this.badge.dataset["state"] = state;
  }
}
