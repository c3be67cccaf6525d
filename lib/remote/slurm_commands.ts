/**
 * SLURM's command line as the launcher uses it: the `sbatch` and `srun` argv of one worker,
 * `squeue`'s answer read back, and the runner that executes them (tests inject their own). The
 * worker's environment (the run's secret among it) goes to SLURM through the environment of
 * `sbatch`/`srun` with `--export=ALL`, never on their command line, which `ps` and `squeue` show.
 */

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import process from "node:process";
import type { SlurmLaunchConfig } from "../pipeline/spec.ts";
import { InputError, shellQuote } from "../errors.ts";
import type { WorkerLaunchSpec } from "./launcher.ts";

/** How a command ended. `status` is null when it could not start or was killed. */
export interface CommandResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A started `srun`: its stderr (SLURM's own messages) is watched, its output logged. */
export interface StepProcess {
  readonly pid: number | undefined;
  /** Resolves once it exited, with how: "it exited with status 1", "it was killed by SIGTERM". */
  readonly exited: Promise<string>;
  /** SLURM's messages and the worker's stderr, as they come. */
  onStderr(listener: (text: string) => void): void;
  signal(signal: "SIGTERM" | "SIGKILL"): void;
}

/** What the launcher needs of the machine; `systemRunner` does it for real. */
export interface SlurmRunner {
  /** Run a command to its end; `env` is added to this process's environment. */
  run(argv: readonly string[], env?: Readonly<Record<string, string>>): Promise<CommandResult>;
  /** Run a command synchronously, best effort (the process is about to exit). */
  runSync(argv: readonly string[]): void;
  /** Start `srun` for one worker, its output appended to `logPath`. */
  start(
    argv: readonly string[],
    env: Readonly<Record<string, string>>,
    logPath: string,
  ): StepProcess;
}

/** A SLURM command taking longer than this counts as failed (an unresponsive controller). */
const COMMAND_TIMEOUT_MS = 60_000;

export const systemRunner: SlurmRunner = {
  run(argv, env) {
    return new Promise((done) => {
      let child: ChildProcess;
      try {
        child = spawn(argv[0]!, argv.slice(1), {
          env: env === undefined ? process.env : { ...process.env, ...env },
          stdio: ["ignore", "pipe", "pipe"],
          timeout: COMMAND_TIMEOUT_MS,
        });
      } catch (error) {
        done({ status: null, stdout: "", stderr: (error as Error).message });
        return;
      }
      let stdout = "";
      let stderr = "";
      child.stdout?.setEncoding("utf8").on("data", (t: string) => (stdout += t));
      child.stderr?.setEncoding("utf8").on("data", (t: string) => (stderr += t));
      child.once("error", (error) => done({ status: null, stdout, stderr: error.message }));
      child.once("close", (code) => done({ status: code, stdout, stderr }));
    });
  },
  runSync(argv) {
    spawnSync(argv[0]!, argv.slice(1), { stdio: "ignore", timeout: 10_000 });
  },
  start(argv, env, logPath) {
    const log = fs.openSync(logPath, "a");
    const child = spawn(argv[0]!, argv.slice(1), {
      env: { ...process.env, ...env },
      stdio: ["ignore", log, "pipe"],
    });
    const listeners: ((text: string) => void)[] = [];
    child.stderr?.setEncoding("utf8").on("data", (text: string) => {
      fs.writeSync(log, text);
      for (const l of listeners) l(text);
    });
    const exited = new Promise<string>((done) => {
      child.once("error", (error) => done(`it could not start: ${error.message}`));
      child.once(
        "close",
        (code, signal) =>
          done(signal !== null ? `it was killed by ${signal}` : `it exited with status ${code}`),
      );
    }).finally(() => fs.closeSync(log));
    return {
      pid: child.pid,
      exited,
      onStderr: (listener) => listeners.push(listener),
      signal: (signal) => {
        child.kill(signal);
      },
    };
  },
};

/** The job name of a task's workers, as `squeue --name` finds them. */
export function workerJobName(taskId: string): string {
  return `blockwise-${taskId}`;
}

/** A worker's step name: unique in the run (worker ids are), so that squeue tells steps apart. */
export function workerStepName(spec: WorkerLaunchSpec): string {
  return `blockwise-${spec.taskId}-w${spec.workerId}`;
}

/** `<logDir>/<task>-worker-<id>-%j.log` (absolute; sbatch puts the job id for `%j`). */
export function sbatchLogPattern(spec: WorkerLaunchSpec): string {
  const dir = isAbsolute(spec.logDir) ? spec.logDir : resolve(spec.logDir);
  return join(dir.replaceAll("%", "%%"), `${spec.taskId}-worker-${spec.workerId}-%j.log`);
}

/** `<logDir>/<task>-worker-%A_%a.log` for a job array's elements (`1234_5`). */
export function sbatchArrayLogPattern(spec: WorkerLaunchSpec): string {
  const dir = isAbsolute(spec.logDir) ? spec.logDir : resolve(spec.logDir);
  return join(dir.replaceAll("%", "%%"), `${spec.taskId}-worker-%A_%a.log`);
}

/** A log pattern with the job id (`1234`, or an array element's `1234_5`) put in. */
export function logPathOf(pattern: string, jobId: string): string {
  const [array, index] = jobId.split("_");
  return pattern.replaceAll(
    /%(%|j|A|a)/g,
    (_m, c: string) => c === "%" ? "%" : c === "A" ? array! : c === "a" ? index ?? "" : jobId,
  );
}

/**
 * The resources every worker asks for, job or step alike. GPUs (`gpusPerWorker`, the task's
 * `requires.gpu`): each worker job or array element asks for its own, and SLURM sets the
 * worker's CUDA_VISIBLE_DEVICES to what it allocated.
 */
function resourceArgs(config: SlurmLaunchConfig): string[] {
  const args: string[] = [];
  if (config.cpusPerWorker !== null) args.push(`--cpus-per-task=${config.cpusPerWorker}`);
  if (config.memPerWorker !== null) args.push(`--mem=${config.memPerWorker}`);
  const gpus = config.gpusPerWorker ?? 0;
  const gres = [config.gres ?? [], gpus > 0 && config.gpus !== "gpus-per-task" ? `gpu:${gpus}` : []]
    .flat();
  if (gres.length > 0) args.push(`--gres=${gres.join(",")}`);
  if (gpus > 0 && config.gpus === "gpus-per-task") args.push(`--gpus-per-task=${gpus}`);
  return args;
}

/** The GPU count a `gres` string asks for (`gpu:2`, `gpu:a100:2`, `gpu` = 1), or null: none. */
export function gresGpus(gres: string): number | null {
  for (const entry of gres.split(",")) {
    const parts = entry.split(":");
    if (parts[0] !== "gpu") continue;
    const last = parts.length > 1 ? Number(parts[parts.length - 1]) : 1;
    return Number.isSafeInteger(last) ? last : 1;
  }
  return null;
}

/**
 * `launch` with its task's `requires.gpu` (`gpu`) as each worker's request. A `gres` that names
 * GPUs already (a type: `gpu:a100:1`) is kept when its count agrees, refused when it does not.
 */
export function withWorkerGpus(
  taskId: string,
  launch: SlurmLaunchConfig,
  gpu: number,
): SlurmLaunchConfig {
  const given = launch.gres === null ? null : gresGpus(launch.gres);
  if (gpu === 0 || given === gpu) return launch;
  if (given !== null) {
    throw new InputError(
      `Task "${taskId}" requires gpu=${gpu} per worker but its launch.gres ${
        JSON.stringify(launch.gres)
      } asks for ${given}; make the two agree (e.g. gres: "gpu:a100:${gpu}"), or drop the gpu entry from gres and blockwise asks for --gres=gpu:${gpu}`,
    );
  }
  return { ...launch, gpusPerWorker: gpu };
}

/** Where a new job goes: partition, account, time limit. */
function placementArgs(config: SlurmLaunchConfig): string[] {
  const args: string[] = [];
  if (config.partition !== null) args.push(`--partition=${config.partition}`);
  if (config.account !== null) args.push(`--account=${config.account}`);
  if (config.time !== null) args.push(`--time=${config.time}`);
  return args;
}

/** `sbatch` for one worker as its own batch job. */
export function sbatchArgv(
  config: SlurmLaunchConfig,
  spec: WorkerLaunchSpec,
  logPattern: string,
): string[] {
  return [
    "sbatch",
    "--parsable",
    // The worker's variables reach the job only through the environment; SBATCH_EXPORT=NONE in
    // the user's environment would drop them.
    "--export=ALL",
    `--job-name=${workerJobName(spec.taskId)}`,
    `--output=${logPattern}`,
    "--nodes=1",
    "--ntasks=1",
    ...placementArgs(config),
    ...resourceArgs(config),
    ...config.extraArgs,
    `--wrap=exec ${spec.argv.map(shellQuote).join(" ")}`,
  ];
}

/** The variable with a job array's per-element slots, comma-separated, in element order. */
export const SLOTS_ENV = "BLOCKWISE_WORKER_SLOTS";

/**
 * Most elements one job array gets: SLURM's default MaxArraySize (1001) allows indices up to
 * 1000, and the slots (33 bytes each) stay far below Linux's 128 KiB per environment string.
 */
export const MAX_ARRAY_ELEMENTS = 1000;

/**
 * The batch script of a job array's element: its slot is the `SLURM_ARRAY_TASK_ID`-th (from 0)
 * of the comma-separated `SLOTS_ENV`, put in `slotVariable` before the worker is exec'd with the
 * same argv as every other element. Slots stay in the environment, never on a command line.
 */
export function arrayWrapScript(argv: readonly string[], slotVariable: string): string {
  return [
    `${slotVariable}=$(echo "$${SLOTS_ENV}" | cut -d, -f"$((\${SLURM_ARRAY_TASK_ID:--1} + 1))" 2>/dev/null)`,
    `[ -n "$${slotVariable}" ] || { echo "blockwise: no worker slot for job array element \${SLURM_ARRAY_TASK_ID:-(none)} in ${SLOTS_ENV}" >&2; exit 2; }`,
    `export ${slotVariable}`,
    `unset ${SLOTS_ENV}`,
    `exec ${argv.map(shellQuote).join(" ")}`,
  ].join("; ");
}

/**
 * `sbatch` for `count` workers as one job array (`--array=0-<count-1>[%throttle]`): one argv and
 * environment for all, each element's slot picked by `arrayWrapScript` from `SLOTS_ENV`.
 */
export function sbatchArrayArgv(
  config: SlurmLaunchConfig,
  spec: WorkerLaunchSpec,
  logPattern: string,
  count: number,
  slotVariable: string,
): string[] {
  const single = sbatchArgv(config, spec, logPattern);
  const throttle = config.arrayThrottle === null ? "" : `%${config.arrayThrottle}`;
  return [
    ...single.slice(0, 3),
    `--array=0-${count - 1}${throttle}`,
    ...single.slice(3, -1),
    `--wrap=${arrayWrapScript(spec.argv, slotVariable)}`,
  ];
}

/**
 * `srun` for one worker. Inside an allocation it is a job step: `--exact` (SLURM 21.08 and
 * later) gives the step only what it asks for, so that several one-task steps share the
 * allocation instead of waiting for each other. Outside one, srun makes a job of its own.
 */
export function srunArgv(
  config: SlurmLaunchConfig,
  spec: WorkerLaunchSpec,
  insideAllocation: boolean,
): string[] {
  return [
    "srun",
    "--export=ALL",
    "--nodes=1",
    "--ntasks=1",
    ...(insideAllocation ? ["--exact"] : placementArgs(config)),
    `--job-name=${insideAllocation ? workerStepName(spec) : workerJobName(spec.taskId)}`,
    ...resourceArgs(config),
    ...config.extraArgs,
    "--",
    ...spec.argv,
  ];
}

/** A job as `squeue -h -t all -o %i|%T|%r` shows it. */
export interface JobStatus {
  readonly id: string;
  readonly state: string;
  readonly reason: string;
}

export const SQUEUE_FORMAT = "%i|%T|%r";

/**
 * `squeue` for these jobs (a job array's id names all its elements), in any state it still
 * remembers; `-r` lists every array element on a line of its own, pending ones included.
 */
export function squeueArgv(ids: readonly string[]): string[] {
  return ["squeue", "-h", "-r", "-t", "all", "-o", SQUEUE_FORMAT, "-j", ids.join(",")];
}

/**
 * Lines of `squeue -o %i|%T|%r` by job id (`1234`, or `1234_5` for an array element); lines
 * that do not parse (a still collapsed `1234_[6-9]` among them) are skipped.
 */
export function parseSqueue(text: string): Map<string, JobStatus> {
  const jobs = new Map<string, JobStatus>();
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+(?:_\d+)?)\|([A-Z_]+)\|(.*)$/.exec(line.trimEnd());
    if (m === null) continue;
    jobs.set(m[1]!, { id: m[1]!, state: m[2]!, reason: m[3]!.trim() });
  }
  return jobs;
}

/** `squeue` for the steps of the allocation `jobId`. */
export function squeueStepsArgv(jobId: string): string[] {
  return ["squeue", "-h", "-s", "-o", "%i|%j", "-j", jobId];
}

/** Step names of `squeue -s -o %i|%j` with their step ids (`1234.5`). */
export function parseSqueueSteps(text: string): Map<string, string> {
  const steps = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+\.\d+)\|(.+)$/.exec(line.trimEnd());
    if (m !== null) steps.set(m[2]!, m[1]!);
  }
  return steps;
}

/** squeue's answer when none of the jobs asked for exists any longer. */
export function isUnknownJobsError(stderr: string): boolean {
  return /Invalid job id/i.test(stderr);
}

const WAITING_STATES = new Set([
  "PENDING",
  "CONFIGURING",
  "REQUEUED",
  "REQUEUE_FED",
  "REQUEUE_HOLD",
  "RESV_DEL_HOLD",
]);
const LIVE_STATES = new Set([
  "RUNNING",
  "SUSPENDED",
  "STOPPED",
  "RESIZING",
  "SIGNALING",
  "STAGE_OUT",
]);

/** A job state as a launch phase; COMPLETING and every final state are "ended". */
export function phaseOfState(state: string): "queued" | "running" | "ended" {
  if (WAITING_STATES.has(state)) return "queued";
  if (LIVE_STATES.has(state)) return "running";
  return "ended";
}

/** The job id `sbatch --parsable` printed (`1234`, or `1234;cluster`), or null. */
export function parseSbatchOutput(stdout: string): string | null {
  const m = /^\s*(\d+)(;\S+)?\s*$/.exec(stdout);
  return m === null ? null : m[1]!;
}

/** The last lines of a failed command's stderr, for a message. */
export function stderrTail(stderr: string, lines = 4): string {
  const all = stderr.split("\n").map((l) => l.trim()).filter((l) => l !== "");
  return all.slice(-lines).join("; ");
}
