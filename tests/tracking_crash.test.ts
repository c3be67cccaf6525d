/**
 * The crash test: `blockwise run --tracking-dir` is SIGKILLed again and again at random moments
 * (seeded PRNG) while ~2000 blocks over two tasks write their outputs. After every kill the done
 * arrays, read raw from the chunk files, may only mark blocks whose output exists (a block is
 * never marked done that did not succeed), and the next run must take the dead run's lock over
 * by itself. A last run without a kill completes everything, and its done arrays equal those of
 * an uninterrupted run in a separate folder.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import type { LockStep } from "../lib/tracking/lock.ts";
import {
  type CliResult,
  delay,
  describeRun,
  prng,
  readChunk,
  readUint32,
  removeDir,
  runArgs,
  runCli,
  startCli,
  startFixture,
  tempDir,
  waitFor,
  writePipeline,
} from "./fixtures/tracking/harness.ts";

const KILLS = 15;
const SEED = 0x5eed_b10c;

const STOP_FIXTURE = fileURLToPath(
  new URL("./fixtures/tracking/stop_in_lock.ts", import.meta.url),
);
const root = tempDir("tracking-crash");
after(() => removeDir(root));

/** Task "a": 40x25 blocks of 1x1 (2-D, chunk c/0/0); task "b": 1000 blocks of 1 (1-D, c/0). */
const LAYOUTS: Readonly<Record<string, TaskLayout>> = {
  a: new TaskLayout({
    totalRoi: makeRoi([0, 0], [40, 25]),
    readRoi: makeRoi([0, 0], [1, 1]),
    writeRoi: makeRoi([0, 0], [1, 1]),
    fit: "valid",
    readWriteConflict: false,
  }),
  b: new TaskLayout({
    totalRoi: makeRoi([0], [1000]),
    readRoi: makeRoi([0], [1]),
    writeRoi: makeRoi([0], [1]),
    fit: "valid",
    readWriteConflict: false,
  }),
};
const TASKS = Object.keys(LAYOUTS);
const TOTAL = TASKS.reduce((n, t) => n + LAYOUTS[t]!.blockCount, 0);

/**
 * A pipeline whose blocks take 1-3 ms and write `<out>/<task>-<blockId>` through a temporary
 * name and a rename, so the file exists only once process() is about to return.
 */
function crashPipeline(dir: string, out: string): string {
  fs.mkdirSync(out, { recursive: true });
  const body = `const OUT = ${JSON.stringify(out)};
function work(block) {
  sleep(1 + (Number(block.id) % 3));
  const final = OUT + "/" + block.taskId + "-" + String(block.id);
  const tmp = final + ".tmp-" + Math.random().toString(36).slice(2);
  fs.writeFileSync(tmp, String(block.index));
  fs.renameSync(tmp, final);
}
export default { tasks: [
  { id: "a", totalRoi: { offset: [0, 0], shape: [40, 25] }, readRoi: { offset: [0, 0], shape: [1, 1] },
    writeRoi: { offset: [0, 0], shape: [1, 1] }, readWriteConflict: false, maxWorkers: 1, process: work },
  { id: "b", totalRoi: { offset: [0], shape: [1000] }, readRoi: { offset: [0], shape: [1] },
    writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false, maxWorkers: 1, process: work },
] };
`;
  return writePipeline(dir, path.basename(out), path.join(dir, "unused.log"), body);
}

/** Output files present (temporaries left by a kill excluded). */
function outputs(out: string): Set<string> {
  return new Set(fs.readdirSync(out).filter((n) => !n.includes(".tmp-")));
}

/** The raw done chunk of a task's store, or null when the store does not exist yet. */
function rawDone(tracking: string, task: string): Uint8Array | null {
  const store = path.join(tracking, task);
  if (!fs.existsSync(path.join(store, "zarr.json"))) return null;
  const dims = LAYOUTS[task]!.dims;
  const chunk = path.join(store, "done", "c", ...new Array<string>(dims).fill("0"));
  return new Uint8Array(fs.readFileSync(chunk));
}

interface Check {
  readonly done: number;
}

/** Every block marked done has its output; done bytes are 0 or 1; no failure was counted. */
function checkInvariant(tracking: string, out: string, when: string): Check {
  const files = outputs(out);
  let done = 0;
  for (const task of TASKS) {
    const layout = LAYOUTS[task]!;
    const bytes = rawDone(tracking, task);
    if (bytes === null) continue;
    assert.equal(bytes.length, layout.trackingCellCount, `${when}: ${task} done chunk size`);
    for (let p = 0; p < layout.blockCount; p++) {
      const cell = layout.trackingCellOf(p);
      const v = bytes[cell]!;
      assert.ok(v === 0 || v === 1, `${when}: ${task} done[${cell}] = ${v}`);
      if (v === 1) {
        done++;
        const name = `${task}-${String(layout.blockIdOf(p))}`;
        if (!files.has(name)) {
          assert.fail(`${when}: block ${name} (cell ${cell}) is marked done but has no output`);
        }
      }
    }
    const failures = readUint32(path.join(tracking, task), "failures");
    assert.ok(failures.every((f) => f === 0), `${when}: ${task} counted a failure`);
  }
  return { done };
}

function lockOf(tracking: string, task: string): { pid: number } | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(tracking, task, "blockwise.lock"), "utf8")) as {
      pid: number;
    };
  } catch {
    return null;
  }
}

describe("crash safety", () => {
  it(`SIGKILLed ${KILLS} times, the store never marks a block done that did not succeed`, {
    timeout: 120_000,
  }, async (t) => {
    const dir = path.join(root, "killed");
    fs.mkdirSync(dir);
    const out = path.join(dir, "out");
    const tracking = path.join(dir, "tracking");
    const file = crashPipeline(dir, out);
    const random = prng(SEED);

    let killedMidRun = 0;
    let finishedBeforeKill = 0;
    let takeovers = 0;
    let previous = 0;
    for (let i = 0; i < KILLS; i++) {
      const staleBefore = TASKS.filter((task) => lockOf(tracking, task) !== null);
      const filesBefore = outputs(out).size;
      // Every third run writes through the fs fallback: it loses marks since its last flush
      // when killed, but must never mark more than the mmap adapter would.
      const io = i % 3 === 1 ? ["--tracking-io", "fs"] : [];
      const run = startCli(runArgs(file, tracking, io));
      // The last kill waits for the run to hold both locks and dispatch, so the final run is
      // sure to find stale locks of a dead run.
      if (i === KILLS - 1 && previous < TOTAL) {
        let exited = false;
        void run.result.then(() => (exited = true), () => (exited = true));
        await waitFor(
          () =>
            exited ||
            (TASKS.every((task) => lockOf(tracking, task)?.pid === run.pid) &&
              outputs(out).size > filesBefore),
          "the last killed run to lock its stores and process a block",
        );
      } else if (i % 2 === 0) {
        // Every other kill lands once the run makes progress, however slowly it started (a
        // loaded machine can take longer to start a run than the random delays below).
        let exited = false;
        void run.result.then(() => (exited = true), () => (exited = true));
        await waitFor(
          () => exited || outputs(out).size > filesBefore,
          "the run to process a block",
        );
        await delay(Math.floor(random() * 150));
      } else {
        await delay(30 + Math.floor(random() * 400));
      }
      run.child.kill("SIGKILL");
      const r: CliResult = await run.result;
      const when = `after kill ${i + 1}`;
      if (r.signal === "SIGKILL") {
        // Killed: whatever it had taken over or created is now a stale lock of a dead pid.
        for (const task of staleBefore) {
          if (lockOf(tracking, task)?.pid === run.pid) takeovers++;
        }
      } else {
        // It finished before the kill: it must have completed, never been refused.
        assert.equal(r.code, 0, `${when}: ${describeRun(r)}`);
        finishedBeforeKill++;
        for (const task of staleBefore) {
          assert.match(r.stderr, new RegExp(`Took over a stale lock on .*${task}`));
          takeovers++;
        }
      }
      const { done } = checkInvariant(tracking, out, when);
      assert.ok(done >= previous, `${when}: done went down from ${previous} to ${done}`);
      if (r.signal === "SIGKILL" && done > previous && done < TOTAL) killedMidRun++;
      previous = done;
    }
    t.diagnostic(
      `${killedMidRun} kills mid-run with progress, ${finishedBeforeKill} runs finished before their kill, ${takeovers} stale-lock takeovers, ${previous}/${TOTAL} done before the last run`,
    );
    // Every run above was killed or completed, never refused (checked as each ended). A test
    // whose kills all missed the runs' progress would check nothing, so it fails.
    assert.ok(killedMidRun >= 1, "at least one run was killed while making progress");

    // The last run, not killed, takes over the dead run's locks and completes everything.
    const stale = TASKS.filter((task) => lockOf(tracking, task) !== null);
    const final = await runCli(runArgs(file, tracking));
    assert.equal(final.code, 0, describeRun(final));
    for (const task of stale) {
      assert.match(
        final.stderr,
        new RegExp(`Took over a stale lock on ${path.join(tracking, task)} left by pid`),
      );
      takeovers++;
    }
    assert.ok(takeovers >= 1, "some run took a dead run's lock over by itself");
    for (const task of TASKS) {
      assert.equal(lockOf(tracking, task), null, `${task}: lock released`);
    }
    const { done } = checkInvariant(tracking, out, "after the final run");
    assert.equal(done, TOTAL);
    assert.equal(outputs(out).size, TOTAL);

    // An uninterrupted run elsewhere ends with the same done arrays, byte for byte.
    const cleanDir = path.join(root, "clean");
    fs.mkdirSync(cleanDir);
    const cleanOut = path.join(cleanDir, "out");
    const cleanTracking = path.join(cleanDir, "tracking");
    const clean = await runCli(runArgs(crashPipeline(cleanDir, cleanOut), cleanTracking));
    assert.equal(clean.code, 0, describeRun(clean));
    assert.equal(outputs(cleanOut).size, TOTAL);
    for (const task of TASKS) {
      const a = readChunk(path.join(tracking, task), "done");
      const b = readChunk(path.join(cleanTracking, task), "done");
      assert.deepEqual(a, b, `${task}: done array differs from an uninterrupted run`);
      assert.ok(a.every((v) => v === 1));
    }
  });
});

describe("a run killed while locking", () => {
  function smallPipeline(dir: string): { file: string; tracking: string; store: string } {
    const file = writePipeline(
      dir,
      "small",
      path.join(dir, "blocks.log"),
      `export default { tasks: [{ id: "a", totalRoi: { offset: [0], shape: [50] },
        readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
        maxWorkers: 1, process() { sleep(2); } }] };\n`,
    );
    const tracking = path.join(dir, "tracking");
    return { file, tracking, store: path.join(tracking, "a") };
  }

  /**
   * SIGKILL a process taking `store`'s lock with the real lock code exactly at `step` (the
   * stop_in_lock fixture stops there), leaving what a run killed at that moment leaves.
   */
  async function killInLock(
    t: { skip: (message: string) => void },
    store: string,
    step: LockStep,
    linkless = false,
  ): Promise<number | null> {
    const started = await startFixture(STOP_FIXTURE, [
      store,
      step,
      ...(linkless ? ["linkless"] : []),
    ]);
    if (started === null) {
      t.skip("needs a runtime that runs TypeScript fixtures");
      return null;
    }
    started.child.kill("SIGKILL");
    const { signal } = await started.done;
    assert.equal(started.line, `at ${step}`, "the process was killed where asked");
    assert.equal(signal, "SIGKILL");
    return started.child.pid ?? null;
  }

  it("a run SIGKILLed while taking over a stale lock does not lock out the next run", {
    timeout: 60_000,
  }, async (t) => {
    const dir = path.join(root, "kill-in-takeover");
    fs.mkdirSync(dir);
    const { file, tracking, store } = smallPipeline(dir);
    // A store whose lock names a run killed after locking: every later run takes it over.
    const first = startCli(runArgs(file, tracking));
    await waitFor(() => lockOf(tracking, "a")?.pid === first.pid, "the first run's lock");
    first.child.kill("SIGKILL");
    await first.result;
    const guard = path.join(store, "blockwise.lock.takeover");
    if (await killInLock(t, store, "guard-created") === null) return;
    assert.ok(fs.existsSync(guard), "the killed takeover left blockwise.lock.takeover");
    assert.equal(lockOf(tracking, "a")?.pid, first.pid, "and did not replace the stale lock");
    const next = await runCli(runArgs(file, tracking));
    assert.equal(next.code, 0, describeRun(next));
    assert.match(
      next.stderr,
      new RegExp(`Took over a stale lock on .* left by pid ${first.pid} `),
    );
    assert.equal(fs.existsSync(guard), false);
    assert.equal(lockOf(tracking, "a"), null);
    assert.deepEqual(fs.readdirSync(store).filter((n) => n.startsWith("blockwise.lock")), []);
  });

  it(
    "a run SIGKILLed between creating its lock file and writing it does not lock out the next run",
    {
      timeout: 60_000,
    },
    async (t) => {
      const dir = path.join(root, "kill-in-create");
      fs.mkdirSync(dir);
      const { file, tracking, store } = smallPipeline(dir);
      const setup = await runCli(runArgs(file, tracking));
      assert.equal(setup.code, 0, describeRun(setup));
      // Only where the file system has no hard links can a lock exist empty; the fixture creates
      // it that way and is killed before writing it.
      const lock = path.join(store, "blockwise.lock");
      if (await killInLock(t, store, "lock-created-empty", true) === null) return;
      assert.equal(fs.readFileSync(lock, "utf8"), "", "the killed run left an empty lock");
      const next = await runCli(runArgs(file, tracking));
      assert.equal(next.code, 0, describeRun(next));
      assert.match(next.stderr, /Took over a stale lock on .*blockwise\.lock was empty/);
      assert.equal(lockOf(tracking, "a"), null);
      assert.deepEqual(fs.readdirSync(store).filter((n) => n.startsWith("blockwise.lock")), []);
    },
  );
});
