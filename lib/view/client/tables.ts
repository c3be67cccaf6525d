/** The page's tables: run history, slowest blocks, failures, running blocks. */

import type { BlockDetail, FailureView, RunningBlock, RunView, TaskView } from "../report_data.ts";
import { formatCoords, formatRoi } from "./decode.ts";
import { type Child, h, pre, table } from "./dom.ts";
import {
  formatBytes,
  formatCount,
  formatIso,
  formatPercentValue,
  formatSeconds,
} from "./format.ts";

const dash = "–";

function orDash<T>(v: T | null | undefined, f: (x: T) => string): string {
  return v === null || v === undefined ? dash : f(v);
}

function outcomeBadge(outcome: string | null): HTMLElement {
  const o = outcome ?? "unknown";
  const kind = /^(ok|success|succeeded|complete|completed|done)$/i.test(o)
    ? "good"
    : /fail|error|crash|abort|killed/i.test(o)
    ? "bad"
    : "neutral";
  return h("span", { class: `badge ${kind}` }, o);
}

export function runsTable(runs: readonly RunView[]): HTMLElement {
  if (runs.length === 0) return h("p", { class: "muted" }, "No runs recorded.");
  return table(
    [
      "#",
      "started",
      "outcome",
      "duration",
      "completed",
      "skipped",
      "failed",
      "exit code",
      "host",
    ],
    runs.map((r, i) => [
      String(i + 1),
      formatIso(r.started_at),
      outcomeBadge(r.outcome),
      orDash(r.seconds, formatSeconds),
      orDash(r.blocks_completed, formatCount),
      orDash(r.blocks_skipped, formatCount),
      orDash(r.blocks_failed, formatCount),
      orDash(r.exit_code, String),
      r.host ?? dash,
    ]),
    (i) => ({ "data-run": String(i + 1) }),
  );
}

/** The slowest blocks; a click on a row calls `onPick` with the block's coordinates. */
export function slowestTable(
  slowest: readonly BlockDetail[],
  onPick: (coords: readonly number[]) => void,
): HTMLElement {
  if (slowest.length === 0) {
    return h("p", { class: "muted" }, "No block timings (no resource tracking, or none ran).");
  }
  // GPU columns only when a listed block has a GPU figure.
  const gpu = slowest.some((b) => b.gpu_util_pct != null || b.gpu_mem_bytes != null);
  const el = table(
    [
      "rank",
      "block ID",
      "index",
      "write ROI",
      "wall",
      "CPU",
      "peak RSS",
      ...(gpu ? ["GPU", "GPU memory"] : []),
      "worker",
    ],
    slowest.map((b, i) => [
      String(i + 1),
      String(b.id),
      formatCoords(b.index),
      formatRoi(b.write_roi),
      orDash(b.wall_seconds, formatSeconds),
      orDash(b.cpu_seconds, formatSeconds),
      orDash(b.peak_rss_bytes, formatBytes),
      ...(gpu
        ? [orDash(b.gpu_util_pct, formatPercentValue), orDash(b.gpu_mem_bytes, formatBytes)]
        : []),
      orDash(b.worker_id, String),
    ]),
    (i) => ({ "data-slowest-rank": String(i + 1), title: "show on the block map" }),
  );
  el.classList.add("clickable");
  const rows = el.tBodies[0]?.rows;
  if (rows) {
    for (let i = 0; i < rows.length; i++) {
      const b = slowest[i];
      const row = rows[i];
      if (b === undefined || row === undefined) continue;
      row.addEventListener("click", () => {
        for (let j = 0; j < rows.length; j++) rows[j]?.classList.remove("picked");
        row.classList.add("picked");
        onPick(b.coords);
      });
    }
  }
  return el;
}

const FAILED_ROWS = 200;

export function failureTables(f: FailureView): HTMLElement {
  if (f.total === 0 && f.blocks.length === 0) {
    return h("p", { class: "muted" }, "No failed blocks.");
  }
  const groups = table(
    ["message", "blocks", "first block IDs"],
    f.groups.map((g) => [
      pre(g.message),
      formatCount(g.count),
      g.blocks.map(String).join(", ") + (g.count > g.blocks.length ? ", …" : ""),
    ]),
  );
  const shown = f.blocks.slice(0, FAILED_ROWS);
  const blocks = table(
    ["block ID", "index", "attempts", "last error", "at"],
    shown.map((b) => [
      String(b.id),
      formatCoords(b.index),
      String(b.attempts),
      b.stack.length === 0 ? pre(b.message ?? "no error recorded") : h(
        "div",
        null,
        pre(b.message ?? "no error recorded"),
        h("details", null, h("summary", null, "traceback"), traceback(b.stack)),
      ),
      b.at ? formatIso(b.at) : dash,
    ]),
    (i) => ({ "data-failed-block": String(shown[i]?.id ?? "") }),
  );
  const more = f.total - shown.length;
  const first = f.blocks.find((b) => b.stack.length > 0);
  return h(
    "div",
    null,
    h(
      "h4",
      null,
      `${formatCount(f.total)} failed block${f.total === 1 ? "" : "s"}, by message` +
        (f.grouped < f.total ? ` (the first ${formatCount(f.grouped)} grouped)` : ""),
    ),
    groups,
    first === undefined ? null : h(
      "div",
      { attrs: { "data-first-traceback": String(first.id) } },
      h(
        "h4",
        null,
        `Traceback of the first failed block, ID ${first.id} (index ${formatCoords(first.index)})`,
      ),
      traceback(first.stack),
    ),
    h("h4", null, "Failed blocks"),
    blocks,
    more > 0
      ? h(
        "p",
        { class: "muted", attrs: { "data-more": String(more) } },
        `and ${formatCount(more)} more`,
      )
      : null,
  );
}

/** A stack or traceback, line for line: never wrapped or trimmed, so `~~^^` markers align. */
function traceback(lines: readonly string[]): HTMLElement {
  return h("pre", { class: "traceback" }, lines.join("\n"));
}

export function runningTable(running: readonly RunningBlock[], total: number): HTMLElement {
  if (running.length === 0) return h("p", { class: "muted" }, "No blocks running.");
  const rows: (readonly Child[])[] = running.map((b) => [
    b.task,
    String(b.id),
    formatCoords(b.index),
    b.worker,
    formatSeconds(b.seconds),
  ]);
  return h(
    "div",
    null,
    table(["task", "block ID", "index", "worker", "running for"], rows),
    total > running.length
      ? h("p", { class: "muted" }, `and ${formatCount(total - running.length)} more`)
      : null,
  );
}

/** The task's runs summarised for its header line. */
export function lastRunText(task: TaskView): string {
  const last = task.runs[task.runs.length - 1];
  if (last === undefined) return "never run";
  return `last run ${formatIso(last.started_at)}, ${last.outcome ?? "outcome unknown"}`;
}
