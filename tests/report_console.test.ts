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
} from "../lib/execute/run_types.ts";
import {
  type ConsoleStream,
  createRunConsole,
  EtaEstimator,
  formatBarLine,
  formatEta,
  formatFailureLine,
} from "../lib/report/console_output.ts";
import type { CounterSnapshot } from "../lib/schedule/counters.ts";

class FakeStream implements ConsoleStream {
  readonly chunks: string[] = [];
  constructor(readonly isTTY: boolean, readonly columns = 100) {}
  write(text: string): boolean {
    this.chunks.push(text);
    return true;
  }
  get text(): string {
    return this.chunks.join("");
  }
  /** The text without ANSI escape sequences. */
  get plain(): string {
    // deno-lint-ignore no-control-regex
    return this.text.replace(/\x1b(\[[0-9;?]*[A-Za-z]|[78])/g, "");
  }
}

function counters(overrides: Partial<CounterSnapshot> = {}): CounterSnapshot {
  return {
    phase: "running",
    total: 64,
    ready: 64,
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
  return { id, counters: counters(overrides), running: 0 };
}

function result(tasks: readonly TaskResult[]): RunResult {
  return { tasks, failures: [], seconds: 1, stoppedBy: null, outcome: outcomeOf(tasks, null) };
}

const failure: BlockFailure = {
  taskId: "extract",
  blockId: 12,
  index: [0, 1, 2],
  attempt: 3,
  message: "RangeError: no signal here\nsecond line of the message",
  stack:
    "RangeError: no signal here\n    at process (pipeline.ts:10:5)\n    at run (worker.ts:3:1)",
  permanent: true,
};

/**
 * Wait until `condition()` holds, polling. The console's line timer is a real interval (it takes
 * no injected timer yet), so a lines-mode test waits for what a tick prints, never for a fixed
 * time; the deadline is only a hang guard.
 */
async function printed(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Nothing printed ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A console clock that moves only when the test says so. */
function manualNow(): { now: () => number; advance(ms: number): void } {
  let t = 1_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

let dir = "";
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), "blockwise-console-"));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("ETA", () => {
  test("formatEta", () => {
    assert.equal(formatEta(0.2), "<1s");
    assert.equal(formatEta(5), "5s");
    assert.equal(formatEta(185), "3m 05s");
    assert.equal(formatEta(7620), "2h 07m");
    assert.equal(formatEta(400 * 3600), ">99h");
  });

  test("uses the recent rate, not the blocks that were done before the run", () => {
    const eta = new EtaEstimator(30_000);
    // A resumed run: 900 of 1000 blocks were skipped at once; then 10 blocks in 10 s.
    eta.add(0, 0);
    for (let i = 1; i <= 10; i++) eta.add(i * 1000, i);
    assert.equal(eta.seconds(10_000, 90), 90);
    // Nothing finished for 10 more seconds: the rate halves.
    assert.equal(eta.seconds(20_000, 90), 180);
    assert.equal(eta.seconds(20_000, 0), 0);
  });

  test("unknown until a block finishes; old samples leave the window", () => {
    const eta = new EtaEstimator(10_000);
    eta.add(0, 0);
    assert.equal(eta.seconds(5_000, 10), null);
    eta.add(1_000, 100); // a fast start
    for (let t = 2_000; t <= 60_000; t += 1_000) eta.add(t, 100 + (t - 1_000) / 1_000);
    // Over the last 10 s: 1 block per second.
    const s = eta.seconds(60_000, 10);
    assert.ok(s !== null && Math.abs(s - 10) < 1.5, String(s));
  });
});

describe("formatting", () => {
  test("failure lines carry the first line of the message only", () => {
    assert.equal(
      formatFailureLine(failure, false),
      "✗ extract/12 (0, 1, 2) failed after 3 attempts: RangeError: no signal here",
    );
    assert.equal(
      formatFailureLine({ ...failure, permanent: false, attempt: 1 }, false),
      "↻ extract/12 (0, 1, 2) attempt 1 failed, retrying: RangeError: no signal here",
    );
  });

  test("bar lines fit the terminal width", () => {
    const view = {
      id: "extract",
      counters: counters({ ready: 20, processing: 4, completed: 40, skipped: 3 }),
      eta: new EtaEstimator(),
    };
    const layout = { idWidth: 12, digits: 2 };
    for (const width of [40, 60, 80, 120, 200]) {
      const line = formatBarLine(view, layout, width, 0, false);
      assert.ok([...line].length <= width - 1, `${width}: ${line}`);
      assert.ok(line.includes("extract"), line);
    }
    const wide = formatBarLine(view, layout, 120, 0, false);
    assert.match(
      wide,
      /^▶ extract {7}█+░+ {2}40\/64 done, 4 running, 0 failed, 0 orphaned, 3 skipped, ETA \?$/,
    );
    const done = formatBarLine(
      { ...view, counters: counters({ phase: "done", ready: 0, completed: 64 }) },
      layout,
      120,
      0,
      false,
    );
    assert.match(done, /^✔ extract/);
    assert.ok(!done.includes("ETA"));
  });
});

describe("createRunConsole", () => {
  test("lines mode: a tick prints one line per changed task, never one for an unchanged task", async () => {
    const stderr = new FakeStream(false);
    const clock = manualNow();
    const run = createRunConsole({
      stderr,
      mode: "auto",
      intervalSeconds: 0.01,
      logDir: null,
      color: false,
      now: clock.now,
    });
    const progressLines = () => stderr.text.split("\n").filter((l) => l.startsWith("["));
    run.observer.runStarted?.([task("extract"), task("label", { ready: 0, pending: 64 })]);
    clock.advance(2_000);
    const extract = task("extract", { ready: 56, processing: 4, completed: 4, started: true });
    run.observer.progress?.([extract, task("label", { ready: 0, pending: 64 })]);
    await printed(() => progressLines().length > 0, "for the changed task");
    assert.match(
      progressLines()[0]!,
      /^\[2\.0s\] extract: 4\/64 done, 4 running, 0 failed, 0 orphaned, 0 skipped, ETA \S+/,
    );
    // Only label changes now: the tick that prints it must not repeat extract.
    clock.advance(1_000);
    run.observer.progress?.([extract, task("label", { ready: 60, processing: 4, started: true })]);
    await printed(() => progressLines().length > 1, "for the second change");
    run.observer.notice?.("worker 2 restarted");
    run.observer.blockFailed?.(failure);
    run.close();
    const lines = stderr.text.split("\n").filter((l) => l !== "");
    assert.equal(progressLines().length, 2, stderr.text);
    assert.match(progressLines()[1]!, /^\[3\.0s\] label: 0\/64 done, 4 running/);
    assert.ok(lines.includes("worker 2 restarted"));
    assert.ok(
      lines.includes("✗ extract/12 (0, 1, 2) failed after 3 attempts: RangeError: no signal here"),
    );
    // The first permanent failure of a task shows its stack, without repeating the message.
    assert.ok(lines.includes("    at process (pipeline.ts:10:5)"), stderr.text);
    assert.ok(!stderr.text.includes("\x1b"));
  });

  test("off mode: no progress, failures and notices still print", () => {
    const stderr = new FakeStream(true);
    const run = createRunConsole({
      stderr,
      mode: "off",
      intervalSeconds: 0.01,
      logDir: null,
      color: false,
    });
    run.observer.runStarted?.([task("extract")]);
    run.observer.progress?.([task("extract", { ready: 60, processing: 4 })]);
    run.observer.blockFailed?.(failure);
    run.observer.notice?.("a notice");
    run.observer.runFinished?.(result([task("extract")]));
    run.close();
    assert.equal(
      stderr.text,
      "✗ extract/12 (0, 1, 2) failed after 3 attempts: RangeError: no signal here\na notice\n",
    );
  });

  test("bars mode: draws bars and prints failures, notices and worker output above them", () => {
    const stderr = new FakeStream(true, 120);
    const stdout = new FakeStream(false);
    const clock = manualNow();
    const run = createRunConsole({
      stderr,
      stdout,
      mode: "bars",
      logDir: null,
      color: true,
      now: clock.now,
    });
    run.observer.runStarted?.([task("extract"), task("label", { ready: 0, pending: 64 })]);
    // Past the bars' refresh limit, so the update applies at once.
    clock.advance(1_000);
    run.observer.progress?.([
      task("extract", { ready: 40, processing: 4, completed: 20 }),
      task("label", { ready: 0, pending: 64 }),
    ]);
    run.observer.blockFailed?.(failure);
    run.observer.notice?.("task label abandoned");
    run.output("extract", 3, "stderr", "warn: low contrast\n");
    run.output("extract", 3, "stdout", "hello\n");
    // Closing draws the last frame, with what was logged since the previous one above it.
    run.close();
    run.close();
    const plain = stderr.plain;
    assert.ok(
      plain.includes("✗ extract/12 (0, 1, 2) failed after 3 attempts: RangeError: no signal here"),
      plain,
    );
    assert.ok(plain.includes("task label abandoned"), plain);
    assert.ok(plain.includes("[extract:w3] warn: low contrast"), plain);
    assert.ok(plain.includes("20/64 done, 4 running, 0 failed, 0 orphaned, 0 skipped"), plain);
    // stdout is not a terminal here: worker stdout goes straight to it.
    assert.equal(stdout.text, "[extract:w3] hello\n");
  });

  test("bars mode: the final frame shows the end states", () => {
    const stderr = new FakeStream(true, 120);
    const clock = manualNow();
    const run = createRunConsole({
      stderr,
      stdout: new FakeStream(false),
      mode: "bars",
      logDir: null,
      color: true,
      now: clock.now,
    });
    run.observer.runStarted?.([task("extract"), task("label", { ready: 0, pending: 64 })]);
    const final = [
      task("extract", { phase: "done", ready: 0, completed: 63, failed: 1 }),
      task("label", { phase: "abandoned", ready: 0, orphaned: 64 }),
    ];
    // Within the refresh limit: the update waits, and the end of the run applies it.
    run.observer.progress?.(final);
    run.observer.runFinished?.(result(final));
    run.close();
    const plain = stderr.plain;
    assert.ok(plain.includes("✗ extract"), plain);
    assert.ok(plain.includes("∅ label"), plain);
    assert.ok(plain.includes("63/64 done"), plain);
  });

  test("worker output: prefixes and partial lines per worker and stream", () => {
    const stderr = new FakeStream(false);
    const stdout = new FakeStream(false);
    const run = createRunConsole({ stderr, stdout, mode: "lines", logDir: null, color: false });
    run.output("extract", 1, "stdout", "one\ntw");
    run.output("extract", 2, "stdout", "other worker\n");
    run.output("extract", 1, "stderr", "err ");
    run.output("extract", 1, "stdout", "o\r\nthree");
    assert.equal(stdout.text, "[extract:w1] one\n[extract:w2] other worker\n[extract:w1] two\n");
    assert.equal(stderr.text, "");
    run.output("extract", 1, "stderr", "line\n");
    assert.equal(stderr.text, "[extract:w1] err line\n");
    run.close();
    assert.equal(
      stdout.text,
      "[extract:w1] one\n[extract:w2] other worker\n[extract:w1] two\n[extract:w1] three\n",
    );
  });

  test("log dir: output goes to per-worker files, announced once", () => {
    const stderr = new FakeStream(false);
    const stdout = new FakeStream(false);
    const logDir = join(dir, "logs");
    fs.mkdirSync(join(logDir, "extract"), { recursive: true });
    fs.writeFileSync(join(logDir, "extract", "worker_0.out"), "earlier\n");
    const run = createRunConsole({ stderr, stdout, mode: "lines", logDir, color: false });
    run.output("extract", 0, "stdout", "a\npartial");
    run.output("extract", 0, "stderr", "oops\n");
    run.output("label", 5, "stdout", "b\n");
    run.close();
    assert.equal(stdout.text, "");
    const announcements = stderr.text.split("\n").filter((l) => l !== "");
    assert.equal(announcements.length, 1, stderr.text);
    assert.ok(announcements[0]!.includes(logDir), announcements[0]);
    assert.equal(
      fs.readFileSync(join(logDir, "extract", "worker_0.out"), "utf8"),
      "earlier\na\npartial",
    );
    assert.equal(fs.readFileSync(join(logDir, "extract", "worker_0.err"), "utf8"), "oops\n");
    assert.equal(fs.readFileSync(join(logDir, "label", "worker_5.out"), "utf8"), "b\n");
  });
});
