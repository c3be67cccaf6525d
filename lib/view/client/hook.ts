/**
 * `window.blockwiseReport` (`globalThis` in code): what tests (and curious users in the console) drive the page with.
 * Rectangles are in CSS pixels relative to the map's canvas, for the view shown now.
 */

import type { CellRect } from "./block_map.ts";
import type { STATE_COLORS } from "./colors.ts";

export interface ViewRequest {
  readonly rowAxis?: number;
  readonly colAxis?: number;
  readonly slice?: readonly number[];
}

export interface ReportHook {
  cellRect(task: string, cellCoords: readonly number[]): CellRect | null;
  setLayer(task: string, layerName: string): void;
  setView(task: string, view: ViewRequest): void;
  readonly colors: typeof STATE_COLORS;
  /** True once everything is drawn (for a live page: after the first full document). */
  ready: boolean;
  /** Milliseconds from navigation start to ready, and the last map draw per task. */
  readyMs: number | null;
  drawMs(task: string): number | null;
  /** Layer names of a task's map, in menu order. */
  layers(task: string): string[];
}

declare global {
  // `var`: the one declaration form that adds a property to globalThis (window, in the page).
  var blockwiseReport: ReportHook | undefined;
}
