/**
 * The execution summary printed at the end of a run, and the one-line progress form used when
 * stdout is not a terminal.
 *
 * It keeps everything daisy's "Execution Summary" shows (daisy reference §7.2: per task the
 * blocks, completed, skipped, failed and orphaned counts and a status symbol) and adds what a
 * user needs next: why a task was abandoned, totals, the first failed blocks with their error,
 * and a verdict that names the exit code. Column widths come from the content, so the table
 * stays aligned for any task name or count. Colour is opt-in (`options.color`).
 *
 * Status symbols, as in daisy: `✗` some block failed; else `∅` some block orphaned; else `…`
 * blocks still waiting or running; else `✔`.
 */

import { type CounterSnapshot, describeAbandonReason } from "../schedule/mod.ts";
import type { RunOutcome, TemporaryStats, WorkerCounts } from "../run/run_types.ts";
import { formatBytes } from "./utilization.ts";

export interface TaskSummaryRow {
  readonly id: string;
  readonly counters: CounterSnapshot;
  /** A temporary task's outputs: what was deleted, what is still live, the peak. */
  readonly temporary?: TemporaryStats;
}

/** Failed blocks grouped by task and error (first line of the message), in first-seen order. */
export function groupFailures<F extends { readonly taskId: string; readonly message: string }>(
  failures: readonly F[],
): F[][] {
  const groups = new Map<string, F[]>();
  for (const f of failures) {
    const key = `${f.taskId}\u0000${firstLine(f.message)}`;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [f]);
    else group.push(f);
  }
  return [...groups.values()];
}

/** Blocks named after "and N more with the same error:". */
const SAME_NAMED = 5;

export interface FailedBlockReport {
  readonly taskId: string;
  readonly blockId: number | bigint;
  readonly index: readonly number[];
  readonly attempts: number;
  readonly message: string;
  readonly stack?: string;
}

export interface SummaryOptions {
  /** ANSI colours (green, red, yellow); only for a terminal that wants them. */
  readonly color: boolean;
  /** Failed blocks listed before "... and N more" (default 10). */
  readonly maxFailures?: number;
  /** How the run ended (`outcomeOf`): only a complete run gets the all-completed verdict. */
  readonly outcome: RunOutcome;
  /** The exit code the verdict names (`exitCodeForOutcome` of the outcome). */
  readonly exitCode: number;
  /** Where the run left its ledger and logs; printed after the verdict when given. */
  readonly locations?: RunLocations;
}

/** The files a run wrote that a user looks for next. Paths are absolute. */
export interface RunLocations {
  /** Every task's tracking store, or null when the task has none. */
  readonly stores: readonly { readonly task: string; readonly path: string | null }[];
  /** `--events FILE`, or null. */
  readonly events: string | null;
  /** `--log-dir DIR`, or null. */
  readonly logDir: string | null;
  /** Where worker processes' own output went (a run with Python or remote workers). */
  readonly remoteLogDir?: string;
  /** True when those workers were all local Python processes (not remote ones). */
  readonly localWorkerLogs?: boolean;
}

export const DEFAULT_MAX_FAILURES = 10;

type Tone = "green" | "red" | "yellow" | "plain";

const ANSI: Record<Exclude<Tone, "plain">, string> = {
  green: "\x1b[32m",
  red: "\x1b[31m",
  yellow: "\x1b[33m",
};
const ANSI_RESET = "\x1b[39m";

function paint(text: string, tone: Tone, color: boolean): string {
  return !color || tone === "plain" || text === "" ? text : `${ANSI[tone]}${text}${ANSI_RESET}`;
}

/** Blocks not handed to a worker yet: ready ones and ones waiting on their upstream. */
function waiting(c: CounterSnapshot): number {
  return c.ready + c.pending;
}

export function statusSymbol(c: CounterSnapshot): string {
  if (c.failed > 0) return "✗";
  if (c.orphaned > 0) return "∅";
  if (waiting(c) > 0 || c.processing > 0) return "…";
  return "✔";
}

function symbolTone(symbol: string): Tone {
  return symbol === "✔" ? "green" : symbol === "✗" ? "red" : "yellow";
}

interface Column {
  readonly title: string;
  readonly value: (c: CounterSnapshot) => number;
  readonly tone?: (n: number) => Tone;
  /** Shown only when some row (or the totals) is non-zero. */
  readonly optional?: boolean;
}

const COLUMNS: readonly Column[] = [
  { title: "blocks", value: (c) => c.total },
  { title: "completed", value: (c) => c.completed },
  { title: "skipped", value: (c) => c.skipped },
  { title: "failed", value: (c) => c.failed, tone: (n) => (n > 0 ? "red" : "plain") },
  { title: "orphaned", value: (c) => c.orphaned, tone: (n) => (n > 0 ? "yellow" : "plain") },
  { title: "pending", value: waiting, optional: true },
  { title: "processing", value: (c) => c.processing, optional: true },
];

const INDENT = "  ";
const GAP = "  ";

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function firstLine(message: string): string {
  const line = message.split(/\r?\n/, 1)[0]?.trim() ?? "";
  return line === "" ? "(no message)" : line;
}

function sumCounters(rows: readonly TaskSummaryRow[]): CounterSnapshot {
  const t = {
    total: 0,
    ready: 0,
    processing: 0,
    pending: 0,
    completed: 0,
    skipped: 0,
    failed: 0,
    orphaned: 0,
    failedAttempts: 0,
  };
  for (const { counters: c } of rows) {
    t.total += c.total;
    t.ready += c.ready;
    t.processing += c.processing;
    t.pending += c.pending;
    t.completed += c.completed;
    t.skipped += c.skipped;
    t.failed += c.failed;
    t.orphaned += c.orphaned;
    t.failedAttempts += c.failedAttempts;
  }
  return { ...t, phase: "done", started: true };
}

/**
 * The whole summary as lines joined by "\n" (no trailing newline). Example, without colour:
 *
 * ```
 * Execution summary
 *     task     blocks  completed  skipped  failed  orphaned
 *   ✔ extract      16         16        4       0         0
 *   ✗ predict      16         12        0       1         3
 *   ∅ label        16          0        0       0        16
 *       abandoned: upstream task "predict" failed
 *     ───────  ────────────────────────────────────────────
 *     total        48         28        4       1        19
 *
 * Failed blocks (1):
 *   predict/7 index (1, 0, 2) after 3 attempts: ValueError: no signal
 *
 * 1 block failed, 19 orphaned, 1 task abandoned: exit 1
 * ```
 */
export function formatExecutionSummary(
  rows: readonly TaskSummaryRow[],
  failures: readonly FailedBlockReport[],
  options: SummaryOptions,
): string {
  const { color } = options;
  const lines: string[] = ["Execution summary"];
  const totals = sumCounters(rows);

  if (rows.length === 0) {
    lines.push(`${INDENT}(no tasks)`);
  } else {
    const columns = COLUMNS.filter((col) =>
      !col.optional || rows.some((r) => col.value(r.counters) > 0)
    );
    const nameWidth = Math.max("task".length, "total".length, ...rows.map((r) => r.id.length));
    const widths = columns.map((col) =>
      Math.max(
        col.title.length,
        String(col.value(totals)).length,
        ...rows.map((r) => String(col.value(r.counters)).length),
      )
    );
    // Rows start with a status symbol and a space; header, rule and totals leave room for it.
    const lead = `${INDENT}  `;
    const cells = (values: readonly string[]): string =>
      values.map((v, i) => v.padStart(widths[i]!)).join(GAP);

    lines.push(`${lead}${"task".padEnd(nameWidth)}${GAP}${cells(columns.map((c) => c.title))}`);
    for (const { id, counters, temporary } of rows) {
      const symbol = statusSymbol(counters);
      const values = columns.map((col, i) => {
        const n = col.value(counters);
        const text = String(n);
        return " ".repeat(widths[i]! - text.length) + paint(text, col.tone?.(n) ?? "plain", color);
      });
      lines.push(
        `${INDENT}${paint(symbol, symbolTone(symbol), color)} ${id.padEnd(nameWidth)}${GAP}${
          values.join(GAP)
        }`,
      );
      if (counters.phase === "abandoned") {
        const reason = firstLine(abandonText(counters));
        lines.push(`${lead}  ${paint(`abandoned: ${reason}`, "yellow", color)}`);
      }
      if (temporary !== undefined) lines.push(`${lead}  ${formatTemporary(temporary)}`);
    }
    const tableWidth = widths.reduce((a, w) => a + w, 0) + GAP.length * (widths.length - 1);
    lines.push(`${lead}${"─".repeat(nameWidth)}${GAP}${"─".repeat(tableWidth)}`);
    lines.push(
      `${lead}${"total".padEnd(nameWidth)}${GAP}${
        cells(columns.map((c) => String(c.value(totals))))
      }`,
    );
  }

  if (failures.length > 0) {
    const max = Math.max(0, Math.floor(options.maxFailures ?? DEFAULT_MAX_FAILURES));
    // Each distinct error once, with the blocks that share it.
    const groups = groupFailures(failures);
    const shown = groups.slice(0, max);
    lines.push("", `Failed blocks (${failures.length}):`);
    let listed = 0;
    for (const [first, ...same] of shown) {
      lines.push(`${INDENT}${formatFailedBlock(first!)}`);
      listed += 1 + same.length;
      if (same.length === 0) continue;
      const names = same.slice(0, SAME_NAMED).map((f) => `${f.taskId}/${f.blockId}`);
      lines.push(
        `${INDENT}  and ${same.length} more with the same error: ${names.join(", ")}${
          same.length > SAME_NAMED ? ", ..." : ""
        }`,
      );
    }
    if (failures.length > listed) {
      lines.push(`${INDENT}... and ${failures.length - listed} more`);
    }
  }

  lines.push("", formatVerdict(rows, totals, options));
  if (options.locations !== undefined) lines.push(...formatLocations(options.locations));
  return lines.join("\n");
}

/**
 * Where the ledger and logs are, e.g.
 *
 * ```
 * tracking     /data/tracking/<task>: extract, label; no store: export
 * events       /data/run/events.jsonl
 * worker logs  /data/logs/<task>/worker_<n>.out, .err
 * remote worker logs  /data/logs/workers/<task>-worker-<n>[-<job id>].log
 * ```
 *
 * Stores under one folder (`--tracking-dir`) share a line; a store elsewhere gets its own.
 */
export function formatLocations(locations: RunLocations): string[] {
  const rows: [string, string][] = [];
  const tracked = locations.stores.filter((s): s is { task: string; path: string } =>
    s.path !== null
  );
  const untracked = locations.stores.filter((s) => s.path === null).map((s) => s.task);
  if (tracked.length === 0) {
    rows.push([
      "tracking",
      "none: a rerun runs every block again (--tracking-dir DIR keeps a ledger to resume from)",
    ]);
  } else {
    const byFolder = new Map<string, string[]>();
    const elsewhere: string[] = [];
    for (const { task, path } of tracked) {
      const folder = parentOf(path);
      if (folder !== null && path === `${folder}/${task}`) {
        byFolder.set(folder, [...(byFolder.get(folder) ?? []), task]);
      } else {
        elsewhere.push(`${task} at ${path}`);
      }
    }
    const parts = [...byFolder].map(([folder, tasks]) => `${folder}/<task>: ${tasks.join(", ")}`);
    parts.push(...elsewhere);
    if (untracked.length > 0) parts.push(`no store: ${untracked.join(", ")}`);
    rows.push(["tracking", parts.join("; ")]);
  }
  if (locations.events !== null) rows.push(["events", locations.events]);
  if (locations.logDir !== null) {
    rows.push(["worker logs", `${locations.logDir}/<task>/worker_<n>.out, .err`]);
  }
  if (locations.remoteLogDir !== undefined) {
    rows.push([
      locations.localWorkerLogs === true ? "Python worker logs" : "remote worker logs",
      `${locations.remoteLogDir}/<task>-worker-<n>[-<job id>].log`,
    ]);
  }
  const width = Math.max(...rows.map(([key]) => key.length));
  return ["", ...rows.map(([key, value]) => `${key.padEnd(width)}  ${value}`)];
}

function parentOf(path: string): string | null {
  const slash = path.lastIndexOf("/");
  return slash <= 0 ? null : path.slice(0, slash);
}

/** `task/blockId index (i, j, k) after N attempts: <first line of message>` */
export function formatFailedBlock(f: FailedBlockReport): string {
  const attempts = f.attempts === 1 ? "1 attempt" : `${f.attempts} attempts`;
  return `${f.taskId}/${f.blockId} index (${f.index.join(", ")}) after ${attempts}: ${
    firstLine(f.message)
  }`;
}

function formatVerdict(
  rows: readonly TaskSummaryRow[],
  totals: CounterSnapshot,
  options: SummaryOptions,
): string {
  const { outcome, exitCode } = options;
  const abandoned = rows.filter((r) => r.counters.phase === "abandoned").length;
  const unfinished = waiting(totals) + totals.processing;
  const skipped = totals.skipped > 0 ? ` (${totals.skipped} skipped)` : "";

  if (outcome === "complete") {
    const text = totals.total === 0
      ? "No blocks to run."
      : `${totals.total === 1 ? "1 block" : `All ${totals.total} blocks`} completed${skipped}.`;
    return paint(text, "green", options.color);
  }

  const parts: string[] = [];
  const blocksWord = (n: number): string => (n === 1 ? "block" : "blocks");
  if (totals.failed > 0) parts.push(`${totals.failed} ${blocksWord(totals.failed)} failed`);
  if (totals.orphaned > 0) {
    parts.push(
      parts.length === 0
        ? `${totals.orphaned} ${blocksWord(totals.orphaned)} orphaned`
        : `${totals.orphaned} orphaned`,
    );
  }
  if (unfinished > 0) {
    parts.push(
      parts.length === 0
        ? `${unfinished} ${blocksWord(unfinished)} not finished`
        : `${unfinished} not finished`,
    );
  }
  if (abandoned > 0) parts.push(`${plural(abandoned, "task")} abandoned`);
  if (parts.length === 0) parts.push(`${totals.completed} of ${totals.total} blocks completed`);
  const tone: Tone = totals.failed > 0 ? "red" : "yellow";
  return paint(`${parts.join(", ")}: exit ${exitCode}`, tone, options.color);
}

/** `temporary: 4096 deleted (16.0 MB), 0 live, peak 2.1 MB live; 27 regenerated` */
export function formatTemporary(t: TemporaryStats): string {
  let text = `temporary: ${t.deletedBlocks} deleted (${
    formatBytes(t.deletedBytes)
  }), ${t.liveBlocks} live (${formatBytes(t.liveBytes)}), peak ${formatBytes(t.peakBytes)} live`;
  if (t.regenerated > 0) text += `; ${t.regenerated} regenerated`;
  return text;
}

/**
 * One compact line for periodic progress logs, e.g.
 * `extract: 12/64 done, 4 running, 0 failed, 0 orphaned, 3 skipped`. "done" counts completed
 * blocks, skipped ones included; remote workers waiting in the cluster's queue show as
 * `2 queued` after the running ones (an elastic task's workers as
 * `workers 3 running, 1 queued, 2 released`); an abandoned task gets its reason appended.
 */
export function formatCountersLine(
  id: string,
  counters: CounterSnapshot,
  running: number = counters.processing,
  temporary?: TemporaryStats,
  queued = 0,
  workers?: WorkerCounts,
): string {
  const c = counters;
  const waiting = workers !== undefined
    ? workersText(workers, false)
    : queued > 0
    ? `, ${queued} queued`
    : "";
  let line = `${id}: ${c.completed}/${c.total} done, ${running} running${waiting}, ` +
    `${c.failed} failed, ${c.orphaned} orphaned, ${c.skipped} skipped`;
  if (temporary !== undefined) {
    line += `, temporary ${formatBytes(temporary.liveBytes)} live (peak ${
      formatBytes(temporary.peakBytes)
    })`;
  }
  if (c.phase === "abandoned") {
    line += `, abandoned: ${firstLine(abandonText(c))}`;
  }
  return line;
}

/** An elastic task's workers in a progress line (`short`: the narrow bar's symbols). */
export function workersText(w: WorkerCounts, short: boolean): string {
  return short
    ? ` ⚙${w.running}◷${w.queued}↓${w.released}`
    : `, workers ${w.running} running, ${w.queued} queued, ${w.released} released`;
}

function abandonText(c: CounterSnapshot): string {
  return c.abandonReason === undefined
    ? "no reason recorded"
    : describeAbandonReason(c.abandonReason);
}
