/**
 * What a run shows on the terminal while it goes: progress (bars on a terminal, periodic lines
 * otherwise, or nothing), block failures, notices and the output of workers.
 *
 * Modes:
 * - `bars`: a cli-progress MultiBar on stderr, one bar per task in display order:
 *   `▶ extract  ██████░░░░  40/64 done, 4 running, 1 failed, 0 orphaned, 3 skipped, ETA 5s`.
 *   The leading symbol is `▶` while the task runs, then `✔`, `✗` or `∅` (as in the summary).
 *   Failures, notices and worker output are printed above the bars. A stream that is not a
 *   terminal gets `lines` instead, since bars need cursor movement.
 * - `lines`: every `intervalSeconds`, one line per task whose counters changed:
 *   `[12.3s] extract: 40/64 done, 4 running, 1 failed, 0 orphaned, 3 skipped, ETA 5s`.
 * - `off`: no progress; failures (first line of the message) and notices still print.
 * - `auto`: `bars` when stderr is a terminal, else `lines`.
 *
 * The ETA comes from the rate at which workers finished blocks over the last 30 s (skipped
 * blocks do not count), so a resumed run whose blocks were mostly done already gets a sensible
 * estimate.
 *
 * Worker output is split into lines, each prefixed with `[<task>:w<worker>] ` (partial lines
 * wait for their newline, per worker and stream); stdout goes to stdout, stderr to stderr. With
 * `logDir`, it is appended unprefixed to `<logDir>/<task>/worker_<id>.out` / `.err` instead.
 */

import * as fs from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { clearInterval, clearTimeout, setInterval, setTimeout } from "node:timers";
import { type GenericBar, MultiBar, type Options, type Params } from "cli-progress";
import type { BlockFailure, RunObserver, TaskResult } from "../execute/run_types.ts";
import type { CounterSnapshot } from "../schedule/counters.ts";
import { formatCountersLine, statusSymbol } from "./summary.ts";

/** The part of a write stream the console needs (`process.stderr` fits). */
export interface ConsoleStream {
  readonly isTTY?: boolean;
  readonly columns?: number;
  write(text: string): unknown;
}

export type ProgressMode = "auto" | "bars" | "lines" | "off";

export interface RunConsoleOptions {
  readonly stderr: ConsoleStream;
  /** Where worker stdout goes (default `process.stdout`). */
  readonly stdout?: ConsoleStream;
  readonly mode: ProgressMode;
  /** Seconds between progress lines in `lines` mode (default 10). */
  readonly intervalSeconds?: number;
  /** Directory for worker output files, or null to print it. */
  readonly logDir: string | null;
  readonly color: boolean;
  /** Monotonic clock in milliseconds (default `performance.now()`); for tests. */
  readonly now?: () => number;
}

export interface RunConsole {
  readonly observer: RunObserver;
  /** Worker output; safe to pass around unbound. */
  output(taskId: string, workerId: number, stream: "stdout" | "stderr", text: string): void;
  /** Stop the bars, print what is buffered, close log files. Idempotent. */
  close(): void;
}

export const DEFAULT_LINE_INTERVAL_SECONDS = 10;
/** Bars are refreshed at most this often. */
const BAR_UPDATE_MS = 100;
const ETA_WINDOW_MS = 30_000;
/** Stack lines printed for the first permanent failure of a task. */
const MAX_STACK_LINES = 12;

// ---- ETA ----------------------------------------------------------------------------------

/**
 * Estimated time left from the recent rate of finished blocks. Samples are `(time, worked)`
 * with `worked` = blocks finished by workers so far (completed minus skipped, plus failed).
 */
export class EtaEstimator {
  private readonly samples: { t: number; worked: number }[] = [];

  constructor(private readonly windowMs = ETA_WINDOW_MS) {}

  add(t: number, worked: number): void {
    const last = this.samples[this.samples.length - 1];
    if (last === undefined || last.worked !== worked) this.samples.push({ t, worked });
    // Keep the newest sample at or before the window start as the anchor of the rate.
    while (this.samples.length > 2 && this.samples[1]!.t <= t - this.windowMs) {
      this.samples.shift();
    }
  }

  /** Seconds left for `remaining` blocks at time `t`, or null while the rate is unknown. */
  seconds(t: number, remaining: number): number | null {
    if (remaining <= 0) return 0;
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (first === undefined || last === undefined) return null;
    const done = last.worked - first.worked;
    const elapsed = t - first.t;
    if (done <= 0 || elapsed <= 0) return null;
    return remaining / (done / elapsed) / 1000;
  }
}

/** `<1s`, `42s`, `3m 05s`, `2h 07m`, `>99h`. */
export function formatEta(seconds: number): string {
  if (seconds < 1) return "<1s";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  const hours = Math.floor(s / 3600);
  if (hours > 99) return ">99h";
  return `${hours}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

function workedBlocks(c: CounterSnapshot): number {
  return c.completed - c.skipped + c.failed;
}

function remainingBlocks(c: CounterSnapshot): number {
  return c.total - c.completed - c.failed - c.orphaned;
}

// ---- text helpers ---------------------------------------------------------------------------

type Tone = "red" | "yellow" | "green" | "dim";

const ANSI: Record<Tone, [string, string]> = {
  red: ["\x1b[31m", "\x1b[39m"],
  yellow: ["\x1b[33m", "\x1b[39m"],
  green: ["\x1b[32m", "\x1b[39m"],
  dim: ["\x1b[2m", "\x1b[22m"],
};

function paint(text: string, tone: Tone | null, color: boolean): string {
  if (!color || tone === null || text === "") return text;
  const [open, close] = ANSI[tone];
  return `${open}${text}${close}`;
}

function firstLine(message: string): string {
  const line = message.split(/\r?\n/, 1)[0]?.trim() ?? "";
  return line === "" ? "(no message)" : line;
}

/** `task/blockId (i, j)`. */
function blockName(f: BlockFailure): string {
  return `${f.taskId}/${f.blockId} (${f.index.join(", ")})`;
}

/** One line for a failed attempt, e.g. `✗ predict/7 (1, 0) failed after 3 attempts: boom`. */
export function formatFailureLine(f: BlockFailure, color: boolean): string {
  const what = f.permanent
    ? `failed after ${f.attempt === 1 ? "1 attempt" : `${f.attempt} attempts`}`
    : `attempt ${f.attempt} failed, retrying`;
  const symbol = paint(f.permanent ? "✗" : "↻", f.permanent ? "red" : "yellow", color);
  return `${symbol} ${blockName(f)} ${what}: ${firstLine(f.message)}`;
}

function etaText(
  c: CounterSnapshot,
  eta: EtaEstimator,
  now: number,
  unknown: string,
): string | null {
  if (c.phase !== "running") return null;
  const seconds = eta.seconds(now, remainingBlocks(c));
  return `ETA ${seconds === null ? unknown : formatEta(seconds)}`;
}

// ---- bars -----------------------------------------------------------------------------------

interface TaskView {
  readonly id: string;
  counters: CounterSnapshot;
  readonly eta: EtaEstimator;
  /** Counters last printed in lines mode. */
  printedKey: string;
  bar: GenericBar | null;
}

interface BarLayout {
  idWidth: number;
  digits: number;
}

interface Segment {
  readonly text: string;
  readonly tone: Tone | null;
}

function barSymbol(c: CounterSnapshot): Segment {
  if (c.phase === "running") return { text: "▶", tone: null };
  const symbol = statusSymbol(c);
  return { text: symbol, tone: symbol === "✔" ? "green" : symbol === "✗" ? "red" : "yellow" };
}

function countSegments(
  c: CounterSnapshot,
  digits: number,
  eta: string | null,
  short: boolean,
): Segment[] {
  const done = `${String(c.completed).padStart(digits)}/${String(c.total).padEnd(digits)}`;
  const failedTone: Tone | null = c.failed > 0 ? "red" : null;
  const orphanTone: Tone | null = c.orphaned > 0 ? "yellow" : null;
  const parts: Segment[] = short
    ? [
      { text: `${done} ▶${c.processing} `, tone: null },
      { text: `✗${c.failed}`, tone: failedTone },
      { text: " ", tone: null },
      { text: `∅${c.orphaned}`, tone: orphanTone },
      { text: ` ↷${c.skipped}`, tone: null },
    ]
    : [
      { text: `${done} done, ${c.processing} running, `, tone: null },
      { text: `${c.failed} failed`, tone: failedTone },
      { text: ", ", tone: null },
      { text: `${c.orphaned} orphaned`, tone: orphanTone },
      { text: `, ${c.skipped} skipped`, tone: null },
    ];
  if (eta !== null) parts.push({ text: short ? ` ${eta}` : `, ${eta}`, tone: null });
  return parts;
}

function segmentsLength(segments: readonly Segment[]): number {
  return segments.reduce((n, s) => n + [...s.text].length, 0);
}

/** The longest count text any task may show, so that every bar gets the same width. */
function worstCountsLength(layout: BarLayout, short: boolean): number {
  const n = 10 ** layout.digits - 1;
  const c: CounterSnapshot = {
    phase: "running",
    total: n,
    ready: 0,
    processing: n,
    pending: 0,
    completed: n,
    skipped: n,
    failed: n,
    orphaned: n,
    failedAttempts: 0,
    started: true,
  };
  return segmentsLength(countSegments(c, layout.digits, "ETA 99h 59m", short));
}

/** One bar line fitted to `maxWidth - 1` columns. */
export function formatBarLine(
  view: Pick<TaskView, "id" | "counters" | "eta">,
  layout: BarLayout,
  maxWidth: number,
  now: number,
  color: boolean,
): string {
  const c = view.counters;
  const width = Math.max(20, maxWidth - 1);
  const eta = etaText(c, view.eta, now, "?");
  const head: Segment[] = [barSymbol(c), {
    text: ` ${view.id.padEnd(layout.idWidth)}  `,
    tone: null,
  }];
  const headLength = segmentsLength(head);
  let short = false;
  let barSize = width - headLength - 2 - worstCountsLength(layout, false);
  if (barSize < 10) {
    short = true;
    barSize = width - headLength - 2 - worstCountsLength(layout, true);
  }
  barSize = Math.min(40, barSize);
  const segments = [...head];
  if (barSize >= 5) {
    const fraction = c.total === 0 ? 1 : c.completed / c.total;
    const full = Math.max(0, Math.min(barSize, Math.round(fraction * barSize)));
    segments.push(
      { text: "█".repeat(full), tone: c.phase === "done" && c.failed === 0 ? "green" : null },
      { text: "░".repeat(barSize - full), tone: "dim" },
      { text: "  ", tone: null },
    );
  }
  segments.push(...countSegments(c, layout.digits, eta, short));
  if (segmentsLength(segments) > width) {
    return [...segments.map((s) => s.text).join("")].slice(0, width).join("");
  }
  return segments.map((s) => paint(s.text, s.tone, color)).join("");
}

// ---- the console ----------------------------------------------------------------------------

/** Writes worker output to `<logDir>/<task>/worker_<id>.out|.err`, keeping the files open. */
class WorkerLogFiles {
  private readonly files = new Map<string, number>();

  constructor(readonly dir: string) {}

  write(taskId: string, workerId: number, stream: "stdout" | "stderr", text: string): void {
    const path = join(
      this.dir,
      taskId,
      `worker_${workerId}.${stream === "stdout" ? "out" : "err"}`,
    );
    let fd = this.files.get(path);
    if (fd === undefined) {
      fs.mkdirSync(join(this.dir, taskId), { recursive: true });
      fd = fs.openSync(path, "a");
      this.files.set(path, fd);
    }
    const bytes = new TextEncoder().encode(text);
    let offset = 0;
    while (offset < bytes.length) offset += fs.writeSync(fd, bytes, offset, bytes.length - offset);
  }

  close(): void {
    for (const fd of this.files.values()) {
      try {
        fs.closeSync(fd);
      } catch {
        // Already closed; everything was written synchronously.
      }
    }
    this.files.clear();
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function createRunConsole(options: RunConsoleOptions): RunConsole {
  const { stderr, color } = options;
  const stdout: ConsoleStream = options.stdout ?? process.stdout;
  const now = options.now ?? (() => performance.now());
  const intervalMs = Math.max(1, (options.intervalSeconds ?? DEFAULT_LINE_INTERVAL_SECONDS) * 1000);
  const mode: "bars" | "lines" | "off" = options.mode === "off"
    ? "off"
    : (options.mode === "bars" || options.mode === "auto") && stderr.isTTY === true
    ? "bars"
    : "lines";

  const views: TaskView[] = [];
  const byId = new Map<string, TaskView>();
  const layout: BarLayout = { idWidth: 4, digits: 1 };
  let startedAt = now();
  let multibar: MultiBar | null = null;
  let lineTimer: ReturnType<typeof setInterval> | null = null;
  let pendingTimer: ReturnType<typeof setTimeout> | null = null;
  let pending: readonly TaskResult[] | null = null;
  let appliedAt = Number.NEGATIVE_INFINITY;
  let closed = false;
  const stackShown = new Set<string>();

  let logFiles: WorkerLogFiles | null = options.logDir === null
    ? null
    : new WorkerLogFiles(options.logDir);
  let logDirAnnounced = false;
  const partial = new Map<string, { readonly prefix: string; text: string }>();

  /** A message of whole lines for stderr, above the bars when they are shown. */
  function printErr(text: string): void {
    const chunk = text.endsWith("\n") ? text : `${text}\n`;
    if (multibar !== null) multibar.log(chunk);
    else stderr.write(chunk);
  }

  function printOut(text: string): void {
    // On a terminal stdout shares the screen with the bars: go above them too.
    if (multibar !== null && stdout.isTTY === true) multibar.log(text);
    else stdout.write(text);
  }

  /** `color` is meant for stderr: stdout gets colour only when it is a terminal too. */
  function prefixColor(stream: "stdout" | "stderr"): boolean {
    return color && (stream === "stderr" || stdout.isTTY === true);
  }

  // -- progress --

  function apply(tasks: readonly TaskResult[]): void {
    const t = now();
    appliedAt = t;
    pending = null;
    for (const task of tasks) {
      const view = byId.get(task.id);
      if (view === undefined) continue;
      view.counters = task.counters;
      view.eta.add(t, workedBlocks(task.counters));
      view.bar?.update(task.counters.completed, { view });
    }
  }

  function applyPending(): void {
    if (pendingTimer !== null) clearTimeout(pendingTimer);
    pendingTimer = null;
    if (pending !== null) apply(pending);
  }

  function progress(tasks: readonly TaskResult[]): void {
    if (closed || mode === "off") return;
    const wait = appliedAt + BAR_UPDATE_MS - now();
    if (wait <= 0) {
      if (pendingTimer !== null) clearTimeout(pendingTimer);
      pendingTimer = null;
      apply(tasks);
      return;
    }
    pending = tasks;
    if (pendingTimer === null) {
      pendingTimer = setTimeout(() => {
        pendingTimer = null;
        if (!closed && pending !== null) apply(pending);
      }, Math.ceil(wait));
      pendingTimer.unref();
    }
  }

  function printLines(): void {
    applyPending();
    const t = now();
    const elapsed = ((t - startedAt) / 1000).toFixed(1);
    for (const view of views) {
      const key = JSON.stringify(view.counters);
      if (key === view.printedKey) continue;
      view.printedKey = key;
      const eta = etaText(view.counters, view.eta, t, "unknown");
      stderr.write(
        `[${elapsed}s] ${formatCountersLine(view.id, view.counters)}${
          eta === null ? "" : `, ${eta}`
        }\n`,
      );
    }
  }

  function formatBar(_options: Options, params: Params, payload: { view?: TaskView }): string {
    const view = payload.view;
    if (view === undefined) return "";
    return formatBarLine(view, layout, params.maxWidth, now(), color);
  }

  function runStarted(tasks: readonly TaskResult[]): void {
    if (closed) return;
    startedAt = now();
    for (const task of tasks) {
      let view = byId.get(task.id);
      if (view === undefined) {
        view = {
          id: task.id,
          counters: task.counters,
          eta: new EtaEstimator(),
          printedKey: "",
          bar: null,
        };
        views.push(view);
        byId.set(task.id, view);
      }
      view.counters = task.counters;
      view.printedKey = JSON.stringify(task.counters);
      view.eta.add(startedAt, workedBlocks(task.counters));
    }
    appliedAt = startedAt;
    if (mode === "bars" && views.length > 0 && multibar === null) {
      layout.idWidth = Math.max(...views.map((v) => [...v.id].length));
      layout.digits = Math.max(...views.map((v) => String(v.counters.total).length));
      multibar = new MultiBar({
        stream: stderr as unknown as NodeJS.WritableStream,
        format: formatBar,
        fps: 10,
        hideCursor: false,
        gracefulExit: false,
        clearOnComplete: false,
        emptyOnZero: false,
      });
      for (const view of views) {
        view.bar = multibar.create(view.counters.total, view.counters.completed, { view });
      }
    } else if (mode === "lines" && lineTimer === null) {
      lineTimer = setInterval(printLines, intervalMs);
      lineTimer.unref();
    }
  }

  // -- failures and notices --

  function blockFailed(f: BlockFailure): void {
    let text = formatFailureLine(f, color);
    if (mode !== "off" && f.permanent && f.stack !== undefined && !stackShown.has(f.taskId)) {
      stackShown.add(f.taskId);
      const stack = f.stack.split(/\r?\n/);
      // The stack usually starts with the message; the line above has it already.
      if (stack[0]?.includes(firstLine(f.message))) stack.shift();
      const shown = stack.slice(0, MAX_STACK_LINES).map((l) => `    ${l.trim()}`);
      if (stack.length > shown.length) shown.push(`    ... ${stack.length - shown.length} more`);
      if (shown.length > 0) text += `\n${shown.join("\n")}`;
    }
    printErr(text);
  }

  // -- worker output --

  function output(
    taskId: string,
    workerId: number,
    stream: "stdout" | "stderr",
    text: string,
  ): void {
    if (text === "") return;
    if (logFiles !== null) {
      try {
        if (!logDirAnnounced) {
          logDirAnnounced = true;
          printErr(
            `Worker output goes to ${join(logFiles.dir, "<task>", "worker_<id>.out")} and .err`,
          );
        }
        logFiles.write(taskId, workerId, stream, text);
        return;
      } catch (error) {
        printErr(
          `warning: cannot write worker logs under "${logFiles.dir}": ${errorText(error)}; ` +
            "printing worker output instead.",
        );
        logFiles.close();
        logFiles = null;
      }
    }
    const key = `${taskId}\u0000${workerId}\u0000${stream}`;
    let entry = partial.get(key);
    if (entry === undefined) {
      entry = { prefix: `[${taskId}:w${workerId}] `, text: "" };
      partial.set(key, entry);
    }
    const lines = (entry.text + text).split("\n");
    entry.text = lines.pop() ?? "";
    if (closed && entry.text !== "") {
      lines.push(entry.text);
      entry.text = "";
    }
    if (lines.length === 0) return;
    const prefix = paint(entry.prefix, "dim", prefixColor(stream));
    const chunk = lines.map((l) => `${prefix}${l.endsWith("\r") ? l.slice(0, -1) : l}\n`).join("");
    if (stream === "stdout") printOut(chunk);
    else printErr(chunk);
  }

  function flushPartials(): void {
    for (const [key, entry] of partial) {
      if (entry.text === "") continue;
      const stream = key.endsWith("stdout") ? "stdout" : "stderr";
      const chunk = `${paint(entry.prefix, "dim", prefixColor(stream))}${entry.text}\n`;
      entry.text = "";
      if (stream === "stdout") printOut(chunk);
      else printErr(chunk);
    }
  }

  function close(): void {
    if (closed) return;
    applyPending();
    closed = true;
    if (lineTimer !== null) clearInterval(lineTimer);
    lineTimer = null;
    flushPartials();
    if (multibar !== null) {
      const bars = multibar;
      multibar = null;
      bars.update(); // prints what was logged since the last frame, above the bars
      bars.stop();
    }
    logFiles?.close();
  }

  const observer: RunObserver = {
    runStarted,
    progress,
    blockFailed,
    notice: (message) => printErr(message),
    runFinished: (result) => {
      if (closed) return;
      if (mode !== "off") apply(result.tasks);
    },
  };
  return { observer, output, close };
}
