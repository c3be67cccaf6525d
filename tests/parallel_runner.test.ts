/**
 * runParallel against real pipeline files and real Web Workers: dependency order, retries,
 * worker crashes and restarts, block timeouts (daisy catalogue 1-3), restart caps (83/86/87
 * adapted), resource budgets (31-36), setup per worker, check functions and a large no-op run.
 * Blocks run in other threads, so they report by appending JSON lines to files in a temp dir.
 *
 * Each failure path is covered here once end to end, with no assertion on how long anything
 * took: timeouts run on an injected manual clock advanced once the block is known to run. The
 * scheduling decisions themselves (windows, fair shares, recalls, grace periods) are tested
 * deterministically with fake executors in run_loop.test.ts.
 */

import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import type { PipelineConfig } from "../lib/pipeline/spec.ts";
import {
  buildPipelineGraph,
  type ParallelRunOptions,
  runParallel,
  runSerial,
} from "../lib/execute/mod.ts";
import type { BlockFailure, RunObserver, RunResult } from "../lib/run/run_types.ts";
import type { DependencyGraph } from "../lib/graph/mod.ts";
import { InputError } from "../lib/errors.ts";
import {
  assertAllBalanced,
  countersOf,
  countLines,
  type LogLine,
  peakConcurrency,
  readLines,
  utilizationOf,
  waitUntil,
  withTimeout,
  writePipeline,
} from "./fixtures/parallel/harness.ts";
import { ManualClock } from "./fixtures/manual_clock.ts";

const newDir = scratchDirs("");

interface Run {
  readonly pipeline: PipelineConfig;
  readonly graph: DependencyGraph;
  readonly result: RunResult;
  readonly failures: BlockFailure[];
  readonly notices: string[];
}

async function load(file: string): Promise<{ pipeline: PipelineConfig; graph: DependencyGraph }> {
  const pipeline = await loadPipeline(file);
  return { pipeline, graph: buildPipelineGraph(pipeline) };
}

/** Run a pipeline file in parallel with a hang guard; counters must balance at the end. */
async function run(
  file: string,
  options: ParallelRunOptions = {},
  ms = 60_000,
  loaded?: { pipeline: PipelineConfig; graph: DependencyGraph },
): Promise<Run> {
  const { pipeline, graph } = loaded ?? await load(file);
  const failures: BlockFailure[] = [];
  const notices: string[] = [];
  const observer: RunObserver = {
    blockFailed: (f) => failures.push(f),
    notice: (m) => notices.push(m),
    progress: (tasks) => {
      for (const t of tasks) {
        const c = t.counters;
        assert.equal(
          c.ready + c.processing + c.pending + c.completed + c.failed + c.orphaned,
          c.total,
          `unbalanced during the run: ${t.id} ${JSON.stringify(c)}`,
        );
      }
    },
  };
  const result = await withTimeout(
    runParallel(pipeline, graph, { observer, ...options }),
    ms,
    `runParallel(${path.basename(file)})`,
  );
  assertAllBalanced(result);
  return { pipeline, graph, result, failures, notices };
}

/** Map each logged block to its (task index, position) in the graph. */
function positions(graph: DependencyGraph): Map<string, { task: number; position: number }> {
  const map = new Map<string, { task: number; position: number }>();
  graph.layouts.forEach((layout, t) => {
    const id = graph.dag.ids[t]!;
    for (const p of layout.allPositions()) {
      map.set(`${id}/${String(layout.blockIdOf(p))}`, { task: t, position: p });
    }
  });
  return map;
}

function attemptsOf(lines: readonly LogLine[], index0: number): number[] {
  return lines.filter((l) => l.index[0] === index0).map((l) => l.attempt).sort();
}

// A single 1-D task: `blocks` blocks of 10, no conflicts.
function linear(id: string, blocks: number, fields: string, processBody: string): string {
  return `{
    id: ${JSON.stringify(id)},
    totalRoi: { offset: [0], shape: [${blocks * 10}] },
    readRoi: { offset: [0], shape: [10] },
    writeRoi: { offset: [0], shape: [10] },
    readWriteConflict: false,
    ${fields}
    process(block, context) { ${processBody} },
  }`;
}

describe("runParallel: dependencies", () => {
  it("runs a 2-D three-task fan-in pipeline with conflicts in dependency order, like runSerial", async () => {
    const dir = newDir("order");
    const body = (file: string) =>
      `const s = now(); sleep(2); log(${JSON.stringify(file)}, block, s);`;
    const file = writePipeline(
      dir,
      `export default { tasks: [
  {
    id: "extract",
    totalRoi: { offset: [0, 0], shape: [63, 57] },
    readRoi: { offset: [-4, -4], shape: [18, 18] },
    writeRoi: { offset: [0, 0], shape: [10, 10] },
    fit: "shrink",
    maxWorkers: 2,
    process(block) { ${body("blocks")} },
  },
  {
    id: "mask",
    totalRoi: { offset: [0, 0], shape: [60, 60] },
    readRoi: { offset: [0, 0], shape: [15, 15] },
    writeRoi: { offset: [0, 0], shape: [15, 15] },
    readWriteConflict: false,
    maxWorkers: 2,
    process(block) { ${body("blocks")} },
  },
  {
    id: "merge",
    upstream: ["extract", "mask"],
    totalRoi: { offset: [0, 0], shape: [60, 60] },
    readRoi: { offset: [-3, -3], shape: [16, 16] },
    writeRoi: { offset: [0, 0], shape: [10, 10] },
    fit: "overhang",
    maxWorkers: 2,
    process(block) { ${body("blocks")} },
  },
] };
`,
    );
    const { graph, result, failures } = await run(file);
    assert.deepEqual(failures, []);
    const totals = result.tasks.map((t) => t.counters.total);
    assert.ok(totals.every((n) => n > 4), `every task has several blocks: ${totals}`);
    for (const t of result.tasks) {
      assert.equal(t.counters.phase, "done");
      assert.equal(t.counters.completed, t.counters.total, t.id);
      assert.equal(t.counters.failed + t.counters.orphaned + t.counters.skipped, 0, t.id);
    }
    assert.equal(utilizationOf(result, "extract").maxConcurrent, 2, "extract ran two workers");
    assert.equal(utilizationOf(result, "mask").maxConcurrent, 2, "mask ran two workers");

    const lines = readLines(dir, "blocks");
    const where = positions(graph);
    const byKey = new Map<string, LogLine>();
    for (const l of lines) {
      const key = `${l.task}/${l.id}`;
      assert.ok(where.has(key), `logged block ${key} is in the graph`);
      assert.ok(!byKey.has(key), `block ${key} ran once`);
      byKey.set(key, l);
    }
    assert.equal(byKey.size, totals.reduce((a, b) => a + b, 0));
    let edges = 0;
    let crossTask = 0;
    for (const [key, line] of byKey) {
      const { task, position } = where.get(key)!;
      for (const u of graph.upstreamOf(task, position)) {
        const ukey = `${graph.dag.ids[u.task]}/${String(graph.blockIdOf(u))}`;
        const up = byKey.get(ukey);
        assert.ok(up !== undefined, `upstream ${ukey} of ${key} ran`);
        assert.ok(
          up.end <= line.start,
          `${key} started at ${line.start} before its upstream ${ukey} ended at ${up.end}`,
        );
        edges++;
        if (u.task !== task) crossTask++;
      }
    }
    assert.ok(edges > 50 && crossTask > 20, `checked ${edges} edges (${crossTask} across tasks)`);

    // The same pipeline in the main thread gives the same counts.
    fs.rmSync(path.join(dir, "blocks"));
    const { pipeline: p2, graph: g2 } = await load(file);
    const serial = await withTimeout(runSerial(p2, g2), 20_000, "runSerial");
    assertAllBalanced(serial);
    assert.deepEqual(
      serial.tasks.map((t) => [t.id, t.counters.completed, t.counters.total]),
      result.tasks.map((t) => [t.id, t.counters.completed, t.counters.total]),
    );
    assert.equal(countLines(dir, "blocks"), byKey.size);
  });
});

describe("runParallel: failing blocks", () => {
  it("retries a throwing block maxRetries+1 times, fails it, orphans downstream; the worker lives on", async () => {
    const dir = newDir("throws");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${
        linear(
          "a",
          4,
          "maxWorkers: 1, maxRetries: 2,",
          `log("a", block, now()); if (block.index[0] === 1) throw new Error("bad block " + block.id);`,
        )
      },
  ${linear("b", 4, `upstream: ["a"], maxWorkers: 1,`, `log("b", block, now());`)},
] };
`,
    );
    const { result, failures } = await run(file);
    const a = countersOf(result, "a");
    const b = countersOf(result, "b");
    assert.equal(a.phase, "done");
    assert.deepEqual(
      [a.total, a.completed, a.failed, a.orphaned, a.skipped, a.failedAttempts],
      [4, 3, 1, 0, 0, 3],
    );
    assert.equal(b.phase, "done");
    assert.deepEqual([b.total, b.completed, b.failed, b.orphaned], [4, 3, 0, 1]);
    const aLines = readLines(dir, "a");
    assert.deepEqual(attemptsOf(aLines, 1), [1, 2, 3], "attempted maxRetries+1 times");
    assert.equal(aLines.length, 3 + 3);
    assert.deepEqual(readLines(dir, "b").map((l) => l.index[0]).sort(), [0, 2, 3]);
    // The worker survived every exception.
    assert.equal(utilizationOf(result, "a").restarts, 0);
    assert.equal(utilizationOf(result, "a").workersSpawned, 1);
    assert.equal(utilizationOf(result, "b").restarts, 0);
    // Reported failures: two retried attempts, then the permanent one.
    assert.deepEqual(failures.map((f) => [f.attempt, f.permanent]), [[1, false], [2, false], [
      3,
      true,
    ]]);
    assert.equal(result.failures.length, 1);
    const f = result.failures[0]!;
    assert.equal(f.taskId, "a");
    assert.deepEqual(f.index, [1]);
    assert.match(f.message, /bad block/);
    assert.ok(f.stack !== undefined && f.stack.includes("bad block"), "stack is kept");
  });

  it("a block function that always throws fails every block but never kills its worker (catalogue 87 adapted)", async () => {
    const dir = newDir("always-throws");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${
        linear(
          "bad",
          8,
          "maxWorkers: 1, maxRetries: 0, maxWorkerRestarts: 3,",
          `log("a", block, now()); throw new Error("always");`,
        )
      },
  ${linear("after", 8, `upstream: ["bad"],`, "")},
] };
`,
    );
    const { result } = await run(file);
    const bad = countersOf(result, "bad");
    assert.equal(bad.phase, "done", "not abandoned: exceptions do not spend restarts");
    assert.deepEqual([bad.completed, bad.failed, bad.orphaned], [0, 8, 0]);
    assert.equal(utilizationOf(result, "bad").restarts, 0);
    assert.equal(utilizationOf(result, "bad").workersSpawned, 1);
    assert.equal(countLines(dir, "a"), 8);
    const down = countersOf(result, "after");
    assert.deepEqual([down.completed, down.failed, down.orphaned], [0, 0, 8]);
    assert.equal(result.failures.length, 8);
  });
});

describe("runParallel: worker crashes", () => {
  it("retries the block and completes when a worker dies mid-block by process.exit(1), an uncaught async error or self.close()", async () => {
    const dir = newDir("crash");
    // One worker at a time; three blocks each kill it once, on their first attempt.
    const file = writePipeline(
      dir,
      `import process from "node:process";
export default { tasks: [
  ${
        linear(
          "a",
          7,
          `maxWorkers: 1, maxRetries: 2,
    setup() { fs.appendFileSync(DIR + "/setup", "x\\n"); return "ctx"; },`,
          `log("a", block, now(), { context });
      if (block.attempt > 1) return;
      if (block.index[0] === 1) process.exit(1);
      if (block.index[0] === 3) {
        return new Promise(() => { setTimeout(() => { throw new Error("async crash"); }, 5); });
      }
      if (block.index[0] === 5) { self.close(); return new Promise(() => {}); }`,
        )
      },
  ${linear("b", 7, `upstream: ["a"],`, `log("b", block, now());`)},
] };
`,
    );
    const { result, failures, notices } = await run(file);
    const a = countersOf(result, "a");
    assert.equal(a.phase, "done");
    assert.deepEqual([a.completed, a.failed, a.orphaned, a.failedAttempts], [7, 0, 0, 3]);
    assert.equal(countersOf(result, "b").completed, 7);
    const lines = readLines(dir, "a");
    for (const i of [1, 3, 5]) {
      // A block whose success was not yet reported when a later block killed the worker runs
      // again with the same attempt number (at least once), so attempt 2 may appear twice.
      const attempts = attemptsOf(lines, i);
      assert.equal(attempts.filter((x) => x === 1).length, 1, `block ${i}: ${attempts}`);
      assert.deepEqual([...new Set(attempts)], [1, 2], `block ${i} ran again as attempt 2`);
    }
    for (let i = 0; i < 7; i++) assert.ok(lines.some((l) => l.index[0] === i), `block ${i} ran`);
    assert.ok(lines.every((l) => l["context"] === "ctx"), "process got setup's value");
    assert.equal(utilizationOf(result, "a").restarts, 3);
    assert.equal(utilizationOf(result, "a").workersSpawned, 4);
    assert.equal(countLines(dir, "setup"), 4, "setup ran once in each worker");
    const byIndex = [...failures].sort((x, y) => x.index[0]! - y.index[0]!);
    assert.deepEqual(
      byIndex.map((f) => [f.index[0], f.attempt, f.permanent]),
      [[1, 1, false], [3, 1, false], [5, 1, false]],
    );
    assert.match(byIndex[0]!.message, /process\.exit\(1\)/);
    assert.match(byIndex[2]!.message, /self\.close\(\)/);
    for (const f of failures) {
      assert.match(f.message, /^Worker \d+ stopped while running this block/);
    }
    assert.equal(result.failures.length, 0);
    assert.equal(notices.filter((n) => /worker \d+ was terminated/.test(n)).length, 3);
  });

  it("abandons a task whose workers crash on every block once maxWorkerRestarts (2) is spent, and its downstream (catalogue 86)", async () => {
    const dir = newDir("crash-always");
    const file = writePipeline(
      dir,
      `import process from "node:process";
export default { tasks: [
  ${
        linear(
          "a",
          12,
          "maxWorkers: 2, maxRetries: 10, maxWorkerRestarts: 2,",
          `log("a", block, now()); sleep(5 * (block.index[0] % 3)); process.exit(1);`,
        )
      },
  ${linear("b", 12, `upstream: ["a"],`, `log("b", block, now());`)},
  {
    id: "good",
    totalRoi: { offset: [0], shape: [40] },
    readRoi: { offset: [0], shape: [10] },
    writeRoi: { offset: [0], shape: [10] },
    command: ["true"],
  },
] };
`,
    );
    const { result, notices } = await run(file);
    const a = countersOf(result, "a");
    assert.equal(a.phase, "abandoned");
    assert.deepEqual([a.completed, a.failed, a.orphaned, a.skipped], [0, 0, 12, 0]);
    assert.deepEqual(a.abandonReason, {
      kind: "workers-failed",
      failures: 4,
      maxWorkerRestarts: 2,
    });
    const u = utilizationOf(result, "a");
    assert.equal(u.restarts, 2);
    assert.equal(u.workersSpawned, 2 + 2);
    assert.equal(a.failedAttempts, 4, "each worker lifetime failed one attempt");
    assert.equal(countLines(dir, "a"), 4, "one attempt per worker lifetime");
    const b = countersOf(result, "b");
    assert.equal(b.phase, "abandoned");
    assert.deepEqual([b.completed, b.failed, b.orphaned], [0, 0, 12]);
    assert.deepEqual(b.abandonReason, { kind: "upstream-abandoned", upstream: "a" });
    assert.equal(countLines(dir, "b"), 0);
    assert.ok(notices.some((n) => n.includes('Task "a" abandoned')), notices.join("\n"));
    assert.ok(notices.some((n) => n.includes('Task "b" abandoned')), notices.join("\n"));
    const good = countersOf(result, "good");
    assert.deepEqual([good.phase, good.completed], ["done", 4], "an independent task completes");
  });

  it("abandons at the second identical setup failure, and after the cap when setup exits (catalogue 83 adapted)", async () => {
    const dir = newDir("setup-crash");
    const file = writePipeline(
      dir,
      `import process from "node:process";
const mark = (name) => fs.appendFileSync(DIR + "/" + name, "x\\n");
export default { tasks: [
  ${
        linear(
          "throws",
          8,
          `maxWorkers: 1, maxWorkerRestarts: 3,
    setup() { mark("setup-throws"); throw new Error("no GPU here"); },`,
          `log("ran", block, now());`,
        )
      },
  ${linear("down", 8, `upstream: ["throws"],`, "")},
  ${
        linear(
          "exits",
          4,
          `maxWorkers: 1, maxWorkerRestarts: 1,
    setup() { mark("setup-exits"); process.exit(1); },`,
          `log("ran", block, now());`,
        )
      },
] };
`,
    );
    const { result, notices } = await run(file);
    const a = countersOf(result, "throws");
    assert.equal(a.phase, "abandoned");
    assert.deepEqual([a.completed, a.failed, a.orphaned, a.failedAttempts], [0, 0, 8, 0]);
    // The same message twice before any worker started: deterministic, no third attempt.
    assert.equal(utilizationOf(result, "throws").restarts, 1);
    assert.equal(utilizationOf(result, "throws").workersSpawned, 2);
    assert.equal(countLines(dir, "setup-throws"), 2, "setup ran twice, not 4 times");
    assert.ok(
      notices.some((n) => n.includes(`Task "throws" abandoned`) && n.includes("no GPU here")),
      notices.join("\n"),
    );
    const down = countersOf(result, "down");
    assert.deepEqual([down.phase, down.orphaned], ["abandoned", 8]);
    const e = countersOf(result, "exits");
    assert.deepEqual([e.phase, e.completed, e.failed, e.orphaned], ["abandoned", 0, 0, 4]);
    assert.equal(utilizationOf(result, "exits").restarts, 1);
    assert.equal(countLines(dir, "setup-exits"), 2);
    assert.equal(countLines(dir, "ran"), 0, "no block ran");
    assert.ok(notices.some((n) => n.includes("no GPU here")), notices.join("\n"));
  });

  it("uses every restart when setup fails with different messages, or after a worker started", async () => {
    const dir = newDir("setup-flaky");
    const file = writePipeline(
      dir,
      `const mark = (name) => fs.appendFileSync(DIR + "/" + name, "x\\n");
const count = (name) => fs.existsSync(DIR + "/" + name) ? fs.readFileSync(DIR + "/" + name, "utf8").length / 2 : 0;
export default { tasks: [
  ${
        linear(
          "varies",
          4,
          `maxWorkers: 1, maxWorkerRestarts: 3,
    setup() { mark("varies"); throw new Error("GPU " + count("varies") + " busy"); },`,
          "",
        )
      },
  ${
        linear(
          "later",
          6,
          `maxWorkers: 1, maxWorkerRestarts: 3,
    setup() { mark("later"); if (count("later") > 1) throw new Error("out of licences"); },`,
          `if (block.id === 2) process.exit(3);`,
        )
      },
] };
`,
    );
    const { result } = await run(file);
    assert.equal(countersOf(result, "varies").phase, "abandoned");
    assert.equal(
      utilizationOf(result, "varies").restarts,
      3,
      "different messages: not deterministic",
    );
    assert.equal(countLines(dir, "varies"), 4);
    assert.equal(countersOf(result, "later").phase, "abandoned");
    assert.equal(
      utilizationOf(result, "later").restarts,
      3,
      "a worker of the task started once: every restart is tried",
    );
  });

  it("abandons a task whose module throws when a worker imports it", async () => {
    const dir = newDir("import-crash");
    const file = writePipeline(
      dir,
      `if (fs.existsSync(DIR + "/armed")) {
  fs.appendFileSync(DIR + "/imports", "x\\n");
  throw new Error("import crash");
}
export default { tasks: [
  ${linear("a", 4, "maxWorkers: 1, maxWorkerRestarts: 1,", `log("ran", block, now());`)},
] };
`,
    );
    const loaded = await load(file);
    fs.writeFileSync(path.join(dir, "armed"), "");
    const { result, notices } = await run(file, {}, 60_000, loaded);
    const a = countersOf(result, "a");
    assert.deepEqual([a.phase, a.completed, a.failed, a.orphaned], ["abandoned", 0, 0, 4]);
    assert.equal(utilizationOf(result, "a").restarts, 1);
    assert.equal(countLines(dir, "imports"), 2);
    assert.equal(countLines(dir, "ran"), 0);
    assert.ok(notices.some((n) => n.includes("import crash")), notices.join("\n"));
  });
});

describe("runParallel: block timeout (catalogue 1-3) on a manual clock", () => {
  // A block that runs until the test writes DIR/release (the test writes it at the end, so a
  // worker that was not terminated still ends).
  const HOLD = `while (!fs.existsSync(DIR + "/release")) sleep(10);`;
  const release = (dir: string) => fs.writeFileSync(path.join(dir, "release"), "");
  /** Health ticks come every 200 ms of run clock; the first one that sees a block starts its watch. */
  const TICK_MS = 200;

  it("terminates the worker of a block that runs past the timeout and succeeds on the retry", async () => {
    const dir = newDir("timeout1");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${
        linear(
          "slow",
          1,
          "timeout: 0.5,",
          `log("starts", block, now()); if (block.attempt === 1) { ${HOLD} }`,
        )
      },
] };
`,
    );
    const clock = new ManualClock();
    try {
      const running = run(file, { clock });
      await waitUntil(() => countLines(dir, "starts") === 1, "the first attempt to start");
      // The first tick sees the block, a later one finds it past 0.5 s.
      clock.advance(TICK_MS + 500 + TICK_MS);
      const { result, failures } = await running;
      const c = countersOf(result, "slow");
      assert.deepEqual([c.phase, c.completed, c.failed, c.failedAttempts], ["done", 1, 0, 1]);
      assert.deepEqual(readLines(dir, "starts").map((l) => l.attempt), [1, 2]);
      assert.equal(failures.length, 1);
      assert.match(failures[0]!.message, /timeout of 0\.5 s/);
      assert.equal(utilizationOf(result, "slow").restarts, 1, "the worker was replaced");
    } finally {
      release(dir);
    }
  });

  it("fails a block that is always slower than the timeout after maxRetries+1 attempts", async () => {
    const dir = newDir("timeout2");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${
        linear(
          "slow",
          1,
          "timeout: 0.2, maxRetries: 1, maxWorkerRestarts: 20,",
          `log("starts", block, now()); ${HOLD}`,
        )
      },
] };
`,
    );
    const clock = new ManualClock();
    try {
      const running = run(file, { clock });
      for (const attempt of [1, 2]) {
        await waitUntil(() => countLines(dir, "starts") === attempt, `attempt ${attempt}`);
        clock.advance(TICK_MS + 200 + TICK_MS);
      }
      const { result } = await running;
      const c = countersOf(result, "slow");
      assert.deepEqual([c.phase, c.completed, c.failed, c.orphaned], ["done", 0, 1, 0]);
      assert.deepEqual(readLines(dir, "starts").map((l) => l.attempt), [1, 2]);
      assert.equal(result.failures.length, 1);
      assert.equal(result.failures[0]!.attempt, 2);
      assert.match(result.failures[0]!.message, /timeout of 0\.2 s/);
      assert.equal(utilizationOf(result, "slow").restarts, 1, "one replacement, for the retry");
    } finally {
      release(dir);
    }
  });

  it("never ends a long block when the task has no timeout", async () => {
    const dir = newDir("timeout3");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${linear("slow", 1, "", `log("starts", block, now()); ${HOLD}`)},
] };
`,
    );
    const clock = new ManualClock();
    try {
      const running = run(file, { clock });
      await waitUntil(() => countLines(dir, "starts") === 1, "the block to start");
      clock.advance(3_600_000);
      release(dir);
      const { result } = await running;
      const c = countersOf(result, "slow");
      assert.deepEqual([c.phase, c.completed, c.failed, c.failedAttempts], ["done", 1, 0, 0]);
      assert.equal(countLines(dir, "starts"), 1);
      assert.equal(utilizationOf(result, "slow").restarts, 0);
    } finally {
      release(dir);
    }
  });
});

describe("runParallel: resources (catalogue 31-36)", () => {
  it("two independent tasks share a budget of cpu=2 (requires cpu 1, maxWorkers 4 each)", async () => {
    const dir = newDir("res33");
    const body = `const s = now(); sleep(50); log("b", block, s);`;
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${linear("a", 8, "maxWorkers: 4, requires: { cpu: 1 },", body)},
  ${linear("b", 8, "maxWorkers: 4, requires: { cpu: 1 },", body)},
] };
`,
    );
    const { result } = await run(file, { resources: { cpu: 2 } });
    assert.deepEqual(result.tasks.map((t) => [t.id, t.counters.phase, t.counters.completed]), [
      ["a", "done", 8],
      ["b", "done", 8],
    ]);
    const lines = readLines(dir, "b");
    assert.equal(lines.length, 16);
    const peak = peakConcurrency(lines);
    assert.ok(peak <= 2, `peak concurrent blocks ${peak} exceeds the budget of 2`);
    const u = result.utilization!;
    assert.ok(u.tasks.every((t) => t.maxConcurrent <= 2));
  });

  it("a chain with requires reassigns the budget when the upstream drains (catalogue 36)", async () => {
    const dir = newDir("res36");
    const body = `const s = now(); sleep(20); log("b", block, s);`;
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${linear("filter", 8, "maxWorkers: 2, requires: { cpu: 1 },", body)},
  ${linear("agglom", 8, `upstream: ["filter"], maxWorkers: 2, requires: { cpu: 1 },`, body)},
] };
`,
    );
    const { result } = await run(file, { resources: { cpu: 2 } });
    assert.deepEqual(result.tasks.map((t) => [t.counters.phase, t.counters.completed]), [
      ["done", 8],
      ["done", 8],
    ]);
    assert.ok(peakConcurrency(readLines(dir, "b")) <= 2);
    assert.ok(utilizationOf(result, "agglom").workersSpawned >= 1);
  });

  it("refuses, before running anything, a task that requires more than the budget", async () => {
    const dir = newDir("res35");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${linear("ok", 2, "", `log("b", block, now());`)},
  ${linear("greedy", 2, "requires: { gpu: 8 },", `log("b", block, now());`)},
] };
`,
    );
    const { pipeline, graph } = await load(file);
    await assert.rejects(
      withTimeout(runParallel(pipeline, graph, { resources: { gpu: 1 } }), 10_000, "run"),
      (error: unknown) => {
        assert.ok(error instanceof InputError, String(error));
        assert.match(error.message, /greedy/);
        assert.match(error.message, /gpu=8/);
        assert.match(error.message, /gpu=1/);
        return true;
      },
    );
    assert.equal(countLines(dir, "b"), 0, "no block ran");
  });
});

describe("runParallel: setup, check and scale", () => {
  it("calls setup once per worker", async () => {
    const dir = newDir("setup");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${
        linear(
          "a",
          8,
          `maxWorkers: 2,
    setup() {
      const token = String(Math.random());
      fs.appendFileSync(DIR + "/setup", JSON.stringify({ token }) + "\\n");
      return token;
    },`,
          `const s = now(); sleep(50); log("b", block, s, { token: context });`,
        )
      },
] };
`,
    );
    const { result } = await run(file);
    assert.equal(countersOf(result, "a").completed, 8);
    const u = utilizationOf(result, "a");
    const setups = readLines<{ token: string }>(dir, "setup").map((l) => l.token);
    assert.equal(setups.length, u.workersSpawned);
    assert.equal(new Set(setups).size, setups.length);
    const used = new Set(readLines(dir, "b").map((l) => String(l["token"])));
    for (const t of used) assert.ok(setups.includes(t), `block context ${t} came from a setup`);
    assert.ok(used.size >= 1 && used.size <= u.workersSpawned);
  });

  it("check: true skips (sync or async), false or a throw runs the block", async () => {
    const dir = newDir("check");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${
        linear(
          "a",
          12,
          `maxWorkers: 2,
    check(block) {
      const i = block.index[0];
      fs.appendFileSync(DIR + "/checks", JSON.stringify({ i }) + "\\n");
      if (i === 0) throw new Error("check broke");
      if (i % 3 === 0) return true;
      if (i % 3 === 1) return Promise.resolve(true);
      return new Promise((resolve) => setTimeout(() => resolve(false), 5));
    },`,
          `log("ran", block, now());`,
        )
      },
  ${linear("b", 12, `upstream: ["a"], maxWorkers: 1,`, `log("ran", block, now());`)},
] };
`,
    );
    const { result, notices } = await run(file);
    const a = countersOf(result, "a");
    assert.deepEqual([a.phase, a.completed, a.skipped, a.failed], ["done", 12, 7, 0]);
    const b = countersOf(result, "b");
    assert.deepEqual([b.completed, b.skipped], [12, 0]);
    const ran = readLines(dir, "ran");
    assert.deepEqual(
      ran.filter((l) => l.task === "a").map((l) => l.index[0]!).sort((x, y) => x - y),
      [0, 2, 5, 8, 11],
    );
    assert.equal(ran.filter((l) => l.task === "b").length, 12);
    assert.equal(countLines(dir, "checks"), 12, "check ran once per block, in the main thread");
    assert.ok(notices.some((n) => n.includes("check broke")), notices.join("\n"));
  });

  it("completes 5000 no-op 1-D blocks", async () => {
    const dir = newDir("many");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  {
    id: "noop",
    totalRoi: { offset: [0], shape: [5000] },
    readRoi: { offset: [0], shape: [1] },
    writeRoi: { offset: [0], shape: [1] },
    readWriteConflict: false,
    maxWorkers: 2,
    process() {},
  },
] };
`,
    );
    const { result } = await run(file);
    const c = countersOf(result, "noop");
    assert.deepEqual([c.phase, c.total, c.completed, c.failed], ["done", 5000, 5000, 0]);
    assert.equal(utilizationOf(result, "noop").blocks, 5000);
  });
});
