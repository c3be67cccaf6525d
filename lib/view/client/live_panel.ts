/** The run in flight (`run --serve`): elapsed time, per-task counters, running blocks. */

import type { LiveView } from "../report_data.ts";
import { STATE_COLORS } from "./colors.ts";
import { facts, h, table } from "./dom.ts";
import { formatCount, formatIso, formatSeconds } from "./format.ts";
import { runningTable } from "./tables.ts";

function bar(done: number, failed: number, running: number, total: number): HTMLElement {
  const el = h("div", { class: "progress small" });
  const t = Math.max(1, total);
  for (
    const [n, color] of [[done, STATE_COLORS.done], [failed, STATE_COLORS.failed], [
      running,
      "#4e79a7",
    ]] as const
  ) {
    if (n <= 0) continue;
    const seg = h("span");
    seg.style.width = `${(100 * n) / t}%`;
    seg.style.background = color;
    el.appendChild(seg);
  }
  return el;
}

export function livePanel(live: LiveView): HTMLElement {
  const tasks = table(
    ["task", "progress", "done", "running", "failed", "orphaned", "skipped", "pending", "total"],
    live.tasks.map((t) => [
      t.task,
      bar(t.done, t.failed, t.running, t.total),
      formatCount(t.done),
      formatCount(t.running),
      formatCount(t.failed),
      formatCount(t.orphaned),
      formatCount(t.skipped),
      formatCount(t.pending),
      formatCount(t.total),
    ]),
    (i) => ({ "data-live-task": live.tasks[i]?.task ?? "" }),
  );
  return h(
    "section",
    { class: "live", attrs: { "data-live": live.finished ? "finished" : "running" } },
    h("h2", null, live.finished ? "Run finished" : "Run in progress"),
    facts([
      ["run", live.run_id],
      ["started", formatIso(live.started_at)],
      ["elapsed", formatSeconds(live.elapsed), "elapsed"],
      ["blocks running", formatCount(live.running_total), "running"],
      ["workers connected", formatCount(live.connected_workers), "connected_workers"],
      ["workers queued", formatCount(live.queued_workers), "queued_workers"],
    ]),
    tasks,
    h("h3", null, "Running blocks"),
    runningTable(live.running, live.running_total),
  );
}
