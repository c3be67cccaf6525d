/**
 * Every pipeline in examples/ runs as the guide shows it, in a copy of its folder: its exit code
 * and what it wrote are checked here (docs:check also compares what the guide prints).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, type RunningCli, startCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("examples");
const SLOW = { timeout: 180_000 };
const numpy = spawnSync("python3", ["-c", "import numpy"]).status === 0;

interface Example {
  /** The pipeline file, below examples/. */
  readonly file: string;
  readonly exit: number;
  readonly env?: Record<string, string>;
  readonly needsNumpy?: boolean;
  /** More arguments of `run`. */
  readonly args?: readonly string[];
  /** Workers to start by hand with the line the run prints (`launch: "manual"`). */
  readonly joiners?: number;
  /** What the run must have written (relative to the copy), or said. */
  readonly check: (dir: string, said: string) => void;
}

/** Start `n` workers by hand with the address and secret file the run prints. */
async function join(
  run: RunningCli,
  n: number,
  dir: string,
  env: Readonly<Record<string, string>>,
): Promise<void> {
  const line = /Workers can join: .* worker --connect (\S+) --secret-file (\S+)/;
  const deadline = Date.now() + 60_000;
  let m = line.exec(run.stderr());
  while (m === null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    m = line.exec(run.stderr());
  }
  assert.ok(m !== null, `the run printed no join line:\n${run.stderr()}`);
  const workers = Array.from(
    { length: n },
    () =>
      startCli(["worker", "--connect", m[1]!, "--secret-file", m[2]!], { cwd: dir, env }).result,
  );
  for (const w of await Promise.all(workers)) assert.equal(w.code, 0, describeRun(w));
}

/**
 * examples/python_segment's labels in the copy `dir`: their shape, whether they are the input
 * thresholded at 0.5 everywhere, and whether the 8-voxel shell holds foreground (about half of
 * it; all zeros where no block writes).
 */
function segmentLabels(dir: string): unknown {
  const code = `import json, sys
import numpy as np
raw, labels = (np.load(sys.argv[1] + "/data/" + n + ".npy") for n in ("raw", "labels"))
shell = np.ones(labels.shape, bool)
shell[8:-8, 8:-8, 8:-8] = False
print(json.dumps(dict(shape=list(labels.shape), matches=bool((labels == (raw > 0.5)).all()),
                      shell=bool(0.4 < labels[shell].mean() < 0.6))))`;
  const r = spawnSync("python3", ["-c", code, dir], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

const count = (dir: string, sub: string) => fs.readdirSync(path.join(dir, sub)).length;

const EXAMPLES: readonly Example[] = [
  {
    file: "pipeline.ts",
    exit: 0,
    check: (_dir, said) => assert.match(said, /All 1088 blocks completed\./),
  },
  {
    file: "compressed_zarr/pipeline.mjs",
    exit: 0,
    check: (dir) => assert.equal(count(dir, "out.zarr/c/0"), 3),
  },
  {
    file: "provenance/pipeline.mjs",
    exit: 0,
    check: (dir) => {
      assert.equal(count(dir, "stats"), 16);
      assert.equal(count(dir, "notes"), 16);
      const stats = JSON.parse(fs.readFileSync(path.join(dir, "stats", "0.json"), "utf8"));
      assert.deepEqual(stats, { block: 0, foreground: 128 });
    },
  },
  {
    file: "why_blocks_run/pipeline.mjs",
    exit: 0,
    check: (dir) => {
      assert.equal(fs.readFileSync(path.join(dir, "out", "seg", "0.txt"), "utf8"), "seg 0 0.5\n");
      assert.equal(count(dir, "out/stats"), 16);
    },
  },
  {
    file: "why_blocks_run/pipeline.mjs",
    exit: 1,
    env: { FAIL: "4" },
    check: (_dir, said) => assert.match(said, /seg\/4 .*segmentation diverged at block 4/),
  },
  {
    file: "temporaries/chain.mjs",
    exit: 0,
    check: (dir, said) => {
      assert.match(said, /temporary: 16 deleted/);
      assert.equal(count(dir, "labels"), 16);
      assert.equal(fs.existsSync(path.join(dir, "affs")) ? count(dir, "affs") : 0, 0);
    },
  },
  {
    file: "tour/flaky.mjs",
    exit: 1,
    check: (_dir, said) => assert.match(said, /1 block failed, 4 orphaned: exit 1/),
  },
  {
    file: "tour/flaky.mjs",
    exit: 0,
    env: { FLAKY: "0" },
    check: (_dir, said) => assert.match(said, /All 300 blocks completed\./),
  },
  {
    file: "tour/convert.mjs",
    exit: 1,
    check: (dir, said) => {
      assert.match(said, /convert: cannot open in_3\.tif/);
      assert.equal(fs.readdirSync(dir).filter((f) => f.endsWith(".png")).length, 7);
    },
  },
  { file: "tour/grown.mjs", exit: 0, check: (_dir, said) => assert.match(said, /All 100 blocks/) },
  {
    file: "tour/placeholders.mjs",
    exit: 0,
    check: (_dir, said) =>
      assert.match(
        said,
        /block_id=\d+ index=0,1 read_offset=-8,56 read_shape=80,80 write_offset=0,64/,
      ),
  },
  {
    file: "tour/tissue.mjs",
    exit: 0,
    check: (_dir, said) => assert.match(said, /All 1536 blocks completed\./),
  },
  {
    file: "many_machines/pipeline.mjs",
    exit: 0,
    check: (_dir, said) => assert.match(said, /remote worker logs/),
  },
  {
    file: "joining/pipeline.mjs",
    exit: 0,
    // Blocks last long enough for both joiners to get some.
    env: { PAUSE_MS: "100" },
    joiners: 2,
    check: (_dir, said) => {
      assert.match(said, /Workers can join: .* worker --connect \S+ --secret-file \S+/);
      assert.match(said, /All 16 blocks completed\./);
    },
  },
  {
    file: "report/pipeline.mjs",
    exit: 1,
    check: (_dir, said) => {
      assert.match(said, /no objects found in block \(3, 25\)/);
      assert.match(said, /1 block failed/);
    },
  },
  {
    // PyTorch-shaped, with the stand-in torch: each of the two workers sees its own GPU.
    file: "gpu/pipeline.mjs",
    exit: 0,
    env: { PYTHONPATH: "stand_in" },
    args: ["--resources", "gpu=0,1"],
    check: (dir, said) => {
      assert.match(said, /Task "predict" GPUs: worker 0 -> device 0, worker 1 -> device 1/);
      const seen = fs.readdirSync(path.join(dir, "workers")).map((f) =>
        fs.readFileSync(path.join(dir, "workers", f), "utf8")
      ).sort();
      assert.deepEqual(seen, [
        "CUDA_VISIBLE_DEVICES=0 BLOCKWISE_GPU=0: 1 device, stand-in GPU 0\n",
        "CUDA_VISIBLE_DEVICES=1 BLOCKWISE_GPU=1: 1 device, stand-in GPU 1\n",
      ]);
      assert.equal(fs.readdirSync(path.join(dir, "predictions")).length, 8);
    },
  },
  {
    file: "python_segment/pipeline.mjs",
    exit: 1,
    needsNumpy: true,
    check: (_dir, said) => assert.match(said, /ValueError: block 63: no foreground/),
  },
  {
    file: "python_segment/pipeline.mjs",
    exit: 0,
    env: { NO_FOREGROUND: "0" },
    needsNumpy: true,
    check: (dir, said) => {
      assert.match(said, /All 64 blocks completed\./);
      // The whole volume is labelled, its 8-voxel border too (no shell of zeros).
      assert.deepEqual(segmentLabels(dir), { shape: [256, 256, 256], matches: true, shell: true });
    },
  },
];

describe("examples/", () => {
  it("every pipeline file there is run below", () => {
    const files: string[] = [];
    const visit = (rel: string) => {
      for (
        const entry of fs.readdirSync(path.join(REPO_ROOT, "examples", rel), {
          withFileTypes: true,
        })
      ) {
        const sub = rel === "" ? entry.name : `${rel}/${entry.name}`;
        if (entry.isDirectory() && !entry.name.endsWith(".zarr")) visit(sub);
        else if (/\.(mjs|ts)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) files.push(sub);
      }
    };
    visit("");
    // read_ledger.mjs is a script, not a pipeline: tests/serve.test.ts runs it.
    const tested = new Set([
      ...EXAMPLES.map((e) => e.file),
      "python/pipeline.ts",
      "report/read_ledger.mjs",
    ]);
    assert.deepEqual(files.filter((f) => !tested.has(f)), [], "examples without a test");
  });

  for (const example of EXAMPLES) {
    const env = Object.entries(example.env ?? {}).map(([k, v]) => `${k}=${v}`).join(" ");
    const skip = example.needsNumpy === true && !numpy ? { skip: "python3 has no numpy" } : {};
    it(`${example.file}${env === "" ? "" : ` with ${env}`}: exit ${example.exit}`, {
      ...SLOW,
      ...skip,
    }, async () => {
      const folder = path.dirname(path.join(REPO_ROOT, "examples", example.file));
      const dir = newDir("copy");
      fs.cpSync(folder, dir, { recursive: true });
      const file = path.join(dir, path.basename(example.file));
      const run = startCli([
        "run",
        file,
        "--tracking-dir",
        path.join(dir, "tracking"),
        "--no-progress",
        ...example.args ?? [],
      ], {
        cwd: dir,
        env: example.env ?? {},
        timeoutMs: 170_000,
      });
      if (example.joiners !== undefined) await join(run, example.joiners, dir, example.env ?? {});
      const r = await run.result;
      assert.equal(r.code, example.exit, describeRun(r));
      example.check(dir, r.stdout + r.stderr);
    });
  }
});

describe("examples/compressed_zarr with SMOOTH_CRASH=1 (the README's Quick start)", () => {
  it(
    "kills itself once a block is done, whatever the machine's speed; the next run resumes",
    SLOW,
    async () => {
      const dir = newDir("crash");
      fs.cpSync(path.join(REPO_ROOT, "examples", "compressed_zarr"), dir, { recursive: true });
      const args = ["run", "pipeline.mjs", "--tracking-dir", "tracking", "--no-progress"];
      const killed = await startCli(args, { cwd: dir, env: { SMOOTH_CRASH: "1" } }).result;
      assert.ok(killed.signal === "SIGKILL" || killed.code === 137, describeRun(killed));
      const marks = fs.readFileSync(path.join(dir, "tracking", "smooth", "done", "c", "0", "0"));
      const done = marks.filter((m) => m === 1).length;
      // At least one block done; at most one per worker (maxWorkers: 2): each worker's second
      // block kills the run.
      assert.ok(done >= 1 && done <= 2, `${done} blocks done when the run was killed`);
      const resumed = await startCli(args, { cwd: dir }).result;
      assert.equal(resumed.code, 0, describeRun(resumed));
      // A block committed but not marked yet when the kill came is adopted, and counted, too.
      const m = /resumed, (\d+)\/6 blocks already done/.exec(resumed.stderr);
      assert.ok(m !== null, describeRun(resumed));
      const skipped = Number(m[1]);
      assert.ok(skipped >= done && skipped <= 2, `${skipped} resumed, ${done} were marked`);
      assert.match(resumed.stderr, new RegExp(`All 6 blocks completed \\(${skipped} skipped\\)`));
    },
  );
});
