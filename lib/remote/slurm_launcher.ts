/**
 * Workers started by SLURM. Outside an allocation each worker is a batch job of its own
 * (`sbatch`); inside one (`SLURM_JOB_ID` set: the run itself is a batch job or runs under
 * `salloc`) each worker is a job step (`srun`) sharing the allocation. SLURM places the workers;
 * this only asks for them, follows them until they connect, and cancels whatever is left when
 * the run ends.
 *
 * The batch jobs launched together for one task are one job array (`slurm_array.ts`): each
 * element is a launch of its own (`SLURM job 1234_5`), cancelled alone with `scancel 1234_5`;
 * closing cancels whole arrays (`scancel 1234`).
 *
 * Batch jobs are followed with one `squeue` for every tracked job, at most every `pollMs`, and
 * only while somebody asks (an executor waiting for its worker to connect): a connected worker's
 * liveness comes from its connection. A step is followed through its `srun` process and SLURM's
 * messages on srun's stderr ("step creation temporarily disabled" means it waits: queued).
 */

import * as fs from "node:fs";
import { join } from "node:path";
import process from "node:process";
import type { LaunchHandle } from "../execute/stream_executor.ts";
import type { SlurmLaunchConfig } from "../pipeline/spec.ts";
import { findProgram } from "../runtime/command_group.ts";
import { InputError } from "../errors.ts";
import { type Launcher, SLOT_ENV, type WorkerLaunchSpec } from "./launcher.ts";
import { chunks, LaunchBatcher, type Submitted } from "./slurm_array.ts";
import {
  isUnknownJobsError,
  type JobStatus,
  logPathOf,
  MAX_ARRAY_ELEMENTS,
  parseSbatchOutput,
  parseSqueue,
  parseSqueueSteps,
  phaseOfState,
  sbatchArgv,
  sbatchArrayArgv,
  sbatchArrayLogPattern,
  sbatchLogPattern,
  SLOTS_ENV,
  type SlurmRunner,
  squeueArgv,
  squeueStepsArgv,
  srunArgv,
  stderrTail,
  systemRunner,
  workerStepName,
} from "./slurm_commands.ts";
import { SrunLaunch } from "./srun_launch.ts";

export interface SlurmContext {
  readonly logDir: string;
  readonly runId: string;
  /** Decides the mode (`SLURM_JOB_ID`) and where the programs are (`PATH`); default: this process's. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Runs sbatch, squeue, scancel and srun; tests inject their own. */
  readonly runner?: SlurmRunner;
  readonly now?: () => number;
  /** Waits between squeue calls while closing; tests inject their own. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Least time between two squeue calls (ms). */
  readonly pollMs?: number;
  /** How long a launch waits for others to join its job array (ms). */
  readonly coalesceMs?: number;
}

const DEFAULT_POLL_MS = 2000;
/** Launches within this of the first of a batch share its job array. */
const DEFAULT_COALESCE_MS = 10;
/** Stopped workers end on their own within this; then their jobs are cancelled. */
const EXIT_GRACE_MS = 3000;
/** How long closing waits for cancelled jobs to leave squeue's active states. */
const CANCEL_WAIT_MS = 30_000;
const CLOSE_POLL_MS = 250;

const realSleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    (timer as { unref?: () => void }).unref?.();
  });

/** One worker as a batch job or job array element: submitting, whatever squeue says, ended. */
class SbatchLaunch implements LaunchHandle {
  readonly #owner: SlurmLauncher;
  #logPattern = "";
  #jobId: string | null = null;
  #arrayId: string | null = null;
  #status: JobStatus | null = null;
  #ended = false;
  /** Gone for good: not even COMPLETING (its processes being cleaned up) any more. */
  #settled = false;
  #reason = "";
  #cancelled = false;
  /** Resolves once sbatch returned (with a job or not). */
  readonly submitted: Promise<void>;

  constructor(owner: SlurmLauncher, submission: Promise<Submitted | Error>) {
    this.#owner = owner;
    this.submitted = submission.then((result) => {
      if (result instanceof Error) {
        this.#settled = true;
        return this.#end(result.message);
      }
      this.#jobId = result.jobId;
      this.#arrayId = result.arrayId;
      this.#logPattern = result.logPattern;
      if (this.#cancelled) this.#owner.scancel([result.jobId]);
    });
  }

  get label(): string {
    if (this.#jobId !== null) return `SLURM job ${this.#jobId}`;
    return this.#ended ? "the SLURM job submission" : "SLURM job (being submitted)";
  }

  get jobId(): string | null {
    return this.#jobId;
  }

  /** What squeue and closing's scancel are given: the whole array's id, or the job's. */
  get wholeId(): string | null {
    return this.#arrayId ?? this.#jobId;
  }

  get settled(): boolean {
    return this.#settled;
  }

  /** Its worker may still start: submitted and not known to have ended (scancel it). */
  get live(): boolean {
    return !this.#ended && this.#jobId !== null;
  }

  /** Still listed by squeue as active (closing waits for these). */
  get alive(): boolean {
    return !this.#settled && this.#jobId !== null;
  }

  phase(): "queued" | "running" | "ended" {
    if (this.#ended) return "ended";
    this.#owner.pollSoon();
    if (this.#status === null) return "queued";
    return phaseOfState(this.#status.state);
  }

  endReason(): string {
    return this.#reason;
  }

  cancel(): void {
    if (this.#cancelled || this.#ended) return;
    this.#cancelled = true;
    if (this.#jobId !== null) this.#owner.scancel([this.#jobId]);
  }

  /** What one squeue said about this job: its status, or null when it was not listed. */
  observe(status: JobStatus | null): void {
    if (this.#settled) return;
    if (
      status === null || (phaseOfState(status.state) === "ended" && status.state !== "COMPLETING")
    ) {
      this.#settled = true;
    }
    const log = this.#jobId === null
      ? ""
      : `; its output: ${logPathOf(this.#logPattern, this.#jobId)}`;
    if (status === null) {
      this.#end(`it is no longer listed by squeue (it ended)${log}`);
      return;
    }
    if (this.#ended) return;
    this.#status = status;
    if (phaseOfState(status.state) === "ended") {
      const reason = status.reason === "" || status.reason === "None" ? "" : ` (${status.reason})`;
      this.#end(`its state is ${status.state}${reason}${log}`);
    }
  }

  #end(reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#reason = reason;
  }
}

export class SlurmLauncher implements Launcher {
  readonly name: string;
  readonly #config: SlurmLaunchConfig;
  readonly #runner: SlurmRunner;
  readonly #now: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #pollMs: number;
  readonly #mode: "sbatch" | "srun";
  readonly #insideAllocation: boolean;
  /** The run's own job, when workers are its steps. */
  readonly #allocation: string | null;
  readonly #jobs = new Set<SbatchLaunch>();
  readonly #steps = new Set<SrunLaunch>();
  /** scancel calls not finished yet (closing waits for them). */
  readonly #cancelling = new Set<Promise<unknown>>();
  #polling: Promise<void> | null = null;
  #lastPoll = Number.NEGATIVE_INFINITY;
  readonly #batcher: LaunchBatcher;

  constructor(config: SlurmLaunchConfig, context: SlurmContext) {
    const env = context.env ?? process.env;
    this.#config = config;
    this.#runner = context.runner ?? systemRunner;
    this.#now = context.now ?? Date.now;
    this.#sleep = context.sleep ?? realSleep;
    this.#pollMs = context.pollMs ?? DEFAULT_POLL_MS;
    this.#batcher = new LaunchBatcher(
      SLOT_ENV,
      context.coalesceMs ?? DEFAULT_COALESCE_MS,
      (specs) => this.#submitBatch(specs),
    );
    const job = env["SLURM_JOB_ID"];
    this.#insideAllocation = job !== undefined && job !== "";
    this.#mode = config.mode === "auto"
      ? (this.#insideAllocation ? "srun" : "sbatch")
      : config.mode;
    this.#allocation = this.#mode === "srun" && this.#insideAllocation ? job! : null;
    this.name = this.#mode === "sbatch"
      ? "SLURM (sbatch)"
      : this.#insideAllocation
      ? `SLURM (srun steps in job ${job})`
      : "SLURM (srun)";
    const programs = this.#mode === "sbatch"
      ? ["sbatch", "squeue", "scancel"]
      : this.#allocation !== null
      ? ["srun", "squeue"]
      : ["srun"];
    for (const program of programs) {
      if (findProgram(program, env["PATH"], process.cwd()) !== null) continue;
      throw new InputError(
        `The SLURM launcher needs "${program}", which is not on PATH${
          this.#insideAllocation ? "" : " (SLURM_JOB_ID is not set either)"
        }; run blockwise on a node of the cluster (a login node), load SLURM first (e.g. module load slurm), or run the workers here with --launcher local`,
      );
    }
  }

  launch(spec: WorkerLaunchSpec): LaunchHandle {
    fs.mkdirSync(spec.logDir, { recursive: true });
    if (this.#mode === "srun") return this.#startStep(spec);
    const launch = new SbatchLaunch(this, this.#batcher.add(spec));
    this.#jobs.add(launch);
    return launch;
  }

  /** One batch of launches: a plain job for one, job arrays of at most MAX_ARRAY_ELEMENTS. */
  async #submitBatch(specs: readonly WorkerLaunchSpec[]): Promise<(Submitted | Error)[]> {
    const parts = await Promise.all(
      chunks(specs, MAX_ARRAY_ELEMENTS).map(async (chunk): Promise<(Submitted | Error)[]> => {
        const first = chunk[0]!;
        if (chunk.length === 1) {
          const logPattern = sbatchLogPattern(first);
          const id = await this.#sbatch(sbatchArgv(this.#config, first, logPattern), first.env);
          return [id instanceof Error ? id : { jobId: id, arrayId: null, logPattern }];
        }
        const logPattern = sbatchArrayLogPattern(first);
        const env: Record<string, string> = { ...first.env };
        delete env[SLOT_ENV];
        env[SLOTS_ENV] = chunk.map((s) => s.env[SLOT_ENV]!).join(",");
        const argv = sbatchArrayArgv(this.#config, first, logPattern, chunk.length, SLOT_ENV);
        const id = await this.#sbatch(argv, env);
        return chunk.map((_s, i) =>
          id instanceof Error ? id : { jobId: `${id}_${i}`, arrayId: id, logPattern }
        );
      }),
    );
    return parts.flat();
  }

  /** Runs sbatch: the job id it printed, or why there is none. */
  async #sbatch(
    argv: readonly string[],
    env: Readonly<Record<string, string>>,
  ): Promise<string | Error> {
    const r = await this.#runner.run(argv, env);
    const id = r.status === 0 ? parseSbatchOutput(r.stdout) : null;
    if (id !== null) return id;
    const said = stderrTail(r.stderr) || stderrTail(r.stdout) || "no message";
    return new Error(
      r.status === 0
        ? `sbatch printed no job id: ${JSON.stringify(r.stdout.trim())}`
        : `sbatch failed (${r.status === null ? "it did not run" : `status ${r.status}`}): ${said}`,
    );
  }

  #startStep(spec: WorkerLaunchSpec): SrunLaunch {
    const logPath = join(spec.logDir, `${spec.taskId}-worker-${spec.workerId}.log`);
    const inside = this.#allocation !== null;
    const argv = srunArgv(this.#config, spec, inside);
    const step = new SrunLaunch(
      this.#runner.start(argv, spec.env, logPath),
      logPath,
      inside ? workerStepName(spec) : null,
      () => this.pollSoon(),
    );
    this.#steps.add(step);
    void step.exited.then(() => this.#steps.delete(step));
    return step;
  }

  /** Cancel jobs (fire and forget; closing waits for it). */
  scancel(ids: readonly string[]): void {
    if (ids.length === 0) return;
    const call = this.#runner.run(["scancel", ...ids]);
    this.#cancelling.add(call);
    void call.finally(() => this.#cancelling.delete(call));
  }

  /** Start a squeue for every tracked job unless one ran within `pollMs`. */
  pollSoon(): void {
    if (this.#polling === null && this.#now() - this.#lastPoll >= this.#pollMs) void this.poll();
  }

  /** One squeue for every tracked job with an id; resolves once its answer is applied. */
  poll(): Promise<void> {
    if (this.#polling !== null) return this.#polling;
    if (this.#allocation !== null) return this.#pollSteps(this.#allocation);
    const asked = [...this.#jobs].filter((j) => j.alive);
    this.#lastPoll = this.#now();
    if (asked.length === 0) {
      this.#forgetEnded();
      return Promise.resolve();
    }
    const ids = [...new Set(asked.map((j) => j.wholeId!))];
    this.#polling = this.#runner.run(squeueArgv(ids)).then((r) => {
      this.#polling = null;
      if (r.status === 0) {
        const listed = parseSqueue(r.stdout);
        for (const job of asked) job.observe(listed.get(job.jobId!) ?? null);
      } else if (isUnknownJobsError(r.stderr)) {
        for (const job of asked) job.observe(null);
      }
      // Any other failure (the controller busy or restarting): keep what is known, ask again.
      this.#forgetEnded();
    });
    return this.#polling;
  }

  /** One squeue of the allocation's steps: a step not listed yet waits for resources. */
  #pollSteps(allocation: string): Promise<void> {
    const asked = [...this.#steps].filter((s) => !s.ended && s.stepName !== null);
    this.#lastPoll = this.#now();
    if (asked.length === 0) return Promise.resolve();
    this.#polling = this.#runner.run(squeueStepsArgv(allocation)).then((r) => {
      this.#polling = null;
      if (r.status !== 0) return;
      const listed = parseSqueueSteps(r.stdout);
      for (const step of asked) step.observe(listed.has(step.stepName!));
    });
    return this.#polling;
  }

  #forgetEnded(): void {
    for (const job of this.#jobs) if (job.settled) this.#jobs.delete(job);
  }

  /** Jobs and steps still to end, after every submission returned. */
  #aliveJobs(): SbatchLaunch[] {
    return [...this.#jobs].filter((j) => j.alive);
  }

  async close(): Promise<void> {
    this.#batcher.drop("the run ended before it was submitted");
    await Promise.all([...this.#jobs].map((j) => j.submitted));
    const steps = [...this.#steps];
    // Stopped workers exit on their own; give them a moment before cancelling what is left.
    const graceEnd = this.#now() + EXIT_GRACE_MS;
    await this.#pollUntil(graceEnd, steps);
    this.scancel(wholeIds([...this.#jobs].filter((j) => j.live)));
    for (const s of steps) s.cancel();
    await this.#pollUntil(this.#now() + CANCEL_WAIT_MS, steps);
    await Promise.all([...this.#cancelling]);
  }

  /** Poll squeue until every job and step ended or `deadline` passes. */
  async #pollUntil(deadline: number, steps: readonly SrunLaunch[]): Promise<void> {
    for (;;) {
      await this.poll();
      const stepsLeft = steps.some((s) => s.phase() !== "ended");
      if ((this.#aliveJobs().length === 0 && !stepsLeft) || this.#now() >= deadline) return;
      await this.#sleep(CLOSE_POLL_MS);
    }
  }

  abort(): void {
    this.#batcher.drop("the run ended before it was submitted");
    const ids = wholeIds(this.#aliveJobs());
    if (ids.length > 0) this.#runner.runSync(["scancel", ...ids]);
    // srun cancels its step on SIGTERM, even once this process is gone.
    for (const s of this.#steps) s.cancel();
  }
}

/** Jobs and whole job arrays, once each (`scancel 1234` cancels every element left). */
function wholeIds(jobs: readonly SbatchLaunch[]): string[] {
  return [...new Set(jobs.map((j) => j.wholeId!))];
}
