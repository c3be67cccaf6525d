/**
 * Resuming through the real CLI (`bun main.ts run PIPELINE --tracking-dir DIR`): a run stopped
 * early or ended with failures resumes with only the remaining blocks, a fully resumed run
 * dispatches nothing, `failures` counts every failed attempt across runs, resource figures land
 * in their arrays, one writer per store (and stale locks taken over), per-task paths and
 * `tracking: false`, the "resumed" notice, `runs.jsonl`, and `--serial`.
 *
 * Blocks run in worker threads of the child process, so they report by appending
 * `task id index` lines to a log file whose path is written into the generated pipeline.
 */

import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { readRunRecords } from "../lib/tracking/runs_log.ts";
import {
  cellOf,
  clearLog,
  type CliResult,
  deadPid,
  describeRun,
  doneCells,
  keysOf,
  readBigUint64,
  readFloat32,
  readFloat64,
  readLog,
  readUint32,
  readUint8,
  runArgs,
  runCli,
  type RunningCli,
  runRecords,
  startCli,
  waitFor,
  writePipeline,
} from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("resume-");

/** The grid every task here uses: total [0,0]+[60,50] in [10,10] blocks, 6x5 = 30 blocks. */
const SHAPE = [6, 5] as const;
const BLOCKS = 30;
const ALL_CELLS = Array.from({ length: BLOCKS }, (_, i) => i);

function task(id: string, body: string, extra = ""): string {
  return `{ id: ${JSON.stringify(id)}, totalRoi: { offset: [0, 0], shape: [60, 50] },
    readRoi: { offset: [0, 0], shape: [10, 10] }, writeRoi: { offset: [0, 0], shape: [10, 10] },
    ${extra} process(block) { ${body} } }`;
}

function pipeline(dir: string, log: string, tasks: readonly string[], name = "pipeline"): string {
  return writePipeline(dir, name, log, `export default { tasks: [\n${tasks.join(",\n")}\n] };\n`);
}

function expectExit(r: CliResult, code: number): void {
  assert.equal(r.code, code, describeRun(r));
}

/**
 * The run stopped on SIGINT and exited 130. Deno's node:child_process reports an exit status
 * above 128 as a signal (code null, signal SIGINT), so the summary's last line is checked too.
 */
function expectInterrupted(r: CliResult): void {
  assert.ok(
    r.code === 130 || (r.code === null && r.signal === "SIGINT"),
    `expected exit 130: ${describeRun(r)}`,
  );
  // The verdict, then where the ledger is (the summary's last lines).
  assert.match(r.stderr, /: exit 130\n\ntracking {2}.+\n*$/);
}

/**
 * SIGINT a run whose blocks hold until `release` exists; release them once the run has taken
 * the signal (so the blocks running finish and nothing new starts).
 */
async function interruptHeld(run: RunningCli, release: string): Promise<void> {
  run.child.kill("SIGINT");
  try {
    await waitFor(() => run.stderr().includes("Received SIGINT"), "the run to take the signal");
  } finally {
    fs.writeFileSync(release, "");
  }
}

/** Cells (tracking grid) of the logged blocks of `taskId`, sorted and deduplicated. */
function loggedCells(log: string, taskId: string): number[] {
  const cells = new Set(
    readLog(log).filter((b) => b.task === taskId).map((b) => cellOf(b.index, SHAPE)),
  );
  return [...cells].sort((a, b) => a - b);
}

function without(all: readonly number[], some: readonly number[]): number[] {
  const s = new Set(some);
  return all.filter((c) => !s.has(c));
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

interface BlockCounts {
  total: number;
  completed: number;
  skipped: number;
  failed: number;
  orphaned: number;
}

function blocksOf(record: Record<string, unknown>): BlockCounts {
  return record["blocks"] as BlockCounts;
}

/** Cells failing while the flag exists: a diagonal pattern over the 6x5 grid. */
const FAILING = ALL_CELLS.filter((c) => (Math.floor(c / 5) + (c % 5)) % 4 === 0);
const FAIL_IF_FLAGGED = (flag: string) =>
  `logBlock(block);
   if (fs.existsSync(${JSON.stringify(flag)}) && (block.index[0] + block.index[1]) % 4 === 0) {
     throw new Error("flagged block " + block.index.join(","));
   }`;

describe("resume after a partial run", () => {
  it(
    "a run stopped by SIGINT resumes with only the blocks it did not finish",
    { timeout: 60_000 },
    async () => {
      const dir = newDir("sigint");
      const log = path.join(dir, "blocks.log");
      const release = path.join(dir, "release");
      // Once four blocks are logged, every block holds (running) until the test releases it:
      // the run is certainly unfinished when the signal comes, however fast the machine.
      const file = pipeline(dir, log, [
        task(
          "a",
          `const logged = fs.existsSync(LOG) ? fs.readFileSync(LOG, "utf8").split("\\n").length - 1 : 0;
          if (logged >= 4) while (!fs.existsSync(${JSON.stringify(release)})) sleep(10);
          logBlock(block);`,
          "maxWorkers: 2,",
        ),
      ]);
      const tracking = path.join(dir, "tracking");
      const store = path.join(tracking, "a");

      const first = startCli(runArgs(file, tracking));
      await waitFor(() => readLog(log).length >= 4, "four blocks to finish");
      await interruptHeld(first, release);
      const r1 = await first.result;
      expectInterrupted(r1);
      // The signal's message says which command resumes: the same one, with the tracking dir.
      assert.match(
        r1.stderr,
        new RegExp(
          `finishing blocks in flight, then stopping .*\n` +
            `To resume \\(done blocks are skipped\\): blockwise run ${
              escape(file)
            } --tracking-dir ${escape(tracking)}\n`,
        ),
      );
      const ranFirst = loggedCells(log, "a");
      assert.ok(ranFirst.length < BLOCKS, `the run was stopped early (${ranFirst.length} blocks)`);
      // Blocks in flight at the signal finish and are recorded; nothing else is marked done.
      assert.deepEqual(doneCells(readUint8(store, "done")), ranFirst);
      assert.equal(fs.existsSync(path.join(store, "blockwise.lock")), false, "lock released");

      clearLog(log);
      const r2 = await runCli(runArgs(file, tracking));
      expectExit(r2, 0);
      const k = ranFirst.length;
      assert.deepEqual(loggedCells(log, "a"), without(ALL_CELLS, ranFirst));
      assert.equal(readLog(log).length, BLOCKS - k, "no block ran twice");
      assert.deepEqual(doneCells(readUint8(store, "done")), ALL_CELLS);
      assert.match(
        r2.stderr,
        new RegExp(`Task "a": resumed, ${k}/${BLOCKS} blocks already done in ${escape(store)}`),
      );
      assert.match(r2.stderr, /task\s+blocks\s+completed\s+skipped\s+failed\s+orphaned/);
      assert.match(r2.stderr, new RegExp(`All ${BLOCKS} blocks completed \\(${k} skipped\\)`));

      const records = runRecords(store);
      assert.equal(records.length, 2);
      assert.equal(records[0]!["outcome"], "interrupted");
      assert.equal(records[0]!["stopped_by"], "SIGINT");
      assert.equal(records[0]!["exit_code"], 130);
      assert.equal(blocksOf(records[0]!).completed, k);
      assert.equal(records[1]!["outcome"], "complete");
      assert.equal(records[1]!["done_at_start"], k);
      assert.deepEqual(blocksOf(records[1]!), {
        total: BLOCKS,
        completed: BLOCKS,
        skipped: k,
        failed: 0,
        orphaned: 0,
        failed_attempts: 0,
      });
    },
  );
});

describe("resume after failures", () => {
  it(
    "reruns only failed and orphaned blocks, keeps counting failed attempts, and a fully resumed run dispatches nothing",
    { timeout: 60_000 },
    async () => {
      const dir = newDir("failures");
      const log = path.join(dir, "blocks.log");
      const flag = path.join(dir, "flag");
      fs.writeFileSync(flag, "");
      const file = pipeline(dir, log, [
        task("a", FAIL_IF_FLAGGED(flag), "maxWorkers: 2, maxRetries: 1,"),
        task("b", "logBlock(block);", `upstream: ["a"], maxWorkers: 2,`),
      ]);
      const tracking = path.join(dir, "tracking");
      const storeA = path.join(tracking, "a");
      const storeB = path.join(tracking, "b");
      const ok = without(ALL_CELLS, FAILING);
      const failuresAt = (store: string) => Array.from(readUint32(store, "failures"));
      const expectFailures = (n: number) => ALL_CELLS.map((c) => FAILING.includes(c) ? n : 0);

      // Run 1: the flagged blocks fail both attempts; b's blocks over them are orphaned.
      const r1 = await runCli(runArgs(file, tracking));
      expectExit(r1, 1);
      assert.deepEqual(doneCells(readUint8(storeA, "done")), ok);
      assert.deepEqual(doneCells(readUint8(storeB, "done")), ok);
      assert.deepEqual(failuresAt(storeA), expectFailures(2));
      assert.deepEqual(failuresAt(storeB), expectFailures(0));
      assert.doesNotMatch(r1.stderr, /resumed/);

      // Run 2, still flagged: only a's failed blocks run (twice each); orphans stay orphaned.
      clearLog(log);
      const r2 = await runCli(runArgs(file, tracking));
      expectExit(r2, 1);
      assert.deepEqual(loggedCells(log, "a"), FAILING);
      assert.equal(readLog(log).length, 2 * FAILING.length);
      assert.deepEqual(loggedCells(log, "b"), []);
      assert.deepEqual(failuresAt(storeA), expectFailures(4), "failures are kept across runs");
      assert.deepEqual(doneCells(readUint8(storeA, "done")), ok);
      assert.match(r2.stderr, new RegExp(`Task "a": resumed, ${ok.length}/${BLOCKS} blocks`));
      assert.match(r2.stderr, new RegExp(`Task "b": resumed, ${ok.length}/${BLOCKS} blocks`));

      // Run 3, fixed: exactly the failed and the orphaned blocks run, once each.
      fs.rmSync(flag);
      clearLog(log);
      const r3 = await runCli(runArgs(file, tracking));
      expectExit(r3, 0);
      assert.deepEqual(loggedCells(log, "a"), FAILING);
      assert.deepEqual(loggedCells(log, "b"), FAILING);
      assert.equal(readLog(log).length, 2 * FAILING.length);
      assert.deepEqual(doneCells(readUint8(storeA, "done")), ALL_CELLS);
      assert.deepEqual(doneCells(readUint8(storeB, "done")), ALL_CELLS);
      assert.deepEqual(failuresAt(storeA), expectFailures(4), "a success does not reset failures");
      assert.match(
        r3.stderr,
        new RegExp(`All ${2 * BLOCKS} blocks completed \\(${2 * ok.length} skipped\\)`),
      );

      // Run 4: everything is done; no block is dispatched and no worker starts.
      clearLog(log);
      const r4 = await runCli(runArgs(file, tracking));
      expectExit(r4, 0);
      assert.deepEqual(readLog(log), []);
      assert.match(
        r4.stderr,
        new RegExp(`All ${2 * BLOCKS} blocks completed \\(${2 * BLOCKS} skipped\\)`),
      );
      assert.match(r4.stderr, new RegExp(`Task "a": resumed, ${BLOCKS}/${BLOCKS} blocks`));

      // runs.jsonl: one "run" line per run with that run's counters.
      const a = runRecords(storeA);
      const b = runRecords(storeB);
      assert.deepEqual(a.map((r) => r["kind"]), ["run", "run", "run", "run"]);
      assert.deepEqual(b.map((r) => r["kind"]), ["run", "run", "run", "run"]);
      assert.deepEqual(a.map((r) => r["exit_code"]), [1, 1, 0, 0]);
      assert.deepEqual(a.map((r) => r["task"]), ["a", "a", "a", "a"]);
      assert.equal(new Set(a.map((r) => r["run_id"])).size, 4);
      assert.deepEqual(a.map((r) => r["run_id"]), b.map((r) => r["run_id"]), "same run, same id");
      const f = FAILING.length;
      assert.deepEqual(a.map(blocksOf), [
        {
          total: 30,
          completed: 30 - f,
          skipped: 0,
          failed: f,
          orphaned: 0,
          failed_attempts: 2 * f,
        },
        {
          total: 30,
          completed: 30 - f,
          skipped: 30 - f,
          failed: f,
          orphaned: 0,
          failed_attempts: 2 * f,
        },
        { total: 30, completed: 30, skipped: 30 - f, failed: 0, orphaned: 0, failed_attempts: 0 },
        { total: 30, completed: 30, skipped: 30, failed: 0, orphaned: 0, failed_attempts: 0 },
      ]);
      assert.deepEqual(b.map(blocksOf), [
        { total: 30, completed: 30 - f, skipped: 0, failed: 0, orphaned: f, failed_attempts: 0 },
        {
          total: 30,
          completed: 30 - f,
          skipped: 30 - f,
          failed: 0,
          orphaned: f,
          failed_attempts: 0,
        },
        { total: 30, completed: 30, skipped: 30 - f, failed: 0, orphaned: 0, failed_attempts: 0 },
        { total: 30, completed: 30, skipped: 30, failed: 0, orphaned: 0, failed_attempts: 0 },
      ]);
      assert.deepEqual(a.map((r) => r["outcome"]), [
        "incomplete",
        "incomplete",
        "complete",
        "complete",
      ]);
      const last = a[3]!;
      // How fast a fully resumed run is, is bench/'s business; here: it starts nothing.
      assert.deepEqual(last["workers"], [], "the fully resumed run started no worker");
    },
  );
});

describe("resource tracking", () => {
  it("fills wall_seconds, worker_id, sent_at and returned_at for every done block", {
    timeout: 60_000,
  }, async () => {
    const dir = newDir("resources");
    const log = path.join(dir, "blocks.log");
    const file = pipeline(dir, log, [
      task("a", "sleep(3); logBlock(block);", "maxWorkers: 2,"),
    ]);
    const tracking = path.join(dir, "tracking");
    const store = path.join(tracking, "a");
    const r = await runCli(runArgs(file, tracking, ["--resource-tracking"]));
    expectExit(r, 0);
    assert.deepEqual(doneCells(readUint8(store, "done")), ALL_CELLS);
    const wall = readFloat32(store, "wall_seconds");
    const cpu = readFloat32(store, "cpu_seconds");
    const rss = readBigUint64(store, "peak_rss_bytes");
    const worker = readUint32(store, "worker_id");
    const sent = readFloat64(store, "sent_at");
    const returned = readFloat64(store, "returned_at");
    const finished = readFloat64(store, "finished_at");
    const gpu = readFloat32(store, "gpu_util_pct");
    const record = runRecords(store)[0]!;
    const workers = new Set(
      (record["workers"] as { workerId: number }[]).map((w) => w.workerId),
    );
    assert.ok(workers.size >= 1 && workers.size <= 2, `workers ${[...workers]}`);
    const t0 = r.startedAt / 1000;
    const t1 = r.endedAt / 1000;
    for (const c of ALL_CELLS) {
      // Within the run's own span: a consistency check, not a bound on how long blocks take.
      assert.ok(wall[c]! > 0 && wall[c]! <= t1 - t0, `wall_seconds[${c}] = ${wall[c]}`);
      assert.ok(Number.isFinite(cpu[c]) && cpu[c]! >= 0, `cpu_seconds[${c}] = ${cpu[c]}`);
      assert.ok(rss[c]! > 0n, `peak_rss_bytes[${c}] = ${rss[c]}`);
      assert.ok(workers.has(worker[c]!), `worker_id[${c}] = ${worker[c]}`);
      assert.ok(sent[c]! <= returned[c]!, `sent_at[${c}] <= returned_at[${c}]`);
      // The worker's clock, the same machine's: it ran between being sent and returned.
      const slack = 0.005;
      assert.ok(
        finished[c]! - wall[c]! >= sent[c]! - slack && finished[c]! <= returned[c]! + slack,
        `cell ${c}: ran ${finished[c]! - wall[c]!}..${finished[c]}, sent ${sent[c]}, returned ${
          returned[c]
        }`,
      );
      assert.ok(sent[c]! >= t0 && returned[c]! <= t1, `cell ${c} within the run's time window`);
      assert.ok(Number.isNaN(gpu[c]), "a task without GPUs reads no utilisation (NaN)");
    }
  });
});

describe("one writer per store", () => {
  it("refuses a second run on the same tracking dir with exit 3, naming the pid and host", {
    timeout: 60_000,
  }, async () => {
    const dir = newDir("concurrent");
    const log = path.join(dir, "blocks.log");
    const release = path.join(dir, "release");
    // The first run's block holds until the test releases it: that run certainly still holds
    // the store when the second one starts.
    const hold = `logBlock(block); while (!fs.existsSync(${JSON.stringify(release)})) sleep(10);`;
    const file = pipeline(dir, log, [task("a", hold, "maxWorkers: 1,")]);
    const tracking = path.join(dir, "tracking");
    const store = path.join(tracking, "a");
    const first = startCli(runArgs(file, tracking));
    try {
      await waitFor(() => readLog(log).length >= 1, "the first run to start a block");
      const before = readUint8(store, "done");
      const second = await runCli(runArgs(file, tracking));
      expectExit(second, 3);
      assert.match(
        second.stderr,
        new RegExp(`in use by another run: pid ${first.pid} on host ${escape(os.hostname())}`),
      );
      assert.match(second.stderr, new RegExp(escape(store)));
      assert.ok(readUint8(store, "done").every((v, i) => v >= before[i]!), "nothing undone");
    } finally {
      await interruptHeld(first, release);
    }
    const r1 = await first.result;
    expectInterrupted(r1);
    assert.equal(fs.existsSync(path.join(store, "blockwise.lock")), false);
    const records = runRecords(store);
    assert.equal(records.length, 1, "the refused run appended no record");
    assert.equal(records[0]!["pid"], first.pid);
  });

  it("takes over a stale lock left by a dead process on this host, with a notice", {
    timeout: 60_000,
  }, async () => {
    const dir = newDir("stale");
    const log = path.join(dir, "blocks.log");
    const flag = path.join(dir, "flag");
    fs.writeFileSync(flag, "");
    const file = pipeline(dir, log, [task("a", FAIL_IF_FLAGGED(flag), "maxRetries: 0,")]);
    const tracking = path.join(dir, "tracking");
    const store = path.join(tracking, "a");
    expectExit(await runCli(runArgs(file, tracking)), 1);
    fs.rmSync(flag);

    const pid = await deadPid();
    const lock = path.join(store, "blockwise.lock");
    fs.writeFileSync(
      lock,
      JSON.stringify({
        pid,
        host: os.hostname(),
        started_at: new Date().toISOString(),
        command: "blockwise run (killed)",
      }) + "\n",
    );
    clearLog(log);
    const r = await runCli(runArgs(file, tracking));
    expectExit(r, 0);
    assert.match(
      r.stderr,
      new RegExp(
        `Took over a stale lock on ${escape(store)} left by pid ${pid} on host ${
          escape(os.hostname())
        }`,
      ),
    );
    assert.deepEqual(loggedCells(log, "a"), FAILING);
    assert.deepEqual(doneCells(readUint8(store, "done")), ALL_CELLS);
    assert.equal(fs.existsSync(lock), false, "the taken-over lock is released at the end");
  });
});

describe("where stores live", () => {
  it(
    "a per-task tracking path (relative to the pipeline file) and tracking: false override --tracking-dir",
    { timeout: 60_000 },
    async () => {
      const dir = newDir("paths");
      const pipelineDir = path.join(dir, "pipelines");
      const cwd = path.join(dir, "elsewhere");
      fs.mkdirSync(pipelineDir);
      fs.mkdirSync(cwd);
      const log = path.join(dir, "blocks.log");
      const file = pipeline(pipelineDir, log, [
        task("own", "logBlock(block);", `tracking: "stores/own-store",`),
        task("off", "logBlock(block);", "tracking: false,"),
        task("dflt", "logBlock(block);"),
      ]);
      const tracking = path.join(dir, "tracking");
      const own = path.join(pipelineDir, "stores", "own-store");

      const r1 = await runCli(runArgs(file, tracking), { cwd });
      expectExit(r1, 0);
      assert.ok(fs.existsSync(path.join(own, "zarr.json")), "own store beside the pipeline file");
      assert.deepEqual(fs.readdirSync(tracking), ["dflt"], "no folder for own or off");
      assert.deepEqual(fs.readdirSync(cwd), [], "nothing relative to the working directory");
      assert.deepEqual(doneCells(readUint8(own, "done")), ALL_CELLS);
      assert.deepEqual(doneCells(readUint8(path.join(tracking, "dflt"), "done")), ALL_CELLS);

      clearLog(log);
      const r2 = await runCli(runArgs(file, tracking), { cwd });
      expectExit(r2, 0);
      assert.deepEqual(keysOf(readLog(log)), keysOf(readLog(log), "off"));
      assert.deepEqual(loggedCells(log, "off"), ALL_CELLS, "the untracked task reruns everything");
      assert.match(
        r2.stderr,
        new RegExp(
          `Task "own": resumed, ${BLOCKS}/${BLOCKS} blocks already done in ${escape(own)}`,
        ),
      );
      assert.doesNotMatch(r2.stderr, /Task "off": resumed/);

      // Without --tracking-dir only the task with its own path is tracked.
      clearLog(log);
      const r3 = await runCli(runArgs(file, null), { cwd });
      expectExit(r3, 0);
      assert.deepEqual(loggedCells(log, "own"), []);
      assert.deepEqual(loggedCells(log, "off"), ALL_CELLS);
      assert.deepEqual(loggedCells(log, "dflt"), ALL_CELLS);
      assert.equal(runRecords(own).length, 3);
      assert.equal(runRecords(path.join(tracking, "dflt")).length, 2);
    },
  );

  it(
    "a changed block size is refused with exit 3 and the rm -rf hint, leaving the store as it was",
    { timeout: 60_000 },
    async () => {
      const dir = newDir("mismatch");
      const log = path.join(dir, "blocks.log");
      const tracking = path.join(dir, "tracking");
      const store = path.join(tracking, "a");
      const first = pipeline(dir, log, [task("a", "logBlock(block);")], "v1");
      expectExit(await runCli(runArgs(first, tracking)), 0);
      const done = readUint8(store, "done");
      const changed = writePipeline(
        dir,
        "v2",
        log,
        `export default { tasks: [{ id: "a", totalRoi: { offset: [0, 0], shape: [60, 50] },
        readRoi: { offset: [0, 0], shape: [5, 5] }, writeRoi: { offset: [0, 0], shape: [5, 5] },
        process(block) { logBlock(block); } }] };\n`,
      );
      clearLog(log);
      const r = await runCli(runArgs(changed, tracking));
      expectExit(r, 3);
      assert.match(r.stderr, new RegExp(`rm -rf ${escape(store)}`));
      assert.match(r.stderr, /write shape \(block stride\) changed from \(10, 10\) to \(5, 5\)/);
      assert.deepEqual(readLog(log), [], "no block ran");
      assert.deepEqual(readUint8(store, "done"), done);
      assert.equal(runRecords(store).length, 1);
      assert.equal(fs.existsSync(path.join(store, "blockwise.lock")), false);
    },
  );
});

describe("an unusable tracking path", () => {
  /** Exit 3 with one sentence naming `target` and a fix; no internal error, no block ran. */
  function refusedCleanly(r: CliResult, log: string, target: string, why: RegExp): void {
    expectExit(r, 3);
    assert.doesNotMatch(r.stderr, /internal error|\n\s+at /, "no stack trace");
    assert.match(r.stderr, new RegExp(`^error: .*${escape(target)}`, "m"));
    assert.match(r.stderr, why);
    assert.deepEqual(readLog(log), [], "no block ran");
  }

  it("--tracking-dir that is a file, or below a file, is refused with exit 3", async () => {
    const dir = newDir("file-dir");
    const log = path.join(dir, "blocks.log");
    const file = pipeline(dir, log, [task("a", "logBlock(block);")]);
    const plain = path.join(dir, "notes.txt");
    fs.writeFileSync(plain, "keep me\n");
    refusedCleanly(
      await runCli(runArgs(file, plain)),
      log,
      plain,
      /as the tracking directory \(--tracking-dir\): .*notes\.txt is a file, not a folder\. Choose a folder/,
    );
    const below = path.join(plain, "tracking");
    refusedCleanly(
      await runCli(runArgs(file, below)),
      log,
      below,
      /notes\.txt, above it, is a file, not a folder/,
    );
    assert.equal(fs.readFileSync(plain, "utf8"), "keep me\n");
  });

  it("a task's own tracking path below a file is refused with exit 3", async () => {
    const dir = newDir("file-own");
    const log = path.join(dir, "blocks.log");
    fs.writeFileSync(path.join(dir, "stores"), "a file where a folder should be\n");
    const file = pipeline(dir, log, [task("a", "logBlock(block);", `tracking: "stores/a",`)]);
    refusedCleanly(
      await runCli(runArgs(file, null)),
      log,
      path.join(dir, "stores"),
      /as the folder of tracking store a: .*stores is a file, not a folder/,
    );
  });

  it("--tracking-dir where this user may not create folders is refused with exit 3", async () => {
    const dir = newDir("readonly");
    const log = path.join(dir, "blocks.log");
    const file = pipeline(dir, log, [task("a", "logBlock(block);")]);
    // As root a read-only mode does not stop writes; /sys refuses new folders to everyone
    // (EPERM, or EROFS where it is mounted read-only).
    const root = process.getuid?.() === 0;
    const parent = root ? "/sys" : path.join(dir, "locked");
    if (!root) fs.mkdirSync(parent, { mode: 0o555 });
    const target = path.join(parent, `blockwise-test-${process.pid}`, "tracking");
    refusedCleanly(
      await runCli(runArgs(file, target)),
      log,
      target,
      /Cannot create the tracking directory \(--tracking-dir\) .*: (permission denied \((EACCES|EPERM)\)|the file system .* is read-only \(EROFS\))/,
    );
    assert.equal(fs.existsSync(target), false);
  });
});

describe("runs.jsonl", () => {
  it(
    "a torn last line is ignored and the next run appends cleanly after it",
    { timeout: 60_000 },
    async () => {
      const dir = newDir("torn");
      const log = path.join(dir, "blocks.log");
      const file = pipeline(dir, log, [task("a", "logBlock(block);")]);
      const tracking = path.join(dir, "tracking");
      const store = path.join(tracking, "a");
      expectExit(await runCli(runArgs(file, tracking)), 0);
      const runsLog = path.join(store, "runs.jsonl");
      const torn = `{"kind":"run","run_id":"torn","task":"a","blo`;
      fs.appendFileSync(runsLog, torn);
      const r = await runCli(runArgs(file, tracking));
      expectExit(r, 0);
      const lines = fs.readFileSync(runsLog, "utf8").split("\n");
      assert.equal(lines.length, 4, "two records, the torn fragment, and the final newline");
      assert.equal(lines[1], torn, "the fragment stays a line of its own");
      assert.equal(lines[3], "");
      const record = JSON.parse(lines[2]!) as Record<string, unknown>;
      assert.equal(record["kind"], "run");
      assert.equal(blocksOf(record).skipped, BLOCKS);
      const parsed = readRunRecords(store);
      assert.equal(parsed.tornLines, 1);
      assert.equal(parsed.records.length, 2);
      expectExit(await runCli(runArgs(file, tracking)), 0);
      assert.equal(readRunRecords(store).records.length, 3);
    },
  );
});

describe("serial mode", () => {
  it("--serial records done blocks and resumes after failures", { timeout: 60_000 }, async () => {
    const dir = newDir("serial");
    const log = path.join(dir, "blocks.log");
    const flag = path.join(dir, "flag");
    fs.writeFileSync(flag, "");
    const file = pipeline(dir, log, [
      task("a", FAIL_IF_FLAGGED(flag), "maxRetries: 1,"),
      task("b", "logBlock(block);", `upstream: ["a"],`),
    ]);
    const tracking = path.join(dir, "tracking");
    const ok = without(ALL_CELLS, FAILING);
    const r1 = await runCli(runArgs(file, tracking, ["--serial"]));
    expectExit(r1, 1);
    assert.deepEqual(doneCells(readUint8(path.join(tracking, "a"), "done")), ok);
    assert.deepEqual(doneCells(readUint8(path.join(tracking, "b"), "done")), ok);
    assert.deepEqual(
      Array.from(readUint32(path.join(tracking, "a"), "failures")),
      ALL_CELLS.map((c) => (FAILING.includes(c) ? 2 : 0)),
    );

    fs.rmSync(flag);
    clearLog(log);
    const r2 = await runCli(runArgs(file, tracking, ["--serial"]));
    expectExit(r2, 0);
    assert.deepEqual(loggedCells(log, "a"), FAILING);
    assert.deepEqual(loggedCells(log, "b"), FAILING);
    assert.equal(readLog(log).length, 2 * FAILING.length);
    assert.match(r2.stderr, new RegExp(`Task "a": resumed, ${ok.length}/${BLOCKS} blocks`));
    assert.match(
      r2.stderr,
      new RegExp(`All ${2 * BLOCKS} blocks completed \\(${2 * ok.length} skipped\\)`),
    );

    clearLog(log);
    const r3 = await runCli(runArgs(file, tracking, ["--serial"]));
    expectExit(r3, 0);
    assert.deepEqual(readLog(log), []);
    assert.equal(runRecords(path.join(tracking, "a")).length, 3);
  });
});
