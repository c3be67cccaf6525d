/**
 * The top of a task's section: blocks by state (each count in a `data-count` element, its exact
 * number in `data-value`, so a test can compare it with `status --json`), outputs, resource
 * totals, and where
 * `serve` serves the task's ledger.
 */

import type { StatusJsonStore } from "../status_json.ts";
import type { ServedLocation, TaskView } from "../report_data.ts";
import { STATE_COLORS } from "./colors.ts";
import { type Child, facts, h } from "./dom.ts";
import {
  formatBytes,
  formatCount,
  formatIso,
  formatPercentValue,
  formatSeconds,
} from "./format.ts";

function progressBar(store: StatusJsonStore): HTMLElement {
  const bar = h("div", { class: "progress", attrs: { role: "img" } });
  const total = Math.max(1, store.blocks);
  const parts: [number, string, string][] = [
    [store.done, STATE_COLORS.done, "done"],
    [store.failed, STATE_COLORS.failed, "failed"],
    [store.pending, STATE_COLORS.never_run, "pending"],
  ];
  for (const [n, color, label] of parts) {
    if (n <= 0) continue;
    const seg = h("span", { title: `${label}: ${formatCount(n)}` });
    seg.style.width = `${(100 * n) / total}%`;
    seg.style.background = color;
    bar.appendChild(seg);
  }
  bar.setAttribute("aria-label", `${store.percent_done}% done`);
  return bar;
}

export function countsView(store: StatusJsonStore | undefined): HTMLElement {
  if (store === undefined) return h("p", { class: "warning" }, "No status for this task.");
  const count = (label: string, n: number, key: string): [string, Child, string, number] => [
    label,
    formatCount(n),
    key,
    n,
  ];
  const items: [string, Child, string?, number?][] = [
    count("blocks", store.blocks, "blocks"),
    count("done", store.done, "done"),
    count("failed", store.failed, "failed"),
    count("never run / pending", store.pending, "pending"),
    ["percent done", `${store.percent_done}%`, "percent_done"],
  ];
  if (store.untracked_blocks > 0) {
    items.push(count("untracked blocks", store.untracked_blocks, "untracked"));
  }
  items.push(["failed attempts", formatCount(store.failed_attempts)]);
  items.push(["runs", formatCount(store.runs)]);
  const o = store.outputs;
  if (o !== null) {
    items.push(count("outputs present", o.present_blocks, "outputs_present"));
    items.push(["present bytes", formatBytes(o.present_bytes)]);
    if (o.temporary || o.deleted_blocks > 0) {
      items.push(count("deleted temporary", o.deleted_blocks, "deleted"));
      items.push(["deleted bytes", formatBytes(o.deleted_bytes)]);
    }
    if (o.reset_blocks > 0) items.push(count("outputs reset", o.reset_blocks, "reset"));
  }
  const notes: Child[] = [];
  if (o?.temporary) notes.push(h("span", { class: "badge neutral" }, "temporary outputs"));
  if (o?.nondeterministic) notes.push(h("span", { class: "badge neutral" }, "nondeterministic"));
  if (store.lock !== null) {
    const l = store.lock;
    const running = l.alive === true ? "running now" : l.alive === false ? "stale lock" : "locked";
    notes.push(
      h(
        "span",
        { class: `badge ${l.alive === false ? "bad" : "neutral"}` },
        `${running}: pid ${l.pid} on ${l.host} since ${formatIso(l.started_at)}`,
      ),
    );
  }
  const warnings: Child[] = [];
  if (store.missing_chunks.length > 0) {
    warnings.push(
      h(
        "p",
        { class: "warning" },
        `Missing chunk files (read as empty): ${store.missing_chunks.join(", ")}`,
      ),
    );
  }
  if (store.torn_lines > 0) {
    warnings.push(
      h("p", { class: "warning" }, `${store.torn_lines} torn line(s) in runs.jsonl were skipped`),
    );
  }
  return h("div", { class: "counts" }, progressBar(store), facts(items), ...notes, ...warnings);
}

export function resourcesView(store: StatusJsonStore | undefined): HTMLElement {
  const r = store?.resources ?? null;
  if (r === null) {
    return h("p", { class: "muted" }, "Resource tracking is off for this store: no timings.");
  }
  const span = r.first_sent_at && r.last_returned_at
    ? (Date.parse(r.last_returned_at) - Date.parse(r.first_sent_at)) / 1000
    : null;
  return facts([
    ["blocks measured", formatCount(r.blocks_measured), "measured"],
    ["wall time, total", formatSeconds(r.wall_seconds_total)],
    ["wall time, mean", r.wall_seconds_mean === null ? "–" : formatSeconds(r.wall_seconds_mean)],
    ["CPU time, total", formatSeconds(r.cpu_seconds_total)],
    ["peak RSS, max", r.peak_rss_bytes_max === null ? "–" : formatBytes(r.peak_rss_bytes_max)],
    ["I/O read", formatBytes(r.io_read_bytes_total)],
    ["I/O written", formatBytes(r.io_write_bytes_total)],
    ["first block sent", formatIso(r.first_sent_at)],
    ["last block returned", formatIso(r.last_returned_at)],
    ["span", span === null || !Number.isFinite(span) ? "–" : formatSeconds(span)],
    // `status`'s GPU figures, when some block has one.
    ...(r.gpu
      ? [
        [
          "GPU utilisation, mean",
          r.gpu.util_pct_mean === null ? "–" : formatPercentValue(r.gpu.util_pct_mean),
          "gpu_util_mean",
        ] as const,
        [
          "GPU memory, max",
          formatBytes(r.gpu.mem_bytes_max),
          "gpu_mem_max",
          r.gpu.mem_bytes_max,
        ] as const,
      ]
      : []),
  ]);
}

function copyButton(input: HTMLInputElement): HTMLElement {
  const button = h("button", { attrs: { type: "button" } }, "copy");
  const say = (text: string) => {
    button.textContent = text;
    setTimeout(() => (button.textContent = "copy"), 1500);
  };
  button.addEventListener("click", () => {
    // The clipboard API exists only in secure contexts: a page served over plain HTTP to
    // another host has none, so the text is selected and copied the old way.
    const clipboard: Clipboard | undefined = navigator.clipboard;
    if (clipboard !== undefined) {
      clipboard.writeText(input.value).then(() => say("copied"), () => say("copy failed"));
      return;
    }
    input.select();
    say(document.execCommand("copy") ? "copied" : "select and copy");
  });
  return button;
}

/** The ledger's Zarr URL and neuroglancer source, when the page is served. */
export function servedView(task: TaskView, served: ServedLocation | null): HTMLElement | null {
  if (served === null) return null;
  let url: string;
  try {
    url = new URL(served.base_path + task.zarr_path, location.origin).href;
  } catch {
    return null;
  }
  const line = (label: string, text: string, key: string) => {
    const input = h("input", {
      attrs: { type: "text", readonly: "", value: text, "data-served": key },
    });
    return h(
      "div",
      { class: "served-line" },
      h("span", { class: "tip-label" }, label),
      input,
      copyButton(input),
    );
  };
  return h(
    "div",
    { class: "served" },
    line("Zarr", url, "zarr"),
    line("neuroglancer", `zarr3://${url}`, "neuroglancer"),
  );
}
