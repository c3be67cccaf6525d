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
import { TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
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
  tempDir,
  waitFor,
  writePipeline,
} from "./fixtures/tracking/harness.ts";

const KILLS = 15;
const SEED = 0x5eed_b10c;

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

/** The refusal a run gets when a SIGKILLed run left its lock file empty or its takeover guard. */
const HALF_LOCKED = /is being locked by another run/;

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
    let halfLocked = 0;
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
      } else if (r.code === 3 && HALF_LOCKED.test(r.stderr)) {
        // The previous kill landed inside the lock handling (the known lock.ts bug tested
        // strictly below); tolerated here so the done-marker invariant is still checked.
        halfLocked++;
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
      `${killedMidRun} kills mid-run with progress, ${finishedBeforeKill} runs finished before their kill, ${takeovers} stale-lock takeovers, ${halfLocked} runs refused on a half-made lock, ${previous}/${TOTAL} done before the last run`,
    );
    assert.ok(killedMidRun >= 1, "at least one run was killed while making progress");

    // The last run, not killed, takes over the dead run's locks and completes everything.
    const stale = TASKS.filter((task) => lockOf(tracking, task) !== null);
    let final = await runCli(runArgs(file, tracking));
    for (let tries = 0; tries < 15 && final.code === 3 && HALF_LOCKED.test(final.stderr); tries++) {
      halfLocked++;
      t.diagnostic(`the final run was refused on a half-made lock; retrying in 1 s`);
      await delay(1000);
      final = await runCli(runArgs(file, tracking));
    }
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
  /**
   * Start runs on `store` and SIGKILL each the moment `name` appears in the store folder
   * (inotify through fs.watch), until one leaves the state `left` checks for; at most
   * `attempts` runs. Returns whether the state was produced.
   */
  async function killOn(
    file: string,
    tracking: string,
    store: string,
    name: string,
    left: () => boolean,
    attempts: number,
  ): Promise<boolean> {
    for (let i = 0; i < attempts; i++) {
      const run = startCli(runArgs(file, tracking));
      const watcher = fs.watch(store, (_event, entry) => {
        if (entry === name) run.child.kill("SIGKILL");
      });
      try {
        await run.result;
      } finally {
        watcher.close();
      }
      if (left()) return true;
    }
    return false;
  }

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
    const produced = await killOn(
      file,
      tracking,
      store,
      "blockwise.lock.takeover",
      () => fs.existsSync(guard),
      10,
    );
    t.diagnostic(
      produced
        ? "a run was killed inside its takeover and left blockwise.lock.takeover"
        : "no kill landed inside a takeover; checking the next run anyway",
    );
    const next = await runCli(runArgs(file, tracking));
    assert.equal(next.code, 0, describeRun(next));
    assert.match(next.stderr, /Took over a stale lock on/);
    assert.equal(fs.existsSync(guard), false);
    assert.equal(lockOf(tracking, "a"), null);
  });

  it("a run SIGKILLed while creating its lock file does not lock out the next run", {
    timeout: 60_000,
  }, async (t) => {
    const dir = path.join(root, "kill-in-create");
    fs.mkdirSync(dir);
    const { file, tracking, store } = smallPipeline(dir);
    const setup = await runCli(runArgs(file, tracking));
    assert.equal(setup.code, 0, describeRun(setup));
    const lock = path.join(store, "blockwise.lock");
    const produced = await killOn(
      file,
      tracking,
      store,
      "blockwise.lock",
      () => {
        if (fs.existsSync(lock) && fs.readFileSync(lock, "utf8") === "") return true;
        fs.rmSync(lock, { force: true }); // start the next attempt from a free store
        return false;
      },
      15,
    );
    t.diagnostic(
      produced
        ? "a run was killed between creating blockwise.lock and writing it"
        : "no kill landed between creating the lock and writing it; checking the next run anyway",
    );
    const next = await runCli(runArgs(file, tracking));
    assert.equal(next.code, 0, describeRun(next));
    assert.equal(lockOf(tracking, "a"), null);
  });
});
