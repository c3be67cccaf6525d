/**
 * Launchers start remote workers; they never place them. A launcher turns "one more worker for
 * task T" into a process, a SLURM job or step, or whatever a site's own command does, and
 * reports how that launch is doing (queued, running, ended) until the worker connects back.
 * Liveness after that comes from the connection and its heartbeats, never from the launcher.
 *
 * Here: the local process launcher (workers as child processes of this run: Python workers on
 * a workstation, and tests) and the generic `command` launcher (an argv template around the
 * worker command, for LSF, PBS and the like). SLURM's is in `slurm_launcher.ts`.
 */

import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import process from "node:process";
import type { LaunchHandle } from "../execute/stream_executor.ts";
import { firstOutputLines, type StartFailure } from "../execute/start_failure.ts";
import { findProgram } from "../runtime/command_group.ts";
import { InputError } from "../errors.ts";
import { expandLaunchTemplate } from "./launch_template.ts";

/** What to launch: one worker of one task. */
export interface WorkerLaunchSpec {
  readonly taskId: string;
  readonly workerId: number;
  /** The worker program and its arguments (`blockwise worker --connect ...`, `python3 ...`). */
  readonly argv: readonly string[];
  /** Variables the worker needs, added to this process's environment (the secret among them). */
  readonly env: Readonly<Record<string, string>>;
  /** Folder for the worker's own output (start-up errors, notices; user output travels the wire). */
  readonly logDir: string;
}

export interface Launcher {
  /** For messages: "local processes", "SLURM (sbatch)", ... */
  readonly name: string;
  /** Once a launch runs, how long its worker may take to connect (ms), if not the default. */
  readonly connectTimeoutMs?: number;
  launch(spec: WorkerLaunchSpec): LaunchHandle;
  /** Called on the run's health tick: refresh what the launcher knows (one squeue for all). */
  poll?(now: number): void;
  /** Cancel every launch still alive and wait (briefly) for them; the run is over. */
  close(): Promise<void>;
  /** The process is about to exit at once (a second signal): cancel everything, synchronously. */
  abort(): void;
}

/** A launched worker's slot (`WorkerLaunchSpec.env`): the one variable its launch has alone. */
export const SLOT_ENV = "BLOCKWISE_WORKER_SLOT";

/** Seconds between SIGTERM and SIGKILL when a launched process is cancelled. */
const KILL_GRACE_MS = 5000;

/** `<logDir>/<task>-worker-<id>.log`, created; returns the open file descriptor and path. */
export function openWorkerLog(spec: WorkerLaunchSpec): { fd: number; path: string } {
  fs.mkdirSync(spec.logDir, { recursive: true });
  const path = join(spec.logDir, `${spec.taskId}-worker-${spec.workerId}.log`);
  return { fd: fs.openSync(path, "a"), path };
}

/** A child process as a launch: running until it exits. */
export class ProcessLaunch implements LaunchHandle {
  readonly label: string;
  readonly #child: ChildProcess;
  #ended = false;
  #reason = "";
  /** How it ended, without "it" and the log path: "exited with status 127". */
  #how = "";
  readonly #log: { readonly path: string; readonly offset: number } | null;
  #killTimer: ReturnType<typeof setTimeout> | null = null;
  readonly exited: Promise<void>;

  /** `log`: the file its output goes to, from `offset` on (the file is appended to). */
  constructor(
    child: ChildProcess,
    label: string,
    log: { readonly path: string; readonly offset: number } | null,
  ) {
    this.#child = child;
    this.label = label;
    this.#log = log;
    this.exited = new Promise((resolve) => {
      child.once("error", (error) => {
        this.#end(`could not start: ${error.message}`);
        resolve();
      });
      child.once("exit", (code, signal) => {
        this.#end(signal !== null ? `was killed by ${signal}` : `exited with status ${code}`);
        resolve();
      });
    });
  }

  startFailure(): StartFailure | null {
    if (!this.#ended) return null;
    return {
      program: this.#child.spawnfile,
      how: this.#how,
      output: this.#log === null
        ? []
        : firstOutputLines(readFrom(this.#log.path, this.#log.offset)),
      logPath: this.#log?.path ?? null,
    };
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  phase(): "queued" | "running" | "ended" {
    return this.#ended ? "ended" : "running";
  }

  endReason(): string {
    return this.#reason;
  }

  /** SIGKILL now. */
  kill(): void {
    if (!this.#ended) this.#child.kill("SIGKILL");
  }

  cancel(): void {
    if (this.#ended || this.#killTimer !== null) return;
    this.#child.kill("SIGTERM");
    this.#killTimer = setTimeout(() => {
      if (!this.#ended) this.#child.kill("SIGKILL");
    }, KILL_GRACE_MS);
    (this.#killTimer as { unref?: () => void }).unref?.();
  }

  #end(how: string): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#how = how;
    this.#reason = this.#log === null ? `it ${how}` : `it ${how} (its output: ${this.#log.path})`;
    if (this.#killTimer !== null) clearTimeout(this.#killTimer);
  }
}

/** The first few KiB of `path` from `offset` on ("" when it cannot be read). */
function readFrom(path: string, offset: number): string {
  try {
    const fd = fs.openSync(path, "r");
    try {
      const buffer = new Uint8Array(16 * 1024);
      const n = fs.readSync(fd, buffer, 0, buffer.length, offset);
      return new TextDecoder().decode(buffer.subarray(0, n));
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return "";
  }
}

/** Workers told to stop exit by themselves within this; the rest are cancelled. */
const EXIT_GRACE_MS = 3000;

/** Give stopped workers a moment to exit on their own, then cancel the rest and wait. */
export async function closeLaunches(launches: ReadonlySet<ProcessLaunch>): Promise<void> {
  const alive = [...launches];
  let timer: ReturnType<typeof setTimeout> | undefined;
  const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, EXIT_GRACE_MS)));
  await Promise.race([Promise.all(alive.map((l) => l.exited)), grace]);
  clearTimeout(timer);
  for (const l of alive) l.cancel();
  await Promise.all(alive.map((l) => l.exited));
}

/** Spawn `argv` with `env` added, output appended to the worker's log. */
export function spawnLogged(
  argv: readonly string[],
  spec: WorkerLaunchSpec,
  label: (pid: number | undefined) => string,
): ProcessLaunch {
  const log = openWorkerLog(spec);
  try {
    const offset = fs.fstatSync(log.fd).size;
    const child = spawn(argv[0]!, argv.slice(1), {
      env: { ...process.env, ...spec.env },
      stdio: ["ignore", log.fd, log.fd],
    });
    return new ProcessLaunch(child, label(child.pid), { path: log.path, offset });
  } finally {
    fs.closeSync(log.fd);
  }
}

/**
 * Names the run to a local worker: a worker whose parent is no longer this process (the run was
 * SIGKILLed before the worker connected) exits instead of retrying its connection.
 */
export const PARENT_PID_ENV = "BLOCKWISE_PARENT_PID";

/** Workers as child processes of this run, on this machine. */
export class LocalProcessLauncher implements Launcher {
  readonly name = "local processes";
  readonly #launches = new Set<ProcessLaunch>();

  launch(spec: WorkerLaunchSpec): LaunchHandle {
    const env = { ...spec.env, [PARENT_PID_ENV]: String(process.pid) };
    const launch = spawnLogged(
      spec.argv,
      { ...spec, env },
      (pid) => `worker process ${pid ?? "?"}`,
    );
    this.#launches.add(launch);
    void launch.exited.then(() => this.#launches.delete(launch));
    return launch;
  }

  async close(): Promise<void> {
    await closeLaunches(this.#launches);
  }

  abort(): void {
    for (const l of this.#launches) l.kill();
  }
}

/** The generic launcher's settings (task field `launch: { kind: "command", ... }`). */
export interface CommandLaunchConfig {
  /** The launch command; an element `{worker}` becomes the worker's argv, `{worker_shell}` inside
   * an element the same as one shell-quoted string; also `{task_id}`, `{worker_id}`, `{log}`. */
  readonly argv: readonly string[];
  /**
   * How long a worker may take to connect after the launch command returned successfully (it
   * submitted a job that may wait in a queue), in seconds.
   */
  readonly startTimeout: number;
}

/**
 * A launch by a site's own command (`bsub`, `qsub`, `ssh`, ...): running while the command runs;
 * a command that returns status 0 before its worker connected submitted a job, which counts as
 * queued until it connects or `startTimeout` passes.
 */
class CommandLaunch implements LaunchHandle {
  readonly label: string;
  readonly #process: ProcessLaunch;
  readonly #startedAt: number;
  readonly #startTimeoutMs: number;
  readonly #now: () => number;

  constructor(process: ProcessLaunch, startTimeoutMs: number, now: () => number) {
    this.#process = process;
    this.label = `launch command (pid ${process.pid ?? "?"})`;
    this.#startedAt = now();
    this.#startTimeoutMs = startTimeoutMs;
    this.#now = now;
  }

  phase(): "queued" | "running" | "ended" {
    if (this.#process.phase() === "running") return "running";
    if (!this.#submitted()) return "ended";
    return this.#now() - this.#startedAt > this.#startTimeoutMs ? "ended" : "queued";
  }

  endReason(): string {
    if (this.#submitted()) {
      return `the command submitted it, but no worker connected within ${
        this.#startTimeoutMs / 1000
      } s (launch option startTimeout)`;
    }
    return this.#process.endReason();
  }

  cancel(): void {
    this.#process.cancel();
  }

  #submitted(): boolean {
    return this.#process.phase() === "ended" &&
      /exited with status 0\b/.test(this.#process.endReason());
  }
}

export class CommandLauncher implements Launcher {
  readonly name: string;
  readonly #config: CommandLaunchConfig;
  readonly #now: () => number;
  readonly #launches = new Set<ProcessLaunch>();

  constructor(config: CommandLaunchConfig, now: () => number = Date.now) {
    this.#config = config;
    this.#now = now;
    this.name = `launch command ${config.argv[0] ?? ""}`;
    const program = config.argv[0] ?? "";
    if (
      program !== "{worker}" && findProgram(program, process.env["PATH"], process.cwd()) === null
    ) {
      throw new InputError(
        `The launch command's program ${
          JSON.stringify(program)
        } was not found on PATH; install it, or give its full path in launch.argv`,
      );
    }
  }

  launch(spec: WorkerLaunchSpec): LaunchHandle {
    const logPath = join(spec.logDir, `${spec.taskId}-worker-${spec.workerId}.log`);
    const argv = expandLaunchTemplate(this.#config.argv, spec, logPath);
    const launch = spawnLogged(argv, spec, (pid) => `launch command (pid ${pid ?? "?"})`);
    this.#launches.add(launch);
    void launch.exited.then(() => this.#launches.delete(launch));
    return new CommandLaunch(launch, this.#config.startTimeout * 1000, this.#now);
  }

  async close(): Promise<void> {
    await closeLaunches(this.#launches);
  }

  abort(): void {
    for (const l of this.#launches) l.kill();
  }
}
