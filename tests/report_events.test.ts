import { afterEach, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import {
  type BlockFailure,
  outcomeOf,
  type RunResult,
  type TaskResult,
} from "../lib/run/run_types.ts";
import { blockIdJson, createEventLog, type EventLogOptions } from "../lib/report/events.ts";
import type { CounterSnapshot } from "../lib/schedule/counters.ts";
import { InputError } from "../lib/errors.ts";
import { ManualClock } from "./fixtures/manual_clock.ts";

type Line = Record<string, unknown>;

const COUNTER_KEYS = [
  "task",
  "phase",
  "total",
  "ready",
  "processing",
  "pending",
  "completed",
  "skipped",
  "failed",
  "orphaned",
  "failed_attempts",
  "running",
];

function counters(overrides: Partial<CounterSnapshot> = {}): CounterSnapshot {
  return {
    phase: "running",
    total: 4,
    ready: 4,
    processing: 0,
    pending: 0,
    completed: 0,
    skipped: 0,
    failed: 0,
    orphaned: 0,
    failedAttempts: 0,
    started: false,
    ...overrides,
  };
}

function task(id: string, overrides: Partial<CounterSnapshot> = {}): TaskResult {
  const c = counters(overrides);
  return { id, counters: c, running: c.processing };
}

function result(tasks: readonly TaskResult[], overrides: Partial<RunResult> = {}): RunResult {
  const stoppedBy = overrides.stoppedBy ?? null;
  return {
    tasks,
    failures: [],
    seconds: 1.5,
    stoppedBy,
    outcome: outcomeOf(tasks, stoppedBy),
    ...overrides,
  };
}

function readLines(path: string): Line[] {
  return fs.readFileSync(path, "utf8").split("\n").filter((l) => l !== "").map((l) => {
    const value: unknown = JSON.parse(l);
    assert.ok(typeof value === "object" && value !== null && !Array.isArray(value));
    return value as Line;
  });
}

let dir = "";
let clock = new ManualClock();
let fake: EventLogOptions = { clock };

beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), "blockwise-events-"));
  clock = new ManualClock(); // 1000 s since the epoch
  fake = { clock };
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("createEventLog", () => {
  test("a whole run: every line parses and has the documented keys", () => {
    const path = join(dir, "nested", "deeper", "events.jsonl");
    const log = createEventLog(path, "pipeline.ts", fake);
    log.runStarted?.([task("extract"), task("label", { ready: 0, pending: 4 })]);
    clock.advance(1_000);
    log.progress?.([
      task("extract", { ready: 3, processing: 1, started: true }),
      task("label", {
        ready: 0,
        pending: 4,
      }),
    ]);
    log.notice?.("worker 3 of task extract restarted");
    const failure: BlockFailure = {
      taskId: "extract",
      blockId: 7,
      index: [1, 2],
      attempt: 1,
      message: "bad block",
      stack: "Error: bad block\n    at f (x.ts:1:1)",
      permanent: false,
    };
    log.blockFailed?.(failure);
    const final = [
      task("extract", { phase: "done", ready: 0, completed: 4, failedAttempts: 1 }),
      task("label", { phase: "done", ready: 0, pending: 0, completed: 4, skipped: 2 }),
    ];
    clock.advance(1_000);
    log.runFinished?.(result(final));
    log.finish(result(final), 0);
    log.close();

    const lines = readLines(path);
    assert.deepEqual(lines.map((l) => l.event), [
      "run_start",
      "task_progress",
      "notice",
      "block_failed",
      "task_progress",
      "task_progress",
      "run_end",
    ]);
    for (const line of lines) {
      assert.deepEqual(Object.keys(line).slice(0, 2), ["event", "time"]);
      assert.equal(typeof line.time, "number");
    }
    const [start, progress, notice, failed, , , end] = lines;
    assert.equal(start!.pipeline, "pipeline.ts");
    assert.equal(start!.time, 1_000);
    const startTasks = start!.tasks as Line[];
    assert.deepEqual(startTasks.map((t) => Object.keys(t)), [COUNTER_KEYS, COUNTER_KEYS]);
    assert.equal(startTasks[1]!.pending, 4);
    // Only the task whose counters changed gets a line.
    assert.deepEqual(Object.keys(progress!), ["event", "time", ...COUNTER_KEYS]);
    assert.equal(progress!.task, "extract");
    assert.equal(progress!.processing, 1);
    assert.equal(notice!.message, "worker 3 of task extract restarted");
    assert.deepEqual(failed, {
      event: "block_failed",
      time: 1_001,
      task: "extract",
      block_id: 7,
      index: [1, 2],
      attempt: 1,
      permanent: false,
      error: { message: "bad block", stack: "Error: bad block\n    at f (x.ts:1:1)" },
    });
    assert.deepEqual(Object.keys(end!), [
      "event",
      "time",
      "outcome",
      "stopped_by",
      "exit_code",
      "seconds",
      "tasks",
    ]);
    assert.equal(end!.outcome, "complete");
    assert.equal(end!.stopped_by, null);
    assert.equal(end!.exit_code, 0);
    assert.equal(end!.seconds, 1.5);
    const endTasks = end!.tasks as Line[];
    assert.equal(endTasks[1]!.skipped, 2);
    assert.equal(endTasks[0]!.failed_attempts, 1);
  });

  test("unchanged counters write nothing; the throttle keeps the final state", () => {
    const path = join(dir, "events.jsonl");
    const log = createEventLog(path, "p.ts", fake);
    log.runStarted?.([task("a")]);
    log.progress?.([task("a")]); // unchanged
    clock.advance(100);
    log.progress?.([task("a", { ready: 3, processing: 1 })]); // held: within 0.5 s of run_start
    clock.advance(100);
    log.progress?.([task("a", { ready: 2, processing: 2 })]); // replaces the held state
    clock.advance(100);
    log.progress?.([task("a", { ready: 2, processing: 1, completed: 1 })]); // replaces it again
    clock.advance(199);
    assert.deepEqual(readLines(path).map((l) => l.event), ["run_start"]);
    clock.advance(1); // 0.5 s after run_start: the timer writes the held state
    let lines = readLines(path);
    assert.deepEqual(lines.map((l) => l.event), ["run_start", "task_progress"]);
    assert.equal(lines[1]!.time, 1_000.5);
    assert.equal(lines[1]!.completed, 1);

    clock.advance(600); // nothing held, 0.6 s after the last line: written at once
    log.progress?.([task("a", { ready: 1, processing: 1, completed: 2 })]);
    clock.advance(100);
    log.progress?.([task("a", { ready: 0, processing: 1, completed: 3 })]); // held
    const final = [task("a", { ready: 0, processing: 0, completed: 3, failed: 1 })];
    log.finish(result(final), 1);
    log.close();
    clock.advance(1_000); // a closed log's timer writes nothing

    lines = readLines(path);
    assert.deepEqual(lines.map((l) => l.event), [
      "run_start",
      "task_progress",
      "task_progress",
      "task_progress",
      "task_progress",
      "run_end",
    ]);
    assert.equal(lines[2]!.completed, 2);
    assert.equal(lines[2]!.time, 1_001.1);
    assert.equal(lines[3]!.completed, 3); // the held state, flushed before the end
    assert.equal(lines[3]!.processing, 1);
    assert.equal(lines[4]!.failed, 1); // the final state
    assert.equal(lines[5]!.outcome, "incomplete");
    assert.equal(lines[5]!.exit_code, 1);
  });

  test("a task that ends is written at once, whatever the throttle", () => {
    const path = join(dir, "events.jsonl");
    const log = createEventLog(path, "p.ts", fake);
    log.runStarted?.([task("a")]);
    clock.advance(10);
    log.progress?.([
      task("a", {
        phase: "abandoned",
        ready: 0,
        orphaned: 4,
        abandonReason: { kind: "setup-failed", message: "x" },
      }),
    ]);
    const lines = readLines(path);
    assert.equal(lines.length, 2);
    assert.equal(lines[1]!.phase, "abandoned");
    assert.equal(lines[1]!.abandon_reason, "setup failed: x");
    log.close();
  });

  test("a held state is written by a timer once its window passes", () => {
    const path = join(dir, "events.jsonl");
    const log = createEventLog(path, "p.ts", { clock, throttleSeconds: 0.05 });
    log.runStarted?.([task("a")]);
    log.progress?.([task("a", { ready: 3, processing: 1 })]);
    clock.advance(49);
    assert.equal(readLines(path).length, 1);
    clock.advance(1);
    const lines = readLines(path);
    assert.deepEqual(lines.map((l) => l.event), ["run_start", "task_progress"]);
    assert.equal(lines[1]!.processing, 1);
    assert.equal(lines[1]!.time, 1_000.05);
    log.close();
  });

  test("block ids beyond 2^53 are strings; stack is null when missing", () => {
    assert.equal(blockIdJson(5), 5);
    assert.equal(blockIdJson(5n), 5);
    assert.equal(blockIdJson(2n ** 53n - 1n), Number.MAX_SAFE_INTEGER);
    assert.equal(blockIdJson(2n ** 53n), "9007199254740992");
    assert.equal(blockIdJson(2n ** 70n), (2n ** 70n).toString());

    const path = join(dir, "events.jsonl");
    const log = createEventLog(path, "p.ts", fake);
    log.blockFailed?.({
      taskId: "t",
      blockId: 2n ** 64n + 1n,
      index: [0, 0, 3],
      attempt: 3,
      message: "boom",
      permanent: true,
    });
    log.close();
    const [line] = readLines(path);
    assert.equal(line!.block_id, "18446744073709551617");
    assert.equal(line!.permanent, true);
    assert.deepEqual(line!.error, { message: "boom", stack: null });
  });

  test("interrupted runs", () => {
    const path = join(dir, "events.jsonl");
    const log = createEventLog(path, "p.ts", fake);
    log.finish(result([task("a")], { stoppedBy: "SIGTERM" }), 143);
    log.finish(result([task("a")]), 0); // ignored
    log.close();
    log.close(); // idempotent
    log.notice?.("after close"); // ignored
    const lines = readLines(path);
    assert.equal(lines.length, 2); // the task's first state, then run_end
    assert.deepEqual(
      [lines[1]!.event, lines[1]!.outcome, lines[1]!.stopped_by, lines[1]!.exit_code],
      ["run_end", "interrupted", "SIGTERM", 143],
    );
  });

  test("the file is truncated by a new run", () => {
    const path = join(dir, "events.jsonl");
    fs.writeFileSync(path, "old content\n");
    const log = createEventLog(path, "p.ts", fake);
    log.notice?.("new");
    log.close();
    assert.deepEqual(readLines(path).map((l) => l.message), ["new"]);
  });

  test("an unwritable path is refused with the path and a fix", () => {
    const file = join(dir, "plain-file");
    fs.writeFileSync(file, "");
    const underFile = join(file, "events.jsonl");
    assert.throws(() => createEventLog(underFile, "p.ts"), (error: unknown) => {
      assert.ok(error instanceof InputError, String(error));
      assert.ok(error.message.includes(underFile), error.message);
      assert.match(error.message, /--events/);
      return true;
    });
    assert.throws(() => createEventLog(dir, "p.ts"), (error: unknown) => {
      assert.ok(error instanceof InputError, String(error));
      assert.ok(error.message.includes(`"${dir}"`), error.message);
      assert.match(error.message, /directory/);
      return true;
    });
  });
});
