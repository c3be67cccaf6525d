/**
 * daisy tasks whose workers are SLURM jobs (`daisy.Task(..., launch="slurm")`), on a real
 * cluster (CI starts a one-node cluster with `.ci/slurm start` and sets SLURM_CONF): a daisy v2
 * script run by the Python of a fresh venv holding blockwise's wheel
 * (tests/fixtures/python_venv.ts), with a block-function task and a downstream worker-function
 * task (a `daisy.Client()` loop). Each worker is a batch job running
 * `python -m blockwise.daisy._job`, which imports the script by path; every block appends
 * `<task> <block id> <SLURM_JOB_ID> <pid>` to a file. Every block must run exactly once, in a
 * SLURM job and never in the script's own process; the ledger (`blockwise status --json`) must
 * say every block done, and no worker job may be left in squeue once the script ended.
 *
 * Without a reachable cluster the tests are skipped, unless BLOCKWISE_REQUIRE_SLURM=1 (CI); without
 * /usr/bin/python3, its venv module or pytest they are skipped, unless
 * BLOCKWISE_REQUIRE_PYTHON_PACKAGE=1. Under either variable a missing piece is a failure.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import {
  type PackageVenv,
  packageVenv,
  REQUIRE_PYTHON_PACKAGE,
  venvMissing,
} from "./fixtures/python_venv.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { oneFileAtATime, REQUIRE_SLURM, slurmUnavailable } from "./fixtures/slurm.ts";

const newDir = scratchDirs("daisy-slurm");

const noVenv = venvMissing();
const slurmWhy = slurmUnavailable();
/** Each missing piece skips, unless its variable asks for it (then the test fails, saying so). */
const skip = slurmWhy !== null && !REQUIRE_SLURM
  ? slurmWhy
  : noVenv !== null && !REQUIRE_PYTHON_PACKAGE
  ? noVenv
  : false;
if (skip !== false) console.log(`daisy_slurm.test.ts skipped: ${skip}`);

/** Two tasks of 12 blocks each over a 1-D ROI; their job names are `blockwise-<task>`. */
const BLOCKS = 12;
const TASKS = ["dsl-square", "dsl-drive"] as const;

const SCRIPT = `
import os
import sys
import time

import blockwise.daisy.v2 as daisy

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(HERE, "blocks.txt")


def record(task, block):
    # The job as its log file names it: <array>_<element> for an element of a job array.
    array = os.environ.get("SLURM_ARRAY_JOB_ID")
    job = os.environ.get("SLURM_JOB_ID", "-")
    label = "%s_%s" % (array, os.environ.get("SLURM_ARRAY_TASK_ID")) if array else job
    line = "%s %d %s %s %d\\n" % (task, block.block_id[1], label, job, os.getpid())
    with open(RECORDS, "a") as out:
        out.write(line)


def square(block):
    record("${TASKS[0]}", block)
    time.sleep(0.3)  # long enough for both workers to get blocks


def drive():
    client = daisy.Client()
    while True:
        with client.acquire_block() as block:
            if block is None:
                break
            record("${TASKS[1]}", block)


if __name__ == "__main__":
    with open(os.path.join(HERE, "main.pid"), "w") as out:
        out.write(str(os.getpid()))
    roi = lambda n: daisy.Roi([0], [n])
    a = daisy.Task("${TASKS[0]}", roi(${BLOCKS * 10}), roi(10), roi(10), process_function=square,
                   read_write_conflict=False, max_workers=2,
                   launch={"kind": "slurm", "cpusPerWorker": 1})
    b = daisy.Task("${TASKS[1]}", roi(${BLOCKS * 10}), roi(10), roi(10), process_function=drive,
                   read_write_conflict=False, max_workers=1, launch="slurm")
    ok = daisy.run_blockwise(a + b, progress=False, tracking_dir=os.path.join(HERE, "ledger"))
    sys.exit(0 if ok else 1)
`;

interface Exit {
  readonly code: number | null;
  readonly signal: string | null;
  readonly output: string;
}

/** The venv's python running `script` in `cwd`; killed (and the test failed) after `ms`. */
function runScript(v: PackageVenv, script: string, cwd: string, ms: number): Promise<Exit> {
  const child = spawn(v.python, [script], {
    cwd,
    env: v.env({ NO_COLOR: "1" }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (output += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (output += c));
  return new Promise<Exit>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${script} did not exit within ${ms} ms:\n${output}`));
    }, ms);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}

interface BlockRecord {
  readonly task: string;
  readonly block: number;
  /** The job as its log names it (`<array>_<element>` in a job array). */
  readonly job: string;
  /** SLURM_JOB_ID. */
  readonly jobId: string;
  readonly pid: number;
}

function records(dir: string): BlockRecord[] {
  const file = path.join(dir, "blocks.txt");
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => {
    const [task, block, job, jobId, pid] = l.split(" ");
    return { task: task!, block: Number(block), job: job!, jobId: jobId!, pid: Number(pid) };
  });
}

/** Every `.log` file under `dir` (the worker jobs' output), each with its last lines. */
function logsUnder(dir: string): string {
  if (!fs.existsSync(dir)) return `(no ${dir})`;
  const files = (fs.readdirSync(dir, { recursive: true }) as string[])
    .map((f) => path.join(dir, f)).filter((f) => f.endsWith(".log") && fs.statSync(f).isFile())
    .sort();
  return files.map((f) =>
    `--- ${f}\n${fs.readFileSync(f, "utf8").split("\n").slice(-30).join("\n")}`
  ).join("\n");
}

/** Jobs squeue still shows as active: those of these names, and those of these ids. */
function activeJobs(names: readonly string[], ids: readonly string[]): string[] {
  const byName = spawnSync(
    "squeue",
    ["-h", "-o", "%i %j %T", `--name=${names.map((t) => `blockwise-${t}`).join(",")}`],
    { encoding: "utf8" },
  );
  assert.equal(byName.status, 0, byName.stderr);
  const lines = byName.stdout.split("\n").filter((l) => l.trim() !== "");
  if (ids.length > 0) {
    // A job that ended a while ago is unknown to squeue: "Invalid job id specified", status 1.
    const byId = spawnSync("squeue", ["-h", "-o", "%i %j %T", `--jobs=${ids.join(",")}`], {
      encoding: "utf8",
    });
    if (byId.status === 0) lines.push(...byId.stdout.split("\n").filter((l) => l.trim() !== ""));
    else assert.match(byId.stderr, /Invalid job id/, byId.stderr);
  }
  return [...new Set(lines)];
}

describe('daisy tasks with launch="slurm"', { skip }, () => {
  // npm test runs Bun and Deno at once: their SLURM files take turns on the one node.
  oneFileAtATime();
  it(
    "a block-function task and a worker-function task as SLURM jobs: every block once, in a job",
    { timeout: 300_000 },
    async () => {
      if (slurmWhy !== null) assert.fail(`BLOCKWISE_REQUIRE_SLURM=1 but ${slurmWhy}`);
      if (noVenv !== null) assert.fail(`BLOCKWISE_REQUIRE_PYTHON_PACKAGE=1 but ${noVenv}`);
      const v = packageVenv();
      const dir = newDir("two-tasks");
      const script = path.join(dir, "launched.py");
      fs.writeFileSync(script, SCRIPT);
      const started = Date.now();
      const exit = await runScript(v, script, dir, 240_000);
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const ledger = path.join(dir, "ledger");
      if (process.env["SHOW_STDERR"] === "1") console.log(exit.output);
      const context = () =>
        `${exit.output}\nworker logs:\n${logsUnder(path.join(ledger, ".workers"))}`;
      assert.equal(
        exit.code,
        0,
        `exit ${exit.code ?? exit.signal} after ${seconds} s\n${context()}`,
      );

      const all = records(dir);
      const main = Number(fs.readFileSync(path.join(dir, "main.pid"), "utf8"));
      for (const task of TASKS) {
        const ids = all.filter((r) => r.task === task).map((r) => r.block).sort((a, b) => a - b);
        assert.deepEqual(ids, Array.from({ length: BLOCKS }, (_, i) => i), `task ${task}`);
      }
      assert.equal(all.length, TASKS.length * BLOCKS);
      for (const r of all) {
        assert.match(r.job, /^\d+(_\d+)?$/, `a block outside a SLURM job: ${JSON.stringify(r)}`);
        assert.notEqual(r.pid, main, `a block ran in the script's process: ${JSON.stringify(r)}`);
      }
      // The block function's two workers ran blocks, each in a job of its own; the worker
      // function's worker in another.
      const jobsOf = (task: string) =>
        new Set(all.filter((r) => r.task === task).map((r) => r.job));
      const [square, drive] = TASKS.map(jobsOf);
      assert.equal(square!.size, 2, JSON.stringify(all));
      assert.equal(drive!.size, 1, JSON.stringify(all));
      assert.ok([...square!].every((j) => !drive!.has(j)), JSON.stringify(all));
      // Each job's output is where the run says worker logs are: <ledger>/.workers/<run>/.
      const shown = /remote worker logs +(\S+)\/<task>-worker-<n>\[-<job id>\]\.log/.exec(
        exit.output,
      );
      assert.ok(shown !== null, exit.output);
      const logs = fs.readdirSync(shown[1]!);
      for (const job of new Set(all.map((r) => r.job))) {
        assert.ok(logs.some((f) => f.endsWith(`-${job}.log`)), `${job}: ${logs.join(" ")}`);
      }

      const status = spawnSync(v.blockwise, ["status", "--json", ledger], {
        cwd: dir,
        encoding: "utf8",
        env: v.env(),
        timeout: 60_000,
      });
      assert.equal(status.status, 0, status.stderr);
      const stores = (JSON.parse(status.stdout) as {
        stores: { task: string; blocks: number; done: number; failed: number; pending: number }[];
      }).stores;
      assert.deepEqual(
        stores.map((s) => ({
          task: s.task,
          blocks: s.blocks,
          done: s.done,
          failed: s.failed,
          pending: s.pending,
        })).sort((a, b) => a.task.localeCompare(b.task)),
        [...TASKS].sort().map((task) => ({
          task,
          blocks: BLOCKS,
          done: BLOCKS,
          failed: 0,
          pending: 0,
        })),
        status.stdout,
      );

      assert.deepEqual(activeJobs(TASKS, [...new Set(all.map((r) => r.jobId))]), []);
      console.log(
        `daisy_slurm: ${all.length} blocks in ${
          new Set(all.map((r) => r.job)).size
        } SLURM jobs; the script took ${seconds} s`,
      );
    },
  );
});
