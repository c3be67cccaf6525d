/**
 * How a run's progress reads on the terminal: the ETA estimate, one bar line per task, and one
 * line per failed attempt. Pure formatting; lib/report/console_output.ts decides when to print.
 *
 * The ETA comes from the rate at which workers finished blocks over the last 30 s (skipped
 * blocks do not count, so a resumed run whose blocks were mostly done already gets a sensible
 * estimate). The rate is measured from the first finished block on, not from the start of the
 * run: until then workers start and import the pipeline, and counting that time made the ETA
 * of a short run several times too long.
 */

import type { GenericBar } from "cli-progress";
import type { BlockFailure, TemporaryStats, WorkerCounts } from "../run/run_types.ts";
import type { CounterSnapshot } from "../schedule/counters.ts";
import { statusSymbol, workersText } from "./summary.ts";
import { formatBytes } from "./utilization.ts";

const ETA_WINDOW_MS = 30_000;
/** Stack lines printed for the first permanent failure of a task. */
const MAX_STACK_LINES = 12;
/** Message lines after the first (a command's stderr tail has up to 20). */
const MAX_MESSAGE_LINES = 24;

// ---- ETA ----------------------------------------------------------------------------------

/**
 * Estimated time left from the recent rate of finished blocks. Samples are `(time, worked)`
 * with `worked` = blocks finished by workers so far (completed minus skipped, plus failed).
 * The first sample (the start of the run) is only a baseline: the first change replaces it, so
 * the rate is measured from the first finished blocks on. Worker start-up, and for a downstream
 * task the time spent waiting for its upstream, would otherwise count as slow work.
 */
export class EtaEstimator {
  readonly #samples: { t: number; worked: number }[] = [];
  readonly #windowMs: number;
  #baseline = false;

  constructor(windowMs = ETA_WINDOW_MS) {
    this.#windowMs = windowMs;
  }

  add(t: number, worked: number): void {
    const samples = this.#samples;
    const last = samples[samples.length - 1];
    if (last === undefined) {
      samples.push({ t, worked });
      this.#baseline = true;
      return;
    }
    if (last.worked === worked) return;
    if (this.#baseline) {
      samples[0] = { t, worked };
      this.#baseline = false;
      return;
    }
    samples.push({ t, worked });
    // Keep the newest sample at or before the window start as the anchor of the rate.
    while (samples.length > 2 && samples[1]!.t <= t - this.#windowMs) samples.shift();
  }

  /** Seconds left for `remaining` blocks at time `t`, or null while the rate is unknown. */
  seconds(t: number, remaining: number): number | null {
    if (remaining <= 0) return 0;
    const first = this.#samples[0];
    const last = this.#samples[this.#samples.length - 1];
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

export function workedBlocks(c: CounterSnapshot): number {
  return c.completed - c.skipped + c.failed;
}

function remainingBlocks(c: CounterSnapshot): number {
  return c.total - c.completed - c.failed - c.orphaned;
}

// ---- text helpers ---------------------------------------------------------------------------

export type Tone = "red" | "yellow" | "green" | "dim";

const ANSI: Record<Tone, [string, string]> = {
  red: ["\x1b[31m", "\x1b[39m"],
  yellow: ["\x1b[33m", "\x1b[39m"],
  green: ["\x1b[32m", "\x1b[39m"],
  dim: ["\x1b[2m", "\x1b[22m"],
};

export function paint(text: string, tone: Tone | null, color: boolean): string {
  if (!color || tone === null || text === "") return text;
  const [open, close] = ANSI[tone];
  return `${open}${text}${close}`;
}

export function firstLine(message: string): string {
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

/** A stack frame of blockwise's block workers (run from source or from a compiled binary). */
const OWN_FRAME = /^\s*at .*[/\\]workers[/\\](block|sync)_worker\.[jt]s:\d+|^\s*at .*\(native:\d+/;

/**
 * The lines shown under the first permanent failure of a task, indented: the rest of the
 * message (for a command, the last lines of its stderr), then the stack without the message
 * and without blockwise's own frames.
 */
export function failureDetails(f: BlockFailure, withStack: boolean): string[] {
  const messageLines = f.message.split(/\r?\n/);
  const rest = messageLines.slice(1);
  while (rest.length > 0 && rest[rest.length - 1]!.trim() === "") rest.pop();
  const shown = rest.slice(0, MAX_MESSAGE_LINES).map((l) => `    ${l.trimEnd()}`);
  if (rest.length > MAX_MESSAGE_LINES) {
    shown.push(`    ... ${rest.length - MAX_MESSAGE_LINES} more lines`);
  }
  if (withStack && f.stack !== undefined) {
    const stack = f.stack.split(/\r?\n/);
    // The stack usually starts with the message; the lines above have it already.
    if (stack[0]?.includes(firstLine(f.message))) {
      const inMessage = new Set(messageLines.map((l) => l.trim()));
      let skip = 1;
      while (skip < stack.length && inMessage.has(stack[skip]!.trim())) skip++;
      stack.splice(0, skip);
    }
    // blockwise's own frames (the worker that called the user's function) are not the user's.
    const frames = stack.filter((l) => !OWN_FRAME.test(l));
    shown.push(...frames.slice(0, MAX_STACK_LINES).map((l) => `    ${l.trim()}`));
    if (frames.length > MAX_STACK_LINES) {
      shown.push(`    ... ${frames.length - MAX_STACK_LINES} more`);
    }
  }
  return shown;
}

export function etaText(
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

export interface TaskView {
  readonly id: string;
  counters: CounterSnapshot;
  /** Blocks running now (processing also counts blocks queued in a worker or committing). */
  running: number;
  /** Remote workers waiting in the cluster's queue. */
  queued?: number;
  /** An elastic task's workers (`launch.workers`). */
  workers?: WorkerCounts;
  temporary?: TemporaryStats;
  readonly eta: EtaEstimator;
  /** Counters last printed in lines mode. */
  printedKey: string;
  bar: GenericBar | null;
}

export interface BarLayout {
  idWidth: number;
  digits: number;
  /** Some task is temporary: every bar keeps room for the live and peak temporary bytes. */
  temporary?: boolean;
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
  running: number = c.processing,
  queued: number | WorkerCounts = 0,
  temporary?: Pick<TemporaryStats, "liveBytes" | "peakBytes">,
): Segment[] {
  const done = `${String(c.completed).padStart(digits)}/${String(c.total).padEnd(digits)}`;
  const failedTone: Tone | null = c.failed > 0 ? "red" : null;
  const orphanTone: Tone | null = c.orphaned > 0 ? "yellow" : null;
  const waiting = typeof queued !== "number"
    ? workersText(queued, short)
    : queued > 0
    ? (short ? ` ◷${queued}` : `, ${queued} queued`)
    : "";
  const parts: Segment[] = short
    ? [
      { text: `${done} ▶${running}${waiting} `, tone: null },
      { text: `✗${c.failed}`, tone: failedTone },
      { text: " ", tone: null },
      { text: `∅${c.orphaned}`, tone: orphanTone },
      { text: ` ↷${c.skipped}`, tone: null },
    ]
    : [
      { text: `${done} done, ${running} running${waiting}, `, tone: null },
      { text: `${c.failed} failed`, tone: failedTone },
      { text: ", ", tone: null },
      { text: `${c.orphaned} orphaned`, tone: orphanTone },
      { text: `, ${c.skipped} skipped`, tone: null },
    ];
  if (temporary !== undefined) {
    const live = formatBytes(temporary.liveBytes);
    const peak = formatBytes(temporary.peakBytes);
    parts.push({
      text: short ? ` tmp ${live}↑${peak}` : `, temporary ${live} live (peak ${peak})`,
      tone: null,
    });
  }
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
  const bytes = 1023.9 * 2 ** 30; // the widest figure formatBytes writes below a TiB
  const temporary = layout.temporary === true ? { liveBytes: bytes, peakBytes: bytes } : undefined;
  return segmentsLength(countSegments(c, layout.digits, "ETA 99h 59m", short, n, 0, temporary));
}

/**
 * One bar line fitted to `maxWidth - 1` columns. Bars of all tasks get the same width, made for
 * the longest counts a task may show; queued remote workers, while there are some, take their
 * room from the bar.
 */
export function formatBarLine(
  view: Pick<TaskView, "id" | "counters" | "eta" | "temporary"> & {
    readonly running?: number;
    readonly queued?: number;
    readonly workers?: WorkerCounts;
  },
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
  const running = view.running ?? c.processing;
  const queued = view.workers ?? view.queued ?? 0;
  // The room the queued count takes (the longest counts leave none for it).
  const extra = (short: boolean): number =>
    queued === 0
      ? 0
      : segmentsLength(countSegments(c, layout.digits, eta, short, running, queued)) -
        segmentsLength(countSegments(c, layout.digits, eta, short, running));
  let short = false;
  let barSize = width - headLength - 2 - worstCountsLength(layout, false) - extra(false);
  if (barSize < 10) {
    short = true;
    barSize = width - headLength - 2 - worstCountsLength(layout, true) - extra(true);
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
  segments.push(
    ...countSegments(c, layout.digits, eta, short, running, queued, view.temporary),
  );
  if (segmentsLength(segments) > width) {
    return [...segments.map((s) => s.text).join("")].slice(0, width).join("");
  }
  return segments.map((s) => paint(s.text, s.tone, color)).join("");
}
