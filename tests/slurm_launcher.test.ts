/**
 * The SLURM launcher without SLURM: the sbatch and srun command lines it builds (the secret
 * never among them), squeue's answers read back, and a launch followed from submission to its
 * end through a scripted runner: queued, running, ended with SLURM's state or sbatch's error;
 * cancel, close and abort cancel exactly the jobs still alive. `remote_slurm.test.ts` runs the
 * real thing.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { spawnSync } from "node:child_process";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import type { SlurmLaunchConfig } from "../lib/pipeline/spec.ts";
import { defaultLaunch } from "../lib/pipeline/launch_fields.ts";
import { InputError } from "../lib/errors.ts";
import type { WorkerLaunchSpec } from "../lib/remote/launcher.ts";
import {
  arrayWrapScript,
  type CommandResult,
  logPathOf,
  MAX_ARRAY_ELEMENTS,
  parseSbatchOutput,
  parseSqueue,
  phaseOfState,
  sbatchArgv,
  sbatchArrayArgv,
  sbatchArrayLogPattern,
  sbatchLogPattern,
  type SlurmRunner,
  srunArgv,
  type StepProcess,
} from "../lib/remote/slurm_commands.ts";
import { SlurmLauncher } from "../lib/remote/slurm_launcher.ts";
import { jobEndTime } from "../lib/remote/walltime.ts";

const newDir = scratchDirs("slurm-unit");

const SECRET = "5ec7e7".repeat(10);

function config(overrides: Partial<SlurmLaunchConfig> = {}): SlurmLaunchConfig {
  return { ...(defaultLaunch("slurm") as SlurmLaunchConfig), ...overrides };
}

function spec(logDir: string, workerId = 3): WorkerLaunchSpec {
  return {
    taskId: "predict",
    workerId,
    argv: ["/opt/bun", "/home/me/blockwise main.ts", "worker", "--connect", "10.0.0.1:4000"],
    env: { BLOCKWISE_SECRET: SECRET, BLOCKWISE_WORKER_SLOT: "ab".repeat(16) },
    logDir,
  };
}

/** A folder with executables named like SLURM's programs, for the launcher's PATH check. */
function fakeBin(programs: readonly string[]): string {
  const dir = newDir("bin");
  for (const p of programs) fs.writeFileSync(path.join(dir, p), "#!/bin/sh\n", { mode: 0o755 });
  return dir;
}

interface Call {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>> | undefined;
}

/** A runner whose answers the test scripts per program; it records every call. */
class ScriptedRunner implements SlurmRunner {
  readonly calls: Call[] = [];
  readonly syncCalls: (readonly string[])[] = [];
  readonly answers = new Map<string, (argv: readonly string[]) => CommandResult>();
  readonly steps: FakeStep[] = [];

  run(argv: readonly string[], env?: Readonly<Record<string, string>>): Promise<CommandResult> {
    this.calls.push({ argv, env });
    const answer = this.answers.get(argv[0]!);
    return Promise.resolve(answer?.(argv) ?? { status: 0, stdout: "", stderr: "" });
  }

  runSync(argv: readonly string[]): void {
    this.syncCalls.push(argv);
  }

  start(argv: readonly string[], env: Readonly<Record<string, string>>): StepProcess {
    const step = new FakeStep(argv, env);
    this.steps.push(step);
    return step;
  }

  called(program: string): (readonly string[])[] {
    return this.calls.filter((c) => c.argv[0] === program).map((c) => c.argv);
  }
}

class FakeStep implements StepProcess {
  readonly pid = 4242;
  readonly signals: string[] = [];
  readonly exited: Promise<string>;
  exit!: (how: string) => void;
  #listeners: ((text: string) => void)[] = [];

  constructor(readonly argv: readonly string[], readonly env: Readonly<Record<string, string>>) {
    this.exited = new Promise((resolve) => (this.exit = resolve));
  }

  onStderr(listener: (text: string) => void): void {
    this.#listeners.push(listener);
  }

  say(text: string): void {
    for (const l of this.#listeners) l(text);
  }

  signal(signal: "SIGTERM" | "SIGKILL"): void {
    this.signals.push(signal);
  }
}

/** Let resolved promises run their continuations. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

function ok(stdout: string): CommandResult {
  return { status: 0, stdout, stderr: "" };
}

function launcherWith(
  runner: ScriptedRunner,
  env: Record<string, string> = {},
  cfg: SlurmLaunchConfig = config(),
) {
  let now = 0;
  const launcher = new SlurmLauncher(cfg, {
    logDir: newDir("logs"),
    runId: "run-1",
    env: { PATH: fakeBin(["sbatch", "squeue", "scancel", "srun"]), ...env },
    runner,
    coalesceMs: 0,
    now: () => now,
    sleep: (ms) => {
      now += ms;
      return Promise.resolve();
    },
  });
  return { launcher, advance: (ms: number) => (now += ms) };
}

describe("sbatch and srun command lines", () => {
  it("sbatch: one task on one node, every option, output per job, the secret nowhere", () => {
    const s = spec("/shared/logs");
    const argv = sbatchArgv(
      config({
        partition: "gpu",
        account: "lab",
        time: "2:00:00",
        cpusPerWorker: 4,
        memPerWorker: "16G",
        gres: "gpu:1",
        extraArgs: ["--qos=short"],
      }),
      s,
      sbatchLogPattern(s),
    );
    assert.deepEqual(argv, [
      "sbatch",
      "--parsable",
      "--export=ALL",
      "--job-name=blockwise-predict",
      "--output=/shared/logs/predict-worker-3-%j.log",
      "--nodes=1",
      "--ntasks=1",
      "--partition=gpu",
      "--account=lab",
      "--time=2:00:00",
      "--cpus-per-task=4",
      "--mem=16G",
      "--gres=gpu:1",
      "--qos=short",
      "--wrap=exec /opt/bun '/home/me/blockwise main.ts' worker --connect 10.0.0.1:4000",
    ]);
    assert.ok(!argv.join(" ").includes(SECRET));
  });

  it("sbatch: defaults ask for nothing more; a % in the log folder is escaped", () => {
    const s = spec("/scratch/100%/logs");
    const pattern = sbatchLogPattern(s);
    assert.equal(pattern, "/scratch/100%%/logs/predict-worker-3-%j.log");
    assert.equal(logPathOf(pattern, "77"), "/scratch/100%/logs/predict-worker-3-77.log");
    const argv = sbatchArgv(config(), s, pattern);
    assert.equal(argv.filter((a) => /--(partition|account|time|cpus|mem|gres)/.test(a)).length, 0);
  });

  it("srun inside an allocation: an exact step, no placement options", () => {
    const s = spec("/logs");
    const cfg = config({ partition: "gpu", time: "1:00:00", cpusPerWorker: 2, gres: "gpu:1" });
    assert.deepEqual(srunArgv(cfg, s, true), [
      "srun",
      "--export=ALL",
      "--nodes=1",
      "--ntasks=1",
      "--exact",
      "--job-name=blockwise-predict-w3",
      "--cpus-per-task=2",
      "--gres=gpu:1",
      "--",
      ...s.argv,
    ]);
    const outside = srunArgv(cfg, s, false);
    assert.ok(outside.includes("--partition=gpu") && outside.includes("--time=1:00:00"));
    assert.ok(!outside.includes("--exact"));
    assert.ok(!outside.join(" ").includes(SECRET));
  });
});

describe("reading SLURM's answers", () => {
  it("squeue lines by job id; other lines are skipped", () => {
    const jobs = parseSqueue(
      "12|PENDING|Resources\n13|RUNNING|None\nslurm_load_jobs error\n14|CANCELLED|None\n\n",
    );
    assert.deepEqual([...jobs.keys()], ["12", "13", "14"]);
    assert.deepEqual(jobs.get("12"), { id: "12", state: "PENDING", reason: "Resources" });
  });

  it("states as phases", () => {
    for (const s of ["PENDING", "CONFIGURING", "REQUEUED"]) assert.equal(phaseOfState(s), "queued");
    for (const s of ["RUNNING", "SUSPENDED"]) assert.equal(phaseOfState(s), "running");
    for (const s of ["COMPLETING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"]) {
      assert.equal(phaseOfState(s), "ended");
    }
  });

  it("sbatch --parsable: a job id, with or without a cluster", () => {
    assert.equal(parseSbatchOutput("1234\n"), "1234");
    assert.equal(parseSbatchOutput("1234;big\n"), "1234");
    assert.equal(parseSbatchOutput("Submitted batch job 1234\n"), null);
  });
});

describe("SlurmLauncher", () => {
  it("refuses to start without sbatch on PATH, saying how to fix it", () => {
    assert.throws(
      () =>
        new SlurmLauncher(config(), {
          logDir: newDir("logs"),
          runId: "r",
          env: { PATH: fakeBin(["squeue"]) },
        }),
      (e: unknown) =>
        e instanceof InputError && /needs "sbatch", which is not on PATH/.test(e.message) &&
        /--launcher local/.test(e.message),
    );
  });

  it("inside an allocation it starts srun steps, outside it submits batch jobs", () => {
    const runner = new ScriptedRunner();
    assert.equal(launcherWith(runner).launcher.name, "SLURM (sbatch)");
    assert.equal(
      launcherWith(runner, { SLURM_JOB_ID: "88" }).launcher.name,
      "SLURM (srun steps in job 88)",
    );
    assert.equal(
      launcherWith(runner, { SLURM_JOB_ID: "88" }, config({ mode: "sbatch" })).launcher.name,
      "SLURM (sbatch)",
    );
  });

  it("a batch job: submitted with the worker's environment, queued, running, ended", async () => {
    const runner = new ScriptedRunner();
    runner.answers.set("sbatch", () => ok("501\n"));
    let squeue = "501|PENDING|Priority\n";
    runner.answers.set("squeue", () => ok(squeue));
    const { launcher, advance } = launcherWith(runner);
    const s = spec(newDir("logs"));
    const launch = launcher.launch(s);
    assert.equal(launch.phase(), "queued");
    await settle();
    const [submit] = runner.calls;
    assert.equal(submit!.argv[0], "sbatch");
    assert.equal(submit!.env?.["BLOCKWISE_SECRET"], SECRET);
    assert.equal(launch.label, "SLURM job 501");

    await launcher.poll();
    assert.deepEqual(runner.called("squeue").at(-1), [
      "squeue",
      "-h",
      "-r",
      "-t",
      "all",
      "-o",
      "%i|%T|%r",
      "-j",
      "501",
    ]);
    assert.equal(launch.phase(), "queued");
    squeue = "501|RUNNING|None\n";
    await launcher.poll();
    assert.equal(launch.phase(), "running");

    // phase() asks squeue again only once pollMs passed.
    const asked = runner.called("squeue").length;
    launch.phase();
    await settle();
    assert.equal(runner.called("squeue").length, asked);
    squeue = "501|TIMEOUT|None\n";
    advance(2000);
    launch.phase();
    await settle();
    assert.equal(launch.phase(), "ended");
    assert.match(
      launch.endReason(),
      /its state is TIMEOUT; its output: .*predict-worker-3-501\.log/,
    );
  });

  it("a job squeue no longer knows has ended", async () => {
    const runner = new ScriptedRunner();
    runner.answers.set("sbatch", () => ok("7\n"));
    runner.answers.set("squeue", () => ({
      status: 1,
      stdout: "",
      stderr: "slurm_load_jobs error: Invalid job id specified\n",
    }));
    const { launcher } = launcherWith(runner);
    const launch = launcher.launch(spec(newDir("logs")));
    await settle();
    await launcher.poll();
    assert.equal(launch.phase(), "ended");
    assert.match(launch.endReason(), /no longer listed by squeue/);
  });

  it("an unreachable controller changes nothing: the job stays as last seen", async () => {
    const runner = new ScriptedRunner();
    runner.answers.set("sbatch", () => ok("7\n"));
    let reachable = true;
    runner.answers.set("squeue", () =>
      reachable ? ok("7|RUNNING|None\n") : {
        status: 1,
        stdout: "",
        stderr: "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
      });
    const { launcher } = launcherWith(runner);
    const launch = launcher.launch(spec(newDir("logs")));
    await settle();
    await launcher.poll();
    reachable = false;
    await launcher.poll();
    assert.equal(launch.phase(), "running");
  });

  it("a refused submission ends the launch with sbatch's own words", async () => {
    const runner = new ScriptedRunner();
    runner.answers.set("sbatch", () => ({
      status: 1,
      stdout: "",
      stderr:
        "sbatch: error: invalid partition specified: nosuch\nsbatch: error: Batch job submission failed: Invalid partition name specified\n",
    }));
    const { launcher } = launcherWith(runner, {}, config({ partition: "nosuch" }));
    const launch = launcher.launch(spec(newDir("logs")));
    await settle();
    assert.equal(launch.phase(), "ended");
    assert.match(
      launch.endReason(),
      /^sbatch failed \(status 1\): .*invalid partition specified: nosuch/,
    );
    await launcher.close();
    assert.equal(runner.called("scancel").length, 0);
  });

  it("cancel: scancel of that job, also when asked while sbatch still runs", async () => {
    const runner = new ScriptedRunner();
    let next = 100;
    runner.answers.set("sbatch", () => ok(`${next++}\n`));
    const { launcher } = launcherWith(runner);
    const early = launcher.launch(spec(newDir("logs"), 1));
    early.cancel();
    assert.equal(runner.called("scancel").length, 0);
    await settle();
    assert.deepEqual(runner.called("scancel"), [["scancel", "100"]]);
    const later = launcher.launch(spec(newDir("logs"), 2));
    await settle();
    later.cancel();
    later.cancel();
    assert.deepEqual(runner.called("scancel"), [["scancel", "100"], ["scancel", "101"]]);
  });

  it("close: jobs that end by themselves are left alone, the rest cancelled and waited for", async () => {
    const runner = new ScriptedRunner();
    let next = 1;
    runner.answers.set("sbatch", () => ok(`${next++}\n`));
    let cancelled = false;
    runner.answers.set("scancel", () => {
      cancelled = true;
      return ok("");
    });
    // Job 1 finishes on its own; job 2 runs until it is cancelled.
    runner.answers.set(
      "squeue",
      () => ok(`1|COMPLETED|None\n2|${cancelled ? "CANCELLED" : "RUNNING"}|None\n`),
    );
    const { launcher } = launcherWith(runner);
    launcher.launch(spec(newDir("logs"), 1));
    launcher.launch(spec(newDir("logs"), 2));
    await settle();
    await launcher.close();
    assert.deepEqual(runner.called("scancel"), [["scancel", "2"]]);
    const last = runner.called("squeue").at(-1)!;
    assert.equal(last.at(-1), "2");
  });

  it("closing waits while a job is COMPLETING (its processes still being cleaned up)", async () => {
    const runner = new ScriptedRunner();
    runner.answers.set("sbatch", () => ok("9\n"));
    const states = ["RUNNING", "RUNNING", "COMPLETING", "COMPLETING", "COMPLETED"];
    runner.answers.set(
      "squeue",
      () => ok(`9|${states.length > 1 ? states.shift() : states[0]}|None\n`),
    );
    let cancelled = false;
    runner.answers.set("scancel", () => {
      cancelled = true;
      return ok("");
    });
    const { launcher } = launcherWith(runner);
    const launch = launcher.launch(spec(newDir("logs")));
    await settle();
    await launcher.poll();
    assert.equal(launch.phase(), "running");
    await launcher.poll();
    await launcher.poll();
    // No worker comes from a completing job, but it is not gone yet.
    assert.equal(launch.phase(), "ended");
    await launcher.close();
    assert.equal(cancelled, false);
    assert.equal(states.length, 1, "close polled until the job was COMPLETED");
  });

  it("abort: one synchronous scancel of every job still alive", async () => {
    const runner = new ScriptedRunner();
    let next = 1;
    runner.answers.set("sbatch", () => ok(`${next++}\n`));
    runner.answers.set("squeue", () => ok("1|COMPLETED|None\n2|PENDING|None\n3|RUNNING|None\n"));
    const { launcher } = launcherWith(runner);
    for (const id of [1, 2, 3]) launcher.launch(spec(newDir("logs"), id));
    await settle();
    await launcher.poll();
    launcher.abort();
    assert.deepEqual(runner.syncCalls, [["scancel", "2", "3"]]);
  });

  it("an srun step waits (queued) until squeue lists it, then runs; it ends with srun's errors", async () => {
    const runner = new ScriptedRunner();
    let steps = "88.batch|batch\n";
    runner.answers.set("squeue", () => ok(steps));
    const { launcher, advance } = launcherWith(runner, { SLURM_JOB_ID: "88" });
    const s = spec(newDir("logs"));
    const launch = launcher.launch(s);
    const step = runner.steps[0]!;
    assert.equal(step.argv[0], "srun");
    assert.ok(step.argv.includes("--exact"));
    assert.ok(step.argv.includes("--job-name=blockwise-predict-w3"));
    assert.equal(step.env["BLOCKWISE_SECRET"], SECRET);
    assert.equal(launch.phase(), "queued");
    await settle();
    assert.deepEqual(runner.called("squeue").at(-1), [
      "squeue",
      "-h",
      "-s",
      "-o",
      "%i|%j",
      "-j",
      "88",
    ]);
    assert.equal(launch.phase(), "queued");
    steps = "88.0|blockwise-predict-w3\n88.batch|batch\n";
    advance(2000);
    launch.phase();
    await settle();
    assert.equal(launch.phase(), "running");
    step.say(
      "srun: error: Unable to create step for job 88: Invalid generic resource (gres) specification\n",
    );
    step.exit("it exited with status 1");
    await settle();
    assert.equal(launch.phase(), "ended");
    assert.match(
      launch.endReason(),
      /^it exited with status 1: Unable to create step for job 88: Invalid generic resource .*\(its output: .*predict-worker-3\.log\)$/,
    );
  });

  it("srun outside an allocation: queued while srun says its job waits", () => {
    const runner = new ScriptedRunner();
    const { launcher } = launcherWith(runner, {}, config({ mode: "srun", partition: "gpu" }));
    assert.equal(launcher.name, "SLURM (srun)");
    const launch = launcher.launch(spec(newDir("logs")));
    const step = runner.steps[0]!;
    assert.ok(step.argv.includes("--job-name=blockwise-predict"));
    assert.ok(step.argv.includes("--partition=gpu"));
    assert.equal(launch.phase(), "running");
    step.say("srun: job 5 queued and waiting for resources\n");
    assert.equal(launch.phase(), "queued");
    step.say("srun: job 5 has been allocated resources\n");
    assert.equal(launch.phase(), "running");
    assert.equal(runner.called("squeue").length, 0);
  });

  it("an srun step is cancelled with SIGTERM (srun then cancels its step)", async () => {
    const runner = new ScriptedRunner();
    const { launcher } = launcherWith(runner, { SLURM_JOB_ID: "88" });
    const launch = launcher.launch(spec(newDir("logs")));
    launch.cancel();
    launch.cancel();
    const step = runner.steps[0]!;
    assert.deepEqual(step.signals, ["SIGTERM"]);
    step.exit("it was killed by SIGTERM");
    await launcher.close();
    assert.deepEqual(step.signals, ["SIGTERM"]);
  });
});

/** Launch `n` workers of `task` in one turn: same argv, log folder and environment, own slots. */
function arraySpecs(logDir: string, n: number, task = "predict"): WorkerLaunchSpec[] {
  return Array.from({ length: n }, (_, i) => ({
    ...spec(logDir, i),
    taskId: task,
    env: { BLOCKWISE_SECRET: SECRET, BLOCKWISE_WORKER_SLOT: slotOf(i) },
  }));
}

/** A distinct 32-hex-digit slot per element. */
function slotOf(i: number): string {
  return i.toString(16).padStart(32, "c");
}

/** Runs an array element's wrap script as its batch shell would, with `env` only. */
function runWrap(shell: string, script: string, env: Record<string, string>) {
  return spawnSync(shell, ["-c", script], {
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...env },
    encoding: "utf8",
  });
}

describe("job arrays", () => {
  it("launches of one task in the same turn are one sbatch --array; later ones a new job", async () => {
    const runner = new ScriptedRunner();
    let next = 700;
    runner.answers.set("sbatch", () => ok(`${next++}\n`));
    const { launcher } = launcherWith(runner);
    const logs = newDir("logs");
    const launches = arraySpecs(logs, 3).map((s) => launcher.launch(s));
    const other = launcher.launch(arraySpecs(logs, 1, "segment")[0]!);
    assert.equal(launches[0]!.label, "SLURM job (being submitted)");
    await settle();
    const submits = runner.calls.filter((c) => c.argv[0] === "sbatch");
    assert.equal(submits.length, 2, "one array for predict, one plain job for segment");
    const array = submits.find((c) => c.argv.some((a) => a.startsWith("--array=")))!;
    assert.ok(array.argv.includes("--array=0-2"));
    assert.ok(array.argv.includes("--job-name=blockwise-predict"));
    assert.equal(array.env?.["BLOCKWISE_WORKER_SLOTS"], [0, 1, 2].map(slotOf).join(","));
    assert.equal(array.env?.["BLOCKWISE_WORKER_SLOT"], undefined);
    assert.equal(array.env?.["BLOCKWISE_SECRET"], SECRET);
    assert.deepEqual(launches.map((l) => l.label), [0, 1, 2].map((i) => `SLURM job 700_${i}`));
    assert.equal(other.label, "SLURM job 701");
    const single = submits.find((c) => c !== array)!;
    assert.ok(!single.argv.some((a) => a.startsWith("--array")));
    assert.equal(single.env?.["BLOCKWISE_WORKER_SLOT"], slotOf(0));
    // A replacement launched later is a submission of its own.
    const replacement = launcher.launch(arraySpecs(logs, 1)[0]!);
    await settle();
    assert.equal(runner.called("sbatch").length, 3);
    assert.equal(replacement.label, "SLURM job 702");
  });

  it("launches differing in more than their slot are never one array", async () => {
    const runner = new ScriptedRunner();
    let next = 10;
    runner.answers.set("sbatch", () => ok(`${next++}\n`));
    const { launcher } = launcherWith(runner);
    const [a, b] = arraySpecs(newDir("logs"), 2);
    launcher.launch(a!);
    launcher.launch({ ...b!, env: { ...b!.env, OMP_NUM_THREADS: "4" } });
    await settle();
    assert.equal(runner.called("sbatch").length, 2);
    assert.ok(!runner.called("sbatch").flat().some((a) => a.startsWith("--array")));
  });

  it("the array's command line: throttle, %A_%a logs, the wrap script; no secret, no slot", () => {
    const [s] = arraySpecs("/shared/logs", 1);
    const argv = sbatchArrayArgv(
      config({ arrayThrottle: 5, partition: "gpu" }),
      s!,
      sbatchArrayLogPattern(s!),
      40,
      "BLOCKWISE_WORKER_SLOT",
    );
    assert.deepEqual(argv.slice(0, -1), [
      "sbatch",
      "--parsable",
      "--export=ALL",
      "--array=0-39%5",
      "--job-name=blockwise-predict",
      "--output=/shared/logs/predict-worker-%A_%a.log",
      "--nodes=1",
      "--ntasks=1",
      "--partition=gpu",
    ]);
    assert.equal(
      argv.at(-1),
      `--wrap=${arrayWrapScript(s!.argv, "BLOCKWISE_WORKER_SLOT")}`,
    );
    assert.match(argv.at(-1)!, /exec \/opt\/bun '\/home\/me\/blockwise main.ts' worker --connect/);
    assert.ok(!argv.join(" ").includes(SECRET));
    assert.ok(!argv.join(" ").includes(slotOf(0)));
    assert.equal(
      logPathOf("/shared/100%%/predict-worker-%A_%a.log", "812_17"),
      "/shared/100%/predict-worker-812_17.log",
    );
  });

  it("each element's batch script execs the worker with its own slot (sh and bash)", () => {
    const argv = [
      "sh",
      "-c",
      'printf "%s|%s|%s\\n" "$BLOCKWISE_WORKER_SLOT" "${BLOCKWISE_WORKER_SLOTS-unset}" "$1"',
      "sh",
      'it\'s a "quoted" $HOME',
    ];
    const script = arrayWrapScript(argv, "BLOCKWISE_WORKER_SLOT");
    const slots = [0, 1, 2].map(slotOf).join(",");
    for (const shell of ["sh", "bash"]) {
      for (const element of [0, 1, 2]) {
        const r = runWrap(shell, script, {
          BLOCKWISE_WORKER_SLOTS: slots,
          SLURM_ARRAY_TASK_ID: String(element),
        });
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout, `${slotOf(element)}|unset|it's a "quoted" $HOME\n`);
      }
      for (const env of [{ SLURM_ARRAY_TASK_ID: "3" }, {}]) {
        const r = runWrap(shell, script, { BLOCKWISE_WORKER_SLOTS: slots, ...env });
        assert.equal(r.status, 2);
        assert.equal(r.stdout, "");
        assert.match(
          r.stderr,
          /no worker slot for job array element (3|\(none\)) in BLOCKWISE_WORKER_SLOTS/,
        );
      }
    }
  });

  it("above MAX_ARRAY_ELEMENTS the launches are split into several submissions", async () => {
    const runner = new ScriptedRunner();
    let next = 1;
    runner.answers.set("sbatch", () => ok(`${next++}\n`));
    const { launcher } = launcherWith(runner);
    const launches = arraySpecs(newDir("logs"), MAX_ARRAY_ELEMENTS + 2).map((s) =>
      launcher.launch(s)
    );
    await settle();
    const submits = runner.calls.filter((c) => c.argv[0] === "sbatch");
    assert.equal(submits.length, 2);
    assert.ok(submits[0]!.argv.includes(`--array=0-${MAX_ARRAY_ELEMENTS - 1}`));
    assert.ok(submits[1]!.argv.includes("--array=0-1"));
    const first = submits[0]!.env!["BLOCKWISE_WORKER_SLOTS"]!;
    assert.equal(first.split(",").length, MAX_ARRAY_ELEMENTS);
    assert.ok(first.length < 128 * 1024 - "BLOCKWISE_WORKER_SLOTS=".length);
    assert.equal(submits[1]!.env!["BLOCKWISE_WORKER_SLOTS"], [1000, 1001].map(slotOf).join(","));
    assert.equal(launches[999]!.label, "SLURM job 1_999");
    assert.equal(launches[1001]!.label, "SLURM job 2_1");
  });

  it("squeue -r lines of array elements, pending ones included", () => {
    const jobs = parseSqueue(
      "700_0|RUNNING|None\n700_1|PENDING|Resources\n700_[2-4]|PENDING|Priority\n701|RUNNING|None\n",
    );
    assert.deepEqual([...jobs.keys()], ["700_0", "700_1", "701"]);
    assert.deepEqual(jobs.get("700_1"), { id: "700_1", state: "PENDING", reason: "Resources" });
  });

  it("one squeue per poll for every array; an element that ends is reported with its own log", async () => {
    const runner = new ScriptedRunner();
    let next = 700;
    runner.answers.set("sbatch", () => ok(`${next++}\n`));
    let squeue = "700_0|RUNNING|None\n700_1|PENDING|Resources\n700_2|PENDING|Resources\n";
    runner.answers.set("squeue", () => ok(squeue));
    const { launcher } = launcherWith(runner);
    const logs = newDir("logs");
    const launches = arraySpecs(logs, 3).map((s) => launcher.launch(s));
    const plain = launcher.launch(arraySpecs(newDir("logs"), 1)[0]!);
    await settle();
    await launcher.poll();
    assert.deepEqual(runner.called("squeue"), [
      ["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%r", "-j", "700,701"],
    ]);
    assert.deepEqual(launches.map((l) => l.phase()), ["running", "queued", "queued"]);
    assert.equal(plain.phase(), "ended", "701 was not listed");
    squeue = "700_0|RUNNING|None\n700_1|NODE_FAIL|None\n";
    await launcher.poll();
    assert.deepEqual(launches.map((l) => l.phase()), ["running", "ended", "ended"]);
    assert.match(
      launches[1]!.endReason(),
      new RegExp(`its state is NODE_FAIL; its output: ${logs}/predict-worker-700_1\\.log$`),
    );
    assert.match(
      launches[2]!.endReason(),
      /no longer listed by squeue .*predict-worker-700_2\.log/,
    );
  });

  it("cancel ends one element (scancel 1234_5); close and abort cancel whole arrays", async () => {
    const runner = new ScriptedRunner();
    let next = 700;
    runner.answers.set("sbatch", () => ok(`${next++}\n`));
    const cancelled = new Set<string>();
    runner.answers.set("scancel", (argv) => {
      for (const id of argv.slice(1)) cancelled.add(id);
      return ok("");
    });
    const state = (id: string) =>
      cancelled.has(id) || cancelled.has(id.split("_")[0]!) ? "CANCELLED" : "RUNNING";
    runner.answers.set(
      "squeue",
      () =>
        ok(
          ["700_0", "700_1", "700_2", "701_0", "701_1"].map((id) => `${id}|${state(id)}|None\n`)
            .join(""),
        ),
    );
    const { launcher } = launcherWith(runner);
    const a = arraySpecs(newDir("logs"), 3).map((s) => launcher.launch(s));
    await settle();
    const b = arraySpecs(newDir("logs"), 2).map((s) => launcher.launch(s));
    await settle();
    a[1]!.cancel();
    a[1]!.cancel();
    assert.deepEqual(runner.called("scancel"), [["scancel", "700_1"]]);
    await launcher.poll();
    assert.deepEqual(a.map((l) => l.phase()), ["running", "ended", "running"]);
    assert.equal(b[0]!.phase(), "running");
    launcher.abort();
    assert.deepEqual(runner.syncCalls, [["scancel", "700", "701"]]);
    await launcher.close();
    assert.deepEqual(runner.called("scancel").slice(1), [["scancel", "700", "701"]]);
    assert.deepEqual([...a, ...b].map((l) => l.phase()), Array(5).fill("ended"));
  });

  it("launches not yet submitted when the run closes are never submitted", async () => {
    const runner = new ScriptedRunner();
    runner.answers.set("sbatch", () => ok("5\n"));
    const { launcher } = launcherWith(runner);
    const launches = arraySpecs(newDir("logs"), 2).map((s) => launcher.launch(s));
    await launcher.close();
    await settle();
    assert.equal(runner.called("sbatch").length, 0);
    for (const l of launches) {
      assert.equal(l.phase(), "ended");
      assert.match(l.endReason(), /the run ended before it was submitted/);
    }
  });
});

describe("a worker's job end inside a job array", () => {
  it("an element asks squeue for itself (array_index), not the array's id", () => {
    const asked: (readonly string[])[] = [];
    const run = (_program: string, args: readonly string[]) => {
      asked.push(args);
      return "2026-12-06T05:27:46\n";
    };
    const env = { SLURM_JOB_ID: "253", SLURM_ARRAY_JOB_ID: "253", SLURM_ARRAY_TASK_ID: "1" };
    assert.equal(jobEndTime(env, run), new Date(2026, 11, 6, 5, 27, 46).getTime());
    assert.deepEqual(asked, [["-h", "-j", "253_1", "-o", "%e"]]);
    jobEndTime({ SLURM_JOB_ID: "77" }, run);
    assert.deepEqual(asked.at(-1), ["-h", "-j", "77", "-o", "%e"]);
  });
});
