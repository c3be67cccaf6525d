/**
 * examples/daisy/: a daisy 1.x script and a daisy v2 script, each unchanged but for its import,
 * run with the Python of a fresh venv holding blockwise's wheel (tests/fixtures/python_venv.ts):
 * what they write is what numpy computes over the whole volume at once; the ledger they leave
 * is read by `blockwise status` (every block done) and `blockwise report`; a second run skips
 * every block; and the 1.x script, SIGKILLed half-way, resumes: the rerun calls its process
 * functions for exactly the blocks not done before, and its outputs are bit-identical to those
 * of a run never interrupted. Also: examples/daisy/alias makes `import daisy` blockwise.daisy
 * (docs/guide/daisy.md).
 *
 * Without /usr/bin/python3, its venv module, pytest or numpy the tests are skipped with the
 * reason, unless BLOCKWISE_REQUIRE_PYTHON_PACKAGE=1 (CI), where that is a failure.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type SpawnSyncReturns } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";
import {
  type PackageVenv,
  packageVenv,
  REQUIRE_PYTHON_PACKAGE,
  SYSTEM_PYTHON,
  venvMissing,
} from "./fixtures/python_venv.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("daisy-examples");
const EXAMPLES = path.join(REPO_ROOT, "examples", "daisy");
const V1 = path.join(EXAMPLES, "v1_pipeline.py");
const V2 = path.join(EXAMPLES, "v2_pipeline.py");

function missing(): string | null {
  const venv = venvMissing();
  if (venv !== null) return venv;
  const numpy = spawnSync(SYSTEM_PYTHON, ["-c", "import numpy"]);
  return numpy.status === 0
    ? null
    : `${SYSTEM_PYTHON} has no numpy (apt-get install python3-numpy)`;
}

const why = missing();
if (why !== null && !REQUIRE_PYTHON_PACKAGE) {
  console.log(`daisy_examples.test.ts: skipped: ${why}`);
}
const VENV = {
  timeout: 300_000,
  ...(why === null || REQUIRE_PYTHON_PACKAGE
    ? {}
    : { skip: `skipped: ${why} (BLOCKWISE_REQUIRE_PYTHON_PACKAGE=1 makes this a failure)` }),
};

function venv(): PackageVenv {
  if (why !== null) assert.fail(`BLOCKWISE_REQUIRE_PYTHON_PACKAGE=1 but ${why}`);
  return packageVenv();
}

type Run = SpawnSyncReturns<string>;

function said(r: Run, lines = 80): string {
  return `exit ${r.status ?? r.signal}\n${`${r.stdout ?? ""}${r.stderr ?? ""}`.trimEnd()}`
    .split("\n").slice(-lines).join("\n");
}

/** The venv's python running `args` in `cwd`. */
function python(
  v: PackageVenv,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Run {
  return spawnSync(v.python, args, {
    cwd,
    encoding: "utf8",
    env: v.env(env),
    timeout: 120_000,
    maxBuffer: 64 << 20,
  });
}

/** The venv's `blockwise` (the wheel's binary: here these sources under Bun). */
function blockwise(v: PackageVenv, args: string[], cwd: string): Run {
  return spawnSync(v.blockwise, args, { cwd, encoding: "utf8", env: v.env(), timeout: 60_000 });
}

interface StoreStatus {
  readonly task: string;
  readonly blocks: number;
  readonly done: number;
  readonly failed: number;
  readonly lock: unknown;
  readonly resource_tracking: boolean;
}

/** `blockwise status --json DIR`, by task (null while DIR holds no store yet). */
function status(v: PackageVenv, dir: string): Map<string, StoreStatus> | null {
  const r = blockwise(v, ["status", "--json", dir], path.dirname(dir));
  if (r.status !== 0) return null;
  const stores = (JSON.parse(r.stdout) as { stores: StoreStatus[] }).stores;
  return new Map(stores.map((s) => [s.task, s]));
}

/** Every task of `tasks` has a store in `dir` whose blocks are all done, none failed. */
function assertAllDone(v: PackageVenv, dir: string, tasks: Record<string, number>): void {
  const r = blockwise(v, ["status", dir], path.dirname(dir));
  assert.equal(r.status, 0, said(r));
  const stores = status(v, dir);
  assert.ok(stores !== null);
  assert.deepEqual([...stores.keys()].sort(), Object.keys(tasks).sort());
  for (const [task, blocks] of Object.entries(tasks)) {
    const s: StoreStatus = stores.get(task)!;
    assert.deepEqual(
      { task, blocks: s.blocks, done: s.done, failed: s.failed, lock: s.lock },
      { task, blocks, done: blocks, failed: 0, lock: null },
      r.stdout,
    );
  }
}

/** `blockwise report DIR -o FILE` writes one HTML page naming every task. */
function assertReport(v: PackageVenv, dir: string, tasks: string[]): void {
  const file = path.join(path.dirname(dir), "report.html");
  const r = blockwise(v, ["report", dir, "-o", file], path.dirname(dir));
  assert.equal(r.status, 0, said(r));
  assert.match(r.stdout, new RegExp(`${tasks.length} tasks, \\d+ blocks`));
  const html = fs.readFileSync(file, "utf8");
  assert.ok(html.startsWith("<!doctype html>"), html.slice(0, 100));
  for (const task of tasks) assert.ok(html.includes(`"${task}"`), `the report lacks ${task}`);
}

/** What a Python snippet prints as JSON, run by the venv's python on `work`. */
function numpyCheck(v: PackageVenv, code: string, work: string): Record<string, unknown> {
  const r = python(v, ["-c", code, work], work);
  assert.equal(r.status, 0, said(r));
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

// The whole volume at once, as the scripts describe it (their raw volume comes from a seeded
// generator). Smoothing is a mean over a cube with edge padding: numpy's sliding windows in
// float64 here, three 1-D float32 passes per block there, so they agree to float32 rounding.
// Labels and masks follow from what the scripts wrote, so they must be equal.
const CHECK_V1 = `
import json, sys
import numpy as np
w = sys.argv[1]
raw = np.random.default_rng(1).random((64, 128, 128), dtype=np.float32)
same_raw = np.array_equal(np.load(w + "/raw.npy"), raw)
windows = np.lib.stride_tricks.sliding_window_view(np.pad(raw, 2, mode="edge"), (5, 5, 5))
expected = windows.mean(axis=(3, 4, 5), dtype=np.float64)
smoothed = np.load(w + "/smoothed.npy")
z, y, x = np.indices(raw.shape)
block = np.ravel_multi_index((z // 32, y // 32, x // 32), (2, 4, 4))
labels = np.where(smoothed > 0.5, block + 1, 0).astype(np.uint32)
written = np.load(w + "/labels.npy")
print(json.dumps({
    "raw": same_raw,
    "smoothed": [smoothed.dtype.name, list(smoothed.shape)],
    "smoothed_error": float(np.abs(smoothed - expected).max()),
    "labels": [written.dtype.name, bool(np.array_equal(written, labels))],
    "foreground": round(float((written > 0).mean()), 1),
    "labels_per_block": sorted(set(np.unique(written[block == 9]).tolist()) - {0}),
}))
`;

const CHECK_V2 = `
import json, sys
import numpy as np
w = sys.argv[1]
raw = np.random.default_rng(2).random((64, 128, 128), dtype=np.float32)
same_raw = np.array_equal(np.load(w + "/raw.npy"), raw)
windows = np.lib.stride_tricks.sliding_window_view(np.pad(raw, 1, mode="edge"), (3, 3, 3))
blurred = np.load(w + "/blurred.npy")
small = np.load(w + "/small.npy")
mask = np.load(w + "/mask.npy")
cubes = blurred.astype(np.float64).reshape(32, 2, 64, 2, 64, 2).mean(axis=(1, 3, 5))
print(json.dumps({
    "raw": same_raw,
    "blurred": [blurred.dtype.name, list(blurred.shape)],
    "blurred_error": float(np.abs(blurred - windows.mean(axis=(3, 4, 5), dtype=np.float64)).max()),
    "small": [small.dtype.name, list(small.shape)],
    "small_error": float(np.abs(small - cubes).max()),
    "mask": [mask.dtype.name, bool(np.array_equal(mask, (blurred > 0.5).astype(np.uint8)))],
    "foreground": round(float(mask.mean()), 1),
}))
`;

function assertV1Outputs(v: PackageVenv, work: string): void {
  const c = numpyCheck(v, CHECK_V1, work);
  assert.ok((c["smoothed_error"] as number) < 1e-6, JSON.stringify(c));
  assert.deepEqual({ ...c, smoothed_error: 0 }, {
    raw: true,
    smoothed: ["float32", [64, 128, 128]],
    smoothed_error: 0,
    labels: ["uint32", true],
    foreground: 0.5,
    labels_per_block: [10],
  });
}

/** The summary's last line: `All N blocks completed (K skipped).` -> K (0 without). */
function skipped(r: Run, blocks: number): number {
  const m = new RegExp(`^All ${blocks} blocks completed(?: \\((\\d+) skipped\\))?\\.$`, "m")
    .exec(r.stderr);
  assert.ok(m !== null, `no "All ${blocks} blocks completed" line:\n${said(r)}`);
  return Number(m[1] ?? 0);
}

/** Lines a task's process functions printed in this run (daisy.logging's worker files). */
function printed(work: string, task: string, what: string): string[] {
  const dir = path.join(work, "daisy_logs", task);
  return fs.readdirSync(dir).filter((f) => /^worker_\d+\.out$/.test(f))
    .flatMap((f) => fs.readFileSync(path.join(dir, f), "utf8").split("\n"))
    .filter((l) => l.startsWith(`${what} block `));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The v1 run never interrupted, for the SIGKILL test to compare with (made once). */
let uninterrupted: string | null = null;

function runV1(v: PackageVenv): string {
  const work = path.join(newDir("v1"), "work");
  const r = python(v, [V1, work], path.dirname(work));
  assert.equal(r.status, 0, said(r));
  assert.equal(skipped(r, 64), 0);
  uninterrupted = work;
  return work;
}

describe("examples/daisy: daisy scripts on blockwise's engine, from the wheel", () => {
  it(
    "v1_pipeline.py (daisy 1.x): numpy's result, a ledger status and report read, a rerun skips all",
    VENV,
    () => {
      const v = venv();
      const work = runV1(v);
      assertV1Outputs(v, work);
      assert.equal(printed(work, "smooth", "smoothed").length, 32);
      assert.equal(printed(work, "label", "labelled").length, 32);
      // The 1.x script sets no tracking folder: the ledger is daisy's default, ./daisy_logs.
      const ledger = path.join(work, "daisy_logs");
      assertAllDone(v, ledger, { smooth: 32, label: 32 });
      assertReport(v, ledger, ["smooth", "label"]);
      const again = python(v, [V1, work], path.dirname(work));
      assert.equal(again.status, 0, said(again));
      assert.equal(skipped(again, 64), 64);
    },
  );

  it(
    "v2_pipeline.py (daisy v2, a worker function with Client): numpy's result, status and report, a rerun skips all",
    VENV,
    () => {
      const v = venv();
      const work = path.join(newDir("v2"), "work");
      const r = python(v, [V2, work], path.dirname(work));
      assert.equal(r.status, 0, said(r));
      assert.equal(skipped(r, 96), 0);
      const c = numpyCheck(v, CHECK_V2, work);
      for (const key of ["blurred_error", "small_error"]) {
        assert.ok((c[key] as number) < 1e-6, `${key}: ${JSON.stringify(c)}`);
      }
      assert.deepEqual({ ...c, blurred_error: 0, small_error: 0 }, {
        raw: true,
        blurred: ["float32", [64, 128, 128]],
        blurred_error: 0,
        small: ["float32", [32, 64, 64]],
        small_error: 0,
        mask: ["uint8", true],
        foreground: 0.5,
      });
      // set_tracking_basedir(WORK/tracking) put the ledger there; blur asked for resource tracking.
      const ledger = path.join(work, "tracking");
      assertAllDone(v, ledger, { blur: 32, downsample: 32, mask: 32 });
      const stores = status(v, ledger)!;
      assert.deepEqual(
        [...stores.values()].map((s) => [s.task, s.resource_tracking]).sort(),
        [["blur", true], ["downsample", false], ["mask", false]],
      );
      assertReport(v, ledger, ["blur", "downsample", "mask"]);
      const again = python(v, [V2, work], path.dirname(work));
      assert.equal(again.status, 0, said(again));
      assert.equal(skipped(again, 96), 96);
    },
  );

  it(
    "v1_pipeline.py SIGKILLed half-way: the ledger kept what was done, the rerun runs only the rest, same bytes",
    VENV,
    async () => {
      const v = venv();
      const reference = uninterrupted ?? runV1(v);
      const dir = newDir("kill");
      const work = path.join(dir, "work");
      const ledger = path.join(work, "daisy_logs");
      const log = fs.openSync(path.join(dir, "killed.log"), "w");
      const child = spawn(v.python, [V1, work], {
        cwd: dir,
        env: v.env({ DAISY_EXAMPLE_PAUSE_MS: "100" }),
        stdio: ["ignore", log, log],
      });
      fs.closeSync(log);
      const exited = new Promise<string | number | null>((resolve) =>
        child.on("exit", (code, signal) => resolve(signal ?? code))
      );
      let ended: string | number | null | undefined;
      void exited.then((e) => (ended = e));
      // Kill once some blocks of both tasks are done (status reads the ledger during the run).
      const deadline = Date.now() + 60_000;
      for (;;) {
        assert.equal(ended, undefined, "the run ended before it was killed");
        assert.ok(Date.now() < deadline, "no blocks done within 60 s");
        const s = status(v, ledger);
        if ((s?.get("smooth")?.done ?? 0) >= 6 && (s?.get("label")?.done ?? 0) >= 2) break;
        await sleep(50);
      }
      child.kill("SIGKILL");
      assert.equal(await exited, "SIGKILL");
      // Python is gone: its daisy session sees its stdin close, stops and releases the ledger.
      let after = status(v, ledger)!;
      while ([...after.values()].some((s) => s.lock !== null)) {
        assert.ok(Date.now() < deadline, `the ledger is still locked:\n${JSON.stringify(after)}`);
        await sleep(100);
        after = status(v, ledger)!;
      }
      const killedLog = fs.readFileSync(path.join(dir, "killed.log"), "utf8");
      assert.match(killedLog, /Stopping: the Python process closed the session/);
      const smoothDone = after.get("smooth")!.done;
      // label has a check_function (a marker file written after the block's data): a block whose
      // marker was written just before the kill counts as done even if the ledger missed it.
      const labelDone = fs.readdirSync(path.join(work, "labelled")).length;
      assert.ok(labelDone >= after.get("label")!.done);
      assert.ok(smoothDone < 32 && labelDone < 32, JSON.stringify([...after.values()]));
      // The rerun's worker log files are its own (the killed run's are removed first).
      for (const task of ["smooth", "label"]) {
        for (const f of fs.readdirSync(path.join(ledger, task))) {
          if (/^worker_\d+\.(out|err)$/.test(f)) fs.rmSync(path.join(ledger, task, f));
        }
      }
      const rerun = python(v, [V1, work], dir);
      assert.equal(rerun.status, 0, said(rerun));
      assert.match(rerun.stderr, new RegExp(`Task "smooth": resumed, ${smoothDone}/32 blocks`));
      assert.equal(skipped(rerun, 64), smoothDone + labelDone, said(rerun));
      assert.equal(printed(work, "smooth", "smoothed").length, 32 - smoothDone);
      assert.equal(printed(work, "label", "labelled").length, 32 - labelDone);
      assertAllDone(v, ledger, { smooth: 32, label: 32 });
      for (const file of ["raw.npy", "smoothed.npy", "labels.npy"]) {
        assert.ok(
          fs.readFileSync(path.join(work, file)).equals(
            fs.readFileSync(path.join(reference, file)),
          ),
          `${file} differs from the uninterrupted run's`,
        );
      }
    },
  );

  it(
    "examples/daisy/alias: with it on PYTHONPATH, `import daisy` (and daisy.v2, daisy.logging) is blockwise.daisy",
    VENV,
    () => {
      const v = venv();
      const code = `
import blockwise.daisy, daisy, daisy.v2, daisy.v1_compat, daisy.logging
from daisy import Task
print(daisy is blockwise.daisy, daisy.v2 is blockwise.daisy.v2, daisy.logging.__name__,
      Task is blockwise.daisy.Task)
`;
      const r = python(v, ["-c", code], EXAMPLES, {
        PYTHONPATH: path.join(EXAMPLES, "alias"),
      });
      assert.equal(r.status, 0, said(r));
      assert.equal(r.stdout.trim(), "True True blockwise.daisy.logging True");
    },
  );
});
