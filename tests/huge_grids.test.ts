/**
 * Huge grids (issue 12 item 4): the start of a run and `status` stream the stores window by
 * window and must give the counts a block-by-block reading gives (odd shapes, block grids
 * shifted inside their tracking grids, windows that cut runs of blocks anywhere); a resume runs
 * exactly the blocks that are not done; and a signal during the start (opening the stores,
 * counting the done markers of a billion-cell store) ends the run with 130 or 143, the lock
 * released and the store as it was.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { buildPipelineGraph, ParallelRun } from "../lib/execute/mod.ts";
import { loadPipeline, validatePipeline } from "../lib/pipeline/mod.ts";
import { FakeExecutorFactory } from "./fixtures/fake_executor.ts";
import { ManualClock } from "./fixtures/manual_clock.ts";
import { linearTask } from "./fixtures/run_rig.ts";
import { ReadyQueue, RING_FIRST } from "../lib/schedule/ready_queue.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import { forEachBlockRun, RunWindows } from "../lib/tracking/block_runs.ts";
import { streamBlockRuns } from "../lib/tracking/chunk_reads.ts";
import { scanDoneMarkers } from "../lib/tracking/done_scan.ts";
import { BLOCK_DONE, BLOCK_FAILED, GridMap, renderGridMap } from "../lib/tracking/grid_map.ts";
import { inspectStore } from "../lib/tracking/inspect.ts";
import { TrackingStore } from "../lib/tracking/store.ts";
import { readStoreMetadata } from "../lib/tracking/store_metadata.ts";
import {
  chunkPath,
  describeRun,
  keysOf,
  readLog,
  removeDir,
  runArgs,
  runCli,
  runRecords,
  startCli,
  tempDir,
  waitFor,
  writePipeline,
} from "./fixtures/tracking/harness.ts";

const root = tempDir("blockwise-huge-");
after(() => removeDir(root));

/** A layout of `blocks` blocks per axis of `write` cells, `before`/`after` context per axis. */
function layoutOf(
  blocks: readonly number[],
  write: readonly number[],
  before: readonly number[],
  extra: readonly number[] = blocks.map(() => 0),
): TaskLayout {
  const after = before.map((b) => b + 1);
  return new TaskLayout({
    totalRoi: makeRoi(
      blocks.map(() => 0),
      blocks.map((b, d) => b * write[d]! + before[d]! + after[d]! + extra[d]!),
    ),
    readRoi: makeRoi(blocks.map(() => 0), write.map((w, d) => w + before[d]! + after[d]!)),
    writeRoi: makeRoi(before, write),
    fit: "valid",
    readWriteConflict: true,
  });
}

/** Odd layouts: block grid equal to the tracking grid (one run), or shifted inside it. */
const LAYOUTS: readonly TaskLayout[] = [
  layoutOf([37], [1], [0]),
  layoutOf([5, 7], [2, 3], [2, 4], [1, 0]),
  layoutOf([3, 4, 5], [1, 1, 1], [1, 1, 1]),
  layoutOf([2, 3, 2, 3], [2, 1, 2, 1], [0, 1, 2, 0], [1, 1, 0, 0]),
];

/** Deterministic noise. */
function noise(i: number, salt: number): number {
  const x = Math.sin(i * 12.9898 + salt * 78.233) * 43758.5453;
  return x - Math.floor(x);
}

/** A store of `layout` with pseudo-random done marks and failure counts. */
async function makeStore(
  name: string,
  layout: TaskLayout,
  salt: number,
): Promise<{ dir: string; done: Uint8Array; failures: Uint32Array }> {
  const dir = path.join(root, name);
  const store = await TrackingStore.open(dir, { taskId: name, layout, resourceTracking: false });
  for (let c = 0; c < layout.trackingCellCount; c++) {
    const r = noise(c, salt);
    if (r < 0.6) store.done[c] = 1;
    else if (r < 0.7) store.done[c] = 7; // not 1: not done
    if (noise(c, salt + 1) < 0.3) store.failures[c] = 1 + Math.floor(noise(c, salt + 2) * 5);
  }
  store.flush();
  const done = store.done.slice();
  const failures = store.failures.slice();
  store.close();
  return { dir, done, failures };
}

/** Counts read block by block (the reading every windowed one must agree with). */
function bruteForce(layout: TaskLayout, done: Uint8Array, failures: Uint32Array) {
  let blocks = 0;
  let nDone = 0;
  let failed = 0;
  let attempts = 0;
  const notDone: number[] = [];
  const states = new Uint8Array(layout.blockCount);
  for (let p = 0; p < layout.blockCount; p++) {
    const cell = layout.trackingCellOf(p);
    if (cell < 0) continue;
    blocks++;
    attempts += failures[cell]!;
    if (done[cell] === 1) {
      nDone++;
      states[p] = BLOCK_DONE;
      continue;
    }
    notDone.push(p);
    if (failures[cell]! > 0) {
      failed++;
      states[p] = BLOCK_FAILED;
    }
  }
  return { blocks, done: nDone, failed, attempts, notDone, states };
}

describe("windowed reads of a store", () => {
  it("RunWindows cuts the block runs along any windows exactly as forEachBlockRun visits them", () => {
    for (const layout of LAYOUTS) {
      const expected: string[] = [];
      forEachBlockRun(layout, (position, cell, length) => {
        for (let i = 0; i < length; i++) expected.push(`${position + i}@${cell + i}`);
      });
      for (const window of [1, 2, 3, 5, 7, 64, layout.trackingCellCount]) {
        const runs = new RunWindows(layout);
        const got: string[] = [];
        for (let first = 0; first < layout.trackingCellCount; first += window) {
          const n = Math.min(window, layout.trackingCellCount - first);
          runs.visit(first, n, (position, offset, length) => {
            assert.ok(offset >= 0 && offset + length <= n, "a run part stays in its window");
            for (let i = 0; i < length; i++) got.push(`${position + i}@${first + offset + i}`);
          });
        }
        assert.deepEqual(got, expected, `grid ${layout.gridShape}, window ${window}`);
      }
    }
  });

  it("scanDoneMarkers counts and lists like a block-by-block reading, from the file or memory", async () => {
    for (const [i, layout] of LAYOUTS.entries()) {
      const { dir, done, failures } = await makeStore(`scan${i}`, layout, i);
      const truth = bruteForce(layout, done, failures);
      const keep = (p: number) => p % 3 !== 1;
      for (const windowCells of [1, 4, 9, 1 << 22]) {
        for (const source of [{ file: chunkPath(dir, "done") }, { array: done }]) {
          let pauses = 0;
          const scan = await scanDoneMarkers(source, layout, {
            keep,
            windowCells,
            pause: () => {
              pauses++;
              return Promise.resolve();
            },
          });
          assert.equal(scan.blocks, truth.blocks);
          assert.equal(scan.done, truth.done);
          const kept = truth.notDone.filter(keep);
          assert.deepEqual([...scan.kept!], kept);
          assert.equal(scan.keptCount, kept.length);
          assert.equal(pauses, Math.ceil(layout.trackingCellCount / windowCells) - 1);
          const counted = await scanDoneMarkers(source, layout, { windowCells });
          assert.deepEqual([counted.done, counted.kept], [truth.done, null], "counting only");
        }
      }
      const limited = await scanDoneMarkers({ array: done }, layout, { keep, limit: 2 });
      assert.equal(limited.kept, null, "past the limit nothing is listed");
      assert.ok(limited.keptCount > 2, "the count goes past the limit");
      await assert.rejects(
        scanDoneMarkers({ array: done }, layout, {
          windowCells: 2,
          pause: () => Promise.reject(new Error("stop")),
        }),
        /stop/,
        "a pause that throws stops the scan",
      );
    }
  });

  it("streamBlockRuns, inspectStore and the --map agree with a block-by-block reading", async () => {
    for (const [i, layout] of LAYOUTS.entries()) {
      const { dir, done, failures } = await makeStore(`status${i}`, layout, 10 + i);
      const truth = bruteForce(layout, done, failures);
      const meta = readStoreMetadata(dir);
      for (const windowCells of [1, 2, 5, 11]) {
        let nDone = 0;
        let failed = 0;
        let attempts = 0;
        const seen: number[] = [];
        const map = new GridMap(layout.gridShape, { width: 30, color: false, maxRows: 7 });
        const blocks = streamBlockRuns(meta, (position, length, d, f, offset) => {
          for (let k = 0; k < length; k++) {
            seen.push(position + k);
            attempts += f[offset + k]!;
            if (d[offset + k] === 1) nDone++;
            else if (f[offset + k]! > 0) failed++;
          }
          map.addRun(position, length, d, f, offset);
        }, windowCells);
        assert.deepEqual(
          [blocks, nDone, failed, attempts],
          [truth.blocks, truth.done, truth.failed, truth.attempts],
        );
        assert.equal(new Set(seen).size, truth.blocks, "every block with a cell, once");
        assert.equal(
          map.render(),
          renderGridMap({ block_grid_shape: layout.gridShape, states: truth.states }, {
            width: 30,
            color: false,
            maxRows: 7,
          }),
        );
      }
      const report = inspectStore(dir);
      assert.deepEqual(
        [report.blocks, report.done, report.failed, report.failed_attempts, report.pending],
        [
          truth.blocks,
          truth.done,
          truth.failed,
          truth.attempts,
          truth.blocks - truth.done - truth.failed,
        ],
      );
    }
  });

  it("inspectStore agrees with a block-by-block reading over several of its windows", async () => {
    // 1031 x 1237 cells (more than one 2^20-cell window), the block grid shifted inside.
    const layout = layoutOf([1029, 1235], [1, 1], [1, 1]);
    assert.ok(layout.trackingCellCount > 1 << 20);
    const { dir, done, failures } = await makeStore("big", layout, 99);
    const truth = bruteForce(layout, done, failures);
    const report = inspectStore(dir);
    assert.deepEqual(
      [report.blocks, report.done, report.failed, report.failed_attempts],
      [truth.blocks, truth.done, truth.failed, truth.attempts],
    );
  });
});

/** A 2-D pipeline a -> b with conflicts, odd sizes; every block logs itself. */
function resumePipeline(dir: string, log: string): string {
  return writePipeline(
    dir,
    "resume",
    log,
    `const task = (id, upstream) => ({
  id, upstream,
  totalRoi: { offset: [0, 0], shape: [${13 * 2 + 2}, ${9 * 3 + 2}] },
  readRoi: { offset: [0, 0], shape: [4, 5] },
  writeRoi: { offset: [1, 1], shape: [2, 3] },
  readWriteConflict: true,
  maxWorkers: 2,
  process(block) { logBlock(block); },
});
export default { tasks: [task("a", []), task("b", ["a"])] };
`,
  );
}

describe("resume of stores with most blocks done", () => {
  for (const serial of [false, true]) {
    it(`runs exactly the blocks that are not done, and the counters balance${serial ? " (--serial)" : ""}`, async () => {
      const dir = path.join(root, `resume-${serial}`);
      fs.mkdirSync(dir, { recursive: true });
      const log = path.join(dir, "blocks.log");
      const file = resumePipeline(dir, log);
      const tracking = path.join(dir, "tracking");
      const extra = serial ? ["--serial"] : [];
      const first = await runCli(runArgs(file, tracking, extra));
      assert.equal(first.code, 0, describeRun(first));
      const all = readLog(log);
      assert.equal(all.length, 2 * 13 * 9);
      // Clear the done marks of a few blocks of each task, done blocks downstream of them kept.
      const layouts = buildPipelineGraph(await loadPipeline(file)).layouts;
      const cleared: string[] = [];
      for (const [t, task] of ["a", "b"].entries()) {
        const layout = layouts[t]!;
        const chunk = chunkPath(path.join(tracking, task), "done");
        const done = new Uint8Array(fs.readFileSync(chunk));
        for (const p of task === "a" ? [0, 50, layout.blockCount - 1] : [37, 50]) {
          const cell = layout.trackingCellOf(p);
          assert.equal(done[cell], 1);
          done[cell] = 0;
          cleared.push(`${task}/${layout.gridIndexOf(p).join(",")}`);
        }
        fs.writeFileSync(chunk, done);
      }
      fs.rmSync(log);
      const again = await runCli(runArgs(file, tracking, extra));
      assert.equal(again.code, 0, describeRun(again));
      const ran = readLog(log).map((b) => `${b.task}/${b.index.join(",")}`).sort();
      assert.deepEqual(ran, cleared.sort(), "only the blocks without a done mark ran");
      assert.equal(keysOf(readLog(log)).length, 5);
      for (const task of ["a", "b"]) {
        const store = path.join(tracking, task);
        const record = runRecords(store).at(-1)!;
        const blocks = record["blocks"] as Record<string, number>;
        const pending = task === "a" ? 3 : 2;
        assert.deepEqual(
          [blocks["total"], blocks["completed"], blocks["skipped"], record["done_at_start"]],
          [13 * 9, 13 * 9, 13 * 9 - pending, 13 * 9 - pending],
        );
        assert.equal(inspectStore(store).done, 13 * 9);
      }
    });
  }
});

/** A store of a 1-D grid of 1e9 blocks (sparse files), and a pipeline that matches it. */
async function hugeStore(name: string): Promise<{ file: string; tracking: string; store: string }> {
  const dir = path.join(root, name);
  fs.mkdirSync(dir, { recursive: true });
  const blocks = 1_000_000_000;
  const file = path.join(dir, "huge.mjs");
  fs.writeFileSync(
    file,
    `export default { tasks: [{
  id: "huge",
  totalRoi: { offset: [0], shape: [${blocks + 2}] },
  readRoi: { offset: [0], shape: [3] },
  writeRoi: { offset: [1], shape: [1] },
  readWriteConflict: true,
  maxWorkers: 1,
  process() {},
}] };
`,
  );
  const tracking = path.join(dir, "tracking");
  const store = path.join(tracking, "huge");
  const layout = buildPipelineGraph(await loadPipeline(file)).layouts[0]!;
  assert.equal(layout.blockCount, blocks);
  // Made here, so the run finds an existing store: it must count its done markers.
  (await TrackingStore.open(store, { taskId: "huge", layout, resourceTracking: false })).close();
  return { file, tracking, store };
}

describe("signals while a huge run starts", () => {
  for (
    const [signal, code, phase] of [
      ["SIGINT", 130, "Opening tracking stores (1,000,000,000 blocks)"],
      ["SIGTERM", 143, "Resuming: checking the done markers of 1,000,000,000 blocks"],
    ] as const
  ) {
    it(`${signal} after "${phase.split(" (")[0]}..." ends the run with ${code}, the lock released and the store as it was`, async () => {
      const { file, tracking, store } = await hugeStore(`signal-${signal}`);
      const running = startCli(runArgs(file, tracking));
      await waitFor(() => running.stderr().includes(phase), `"${phase}" on stderr`, 60_000);
      // process.kill, not child.kill: Deno's child.kill reports the signal, not the exit code.
      process.kill(running.pid, signal);
      const r = await running.result;
      // Deno's node:child_process reports an exit status above 128 as the signal.
      assert.ok(r.code === code || (r.code === null && r.signal === signal), describeRun(r));
      // Counting a billion done markers takes a while: the signal lands before the run loop.
      assert.match(
        r.stderr,
        new RegExp(`Received ${signal} while (opening tracking stores|checking done markers)`),
      );
      assert.match(
        r.stderr,
        new RegExp(`Stopped by ${signal} before any block ran; the tracking stores are closed`),
      );
      assert.ok(!fs.existsSync(path.join(store, "blockwise.lock")), "the lock is released");
      const record = runRecords(store).at(-1)!;
      assert.deepEqual(
        [record["outcome"], record["stopped_by"], record["exit_code"], record["done_at_start"]],
        ["interrupted", signal, code, null],
      );
      readStoreMetadata(store); // the validator accepts it
    });
  }
});

describe("skipping done blocks one by one", () => {
  it("lets timers and signal handlers run between turns of skipping", async () => {
    const pipeline = validatePipeline({ tasks: [linearTask("a", 1_000_000)] }, "/huge/p.ts");
    const fakes = new FakeExecutorFactory();
    const run = new ParallelRun(pipeline, buildPipelineGraph(pipeline), {
      executorFactory: fakes.factory,
      clock: new ManualClock(),
      precheck: () => () => "done",
    });
    let finished = false;
    let turns = 0;
    const timer = setInterval(() => {
      if (!finished) turns++;
    }, 0);
    const running = run.start();
    // Blocks are pre-checked as an executor asks for them: the first one is ready.
    fakes.made[0]!.becomeReady();
    const result = await running;
    finished = true;
    clearInterval(timer);
    assert.equal(result.tasks[0]!.counters.skipped, 1_000_000);
    assert.ok(
      turns >= 2,
      `the event loop turned ${turns} times while a million blocks were skipped`,
    );
  });
});

describe("the ready queue of a huge first run", () => {
  it("serves released blocks before more initial ones once RING_FIRST of them wait", () => {
    const queue = new ReadyQueue([1_000_000, 1_000_001, 1_000_002], 3);
    assert.equal(queue.shift(), 1_000_000, "initial blocks first (daisy's order)");
    for (let p = 0; p < RING_FIRST; p++) queue.push(p);
    assert.equal(queue.shift(), 0, "a full ring goes first");
    assert.equal(queue.shift(), 1_000_001, "below RING_FIRST again: initial blocks");
    assert.equal(queue.length, RING_FIRST);
  });
});
