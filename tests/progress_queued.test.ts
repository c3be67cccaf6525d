/**
 * Remote workers waiting in the cluster's queue show in progress: "2 queued" after the running
 * count on the bar line and the plain progress line (in the bar's short form "◷2"), a line is
 * printed again when only that count changes, and the events file's progress records carry it
 * while there are some.
 */

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { join } from "node:path";
import type { TaskResult } from "../lib/run/run_types.ts";
import { type ConsoleStream, createRunConsole } from "../lib/report/console_output.ts";
import { createEventLog } from "../lib/report/events.ts";
import { EtaEstimator, formatBarLine } from "../lib/report/progress_format.ts";
import { formatCountersLine } from "../lib/report/summary.ts";
import type { CounterSnapshot } from "../lib/schedule/counters.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { ManualClock } from "./fixtures/manual_clock.ts";

const newDir = scratchDirs("queued");

function counters(overrides: Partial<CounterSnapshot> = {}): CounterSnapshot {
  return {
    phase: "running",
    total: 64,
    ready: 60,
    processing: 2,
    pending: 0,
    completed: 2,
    skipped: 0,
    failed: 0,
    orphaned: 0,
    failedAttempts: 0,
    started: true,
    ...overrides,
  };
}

function task(queued: number | undefined, overrides: Partial<CounterSnapshot> = {}): TaskResult {
  const c = counters(overrides);
  return {
    id: "predict",
    counters: c,
    running: c.processing,
    ...(queued === undefined ? {} : { queued }),
  };
}

class FakeStream implements ConsoleStream {
  readonly chunks: string[] = [];
  readonly isTTY = false;
  readonly columns = 100;
  write(text: string): boolean {
    this.chunks.push(text);
    return true;
  }
}

describe("queued remote workers in progress", () => {
  test("the bar line says how many wait, after the running ones", () => {
    const view = { id: "predict", counters: counters(), eta: new EtaEstimator(), running: 2 };
    const layout = { idWidth: 7, digits: 2 };
    const line = formatBarLine({ ...view, queued: 3 }, layout, 140, 0, false);
    assert.match(
      line,
      / 2\/64 done, 2 running, 3 queued, 0 failed, 0 orphaned, 0 skipped, ETA \?$/,
    );
    assert.doesNotMatch(formatBarLine({ ...view, queued: 0 }, layout, 140, 0, false), /queued/);
    assert.doesNotMatch(formatBarLine(view, layout, 140, 0, false), /queued/);
  });

  test("queued workers take their room from the bar; the line still fits", () => {
    const view = { id: "predict", counters: counters(), eta: new EtaEstimator(), running: 2 };
    const layout = { idWidth: 7, digits: 2 };
    for (const width of [40, 60, 80, 100]) {
      const line = formatBarLine({ ...view, queued: 12 }, layout, width, 0, false);
      assert.ok([...line].length <= width - 1, `${width}: ${line}`);
      assert.match(line, /12 queued|◷12/, `${width}: ${line}`);
      // Nothing cut off at the end.
      assert.match(line, /ETA \?$/, `${width}: ${line}`);
    }
    assert.match(formatBarLine({ ...view, queued: 12 }, layout, 60, 0, false), / ▶2 ◷12 ✗0/);
  });

  test("the plain progress line", () => {
    assert.equal(
      formatCountersLine("predict", counters(), 2, undefined, 3),
      "predict: 2/64 done, 2 running, 3 queued, 0 failed, 0 orphaned, 0 skipped",
    );
    assert.equal(
      formatCountersLine("predict", counters(), 2),
      "predict: 2/64 done, 2 running, 0 failed, 0 orphaned, 0 skipped",
    );
  });

  test("lines mode prints a task again when only its queued count changed", () => {
    const stderr = new FakeStream();
    let now = 0;
    let tick: (() => void) | null = null;
    const run = createRunConsole({
      stderr,
      mode: "lines",
      intervalSeconds: 1,
      logDir: null,
      color: false,
      now: () => now,
      timers: {
        every: (_ms, f) => {
          tick = f;
          return () => (tick = null);
        },
        after: (_ms, f) => {
          f();
          return () => {};
        },
      },
    });
    run.observer.runStarted?.([task(4, { processing: 0, completed: 0, started: false })]);
    now = 1000;
    run.observer.progress?.([task(3)]);
    tick!();
    now = 2000;
    run.observer.progress?.([task(1)]);
    tick!();
    now = 3000;
    run.observer.progress?.([task(1)]);
    tick!();
    run.close();
    const lines = stderr.chunks.join("").split("\n").filter((l) => l.startsWith("["));
    assert.deepEqual(lines.map((l) => l.replace(/, ETA .*$/, "")), [
      "[1.0s] predict: 2/64 done, 2 running, 3 queued, 0 failed, 0 orphaned, 0 skipped",
      "[2.0s] predict: 2/64 done, 2 running, 1 queued, 0 failed, 0 orphaned, 0 skipped",
    ]);
  });

  test("the events file's progress records carry the count while there is one", () => {
    const path = join(newDir("events"), "events.jsonl");
    const clock = new ManualClock();
    const log = createEventLog(path, "pipeline.ts", { clock, throttleSeconds: 0 });
    log.runStarted?.([task(undefined, { processing: 0, completed: 0, started: false })]);
    clock.advance(1);
    log.progress?.([task(2)]);
    clock.advance(1);
    log.progress?.([task(0, { completed: 3 })]);
    log.close?.();
    const records = fs.readFileSync(path, "utf8").trim().split("\n").map((l) =>
      JSON.parse(l) as Record<string, unknown>
    ).filter((r) => r["event"] === "task_progress");
    assert.deepEqual(records.map((r) => r["queued"]), [2, undefined]);
  });
});
