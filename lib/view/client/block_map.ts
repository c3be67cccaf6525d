/**
 * One task's block map: a canvas showing one 2-D slice of the cell grid on one layer, with
 * controls for the axes, the slice and the layer, a legend, and a tooltip per cell (pinned by a
 * click). The slice is painted at one pixel per cell into ImageData and scaled up without
 * smoothing, so a million cells draw in a few milliseconds.
 */

import type { FailedBlockView, TaskView } from "../report_data.ts";
import { CELL_EMPTY } from "../report_data.ts";
import { coordsOf, flatOf } from "./decode.ts";
import { h } from "./dom.ts";
import { formatCount, metricLabel } from "./format.ts";
import { legendOf } from "./map_legend.ts";
import { EMPTY_PIXEL, MapLayers, STATE_LAYER, WORKER_LAYER } from "./map_layers.ts";
import { failedByPosition, tooltipContent } from "./map_tooltip.ts";
import {
  cellAtDisplay,
  clampView,
  defaultView,
  displayOf,
  MAP_MAX_WIDTH,
  type MapView,
  paintSlice,
  type SliceGeometry,
  sliceGeometry,
} from "./map_view.ts";

export interface CellRect {
  readonly x: number;
  readonly y: number;
  readonly w: number;
  readonly h: number;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export class BlockMapPanel {
  readonly root: HTMLElement;
  /** Called when the user picks a layer (a live page fetches fresh metric layers then). */
  onLayerPicked: ((name: string) => void) | null = null;
  lastDrawMs = 0;

  private readonly canvas: HTMLCanvasElement;
  private readonly offscreen: HTMLCanvasElement;
  private readonly controls: HTMLElement;
  private readonly legend: HTMLElement;
  private readonly tooltip: HTMLElement;
  private readonly note: HTMLElement;
  private task: TaskView | null = null;
  private layers: MapLayers | null = null;
  private failed: Map<number, FailedBlockView> = new Map();
  private present: Set<number> = new Set();
  private layer = STATE_LAYER;
  private view: MapView = defaultView([]);
  private geom: SliceGeometry | null = null;
  private hover = -1;
  private pinned = -1;
  private highlight: number[] | null = null;
  private controlsKey = "";
  private width = MAP_MAX_WIDTH;
  private tooltipText = "";

  constructor(readonly taskId: string) {
    this.canvas = h("canvas", { class: "map", attrs: { "data-map": taskId } });
    this.offscreen = document.createElement("canvas");
    this.controls = h("div", { class: "map-controls" });
    this.legend = h("div", { class: "map-legend" });
    this.note = h("p", { class: "muted" });
    this.tooltip = h("div", { class: "tooltip", attrs: { "data-tooltip": taskId } });
    this.tooltip.hidden = true;
    this.root = h(
      "div",
      { class: "block-map" },
      this.controls,
      this.legend,
      h("div", { class: "map-scroll" }, this.canvas),
      this.note,
      this.tooltip,
    );
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseleave", () => this.onLeave());
    this.canvas.addEventListener("click", (e) => this.onClick(e));
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape") this.unpin();
    });
  }

  /** New data for the task: the view, layer and pinned cell stay when the grid is the same. */
  update(task: TaskView): void {
    const old = this.task;
    this.task = task;
    this.layers = new MapLayers(task.map);
    this.failed = failedByPosition(task);
    this.present = this.layers.statesPresent();
    if (old === null || !sameShape(old.map.shape, task.map.shape)) {
      this.view = openingView(task);
      this.pinned = -1;
      this.highlight = null;
    }
    if (!this.layers.has(this.layer)) this.layer = STATE_LAYER;
    this.rebuildControls();
    this.draw();
    if (this.pinned >= 0) this.showTooltip(this.pinned, null);
  }

  /** Re-fit to the page width (on resize). */
  relayout(): void {
    if (this.availableWidth() !== this.width && this.task !== null) this.draw();
  }

  /** The page width the canvas may take (the most before the map is on the page). */
  private availableWidth(): number {
    const w = this.root.clientWidth;
    return w > 0 ? Math.min(MAP_MAX_WIDTH, Math.max(200, w)) : MAP_MAX_WIDTH;
  }

  get layerName(): string {
    return this.layer;
  }

  /** The state code of the cell holding block `blockCoords` (CELL_EMPTY when unknown). */
  stateOfBlock(blockCoords: readonly number[]): number {
    const task = this.task;
    if (task === null || this.layers === null) return CELL_EMPTY;
    const cell = blockCoords.map((c, d) => Math.floor(c / (task.map.cell_shape[d] ?? 1)));
    return this.layers.stateAt(flatOf(cell, task.map.shape)).code;
  }

  layerNames(): string[] {
    return this.layers?.names() ?? [];
  }

  setLayer(name: string): void {
    if (this.layers === null || !this.layers.has(name)) {
      throw new Error(`task ${this.taskId} has no layer ${name}`);
    }
    this.layer = name;
    this.rebuildControls(true);
    this.draw();
  }

  setView(view: Partial<MapView>): void {
    if (this.task === null) return;
    this.view = clampView(this.task.map.shape, { ...this.view, ...view });
    this.rebuildControls(true);
    this.draw();
  }

  cellRect(cellCoords: readonly number[]): CellRect | null {
    const task = this.task;
    const g = this.geom;
    if (task === null || g === null) return null;
    const at = displayOf(task.map.shape, this.view, g, cellCoords);
    if (at === null) return null;
    return { x: at.c * g.pixels, y: at.r * g.pixels, w: g.pixels, h: g.pixels };
  }

  /** Outline the cell holding block `blockCoords`, bringing its slice into view. */
  highlightBlock(blockCoords: readonly number[]): void {
    const task = this.task;
    if (task === null) return;
    const cell = blockCoords.map((c, d) => Math.floor(c / (task.map.cell_shape[d] ?? 1)));
    this.highlight = cell;
    this.setView({ slice: cell });
    this.canvas.scrollIntoView({ block: "center", behavior: "smooth" });
  }

  private rebuildControls(force = false): void {
    const task = this.task;
    const layers = this.layers;
    if (task === null || layers === null) return;
    const key = JSON.stringify([task.map.shape, layers.names()]);
    if (!force && key === this.controlsKey) {
      this.refreshLegend();
      return;
    }
    this.controlsKey = key;
    const shape = task.map.shape;
    const layerSelect = h("select", { attrs: { "data-layer-select": this.taskId } });
    for (const name of layers.names()) {
      const label = name === STATE_LAYER
        ? "state"
        : name === WORKER_LAYER
        ? "worker"
        : metricLabel(name);
      const option = h("option", { attrs: { value: name } }, label);
      option.selected = name === this.layer;
      layerSelect.appendChild(option);
    }
    layerSelect.addEventListener("change", () => {
      this.setLayer(layerSelect.value);
      this.onLayerPicked?.(layerSelect.value);
    });
    const parts: Node[] = [h("label", null, "layer ", layerSelect)];
    if (shape.length >= 2) {
      parts.push(this.axisSelect("rows", "rowAxis", shape));
      parts.push(this.axisSelect("columns", "colAxis", shape));
      for (let d = 0; d < shape.length; d++) {
        if (d !== this.view.rowAxis && d !== this.view.colAxis) parts.push(this.slider(d, shape));
      }
    }
    this.controls.replaceChildren(...parts);
    this.refreshLegend();
  }

  private axisSelect(
    label: string,
    which: "rowAxis" | "colAxis",
    shape: readonly number[],
  ): HTMLElement {
    const select = h("select", { attrs: { "data-axis": which } });
    shape.forEach((s, d) => {
      const option = h("option", { attrs: { value: String(d) } }, `axis ${d} (${s})`);
      option.selected = this.view[which] === d;
      select.appendChild(option);
    });
    select.addEventListener("change", () => {
      const d = Number(select.value);
      const other = which === "rowAxis" ? this.view.colAxis : this.view.rowAxis;
      // Picking the other selector's axis swaps the two.
      const next = d === other
        ? { rowAxis: this.view.colAxis, colAxis: this.view.rowAxis }
        : { [which]: d };
      this.setView(next);
    });
    return h("label", null, `${label} `, select);
  }

  private slider(d: number, shape: readonly number[]): HTMLElement {
    const max = String(Math.max(0, shape[d]! - 1));
    const value = String(this.view.slice[d] ?? 0);
    const range = h("input", {
      attrs: { type: "range", min: "0", max, step: "1", value, "data-slice-axis": String(d) },
    });
    const number = h("input", {
      class: "slice-number",
      attrs: { type: "number", min: "0", max, step: "1", value },
    });
    const apply = (v: number) => {
      const slice = [...this.view.slice];
      slice[d] = v;
      this.view = clampView(shape, { ...this.view, slice });
      range.value = number.value = String(this.view.slice[d]);
      this.draw();
    };
    range.addEventListener("input", () => apply(Number(range.value)));
    number.addEventListener("change", () => apply(Number(number.value)));
    return h("label", { class: "slice" }, `axis ${d} `, range, number, ` of ${shape[d]}`);
  }

  private refreshLegend(): void {
    if (this.layers === null) return;
    this.legend.replaceChildren(legendOf(this.layers, this.layer, this.present));
  }

  private draw(): void {
    const task = this.task;
    const layers = this.layers;
    if (task === null || layers === null) return;
    const t0 = performance.now();
    this.width = this.availableWidth();
    const g = sliceGeometry(task.map.shape, this.view, this.width);
    this.geom = g;
    const empty = g.rows * g.cols === 0;
    this.canvas.hidden = empty;
    const cellShape = task.map.cell_shape;
    const aggregated = cellShape.some((s) => s !== 1);
    this.note.textContent = empty ? "No blocks." : `${formatCount(g.cells)} cells` +
      (aggregated ? `, each ${cellShape.join(" × ")} blocks` : ", one per block") +
      (g.wrapped && g.rows > 1 ? `; the one axis wraps every ${g.cols} cells` : "") +
      (!g.wrapped && task.map.shape.length > 2 ? `; this slice ${g.rows} × ${g.cols}` : "") +
      ". Hover a cell for details, click to pin.";
    if (empty) return;
    this.offscreen.width = g.cols;
    this.offscreen.height = g.rows;
    const octx = this.offscreen.getContext("2d");
    if (octx === null) return;
    const image = octx.createImageData(g.cols, g.rows);
    const paint = layers.paint(this.layer);
    paintSlice(
      g,
      new Uint32Array(image.data.buffer),
      paint.source,
      paint.lut,
      EMPTY_PIXEL,
      paint.second,
    );
    octx.putImageData(image, 0, 0);
    this.compose();
    this.lastDrawMs = performance.now() - t0;
  }

  /** Scale the painted slice onto the canvas and draw the outlines over it. */
  private compose(): void {
    const g = this.geom;
    const task = this.task;
    if (g === null || task === null) return;
    const dpr = Math.max(1, Math.round(globalThis.devicePixelRatio || 1));
    const cssW = g.cols * g.pixels;
    const cssH = g.rows * g.pixels;
    if (this.canvas.width !== cssW * dpr || this.canvas.height !== cssH * dpr) {
      this.canvas.width = cssW * dpr;
      this.canvas.height = cssH * dpr;
      this.canvas.style.width = `${cssW}px`;
      this.canvas.style.height = `${cssH}px`;
    }
    const ctx = this.canvas.getContext("2d");
    if (ctx === null) return;
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.offscreen, 0, 0, cssW * dpr, cssH * dpr);
    if (g.pixels >= 8) {
      // Hairlines between large cells, so a run of same-coloured blocks still reads as blocks.
      ctx.fillStyle = "rgba(255, 255, 255, 0.45)";
      const p = g.pixels * dpr;
      for (let c = 1; c < g.cols; c++) ctx.fillRect(c * p, 0, dpr, cssH * dpr);
      for (let r = 1; r < g.rows; r++) ctx.fillRect(0, r * p, cssW * dpr, dpr);
    }
    const outline = (flat: number, color: string, width: number) => {
      const at = displayOf(task.map.shape, this.view, g, coordsOf(flat, task.map.shape));
      if (at === null) return;
      const p = g.pixels * dpr;
      ctx.lineWidth = width * dpr;
      ctx.strokeStyle = color;
      // Small cells get a box around them, so the outline does not hide the cell.
      const grow = g.pixels < 6 ? 2 * dpr : 0;
      ctx.strokeRect(
        at.c * p - grow + ctx.lineWidth / 2,
        at.r * p - grow + ctx.lineWidth / 2,
        p + 2 * grow - ctx.lineWidth,
        p + 2 * grow - ctx.lineWidth,
      );
    };
    if (this.highlight !== null) {
      outline(flatOf(this.highlight, task.map.shape), "#111111", 2);
    }
    if (this.pinned >= 0) outline(this.pinned, "#1f4fd1", 2);
    if (this.hover >= 0 && this.hover !== this.pinned && g.pixels >= 4) {
      outline(this.hover, "rgba(0,0,0,0.55)", 1);
    }
  }

  private cellAtEvent(e: MouseEvent): number {
    const g = this.geom;
    if (g === null) return -1;
    const rect = this.canvas.getBoundingClientRect();
    const c = Math.floor((e.clientX - rect.left) / g.pixels);
    const r = Math.floor((e.clientY - rect.top) / g.pixels);
    return cellAtDisplay(g, r, c);
  }

  private onMove(e: MouseEvent): void {
    const flat = this.cellAtEvent(e);
    if (flat !== this.hover) {
      this.hover = flat;
      this.compose();
      if (this.pinned < 0) {
        if (flat < 0) this.tooltip.hidden = true;
        else this.showTooltip(flat, e);
      }
    } else if (this.pinned < 0 && flat >= 0) this.place(e);
  }

  private onLeave(): void {
    this.hover = -1;
    this.compose();
    if (this.pinned < 0) this.tooltip.hidden = true;
  }

  private onClick(e: MouseEvent): void {
    const flat = this.cellAtEvent(e);
    if (flat < 0 || flat === this.pinned) {
      this.unpin();
      return;
    }
    this.pinned = flat;
    this.showTooltip(flat, e);
    this.tooltip.classList.add("pinned");
    this.compose();
  }

  private unpin(): void {
    if (this.pinned < 0) return;
    this.pinned = -1;
    this.tooltip.classList.remove("pinned");
    this.tooltip.hidden = this.hover < 0;
    if (this.hover >= 0) this.showTooltip(this.hover, null);
    this.compose();
  }

  private showTooltip(flat: number, e: MouseEvent | null): void {
    const task = this.task;
    const layers = this.layers;
    if (task === null || layers === null) return;
    const content = tooltipContent(task, layers, this.failed, flat);
    if (this.pinned === flat) {
      content.push(h("div", { class: "tip-hint" }, "pinned: click the cell again or press Esc"));
    }
    // A live page refreshes a pinned tooltip every second: leave it alone when nothing changed,
    // so a selection in it survives.
    const text = content.map((n) => n.textContent).join("\n");
    if (this.tooltip.hidden || text !== this.tooltipText) {
      this.tooltip.replaceChildren(...content);
      this.tooltipText = text;
    }
    this.tooltip.hidden = false;
    if (e !== null) this.place(e);
  }

  /** Next to the pointer, flipped to stay inside the window. */
  private place(e: MouseEvent): void {
    const tip = this.tooltip;
    const pad = 14;
    const w = tip.offsetWidth;
    const hgt = tip.offsetHeight;
    let x = e.clientX + pad;
    let y = e.clientY + pad;
    if (x + w > globalThis.innerWidth - 4) x = Math.max(4, e.clientX - pad - w);
    if (y + hgt > globalThis.innerHeight - 4) y = Math.max(4, e.clientY - pad - hgt);
    tip.style.left = `${x}px`;
    tip.style.top = `${y}px`;
  }
}

/** The last two axes, on the slice holding the first failed block (else the first slice). */
function openingView(task: TaskView): MapView {
  const shape = task.map.shape;
  const view = defaultView(shape);
  const first = task.failures.blocks[0];
  if (first === undefined || shape.length < 3) return view;
  const slice = first.coords.map((c, d) => Math.floor(c / (task.map.cell_shape[d] ?? 1)));
  return clampView(shape, { ...view, slice });
}
