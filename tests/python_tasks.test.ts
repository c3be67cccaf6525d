/**
 * Python tasks end to end with real Python workers: a 3-D pipeline with conflicts and a
 * downstream task runs in parallel, every block once and after the blocks it reads, with setup
 * once per worker; an exception fails the attempt with its traceback; a crash (os._exit) and a
 * hang past the timeout (on a manual clock) cost that attempt and a replaced worker; a failing
 * setup abandons the task with its message; a module changed mid-run is refused; a SIGKILLed
 * run resumes; a path output commits with the same content hash as a JS task; and the refusals
 * before a run (a missing interpreter, --serial, bad python fields).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import {
  assertAllBalanced,
  countersOf,
  utilizationOf,
  waitUntil,
  withTimeout,
} from "./fixtures/parallel/harness.ts";
import { ManualClock } from "./fixtures/manual_clock.ts";
import { PYTHON, pythonMissing } from "./fixtures/python_peer.ts";
import {
  cellOf,
  describeRun,
  doneCells,
  readUint8,
  REPO,
  runArgs,
  runCli,
  startCli,
} from "./fixtures/tracking/harness.ts";
import { manifestOf } from "./fixtures/outputs.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import {
  buildPipelineGraph,
  type Executor,
  localExecutorFactory,
  runParallel,
} from "../lib/execute/mod.ts";
import type { BlockFailure, RunResult } from "../lib/run/run_types.ts";
import { RemoteWorkers } from "../lib/remote/remote_workers.ts";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { PYTHON_CLIENT_SOURCE } from "../lib/remote/python_client_source.ts";

const newDir = scratchDirs("pytasks");
const missing = pythonMissing();

/**
 * Checks examples/python's volumes (argv[1] is its folder): the 2-voxel shell of smoothed.npy
 * holds no zero, smoothed is the mean over 5³ voxels of raw.npy padded with zeros (computed with
 * summed-area tables), and mask is smoothed > 0.5, everywhere.
 */
const WHOLE_VOLUME = `import json, sys
import numpy as np
d = sys.argv[1] + "/data/"
raw, smoothed, mask = (np.load(d + n + ".npy") for n in ("raw", "smoothed", "mask"))
k = 5
c = np.pad(np.pad(raw, 2).astype(np.float64).cumsum(0).cumsum(1).cumsum(2), ((1, 0),) * 3)
a, b = slice(k, None), slice(None, -k)
mean = (c[a, a, a] - c[b, a, a] - c[a, b, a] - c[a, a, b] + c[b, b, a] + c[b, a, b]
        + c[a, b, b] - c[b, b, b]) / k ** 3
shell = np.ones(smoothed.shape, bool)
shell[2:-2, 2:-2, 2:-2] = False
print(json.dumps(dict(shape=list(smoothed.shape), zerosInShell=int((smoothed[shell] == 0).sum()),
                      smoothedMatches=bool(np.abs(mean - smoothed).max() < 1e-4),
                      maskMatches=bool((mask == (smoothed > 0.5)).all()))))
`;

/** Why the numpy example cannot run here, or null. */
function numpyMissing(): string | null {
  const r = spawnSync(PYTHON, ["-c", "import numpy"], { encoding: "utf8" });
  return r.status === 0 ? null : "skipped: python3 cannot import numpy (apt install python3-numpy)";
}
const SLOW = { timeout: 120_000, ...(missing === null ? {} : { skip: missing }) };

/** Write the pipeline (`tasks` is the array's source) and the Python module beside it. */
function write(dir: string, tasks: string, python: string, name = "task.py"): string {
  fs.writeFileSync(path.join(dir, name), python);
  const file = path.join(dir, "pipeline.mjs");
  fs.writeFileSync(file, `export default { tasks: [${tasks}] };\n`);
  return file;
}

/** Python that appends one JSON line per event to LOG (in the module's folder). */
const PY_PRELUDE = `import json, os, time
LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log.jsonl")

def log(kind, block=None, **extra):
    entry = dict(kind=kind, pid=os.getpid(), at=time.time(), **extra)
    if block is not None:
        entry.update(task=block.task_id, id=block.id, index=list(block.index),
                     attempt=block.attempt, read=[list(block.read_roi.offset),
                     list(block.read_roi.shape)], write=[list(block.write_roi.offset),
                     list(block.write_roi.shape)])
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\\n")
`;

interface Entry {
  readonly kind: string;
  readonly pid: number;
  readonly at: number;
  readonly task?: string;
  readonly id?: number;
  readonly index?: number[];
  readonly attempt?: number;
  readonly read?: [number[], number[]];
  readonly write?: [number[], number[]];
  readonly [key: string]: unknown;
}

function entries(dir: string, kind?: string): Entry[] {
  const file = path.join(dir, "log.jsonl");
  if (!fs.existsSync(file)) return [];
  // A worker may be writing a line while the test polls: only whole lines count.
  const text = fs.readFileSync(file, "utf8");
  return text.slice(0, text.lastIndexOf("\n") + 1).split("\n").filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Entry).filter((e) => kind === undefined || e.kind === kind);
}

interface Run {
  readonly result: RunResult;
  readonly notices: string[];
  readonly failures: BlockFailure[];
  readonly output: string[];
}

/** Run a pipeline in this process, Python tasks through RemoteWorkers (local processes). */
async function run(
  file: string,
  options: { clock?: ManualClock; executors?: Executor[]; beforeRun?: () => void } = {},
): Promise<Run> {
  const pipeline = await loadPipeline(file);
  const dir = path.dirname(file);
  const notices: string[] = [];
  const failures: BlockFailure[] = [];
  const output: string[] = [];
  const remote = await RemoteWorkers.open({
    pipeline,
    logDir: path.join(dir, "worker-logs"),
    runId: "test-run",
    log: (m) => notices.push(m),
    pythonClientDir: path.join(dir, "client"),
  });
  assert.ok(remote !== null, "a pipeline with Python tasks needs RemoteWorkers");
  options.beforeRun?.();
  const factory = remote.factory(localExecutorFactory);
  try {
    const result = await withTimeout(
      runParallel(pipeline, buildPipelineGraph(pipeline), {
        executorFactory: (spec) => {
          const executor = factory(spec);
          options.executors?.push(executor);
          return executor;
        },
        observer: { notice: (m) => notices.push(m), blockFailed: (f) => failures.push(f) },
        output: (task, _worker, stream, text) => output.push(`${task} ${stream} ${text}`),
        ...(options.clock === undefined ? {} : { clock: options.clock }),
      }),
      100_000,
      "the run",
    );
    return { result, notices, failures, output };
  } finally {
    await remote.close();
  }
}

/** A task of `n` one-voxel blocks in 1-D, without conflicts. */
function line(id: string, n: number, extra: string): string {
  return `{
    id: ${JSON.stringify(id)},
    totalRoi: { offset: [0], shape: [${n}] }, readRoi: { offset: [0], shape: [1] },
    writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false,
    ${extra}
  }`;
}

function overlaps(a: [number[], number[]], b: [number[], number[]]): boolean {
  return a[0].every((o, d) => o < b[0][d]! + b[1][d]! && b[0][d]! < o + a[1][d]!);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("Python tasks", () => {
  it(
    "run a 3-D pipeline with conflicts in parallel: every block once, in order, setup once per worker",
    SLOW,
    async () => {
      const dir = newDir("pipeline");
      const seg = {
        totalRoi: { offset: [0, 0, 0], shape: [90, 90, 90] },
        readRoi: { offset: [-5, -5, -5], shape: [30, 30, 30] },
        writeRoi: { offset: [0, 0, 0], shape: [20, 20, 20] },
      };
      const file = write(
        dir,
        `{ id: "seg", ...${JSON.stringify(seg)}, maxWorkers: 3, params: { sigma: 1.5 },
        python: { module: "task.py", setup: "setup" } },
      { id: "relabel", upstream: ["seg"], ...${JSON.stringify(seg)}, maxWorkers: 2,
        python: { module: "task.py", process: "relabel" } }`,
        `${PY_PRELUDE}
def setup():
    log("setup")
    print("model loaded")
    return {"model": "loaded", "blocks": 0}

def process(block, state):
    assert state["model"] == "loaded" and block.params == {"sigma": 1.5}
    state["blocks"] += 1
    start = time.time()
    time.sleep(0.01)
    log("block", block, start=start, count=state["blocks"])

def relabel(block):
    start = time.time()
    log("block", block, start=start)
`,
      );
      const { result, output } = await run(file);
      assertAllBalanced(result);
      const layout = new TaskLayout({ ...seg, fit: "valid", readWriteConflict: true });
      assert.equal(layout.blockCount, 64);
      for (const id of ["seg", "relabel"]) {
        const c = countersOf(result, id);
        assert.deepEqual([c.phase, c.completed, c.failedAttempts], ["done", 64, 0], id);
      }
      const blocks = entries(dir, "block");
      const seen = new Map<string, Entry>();
      for (const b of blocks) {
        const key = `${b.task}/${b.index!.join(",")}`;
        assert.ok(!seen.has(key), `${key} ran twice`);
        seen.set(key, b);
      }
      assert.equal(seen.size, 128);
      // Within seg: a block starts after its upstream neighbours (the previous level) ended.
      const up: number[] = [];
      for (let p = 0; p < layout.blockCount; p++) {
        const me = seen.get(`seg/${layout.gridIndexOf(p).join(",")}`)!;
        const n = layout.intraUpstream(p, up);
        for (const u of up.slice(0, n)) {
          const other = seen.get(`seg/${layout.gridIndexOf(u).join(",")}`)!;
          assert.ok(
            other.at <= (me["start"] as number),
            `seg ${me.index} started before ${other.index} ended`,
          );
        }
      }
      // Across tasks: a relabel block starts after every seg block whose write ROI it reads.
      for (const r of blocks.filter((b) => b.task === "relabel")) {
        for (const s of blocks.filter((b) => b.task === "seg" && overlaps(r.read!, b.write!))) {
          assert.ok(
            s.at <= (r["start"] as number),
            `relabel ${r.index} started before seg ${s.index}`,
          );
        }
      }
      // Setup ran once in each seg worker, and the state it made lived on across its blocks.
      const setups = entries(dir, "setup");
      const segPids = new Set(blocks.filter((b) => b.task === "seg").map((b) => b.pid));
      const setupPids = setups.map((s) => s.pid);
      assert.equal(new Set(setupPids).size, setups.length, "one setup per worker process");
      assert.ok(setups.length <= utilizationOf(result, "seg").workersSpawned);
      assert.ok([...segPids].every((pid) => setupPids.includes(pid)), "blocks ran after setup");
      assert.ok(segPids.size >= 2, "seg ran on more than one worker");
      const counts = blocks.filter((b) => b.task === "seg").map((b) => b["count"] as number);
      assert.equal(Math.max(...counts) > 1, true);
      const loaded = output.filter((o) => o === "seg stdout model loaded\n").length;
      assert.ok(loaded >= segPids.size && loaded <= setups.length, "setup's print reached the run");
    },
  );

  it(
    "fail a block whose process raises, with the Python traceback, and retry it",
    SLOW,
    async () => {
      const dir = newDir("raise");
      const file = write(
        dir,
        line("t", 6, `maxRetries: 1, python: { module: "task.py" }`),
        `def check(block):
    raise KeyError("no label %d" % block.index[0])

def process(block):
    if block.index[0] == 4:
        check(block)
`,
      );
      const { result, failures } = await run(file);
      assertAllBalanced(result);
      const c = countersOf(result, "t");
      assert.deepEqual([c.completed, c.failed, c.failedAttempts], [5, 1, 2]);
      assert.deepEqual(failures.map((f) => [f.index, f.attempt, f.permanent]), [[[4], 1, false], [
        [4],
        2,
        true,
      ]]);
      assert.equal(failures[1]!.message, "KeyError: 'no label 4'");
      assert.match(failures[1]!.stack ?? "", /task\.py", line 2, in check\n/);
    },
  );

  it("replace a worker that crashes (os._exit) and retry its block", SLOW, async () => {
    const dir = newDir("crash");
    const file = write(
      dir,
      line("t", 12, `maxWorkers: 2, python: { module: "task.py" }`),
      `${PY_PRELUDE}
def process(block):
    log("block", block)
    time.sleep(0.02)  # a block this long is named to the scheduler before it runs
    if block.index[0] == 5 and block.attempt == 1:
        os._exit(3)
`,
    );
    const { result, failures } = await run(file);
    assertAllBalanced(result);
    const c = countersOf(result, "t");
    assert.deepEqual([c.phase, c.completed, c.failed, c.failedAttempts], ["done", 12, 0, 1]);
    assert.equal(utilizationOf(result, "t").restarts, 1);
    assert.deepEqual(
      entries(dir, "block").filter((b) => b.index![0] === 5).map((b) => b.attempt),
      [1, 2],
    );
    assert.equal(failures.length, 1);
    assert.match(failures[0]!.message, /Worker \d+ stopped while running this block/);
  });

  it("kill a worker whose block runs past the timeout, and retry the block", SLOW, async () => {
    const dir = newDir("timeout");
    const file = write(
      dir,
      line("t", 3, `timeout: 0.5, python: { module: "task.py" }`),
      `${PY_PRELUDE}
def process(block):
    log("block", block)
    if block.index[0] == 1 and block.attempt == 1:
        time.sleep(3600)
`,
    );
    const clock = new ManualClock();
    const executors: Executor[] = [];
    const running = run(file, { clock, executors });
    // The worker's heartbeat says block 1 runs; then the run clock passes the timeout.
    await waitUntil(() => executors.some((e) => e.runningPosition() === 1), "block 1 to run");
    clock.advance(200 + 500 + 200);
    const { result, failures } = await running;
    assertAllBalanced(result);
    const c = countersOf(result, "t");
    assert.deepEqual([c.phase, c.completed, c.failedAttempts], ["done", 3, 1]);
    assert.match(failures[0]!.message, /timeout of 0\.5 s/);
    assert.equal(utilizationOf(result, "t").restarts, 1);
    const hung = entries(dir, "block").find((b) => b.index![0] === 1 && b.attempt === 1)!;
    await waitUntil(() => !alive(hung.pid), "the hung worker to be killed");
  });

  it("abandon the task when setup keeps failing, with its message", SLOW, async () => {
    const dir = newDir("setup");
    const file = write(
      dir,
      line("t", 4, `maxWorkerRestarts: 1, python: { module: "task.py", setup: "load" }`) + "," +
        line("after", 4, `upstream: ["t"], python: { module: "task.py" }`),
      `${PY_PRELUDE}
def load():
    log("setup")
    raise FileNotFoundError("model.pt is missing")

def process(block, state):
    log("block", block)
`,
    );
    const { result, notices } = await run(file);
    assertAllBalanced(result);
    const c = countersOf(result, "t");
    assert.equal(c.phase, "abandoned");
    assert.deepEqual(c.abandonReason, {
      kind: "setup-failed",
      message: "FileNotFoundError: model.pt is missing",
    });
    assert.equal(countersOf(result, "after").phase, "abandoned");
    assert.equal(entries(dir, "setup").length, 2, "the first worker and its one replacement");
    assert.deepEqual(entries(dir, "block"), []);
    assert.ok(
      notices.some((n) => /setup failed .*model\.pt is missing/.test(n)),
      notices.join("\n"),
    );
    assert.ok(notices.some((n) => /task\.py", line \d+, in load\n/.test(n)), "the traceback");
  });

  it("refuse a module that changed after the run started", SLOW, async () => {
    const dir = newDir("changed");
    const file = write(
      dir,
      line("t", 2, `maxWorkerRestarts: 0, python: { module: "task.py" }`),
      `def process(block):\n    pass\n`,
    );
    const { result } = await run(file, {
      beforeRun: () => fs.appendFileSync(path.join(dir, "task.py"), "# edited\n"),
    });
    const c = countersOf(result, "t");
    assert.equal(c.phase, "abandoned");
    assert.match(
      c.abandonReason?.kind === "setup-failed" ? c.abandonReason.message : "",
      /task\.py on .* differs from the scheduler's/,
    );
  });
});

describe("Python tasks through the CLI", () => {
  it("print the traceback of a failed block and exit 1", SLOW, async () => {
    const dir = newDir("cli-raise");
    const file = write(
      dir,
      line("t", 3, `maxRetries: 0, python: { module: "task.py" }`),
      `def process(block):\n    if block.index[0] == 2:\n        raise ValueError("bad block %d" % block.id)\n`,
    );
    const r = await runCli(["run", file, "--tracking-dir", path.join(dir, "tracking")], {
      cwd: dir,
    });
    assert.equal(r.code, 1, describeRun(r));
    assert.match(r.stderr, /✗ t\/2 \(2\) failed after 1 attempt: ValueError: bad block 2/);
    assert.match(r.stderr, /Traceback \(most recent call last\):/);
    assert.match(r.stderr, /task\.py", line 3, in process/);
    assert.match(r.stderr, /t\/2 index \(2\) after 1 attempt: ValueError: bad block 2/);
  });

  it(
    "number workers run-wide: one number in the output prefix and the log file name",
    SLOW,
    async () => {
      const dir = newDir("cli-numbers");
      const file = write(
        dir,
        [
          line("a", 2, `maxWorkers: 2, python: { module: "task.py" }`),
          line("b", 1, `upstream: ["a"], python: { module: "task.py" }`),
        ].join(","),
        `import sys\ndef process(block):\n    print("hello from", block.task_id, flush=True)\n`,
      );
      const tracking = path.join(dir, "tracking");
      const r = await runCli(["run", file, "--tracking-dir", tracking, "--no-progress"], {
        cwd: dir,
      });
      assert.equal(r.code, 0, describeRun(r));
      const prefix = /\[b:w(\d+)\] hello from b/.exec(r.stdout + r.stderr);
      assert.ok(prefix !== null, describeRun(r));
      assert.equal(prefix[1], "2", "a's two workers are w0 and w1");
      const runs = fs.readdirSync(path.join(tracking, ".workers")).filter((n) =>
        !n.startsWith("blockwise-client-")
      );
      const logs = fs.readdirSync(path.join(tracking, ".workers", runs[0]!)).sort();
      assert.deepEqual(logs, ["a-worker-0.log", "a-worker-1.log", "b-worker-2.log"]);
    },
  );

  it("name the exception's cause chain (raise ... from, and during handling)", SLOW, async () => {
    const dir = newDir("cli-cause");
    const file = write(
      dir,
      line("t", 1, `maxRetries: 0, python: { module: "task.py" }`),
      `def read():
    try:
        {}["chunk"]
    except KeyError:
        raise OSError("chunk 3 is truncated")

def process(block):
    try:
        read()
    except OSError as error:
        raise ValueError("cannot read the block") from error
`,
    );
    const r = await runCli(["run", file, "--tracking-dir", path.join(dir, "tracking")], {
      cwd: dir,
    });
    assert.equal(r.code, 1, describeRun(r));
    assert.match(
      r.stderr,
      /failed after 1 attempt: ValueError: cannot read the block; caused by OSError: chunk 3 is truncated; caused by KeyError: 'chunk'/,
    );
  });

  it(
    "resume after the scheduler is SIGKILLed: no orphaned worker, every block done once",
    SLOW,
    async () => {
      const dir = newDir("resume");
      const file = write(
        dir,
        line("t", 40, `maxWorkers: 2, python: { module: "task.py" }`),
        `${PY_PRELUDE}
def process(block):
    log("block", block)
    time.sleep(0.05)
`,
      );
      const tracking = path.join(dir, "tracking");
      const first = startCli(runArgs(file, tracking), { cwd: dir });
      await waitUntil(() => entries(dir, "block").length >= 12, "a dozen blocks", 60_000);
      process.kill(first.pid, "SIGKILL");
      assert.equal((await first.result).signal, "SIGKILL");
      const workers = new Set(entries(dir, "block").map((b) => b.pid));
      await waitUntil(() => [...workers].every((pid) => !alive(pid)), "the workers to exit");
      const store = path.join(tracking, "t");
      const doneFirst = doneCells(readUint8(store, "done"));
      assert.ok(doneFirst.length > 0 && doneFirst.length < 40, `${doneFirst.length} done`);
      fs.rmSync(path.join(dir, "log.jsonl"));
      const second = await runCli(runArgs(file, tracking), { cwd: dir });
      assert.equal(second.code, 0, describeRun(second));
      const rerun = entries(dir, "block").map((b) => cellOf(b.index!, [40]));
      assert.deepEqual(
        rerun.filter((cell) => doneFirst.includes(cell)),
        [],
        "done blocks ran again",
      );
      assert.deepEqual([...new Set([...doneFirst, ...rerun])].sort((a, b) => a - b), [
        ...Array(40).keys(),
      ]);
      assert.equal(doneCells(readUint8(store, "done")).length, 40);
    },
  );

  it("commit a path output with the same content hash as the same JS task", SLOW, async () => {
    const hashes: unknown[] = [];
    for (const kind of ["js", "python"]) {
      const dir = newDir(`outputs-${kind}`);
      const body = kind === "js"
        ? `process(block, state, context) {
            fs.mkdirSync(context.outputs.o, { recursive: true });
            fs.writeFileSync(context.outputs.o + "/a.txt", "block " + block.id + " é");
            fs.writeFileSync(context.outputs.o + "/b.bin", new Uint8Array(block.index[0] + 1));
          }`
        : `python: { module: "task.py" }`;
      const file = write(
        dir,
        line("t", 5, `outputs: { o: { path: "out/{index}" } }, ${body}`),
        `import os
def process(block):
    os.makedirs(block.outputs["o"])
    with open(os.path.join(block.outputs["o"], "a.txt"), "w", encoding="utf-8") as f:
        f.write("block %d é" % block.id)
    with open(os.path.join(block.outputs["o"], "b.bin"), "wb") as f:
        f.write(bytes(block.index[0] + 1))
`,
      );
      fs.writeFileSync(file, `import fs from "node:fs";\n${fs.readFileSync(file, "utf8")}`);
      const r = await runCli(runArgs(file, path.join(dir, "tracking")), { cwd: dir });
      assert.equal(r.code, 0, describeRun(r));
      assert.equal(fs.readFileSync(path.join(dir, "out", "3", "a.txt"), "utf8"), "block 3 é");
      hashes.push(
        manifestOf(dir, "t").filter((m) => m.t === "intent").map((m) => [
          m.index,
          m.content,
          m.files,
        ]).sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
      );
    }
    assert.equal((hashes[0] as unknown[]).length, 5);
    assert.deepEqual(hashes[1], hashes[0]);
  });

  it(
    "refuse before the run: a missing interpreter, --serial, bad python fields",
    SLOW,
    async () => {
      const dir = newDir("refuse");
      const file = write(
        dir,
        line("t", 2, `python: { module: "task.py", interpreter: "python3-not-installed" }`),
        `def process(block):\n    pass\n`,
      );
      const tracking = path.join(dir, "tracking");
      const r = await runCli(runArgs(file, tracking), { cwd: dir });
      assert.equal(r.code, 2, describeRun(r));
      assert.match(
        r.stderr,
        /Task "t": the Python interpreter "python3-not-installed" \(python\.interpreter\) was not found on PATH/,
      );
      const serial = write(
        dir,
        line("t", 2, `python: { module: "task.py" }`),
        `def process(b):\n    pass\n`,
      );
      const s = await runCli(runArgs(serial, tracking, ["--serial"]), { cwd: dir });
      assert.equal(s.code, 2, describeRun(s));
      assert.match(s.stderr, /--serial .* task "t" runs Python/);
      assert.ok(!fs.existsSync(path.join(tracking, "t")), "nothing was written before refusing");
      const bad = write(
        dir,
        line("t", 2, `python: { module: "nothere.py", process: "not-a-name", extra: 1 }`) + "," +
          line("u", 2, `python: { module: "task.py" }, process() {}`),
        `def process(b):\n    pass\n`,
      );
      const b = await runCli(runArgs(bad, tracking), { cwd: dir });
      assert.equal(b.code, 2, describeRun(b));
      assert.match(b.stderr, /Task "t": field "python" has no option "extra"/);
      assert.match(b.stderr, /Task "u": fields "python" and "process" cannot both be given/);
    },
  );

  it("run examples/python (numpy), and resume it with nothing left to do", {
    ...SLOW,
    ...(missing === null && numpyMissing() !== null ? { skip: numpyMissing()! } : {}),
  }, async () => {
    const dir = newDir("example");
    const examples = path.join(REPO, "examples");
    fs.mkdirSync(path.join(dir, "examples", "python"), { recursive: true });
    fs.copyFileSync(
      path.join(examples, "blockwise.d.ts"),
      path.join(dir, "examples", "blockwise.d.ts"),
    );
    for (const name of ["pipeline.ts", "segment.py"]) {
      fs.copyFileSync(
        path.join(examples, "python", name),
        path.join(dir, "examples", "python", name),
      );
    }
    const file = path.join(dir, "examples", "python", "pipeline.ts");
    const tracking = path.join(dir, "tracking");
    const first = await runCli(runArgs(file, tracking), { cwd: dir });
    assert.equal(first.code, 0, describeRun(first));
    assert.match(first.stdout, /\[smooth:w\d+\] worker \d+ opened its volumes/);
    const counts = fs.readdirSync(path.join(dir, "examples", "python", "counts"));
    assert.equal(counts.length, 64);
    // The whole volume is written, its border too (no shell of zeros): smoothed is the mean of
    // the zero-padded input over 5³ voxels everywhere, and the mask thresholds all of it.
    const written = spawnSync(PYTHON, ["-c", WHOLE_VOLUME, path.join(dir, "examples", "python")], {
      encoding: "utf8",
    });
    assert.equal(written.status, 0, written.stderr);
    assert.deepEqual(JSON.parse(written.stdout), {
      shape: [128, 128, 128],
      zerosInShell: 0,
      smoothedMatches: true,
      maskMatches: true,
    });
    const again = await runCli(runArgs(file, tracking), { cwd: dir });
    assert.equal(again.code, 0, describeRun(again));
    assert.match(again.stderr, /All 128 blocks completed \(128 skipped\)/);
  });

  it("print the Python client with blockwise worker --python-client", SLOW, async () => {
    const r = await runCli(["worker", "--python-client"]);
    assert.equal(r.code, 0, describeRun(r));
    assert.ok(r.stdout === PYTHON_CLIENT_SOURCE, "the printed client is the embedded one");
  });
});
