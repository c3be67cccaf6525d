/**
 * Remote workers on a real SLURM cluster (CI starts a one-node cluster with `.ci/slurm start`
 * and sets SLURM_CONF): the CLI in a child process (`bun main.ts run`), its workers sbatch jobs,
 * or srun steps when the run itself is a batch job. Every block logs each attempt with the job
 * (and step) it ran in; the ledger (`status --json`) must say every block done, and no worker
 * job may be left in squeue once the run ended, interrupted or not.
 *
 * Without a reachable cluster the tests are skipped, unless BLOCKWISE_REQUIRE_SLURM=1 (CI),
 * where that is a failure.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { REPO_ROOT, waitUntil, writePipeline } from "./fixtures/parallel/harness.ts";
import { shellQuote } from "../lib/errors.ts";
import { ledger } from "./fixtures/remote.ts";
import { oneFileAtATime, REQUIRE_SLURM as REQUIRED, slurmUnavailable } from "./fixtures/slurm.ts";

const BUN = path.join(REPO_ROOT, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO_ROOT, "main.ts");

const newDir = scratchDirs("slurm");

const unavailable = slurmUnavailable();
const skip = unavailable === null ? false : unavailable;

if (skip !== false && !REQUIRED) console.log(`remote_slurm.test.ts skipped: ${skip}`);

/** The CPUs of the cluster's (first) node. */
function nodeCpus(): number {
  const r = spawnSync("sinfo", ["-h", "-o", "%c"], { encoding: "utf8" });
  return Number.parseInt(r.stdout.trim().split("\n")[0] ?? "1", 10) || 1;
}

interface Exit {
  readonly code: number | null;
  readonly stderr: string;
}

interface Cli {
  readonly done: Promise<Exit>;
  interrupt(signal?: "SIGINT" | "SIGTERM"): void;
}

/** `bun main.ts ...args` in `cwd`; killed (and the test failed) after `ms`. */
function start(args: readonly string[], cwd: string, ms = 90_000): Cli {
  const child = spawn(BUN, [MAIN, ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: "1" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const done = new Promise<Exit>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`blockwise ${args.join(" ")} did not exit within ${ms} ms:\n${stderr}`));
    }, ms);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
  return { done, interrupt: (signal = "SIGINT") => process.kill(child.pid!, signal) };
}

function run(dir: string, pipeline: string, extra: readonly string[] = []): Cli {
  return start(
    [
      "run",
      pipeline,
      "--tracking-dir",
      path.join(dir, "tracking"),
      "--events",
      path.join(dir, "events.jsonl"),
      "--log-dir",
      path.join(dir, "logs"),
      "--progress-interval",
      "0.2",
      ...extra,
    ],
    dir,
  );
}

/**
 * A pipeline of tasks on a 2-D grid of `blocks` x 1 blocks; each attempt appends
 * `{task, id, attempt, job, step, array, element}` to `calls.jsonl` (the job, step and job array
 * element it ran in) and sleeps `ms`.
 */
function pipeline(
  dir: string,
  tasks: readonly { id: string; blocks: number; upstream?: string; launch: string }[],
  ms: number,
  maxWorkers = 2,
): string {
  const body = tasks.map((t) =>
    `{
      id: ${JSON.stringify(t.id)},
      ${t.upstream === undefined ? "" : `upstream: [${JSON.stringify(t.upstream)}],`}
      totalRoi: { offset: [0, 0], shape: [${t.blocks * 10}, 10] },
      readRoi: { offset: [0, 0], shape: [10, 10] },
      writeRoi: { offset: [0, 0], shape: [10, 10] },
      maxWorkers: ${maxWorkers},
      launch: ${t.launch},
      process(block) {
        const start = now();
        log("calls.jsonl", block, start, {
          job: process.env.SLURM_JOB_ID ?? null,
          step: process.env.SLURM_STEP_ID ?? null,
          array: process.env.SLURM_ARRAY_JOB_ID ?? null,
          element: process.env.SLURM_ARRAY_TASK_ID ?? null,
        });
        sleep(${ms});
      },
    }`
  );
  return writePipeline(
    dir,
    `import process from "node:process";
export default { tasks: [${body.join(", ")}] };
`,
  );
}

interface Call {
  readonly task: string;
  readonly id: string;
  readonly index: readonly number[];
  readonly attempt: number;
  readonly job: string | null;
  readonly step: string | null;
  readonly array: string | null;
  readonly element: string | null;
}

/** The job a block ran in as SLURM names it: `1234_5` for a job array's element, else `1234`. */
function jobOf(c: Call): string {
  return c.array === null ? c.job ?? "" : `${c.array}_${c.element}`;
}

function calls(dir: string): Call[] {
  const file = path.join(dir, "calls.jsonl");
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) =>
    JSON.parse(l) as Call
  );
}

/** Worker jobs of these tasks squeue still shows as active. */
function activeJobs(tasks: readonly string[]): string[] {
  const r = spawnSync(
    "squeue",
    ["-h", "-o", "%i %j %T", `--name=${tasks.map((t) => `blockwise-${t}`).join(",")}`],
    { encoding: "utf8" },
  );
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split("\n").filter((l) => l.trim() !== "");
}

/** Wait until `condition()` holds, asking every `everyMs` (SLURM's commands are not free). */
async function pollUntil(condition: () => boolean, what: string, ms: number, everyMs = 200) {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Gave up after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Every block of `task` (indices 0..blocks-1 along the first axis) ran, and exactly once. */
function assertOnce(all: readonly Call[], task: string, blocks: number): void {
  const ids = all.filter((c) => c.task === task).map((c) => c.index[0]!).sort((a, b) => a - b);
  assert.deepEqual(ids, Array.from({ length: blocks }, (_, i) => i), `task ${task}`);
}

describe("remote workers on SLURM", { skip: REQUIRED ? false : skip }, () => {
  // npm test runs Bun and Deno at once: their SLURM files take turns on the one node.
  oneFileAtATime();
  if (REQUIRED) {
    it("a SLURM cluster is reachable (BLOCKWISE_REQUIRE_SLURM=1)", () => {
      assert.equal(unavailable, null, `BLOCKWISE_REQUIRE_SLURM=1 but ${unavailable}`);
    });
  }

  it("a two-task pipeline whose workers are sbatch job arrays: every block done once", {
    skip,
  }, async () => {
    const dir = newDir("sbatch");
    const file = pipeline(dir, [
      { id: "sa", blocks: 12, launch: `"slurm"` },
      { id: "sb", blocks: 12, upstream: "sa", launch: `{ kind: "slurm", cpusPerWorker: 1 }` },
    ], 20);
    const exit = await run(dir, file).done;
    assert.equal(exit.code, 0, exit.stderr);
    assert.match(exit.stderr, /All 24 blocks completed/);
    const all = calls(dir);
    assertOnce(all, "sa", 12);
    assertOnce(all, "sb", 12);
    // sa's two workers started together: the elements of one job array. sb's start as its
    // blocks become ready (after sa's): an array when they came together, else plain jobs.
    const sa = all.filter((c) => c.task === "sa");
    for (const c of sa) assert.match(jobOf(c), /^\d+_[01]$/, JSON.stringify(c));
    assert.equal(new Set(sa.map((c) => c.array)).size, 1, "sa's workers are one array");
    for (const c of all) assert.match(jobOf(c), /^\d+(_[01])?$/, JSON.stringify(c));
    const logs = fs.readdirSync(path.join(dir, "logs", "workers"));
    for (const job of new Set(all.map(jobOf))) {
      assert.ok(logs.some((f) => f.endsWith(`-${job}.log`)), `${job}: ${logs.join(" ")}`);
    }
    const l = ledger(dir);
    assert.deepEqual(l.get("sa"), { ...l.get("sa")!, done: 12, failed: 0, pending: 0 });
    assert.deepEqual(l.get("sb"), { ...l.get("sb")!, done: 12, failed: 0, pending: 0 });
    assert.deepEqual(activeJobs(["sa", "sb"]), []);
  });

  it(
    "run inside an allocation: workers are srun steps of the run's own job; a step that waits for room is queued",
    {
      skip,
    },
    async () => {
      const dir = newDir("steps");
      // Three workers in a two-task allocation: one step waits until another ends.
      const file = pipeline(dir, [{ id: "st", blocks: 24, launch: `"slurm"` }], 60, 3);
      const events = path.join(dir, "events.jsonl");
      const command = [
        BUN,
        MAIN,
        "run",
        file,
        "--tracking-dir",
        path.join(dir, "tracking"),
        "--events",
        events,
      ].map(shellQuote).join(" ");
      // Submitted and then watched here: sbatch --wait polls every few seconds, far slower.
      const r = spawnSync(
        "sbatch",
        [
          "--parsable",
          "--ntasks=2",
          "--job-name=blockwise-test-alloc",
          `--output=${path.join(dir, "alloc.log")}`,
          `--wrap=${command} --no-progress`,
        ],
        { cwd: dir, encoding: "utf8", timeout: 60_000 },
      );
      assert.equal(r.status, 0, r.stderr);
      const allocation = r.stdout.trim();
      let state = "";
      await pollUntil(
        () => {
          const q = spawnSync("squeue", ["-h", "-t", "all", "-j", allocation, "-o", "%T"], {
            encoding: "utf8",
          });
          state = q.stdout.trim();
          return q.status !== 0 || !/^(PENDING|CONFIGURING|RUNNING|COMPLETING)$/.test(state);
        },
        `the run's own job ${allocation} to end`,
        90_000,
      );
      const log = fs.readFileSync(path.join(dir, "alloc.log"), "utf8");
      assert.equal(state, "COMPLETED", log);
      assert.match(log, /All 24 blocks completed/);
      const all = calls(dir);
      assertOnce(all, "st", 24);
      for (const c of all) {
        assert.equal(c.job, allocation, JSON.stringify(c));
        assert.match(c.step ?? "", /^\d+$/, JSON.stringify(c));
      }
      assert.equal(ledger(dir).get("st")?.done, 24);
      const progress = fs.readFileSync(events, "utf8").split("\n")
        .filter((l) => l.includes('"task_progress"')).map((l) =>
          JSON.parse(l) as { completed: number; queued?: number }
        );
      assert.ok(
        progress.some((p) => p.completed > 0 && p.completed < 24 && (p.queued ?? 0) > 0),
        progress.map((p) => JSON.stringify(p)).join("\n"),
      );
    },
  );

  it("scancel of one job array element mid-run: its blocks run again, every block done once", {
    skip,
  }, async () => {
    const dir = newDir("scancel");
    const blocks = 40;
    const file = pipeline(dir, [{ id: "sc", blocks, launch: `"slurm"` }], 100);
    const cli = run(dir, file);
    let victim = "";
    await waitUntil(
      () => {
        const perJob = new Map<string, number>();
        for (const c of calls(dir)) perJob.set(jobOf(c), (perJob.get(jobOf(c)) ?? 0) + 1);
        victim = [...perJob].find(([, n]) => n >= 3)?.[0] ?? "";
        return victim !== "";
      },
      "a worker job that ran 3 blocks",
      60_000,
    );
    // The workers are the elements of one array: cancel one of them only.
    assert.match(victim, /^\d+_[01]$/);
    const [array] = victim.split("_");
    assert.ok(
      activeJobs(["sc"]).some((l) => l.startsWith(`${victim} `)),
      activeJobs(["sc"]).join("\n"),
    );
    const cancelledAt = calls(dir).length;
    const cancel = spawnSync("scancel", [victim], { encoding: "utf8" });
    assert.equal(cancel.status, 0, cancel.stderr);
    const exit = await cli.done;
    assert.equal(exit.code, 0, exit.stderr);
    assert.match(exit.stderr, new RegExp(`All ${blocks} blocks completed`));
    if (process.env["SHOW_STDERR"] === "1") console.log(exit.stderr);
    const all = calls(dir);
    const ids = new Set(all.map((c) => c.id));
    assert.equal(ids.size, blocks);
    // Attempts beyond one per block: only blocks the cancelled element had started, run again.
    const seen = new Map<string, Call>();
    for (const c of all) {
      const first = seen.get(c.id);
      if (first === undefined) seen.set(c.id, c);
      else {
        assert.equal(
          jobOf(first),
          victim,
          `block ${c.id} ran twice: ${JSON.stringify([first, c])}`,
        );
      }
    }
    const after = all.slice(cancelledAt);
    // The other element went on; the replacement is a submission of its own (a plain job).
    assert.ok(after.some((c) => c.array === array && jobOf(c) !== victim), "the sibling went on");
    assert.ok(after.some((c) => c.array === null && /^\d+$/.test(c.job ?? "")), "a replacement");
    assert.deepEqual(
      ledger(dir).get("sc"),
      { ...ledger(dir).get("sc")!, done: blocks, failed: 0, pending: 0 },
    );
    assert.deepEqual(activeJobs(["sc"]), []);
  });

  it("more workers than the cluster has room for: some wait queued, the run completes", {
    skip,
  }, async () => {
    const dir = newDir("queued");
    // Each worker takes a whole node: only one runs at a time.
    const file = pipeline(
      dir,
      [{
        id: "sq",
        blocks: 20,
        launch: `{ kind: "slurm", cpusPerWorker: ${nodeCpus()} }`,
      }],
      60,
      3,
    );
    const exit = await run(dir, file).done;
    assert.equal(exit.code, 0, exit.stderr);
    assertOnce(calls(dir), "sq", 20);
    const progress = fs.readFileSync(path.join(dir, "events.jsonl"), "utf8").split("\n")
      .filter((l) => l.includes('"task_progress"')).map((l) =>
        JSON.parse(l) as { completed: number; queued?: number }
      );
    assert.ok(
      progress.some((p) => p.completed > 0 && (p.queued ?? 0) > 0),
      `no progress record with blocks done while workers were queued:\n${
        progress.map((p) => JSON.stringify(p)).join("\n")
      }`,
    );
    assert.match(exit.stderr, /\d+ running, \d+ queued/);
    assert.deepEqual(activeJobs(["sq"]), []);
  });

  it(
    "elastic workers { min: 1, max }: a backlog scales up to max, the tail releases workers down to min",
    {
      skip,
    },
    async () => {
      const dir = newDir("elastic");
      const max = Math.min(3, nodeCpus());
      const blocks = 60;
      const file = pipeline(
        dir,
        [{ id: "el", blocks, launch: `{ kind: "slurm", workers: { min: 1, max: ${max} } }` }],
        200,
        max,
      );
      const exit = await run(dir, file).done;
      assert.equal(exit.code, 0, exit.stderr);
      const all = calls(dir);
      assertOnce(all, "el", blocks);
      // The run started with one worker and scaled up to max worker jobs, each of which ran blocks.
      const jobs = new Set(all.map(jobOf));
      assert.equal(jobs.size, max, `jobs that ran blocks: ${[...jobs].join(" ")}`);
      const progress = fs.readFileSync(path.join(dir, "events.jsonl"), "utf8").split("\n")
        .filter((l) => l.includes('"task_progress"')).map((l) =>
          JSON.parse(l) as {
            completed: number;
            workers?: { queued: number; running: number; released: number };
          }
        );
      const lines = progress.map((p) => JSON.stringify(p)).join("\n");
      const workers = progress.map((p) => p.workers!);
      assert.ok(workers.every((w) => w !== undefined && w.queued + w.running <= max), lines);
      assert.equal(workers[0]!.queued + workers[0]!.running, 1, `it starts with min: ${lines}`);
      assert.ok(workers.some((w) => w.queued + w.running === max), lines);
      // The tail: idle workers released (not lost) before the end, down to min.
      const released = workers.at(-1)!.released;
      assert.ok(released >= 1 && released <= max - 1, lines);
      assert.match(
        exit.stderr,
        /worker \d+ released \(no block waits; launch\.workers\.min is 1\)/,
      );
      assert.doesNotMatch(exit.stderr, /stopped while running|replacement starts|abandoned/);
      assert.match(exit.stderr, /workers \d+ running, \d+ queued, \d+ released/);
      assert.equal(ledger(dir).get("el")?.done, blocks);
      assert.deepEqual(activeJobs(["el"]), []);
    },
  );

  it("a submission SLURM refuses: the run says why, in sbatch's words", { skip }, async () => {
    const dir = newDir("refused");
    const file = pipeline(dir, [{
      id: "sr",
      blocks: 4,
      launch: `{ kind: "slurm", partition: "no-such-partition" }`,
    }], 0);
    const exit = await run(dir, file).done;
    assert.equal(exit.code, 1, exit.stderr);
    assert.match(
      exit.stderr,
      /the SLURM job submission ended before its worker connected: sbatch failed \(status 1\): .*invalid partition/,
    );
    assert.match(exit.stderr, /Task "sr" abandoned/);
    assert.deepEqual(calls(dir), []);
  });

  for (
    const [how, signals, code] of [
      ["SIGINT", ["SIGINT"], 130],
      ["SIGTERM", ["SIGTERM"], 143],
      ["a second SIGINT (abort)", ["SIGINT", "SIGINT"], 130],
    ] as const
  ) {
    it(`a run interrupted by ${how} leaves no worker job behind`, { skip }, async () => {
      const dir = newDir("interrupt");
      // Three workers on a two-CPU node: one array element still pending when the run stops.
      const file = pipeline(dir, [{ id: "si", blocks: 60, launch: `"slurm"` }], 200, 3);
      const cli = run(dir, file);
      await waitUntil(() => calls(dir).length >= 2, "blocks running in worker jobs", 60_000);
      assert.notDeepEqual(activeJobs(["si"]), []);
      for (const signal of signals) {
        cli.interrupt(signal);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const exit = await cli.done;
      assert.equal(exit.code, code, exit.stderr);
      if (signals.length === 1) {
        assert.deepEqual(activeJobs(["si"]), []);
        const l = ledger(dir).get("si")!;
        assert.ok(l.done > 0 && l.done < 60, JSON.stringify(l));
      } else {
        // The hard exit cancels and leaves at once: SLURM may still be ending the jobs.
        await pollUntil(() => activeJobs(["si"]).length === 0, "no job left in squeue", 30_000);
      }
    });
  }
});
