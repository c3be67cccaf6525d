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
 * - `off`: no progress; failures (with the first one's stack) and notices still print.
 * - `auto`: `bars` when stderr is a terminal, else `lines`.
 *
 * A failed attempt is one line (the first line of its message). The first permanent failure of
 * each task also shows the rest of its message, e.g. the last lines of a command's stderr, and
 * its stack (a Python traceback), in every mode: `off` drops progress, not where a block failed.
 * Formatting and the ETA live in progress_format.ts, worker output in worker_output.ts.
 */

import process from "node:process";
import { clearInterval, clearTimeout, setInterval, setTimeout } from "node:timers";
import { MultiBar, type Options, type Params } from "cli-progress";
import type { BlockFailure, RunObserver, TaskResult } from "../run/run_types.ts";
import { formatCountersLine } from "./summary.ts";
import {
  type BarLayout,
  EtaEstimator,
  etaText,
  failureDetails,
  formatBarLine,
  type TaskView,
  workedBlocks,
} from "./progress_format.ts";
import { type OutputStream, WorkerOutput } from "./worker_output.ts";
import { RepeatedFailures } from "./failure_groups.ts";

/** The part of a write stream the console needs (`process.stderr` fits). */
export interface ConsoleStream {
  readonly isTTY?: boolean;
  readonly columns?: number;
  write(text: string): unknown;
}

export type ProgressMode = "auto" | "bars" | "lines" | "off";

/** Timers the console uses; each returns a function that cancels it. For tests. */
export interface ConsoleTimers {
  every(ms: number, run: () => void): () => void;
  after(ms: number, run: () => void): () => void;
}

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
  /** Default: node:timers, unref'd so that they never keep a run alive. */
  readonly timers?: ConsoleTimers;
}

export interface RunConsole {
  readonly observer: RunObserver;
  /** Worker output; safe to pass around unbound. */
  output(taskId: string, workerId: number, stream: OutputStream, text: string): void;
  /** Stop the bars, print what is buffered, close log files. Idempotent. */
  close(): void;
}

export const DEFAULT_LINE_INTERVAL_SECONDS = 10;
/** Bars are refreshed at most this often. */
const BAR_UPDATE_MS = 100;

const NODE_TIMERS: ConsoleTimers = {
  every(ms, run) {
    const timer = setInterval(run, ms);
    timer.unref();
    return () => clearInterval(timer);
  },
  after(ms, run) {
    const timer = setTimeout(run, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** What a progress line says: a task's line is printed again only when this changes. */
function printedKey(view: TaskView): string {
  const temporary = view.temporary;
  const bytes = temporary === undefined ? null : [temporary.liveBytes, temporary.peakBytes];
  return JSON.stringify([view.counters, view.queued ?? 0, view.workers ?? null, bytes]);
}

export function createRunConsole(options: RunConsoleOptions): RunConsole {
  const { stderr, color } = options;
  const stdout: ConsoleStream = options.stdout ?? process.stdout;
  const now = options.now ?? (() => performance.now());
  const timers = options.timers ?? NODE_TIMERS;
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
  let cancelLines: (() => void) | null = null;
  let cancelPending: (() => void) | null = null;
  let pending: readonly TaskResult[] | null = null;
  let appliedAt = Number.NEGATIVE_INFINITY;
  let closed = false;
  const detailsShown = new Set<string>();
  const repeated = new RepeatedFailures();

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

  const workerOutput = new WorkerOutput(options.logDir, {
    print: (stream, lines) => (stream === "stdout" ? printOut(lines) : printErr(lines)),
    notice: printErr,
    // `color` is meant for stderr: stdout gets colour only when it is a terminal too.
    color: (stream) => color && (stream === "stderr" || stdout.isTTY === true),
  });

  // -- progress --

  function apply(tasks: readonly TaskResult[]): void {
    const t = now();
    appliedAt = t;
    pending = null;
    for (const task of tasks) {
      const view = byId.get(task.id);
      if (view === undefined) continue;
      view.counters = task.counters;
      view.running = task.running;
      view.queued = task.queued ?? 0;
      if (task.workers !== undefined) view.workers = task.workers;
      if (task.temporary !== undefined) view.temporary = task.temporary;
      view.eta.add(t, workedBlocks(task.counters));
      view.bar?.update(task.counters.completed, { view });
    }
    // Draw now rather than on the bars' own timer: what was logged shows at once too.
    multibar?.update();
  }

  function cancelPendingApply(): void {
    cancelPending?.();
    cancelPending = null;
  }

  function applyPending(): void {
    cancelPendingApply();
    if (pending !== null) apply(pending);
  }

  function progress(tasks: readonly TaskResult[]): void {
    if (closed || mode === "off") return;
    const wait = appliedAt + BAR_UPDATE_MS - now();
    if (wait <= 0) {
      cancelPendingApply();
      apply(tasks);
      return;
    }
    pending = tasks;
    if (cancelPending === null) {
      cancelPending = timers.after(Math.ceil(wait), () => {
        cancelPending = null;
        if (!closed && pending !== null) apply(pending);
      });
    }
  }

  function printLines(): void {
    applyPending();
    const t = now();
    const elapsed = ((t - startedAt) / 1000).toFixed(1);
    for (const view of views) {
      const key = printedKey(view);
      if (key === view.printedKey) continue;
      view.printedKey = key;
      const eta = etaText(view.counters, view.eta, t, "unknown");
      const line = formatCountersLine(
        view.id,
        view.counters,
        view.running,
        view.temporary,
        view.queued,
        view.workers,
      );
      stderr.write(`[${elapsed}s] ${line}${eta === null ? "" : `, ${eta}`}\n`);
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
          running: task.running,
          eta: new EtaEstimator(),
          printedKey: "",
          bar: null,
        };
        views.push(view);
        byId.set(task.id, view);
      }
      view.counters = task.counters;
      view.running = task.running;
      view.queued = task.queued ?? 0;
      if (task.workers !== undefined) view.workers = task.workers;
      if (task.temporary !== undefined) view.temporary = task.temporary;
      view.printedKey = printedKey(view);
      view.eta.add(startedAt, workedBlocks(task.counters));
    }
    appliedAt = startedAt;
    if (mode === "bars" && views.length > 0 && multibar === null) {
      layout.idWidth = Math.max(...views.map((v) => [...v.id].length));
      layout.digits = Math.max(...views.map((v) => String(v.counters.total).length));
      layout.temporary = views.some((v) => v.temporary !== undefined);
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
    } else if (mode === "lines" && cancelLines === null) {
      cancelLines = timers.every(intervalMs, printLines);
    }
  }

  // -- failures and notices --

  function blockFailed(f: BlockFailure): void {
    const line = repeated.line(f, color);
    if (line === null) return;
    let text = line;
    if (f.permanent && !detailsShown.has(f.taskId)) {
      detailsShown.add(f.taskId);
      const details = failureDetails(f, true);
      if (details.length > 0) text += `\n${details.join("\n")}`;
    }
    printErr(text);
  }

  function close(): void {
    if (closed) return;
    applyPending();
    closed = true;
    cancelLines?.();
    cancelLines = null;
    workerOutput.end();
    if (multibar !== null) {
      const bars = multibar;
      multibar = null;
      bars.update(); // prints what was logged since the last frame, above the bars
      bars.stop();
    }
  }

  const observer: RunObserver = {
    runStarted,
    progress,
    blockFailed,
    notice: (message) => printErr(message),
    runFinished: (result) => {
      if (closed) return;
      for (const line of repeated.closing(color)) printErr(line);
      if (mode !== "off") apply(result.tasks);
    },
  };
  const output = (taskId: string, workerId: number, stream: OutputStream, text: string): void =>
    workerOutput.write(taskId, workerId, stream, text);
  return { observer, output, close };
}
