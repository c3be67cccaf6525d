/**
 * GPUs of SLURM workers on a real cluster (CI's one-node cluster from `.ci/slurm start`, whose
 * node has two stand-in GPUs in its gres.conf): a `gpu: 1` task's two workers, one job array,
 * each get their own device from SLURM, whatever CUDA_VISIBLE_DEVICES the scheduler itself
 * runs with. Skipped without a cluster whose nodes have gres gpu, unless
 * BLOCKWISE_REQUIRE_SLURM=1 (CI), where that is a failure.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { REPO_ROOT, writePipeline } from "./fixtures/parallel/harness.ts";
import { shellQuote } from "../lib/errors.ts";
import { oneFileAtATime, REQUIRE_SLURM, slurmUnavailable } from "./fixtures/slurm.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("slurm-gpus");

/** Why the cluster cannot run this test, or null. */
function gpusUnavailable(): string | null {
  const why = slurmUnavailable();
  if (why !== null) return why;
  const r = spawnSync("sinfo", ["-h", "-o", "%G"], { encoding: "utf8", timeout: 15_000 });
  return /\bgpu:/.test(r.stdout)
    ? null
    : `the cluster's nodes have no gres gpu (sinfo %G says ${
      JSON.stringify(r.stdout.trim())
    }); .ci/slurm start gives its node two stand-in GPUs`;
}

const unavailable = gpusUnavailable();
const skip = REQUIRE_SLURM ? false : unavailable ?? false;

interface Seen {
  readonly element: string | null;
  readonly step: string | null;
  readonly cuda: string | null;
  readonly jobGpus: string | null;
  readonly stepGpus: string | null;
}

const BUN = path.join(REPO_ROOT, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO_ROOT, "main.ts");

/** A `gpu: 1` task of 4 blocks, 2 SLURM workers; each worker's setup appends what it sees. */
function gpuPipeline(dir: string): string {
  return writePipeline(
    dir,
    `import process from "node:process";
export default { tasks: [{
  id: "predict",
  totalRoi: { offset: [0], shape: [4] }, readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false,
  maxWorkers: 2, requires: { gpu: 1 }, launch: "slurm",
  setup() {
    fs.appendFileSync(${JSON.stringify(path.join(dir, "seen.jsonl"))}, JSON.stringify({
      element: process.env.SLURM_ARRAY_TASK_ID ?? null,
      step: process.env.SLURM_STEP_ID ?? null,
      cuda: process.env.CUDA_VISIBLE_DEVICES ?? null,
      jobGpus: process.env.SLURM_JOB_GPUS ?? null,
      stepGpus: process.env.SLURM_STEP_GPUS ?? null,
    }) + "\\n");
  },
  process() { sleep(200); },
}] };
`,
  );
}

function seenBy(dir: string): Seen[] {
  return fs.readFileSync(path.join(dir, "seen.jsonl"), "utf8").trim().split("\n").map((l) =>
    JSON.parse(l) as Seen
  );
}

describe("SLURM workers' GPUs", { skip }, () => {
  // npm test runs Bun and Deno at once: their SLURM files take turns on the one node.
  oneFileAtATime();
  it("each element of a gpu: 1 task's job array sees its own device", {
    timeout: 180_000,
  }, async () => {
    assert.equal(unavailable, null, `BLOCKWISE_REQUIRE_SLURM=1 but ${unavailable}`);
    const dir = newDir("array");
    const file = gpuPipeline(dir);

    const r = await runCli(["run", file, "--no-progress", "--log-dir", path.join(dir, "logs")], {
      cwd: dir,
      env: { CUDA_VISIBLE_DEVICES: "7" },
      timeoutMs: 150_000,
    });
    assert.equal(r.code, 0, describeRun(r));
    assert.match(
      r.stderr,
      /Task "predict" GPUs: SLURM allocates 1 per worker job \(--gres=gpu:1\); each worker sees its own/,
    );
    const seen = seenBy(dir);
    assert.equal(seen.length, 2, JSON.stringify(seen));
    assert.deepEqual(new Set(seen.map((s) => s.element)), new Set(["0", "1"]), "one job array");
    for (const s of seen) {
      assert.match(s.cuda ?? "", /^\d$/, `SLURM's device, not the scheduler's 7: ${s.cuda}`);
      assert.equal(s.jobGpus, s.cuda, "SLURM_JOB_GPUS names the same device");
    }
    assert.notEqual(seen[0]!.cuda, seen[1]!.cuda, "two workers, two devices");
  });

  it("a run inside an allocation with GPUs: each srun step worker sees its own", {
    timeout: 180_000,
  }, async () => {
    assert.equal(unavailable, null, `BLOCKWISE_REQUIRE_SLURM=1 but ${unavailable}`);
    const dir = newDir("steps");
    const file = gpuPipeline(dir);
    const command = [BUN, MAIN, "run", file, "--no-progress", "--log-dir", path.join(dir, "logs")]
      .map(shellQuote).join(" ");
    const r = spawnSync("sbatch", [
      "--parsable",
      "--ntasks=2",
      "--gres=gpu:2",
      "--job-name=blockwise-test-gpus",
      `--output=${path.join(dir, "alloc.log")}`,
      `--wrap=${command}`,
    ], { cwd: dir, encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const job = r.stdout.trim();
    const deadline = Date.now() + 150_000;
    for (;;) {
      const q = spawnSync("squeue", ["-h", "-t", "all", "-j", job, "-o", "%T"], {
        encoding: "utf8",
      });
      if (q.status !== 0 || !/^(PENDING|CONFIGURING|RUNNING|COMPLETING)$/.test(q.stdout.trim())) {
        break;
      }
      assert.ok(Date.now() < deadline, `job ${job} did not end`);
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const log = fs.readFileSync(path.join(dir, "alloc.log"), "utf8");
    assert.match(log, /All 4 blocks completed/, log);
    assert.match(log, /SLURM allocates 1 per worker job \(--gres=gpu:1\)/, log);
    const seen = seenBy(dir);
    assert.equal(seen.length, 2, JSON.stringify(seen));
    for (const s of seen) {
      assert.notEqual(s.step, null, "a job step");
      assert.match(s.cuda ?? "", /^\d$/, JSON.stringify(s));
      assert.equal(s.stepGpus, s.cuda, "SLURM_STEP_GPUS names the same device");
    }
    assert.notEqual(seen[0]!.cuda, seen[1]!.cuda, "two steps, two devices");
  });
});
