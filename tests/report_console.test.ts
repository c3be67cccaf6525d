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
  type TemporaryStats,
} from "../lib/run/run_types.ts";
import {
  type ConsoleStream,
  type ConsoleTimers,
  createRunConsole,
} from "../lib/report/console_output.ts";
import {
  EtaEstimator,
  formatBarLine,
  formatEta,
  formatFailureLine,
} from "../lib/report/progress_format.ts";
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
  const c = counters(overrides);
  return { id, counters: c, running: c.processing };
}

/** What a temporary task reports: 1.5 MB on disk now, 3 MB at most so far. */
const TEMPORARY: TemporaryStats = {
  liveBlocks: 3,
  liveBytes: 1.5 * 2 ** 20,
  peakBytes: 3 * 2 ** 20,
  deletedBlocks: 10,
  deletedBytes: 5 * 2 ** 20,
  regenerated: 0,
  removing: 0,
};

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

/** A clock and timers the test moves by hand: `advance(ms)` runs what falls due, in order. */
class ManualTime implements ConsoleTimers {
  now = 0;
  #next = 0;
  readonly #timers = new Map<number, { at: number; every: number | null; run: () => void }>();

  readonly clock = (): number => this.now;

  every(ms: number, run: () => void): () => void {
    return this.#add(ms, ms, run);
  }

  after(ms: number, run: () => void): () => void {
    return this.#add(ms, null, run);
  }

  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      let due: [number, { at: number; every: number | null; run: () => void }] | null = null;
      for (const entry of this.#timers) {
        if (entry[1].at <= end && (due === null || entry[1].at < due[1].at)) due = entry;
      }
      if (due === null) break;
      const [id, timer] = due;
      this.now = timer.at;
      if (timer.every === null) this.#timers.delete(id);
      else timer.at += timer.every;
      timer.run();
    }
    this.now = end;
  }

  #add(ms: number, every: number | null, run: () => void): () => void {
    const id = this.#next++;
    this.#timers.set(id, { at: this.now + ms, every, run });
    return () => this.#timers.delete(id);
  }
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
    // Nothing finished for 10 more seconds: 9 blocks since the first one, in 19 s.
    assert.equal(eta.seconds(20_000, 90), 190);
    assert.equal(eta.seconds(20_000, 0), 0);
  });

  test("measures from the first finished block: start-up and waiting do not count", () => {
    // A short run: workers need 2 s to start, then finish 10 blocks per second.
    const startup = new EtaEstimator(30_000);
    startup.add(0, 0);
    for (let i = 1; i <= 10; i++) startup.add(2_000 + 100 * i, i);
    assert.equal(startup.seconds(3_000, 90), 9);
    // A downstream task that waited 20 s for its upstream, then ran 4 blocks per second.
    const downstream = new EtaEstimator(30_000);
    downstream.add(0, 0);
    for (let i = 1; i <= 9; i++) downstream.add(20_000 + 250 * i, i);
    assert.equal(downstream.seconds(22_250, 40), 10);
  });

  test("a bar's ETA follows the measured rate (injected clock)", () => {
    const eta = new EtaEstimator();
    eta.add(0, 0);
    eta.add(5_000, 8);
    eta.add(6_000, 16);
    const view = { id: "extract", counters: counters({ ready: 48, completed: 16 }), eta };
    const line = formatBarLine(view, { idWidth: 7, digits: 2 }, 120, 6_000, false);
    assert.ok(line.endsWith("ETA 6s"), line);
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

describe("temporary bytes in the progress", () => {
  test("a bar shows the live and peak bytes of a temporary task, and every bar keeps room", () => {
    const view = {
      id: "affs",
      counters: counters({ ready: 20, processing: 4, completed: 40 }),
      eta: new EtaEstimator(),
      temporary: TEMPORARY,
    };
    const layout = { idWidth: 8, digits: 2, temporary: true };
    const wide = formatBarLine(view, layout, 160, 0, false);
    assert.match(
      wide,
      /^▶ affs {6}█+░+ {2}40\/64 done, 4 running, 0 failed, 0 orphaned, 0 skipped, temporary 1\.5 MB live \(peak 3\.0 MB\), ETA \?$/,
    );
    const narrow = formatBarLine(view, layout, 80, 0, false);
    assert.match(narrow, / tmp 1\.5 MB↑3\.0 MB ETA \?$/);
    for (const width of [40, 60, 80, 120, 200]) {
      const line = formatBarLine(view, layout, width, 0, false);
      assert.ok([...line].length <= width - 1, `${width}: ${line}`);
    }
    // A task that is not temporary shows no bytes, and its bar is as long as the other's.
    const { temporary: _, ...notTemporary } = view;
    const plain = formatBarLine({ ...notTemporary, id: "seg" }, layout, 160, 0, false);
    assert.doesNotMatch(plain, /temporary|tmp/);
    const bar = (line: string) => line.match(/[█░]+/)![0].length;
    assert.equal(bar(plain), bar(wide));
  });

  test("the plain progress line shows them, and prints again when only they change", () => {
    const stderr = new FakeStream(false);
    const time = new ManualTime();
    const run = createRunConsole({
      stderr,
      mode: "lines",
      intervalSeconds: 0.1,
      logDir: null,
      color: false,
      now: time.clock,
      timers: time,
    });
    const affs = (temporary: TemporaryStats) => ({
      ...task("affs", { ready: 56, processing: 4, completed: 4, started: true }),
      temporary,
    });
    run.observer.runStarted?.([task("affs")]);
    run.observer.progress?.([affs(TEMPORARY)]);
    time.advance(100);
    run.observer.progress?.([affs({ ...TEMPORARY, liveBytes: 512 })]);
    time.advance(100);
    run.close();
    const lines = stderr.text.split("\n").filter((l) => l.startsWith("["));
    assert.deepEqual(lines, [
      "[0.1s] affs: 4/64 done, 4 running, 0 failed, 0 orphaned, 0 skipped, temporary 1.5 MB live (peak 3.0 MB), ETA unknown",
      "[0.2s] affs: 4/64 done, 4 running, 0 failed, 0 orphaned, 0 skipped, temporary 512 B live (peak 3.0 MB), ETA unknown",
    ]);
  });

  test("bars mode draws them on the temporary task's bar", () => {
    const stderr = new FakeStream(true, 160);
    const time = new ManualTime();
    const run = createRunConsole({
      stderr,
      stdout: new FakeStream(false),
      mode: "bars",
      logDir: null,
      color: false,
      now: time.clock,
      timers: time,
    });
    run.observer.runStarted?.([{ ...task("affs"), temporary: { ...TEMPORARY, liveBytes: 0 } }]);
    time.advance(150);
    run.observer.progress?.([{
      ...task("affs", { ready: 40, processing: 4, completed: 20 }),
      temporary: TEMPORARY,
    }]);
    time.advance(150);
    run.close();
    assert.ok(stderr.plain.includes("temporary 1.5 MB live (peak 3.0 MB)"), stderr.plain);
  });
});

describe("createRunConsole", () => {
  test("lines mode: one line per changed task every interval", () => {
    const stderr = new FakeStream(false);
    const time = new ManualTime();
    const run = createRunConsole({
      stderr,
      mode: "auto",
      intervalSeconds: 0.03,
      logDir: null,
      color: false,
      now: time.clock,
      timers: time,
    });
    run.observer.runStarted?.([task("extract"), task("label", { ready: 0, pending: 64 })]);
    time.advance(150);
    run.observer.progress?.([
      task("extract", { ready: 56, processing: 4, completed: 4, started: true }),
      task("label", { ready: 0, pending: 64 }),
    ]);
    time.advance(200);
    run.observer.notice?.("worker 2 restarted");
    run.observer.blockFailed?.(failure);
    run.close();
    const lines = stderr.text.split("\n").filter((l) => l !== "");
    const progressLines = lines.filter((l) => l.startsWith("["));
    // Printed once: later ticks see no change; the unchanged task never prints.
    assert.equal(progressLines.length, 1, stderr.text);
    assert.equal(
      progressLines[0]!,
      "[0.2s] extract: 4/64 done, 4 running, 0 failed, 0 orphaned, 0 skipped, ETA unknown",
    );
    assert.ok(lines.includes("worker 2 restarted"));
    assert.ok(
      lines.includes("✗ extract/12 (0, 1, 2) failed after 3 attempts: RangeError: no signal here"),
    );
    // The first permanent failure of a task shows the rest of its message and its stack,
    // without repeating the message.
    assert.ok(lines.includes("    second line of the message"), stderr.text);
    assert.ok(lines.includes("    at process (pipeline.ts:10:5)"), stderr.text);
    assert.equal(lines.filter((l) => l.includes("no signal here")).length, 1, stderr.text);
    assert.ok(!stderr.text.includes("\x1b"));
  });

  test("off mode: no progress; failures (the first with its stack) and notices still print", () => {
    const stderr = new FakeStream(true);
    const time = new ManualTime();
    const run = createRunConsole({
      stderr,
      mode: "off",
      intervalSeconds: 0.01,
      logDir: null,
      color: false,
      now: time.clock,
      timers: time,
    });
    run.observer.runStarted?.([task("extract")]);
    run.observer.progress?.([task("extract", { ready: 60, processing: 4 })]);
    run.observer.blockFailed?.(failure);
    run.observer.blockFailed?.({ ...failure, blockId: 13 });
    run.observer.notice?.("a notice");
    time.advance(50);
    run.observer.runFinished?.(result([task("extract")]));
    run.close();
    assert.equal(
      stderr.text,
      "✗ extract/12 (0, 1, 2) failed after 3 attempts: RangeError: no signal here\n" +
        "    second line of the message\n" +
        // --no-progress keeps where the block failed (issue 48).
        "    at process (pipeline.ts:10:5)\n" +
        "    at run (worker.ts:3:1)\n" +
        // The same error again: named once, not repeated (lib/report/failure_groups.ts).
        "✗ extract/13 (0, 1, 2) failed after 3 attempts: same error as extract/12\n" +
        "a notice\n",
    );
  });

  test("a failed command block shows the last lines of its stderr under the failure", () => {
    const stderr = new FakeStream(false);
    const run = createRunConsole({ stderr, mode: "off", logDir: null, color: false });
    const command: BlockFailure = {
      taskId: "export",
      blockId: 3,
      index: [3],
      attempt: 1,
      message:
        'Command ["sh","-c","convert"] exited with status 2\nlast lines of its stderr:\nconvert: no such file\nhint: check the input',
      permanent: true,
    };
    run.observer.blockFailed?.({ ...command, permanent: false });
    run.observer.blockFailed?.(command);
    run.close();
    assert.equal(
      stderr.text,
      '↻ export/3 (3) attempt 1 failed, retrying: Command ["sh","-c","convert"] exited with status 2\n' +
        '✗ export/3 (3) failed after 1 attempt: Command ["sh","-c","convert"] exited with status 2\n' +
        "    last lines of its stderr:\n" +
        "    convert: no such file\n" +
        "    hint: check the input\n",
    );
  });

  test("bars mode: draws bars and prints failures and notices above them", () => {
    const stderr = new FakeStream(true, 120);
    const stdout = new FakeStream(false);
    const time = new ManualTime();
    const run = createRunConsole({
      stderr,
      stdout,
      mode: "bars",
      logDir: null,
      color: true,
      now: time.clock,
      timers: time,
    });
    run.observer.runStarted?.([task("extract"), task("label", { ready: 0, pending: 64 })]);
    time.advance(150);
    run.observer.progress?.([
      task("extract", { ready: 40, processing: 4, completed: 20 }),
      task("label", { ready: 0, pending: 64 }),
    ]);
    run.observer.blockFailed?.(failure);
    run.observer.notice?.("task label abandoned");
    run.output("extract", 3, "stderr", "warn: low contrast\n");
    run.output("extract", 3, "stdout", "hello\n");
    time.advance(150);
    const final = [
      task("extract", { phase: "done", ready: 0, completed: 63, failed: 1 }),
      task("label", { phase: "abandoned", ready: 0, orphaned: 64 }),
    ];
    run.observer.progress?.(final);
    run.observer.runFinished?.(result(final));
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
    // The final frame shows the end states.
    assert.ok(plain.includes("✗ extract"), plain);
    assert.ok(plain.includes("∅ label"), plain);
    assert.ok(plain.includes("63/64 done"), plain);
    // stdout is not a terminal here: worker stdout goes straight to it.
    assert.equal(stdout.text, "[extract:w3] hello\n");
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
