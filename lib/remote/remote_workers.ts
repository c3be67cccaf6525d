/**
 * The remote half of a run: when a task's workers run elsewhere (`launch: "slurm"`,
 * `launch: { kind: "command" }`), or are Python processes (a `python` task; child processes of
 * this run with the default launch), the run listens for them (`--listen`, loopback by default),
 * makes the run's secret, and wraps the local executor factory so that those tasks get
 * `StreamExecutor`s: each launches one worker, waits for it to connect and authenticate on its
 * slot, then drives it like any other executor. The scheduler stays the only writer of the
 * ledger: remote workers only run blocks and stage outputs.
 */

import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import * as os from "node:os";
import process from "node:process";
import type { ExecutorFactory, ExecutorSpec, TaskDemand } from "../execute/executor.ts";
import { StreamExecutor } from "../execute/stream_executor.ts";
import { DEMAND_BUSY_SHARE } from "../execute/worker_demand.ts";
import { REMOTE_TARGET_BATCH_MS } from "../execute/dispatch.ts";
import {
  withLaunch,
  type WorkerEnvironment,
  workerEnvironment,
} from "../execute/worker_profile.ts";
import type { HelloMessage, PythonInit } from "../execute/protocol/messages.ts";
import type { ByteChannel } from "../execute/byte_channel.ts";
import type { LaunchConfig, LaunchKind, PipelineConfig, TaskConfig } from "../pipeline/spec.ts";
import { defaultLaunch } from "../pipeline/launch_fields.ts";
import { InputError } from "../errors.ts";
import { selfCommand } from "../runtime/mod.ts";
import { workerArgv } from "./worker_argv.ts";
import { newSecret, SECRET_ENV } from "./auth.ts";
import {
  connectAddress,
  formatAddress,
  type HostPort,
  isLoopback,
  parseHostPort,
} from "./address.ts";
import { CommandLauncher, type Launcher, LocalProcessLauncher, SLOT_ENV } from "./launcher.ts";
import {
  checkInterpreters,
  defaultPythonClientDir,
  pythonInit,
  writePythonClient,
} from "./python_client.ts";
import { SlurmLauncher } from "./slurm_launcher.ts";
import { withWorkerGpus } from "./slurm_commands.ts";
import {
  Joiners,
  joinInstructions,
  ManualLauncher,
  shellWord,
  writeJoinSecret,
} from "./joiners.ts";
import { WorkerServer } from "./worker_server.ts";

export const CONNECT_ENV = "BLOCKWISE_CONNECT";
/** Workers a task takes before its first measure of need (`#enoughBeforeMeasure`). */
export const FIRST_CLAIMS = 64;
/** How long the workers after those wait for that measure at most (ms). */
export const FIRST_MEASURE_MS = 250;
export { SLOT_ENV };
export const WALLTIME_MARGIN_ENV = "BLOCKWISE_WALLTIME_MARGIN";

export interface RemoteWorkersOptions {
  readonly pipeline: PipelineConfig;
  /** `--listen HOST:PORT`, or undefined for loopback on a port the system picks. */
  readonly listen?: string;
  /** `--launcher KIND`: every task's workers this way (a task's own options kept when it matches). */
  readonly launcher?: LaunchKind;
  /** Where launched workers' own output goes (start-up errors, notices). */
  readonly logDir: string;
  readonly runId: string;
  readonly log: (message: string) => void;
  /** How long a connected worker may stay silent before it counts as lost (ms). */
  readonly leaseMs?: number;
  /** Where the Python client is written (default: a per-user folder in the system's temp). */
  readonly pythonClientDir?: string;
  /** Workers a task takes before its first measure of need (FIRST_CLAIMS). */
  readonly firstClaims?: number;
  /** How long later workers wait for that measure at most, ms (FIRST_MEASURE_MS). */
  readonly firstMeasureMs?: number;
  /**
   * Starts the workers of embedded Python tasks (threads of the Python process that runs the
   * daisy API); required when the pipeline has such a task.
   */
  readonly embeddedLauncher?: Launcher;
}

/** Each task's launch after `--launcher`; command tasks always run their blocks here. */
export function effectiveLaunches(
  pipeline: PipelineConfig,
  override: LaunchKind | undefined,
): LaunchConfig[] {
  return pipeline.tasks.map((task) => {
    if (override === undefined || task.kind === "command") return task.launch;
    if (task.launch.kind === override) return task.launch;
    if (override === "command") {
      throw new InputError(
        `--launcher command needs the launch command of task "${task.id}": give the task launch: { kind: "command", argv: ["bsub", "-I", "{worker}"] } (its kind is "${task.launch.kind}" now)`,
      );
    }
    return defaultLaunch(override);
  });
}

export class RemoteWorkers {
  readonly #o: RemoteWorkersOptions;
  readonly #server: WorkerServer;
  readonly #secret: string;
  readonly #connect: HostPort;
  readonly #sha256: string | null;
  readonly #launchers: (Launcher | null)[];
  readonly #launches: LaunchConfig[];
  /** The Python client's file, when the pipeline has Python tasks. */
  readonly #pythonClient: string | null;
  /** Per task: a Python task's module as of the run's start (workers refuse another file). */
  readonly #python: (PythonInit | null)[];
  /** Per task: what its worker processes get on top of the inherited environment. */
  readonly #environments: WorkerEnvironment[];
  /** Per task: its workers' command, made at its first launch (the same for every worker). */
  readonly #argv: (readonly string[] | undefined)[] = [];
  /** Tasks with `launch: "manual"`: their places for workers joining by hand. */
  readonly #joiners: Joiners;
  /** Per task: its workers launched and not connected yet (held-back connections may be theirs). */
  readonly #unconnected: number[];
  /** Per task: whether it could use another worker now (from its first executor's spec). */
  readonly #demand: (TaskDemand | undefined)[] = [];
  /** Per task: workers that took their slot, and when the first did (ms; NaN: none yet). */
  readonly #claimed: number[];
  readonly #firstClaimAt: number[];
  /** The notices about held workers said so far ("unmeasured", "idle"): each once a run. */
  readonly #said = new Set<string>();
  /** The secret's file for joiners (removed on close), or null. */
  #secretFile: string | null = null;

  private constructor(
    options: RemoteWorkersOptions,
    server: WorkerServer,
    secret: string,
    launches: LaunchConfig[],
    launchers: (Launcher | null)[],
    pythonClient: string | null,
  ) {
    this.#o = options;
    this.#server = server;
    this.#secret = secret;
    this.#launches = launches;
    this.#launchers = launchers;
    this.#pythonClient = pythonClient;
    this.#python = options.pipeline.tasks.map((t) => t.kind === "python" ? pythonInit(t) : null);
    this.#environments = options.pipeline.tasks.map((t, i) =>
      workerEnvironment(withLaunch(t, launches[i]), process.env)
    );
    this.#connect = connectAddress(server.address);
    this.#joiners = new Joiners(options.pipeline, launches);
    this.#unconnected = launches.map(() => 0);
    this.#claimed = launches.map(() => 0);
    this.#firstClaimAt = launches.map(() => Number.NaN);
    server.admitWhen({
      wanted: () => this.#wanted(),
      needsNone: () => this.#unconnected.every((n) => n === 0),
      holding: () => this.#sayWhyHeld(),
    });
    // A daisy script's tasks all run in its own process: there is no pipeline file to load.
    const embeddedOnly = options.pipeline.tasks.every((t) =>
      t.kind === "python" && t.python.embedded !== undefined
    );
    this.#sha256 = embeddedOnly
      ? null
      : createHash("sha256").update(fs.readFileSync(options.pipeline.path)).digest("hex");
  }

  /** Null when every task's workers are Web Workers or commands here (nothing to listen for). */
  static async open(options: RemoteWorkersOptions): Promise<RemoteWorkers | null> {
    const { pipeline } = options;
    const launches = effectiveLaunches(pipeline, options.launcher);
    const python = pipeline.tasks.some((t) => t.kind === "python");
    const remote = launches.some((l) => l.kind !== "local");
    if (!remote && !python) return null;
    checkInterpreters(pipeline, launches);
    const pythonClient = python
      ? writePythonClient(options.pythonClientDir ?? defaultPythonClientDir(null))
      : null;
    const listen = options.listen === undefined
      ? { host: "127.0.0.1", port: 0 }
      : parseHostPort(options.listen, "--listen", true);
    const processes = new LocalProcessLauncher();
    const launchers = launches.map((l, t) => {
      const task = pipeline.tasks[t]!;
      if (l.kind !== "local" || task.kind !== "python") return makeLauncher(l, options, task);
      if (task.python.embedded === undefined) return processes;
      if (options.embeddedLauncher === undefined) {
        throw new Error(
          `Internal error: task "${task.id}" runs in its Python process, but the run has no launcher for it`,
        );
      }
      return options.embeddedLauncher;
    });
    const secret = newSecret();
    let server: WorkerServer;
    try {
      server = await WorkerServer.start({ listen, secret, log: options.log });
    } catch (error) {
      await Promise.all([...new Set(launchers)].map((l) => l?.close()));
      throw new InputError(
        `Cannot listen for workers on ${formatAddress(listen)}: ${
          (error as Error).message
        }; choose another --listen HOST:PORT (port 0 picks a free one)`,
      );
    }
    const workers = new RemoteWorkers(options, server, secret, launches, launchers, pythonClient);
    const where = formatAddress(workers.#connect);
    if (remote) {
      options.log(
        `Listening for remote workers on ${
          formatAddress(server.address)
        } (workers connect to ${where})`,
      );
    }
    workers.#openToJoiners();
    if (isLoopback(listen.host) && launches.some((l) => l.kind === "slurm")) {
      options.log(
        `warning: listening on loopback only: SLURM workers on other nodes cannot connect; use --listen 0.0.0.0:0 (or this node's address) on a multi-node cluster`,
      );
    }
    return workers;
  }

  /** Where workers connect (for messages and tests). */
  /** Where each remote worker's own output goes (`<task>-worker-<n>[-<job id>].log`). */
  get logDir(): string {
    return this.#o.logDir;
  }

  get connectAddress(): HostPort {
    return this.#connect;
  }

  get server(): WorkerServer {
    return this.#server;
  }

  /**
   * Admission by need: a connection may be admitted while some task with workers still to
   * connect could use one more, or while none waits for a worker. A task whose workers are local
   * processes (Python) always can: they are few, and a held connection may be one of theirs.
   */
  #wanted(): boolean {
    let waited = false;
    for (let t = 0; t < this.#unconnected.length; t++) {
      if (this.#unconnected[t] === 0) continue;
      waited = true;
      const demand = this.#demand[t];
      if (demand === undefined || this.#launches[t]!.kind === "local") return true;
      if (demand.wanted() && (demand.decided || !this.#enoughBeforeMeasure(t))) return true;
    }
    // No task waits for a worker: whoever connects is told at once (a stranger, a joiner too
    // many, a worker no longer wanted), not held.
    return !waited;
  }

  /**
   * Before its first measure a task takes FIRST_CLAIMS workers, then waits for the measure (its
   * first results' window) up to FIRST_MEASURE_MS: a job array's workers connect within
   * milliseconds, and without this one or two hundred took their slots before any block came back.
   */
  #enoughBeforeMeasure(t: number): boolean {
    return this.#claimed[t]! >= (this.#o.firstClaims ?? FIRST_CLAIMS) &&
      Date.now() - this.#firstClaimAt[t]! < (this.#o.firstMeasureMs ?? FIRST_MEASURE_MS);
  }

  /** Say once why workers wait: before a task's first measure, and for lack of need. */
  #sayWhyHeld(): void {
    if (this.#said.size === 2) return; // both said: nothing to work out at every hold
    const waiting = this.#demand.flatMap((d, t) =>
      d === undefined || this.#unconnected[t] === 0 ? [] : [{ d, t }]
    );
    const unmeasured = waiting.find(({ d, t }) => !d.decided && this.#enoughBeforeMeasure(t));
    if (unmeasured !== undefined) {
      if (this.#said.has("unmeasured")) return;
      this.#said.add("unmeasured");
      const n = this.#claimed[unmeasured.t]!;
      this.#o.log(
        `Task "${this.#o.pipeline.tasks[unmeasured.t]!.id}" took its first ${n} worker${
          n === 1 ? "" : "s"
        }; the next wait, connected, until its first blocks show whether it can use them (${
          (this.#o.firstMeasureMs ?? FIRST_MEASURE_MS) / 1000
        } s at most)`,
      );
      return;
    }
    if (this.#said.has("idle")) return;
    this.#said.add("idle");
    const shares = waiting.flatMap(({ d, t }) =>
      Number.isNaN(d.busyShare)
        ? []
        : [`task "${this.#o.pipeline.tasks[t]!.id}": ${Math.round(100 * d.busyShare)} %`]
    );
    this.#o.log(
      `Holding back the workers that connect from now on: the admitted ones spend under ${
        Math.round(100 * DEMAND_BUSY_SHARE)
      } % of their time in blocks (${
        shares.join(", ")
      }), so more would not make the run faster (the scheduler or the ready blocks set its pace); they are admitted as soon as the admitted ones are busier`,
    );
  }

  /** Tasks with `launch: "manual"`: write the secret (0600), take joiners, say how to join. */
  #openToJoiners(): void {
    const ids = this.#joiners.taskIds;
    if (ids.length === 0) return;
    const file = writeJoinSecret(this.#o.logDir, this.#o.runId, this.#secret);
    this.#secretFile = file;
    this.#server.acceptJoiners((hello) => this.#joiners.answer(hello));
    const args = ["--connect", formatAddress(this.#connect), "--secret-file", file];
    const worker = (id: string) => {
      const task = this.#o.pipeline.tasks.find((t) => t.id === id)!;
      const program = task.kind === "python"
        ? [task.python.interpreter, this.#pythonClient!]
        : [...selfCommand(), "worker"];
      return [...program, ...args].map(shellWord).join(" ");
    };
    for (const line of joinInstructions(ids, worker)) this.#o.log(line);
  }

  /** Executors for tasks whose workers are remote; `local` makes the others. */
  factory(local: ExecutorFactory): ExecutorFactory {
    return (spec) => {
      const launcher = this.#launchers[spec.task] ?? null;
      return launcher === null ? local(spec) : this.#launch(spec, launcher);
    };
  }

  #launch(spec: ExecutorSpec, launcher: Launcher): StreamExecutor {
    const slot = randomBytes(16).toString("hex");
    const launch = this.#launches[spec.task]!;
    const python = this.#python[spec.task] ?? null;
    const env: Record<string, string> = {
      ...this.#environments[spec.task]!.variables,
      ...spec.devices?.env, // local workers' GPUs; SLURM sets its workers' own
      [SECRET_ENV]: this.#secret,
      [SLOT_ENV]: slot,
      [CONNECT_ENV]: formatAddress(this.#connect),
    };
    if ("walltimeMargin" in launch && launch.walltimeMargin !== null) {
      env[WALLTIME_MARGIN_ENV] = String(launch.walltimeMargin);
    }
    let unexpect = (): void => {};
    this.#demand[spec.task] ??= spec.demand;
    let waiting = true;
    this.#unconnected[spec.task]!++;
    const stopWaiting = () => {
      if (waiting) this.#unconnected[spec.task]!--;
      waiting = false;
    };
    const handle = launcher.launch({
      taskId: spec.config.id,
      workerId: spec.id,
      argv: this.#argv[spec.task] ??= workerArgv(
        spec.config,
        formatAddress(this.#connect),
        this.#pythonClient,
      ),
      env,
      logDir: this.#o.logDir,
    });
    const executor = new StreamExecutor({
      spec,
      channel: null,
      pipelineSha256: this.#sha256,
      ...(python === null ? {} : { python }),
      launch: handle,
      ...(this.#o.leaseMs === undefined ? {} : { leaseMs: this.#o.leaseMs }),
      ...(launcher.connectTimeoutMs === undefined
        ? {}
        : { connectTimeoutMs: launcher.connectTimeoutMs }),
      onEnd: () => {
        stopWaiting();
        unexpect();
      },
      connectHeld: () => this.#server.holding,
      joined: launch.kind === "manual",
      // Local Python workers keep the local batch size; others pay a network message a batch.
      ...(launch.kind === "local" ? {} : { batchMs: REMOTE_TARGET_BATCH_MS }),
    });
    const claim = (channel: ByteChannel, hello: HelloMessage) => {
      stopWaiting();
      if (this.#claimed[spec.task]!++ === 0) this.#firstClaimAt[spec.task] = Date.now();
      return executor.attach(channel, hello);
    };
    unexpect = launch.kind === "manual"
      ? this.#joiners.wait(spec.task, claim)
      : this.#server.expect(slot, claim);
    return executor;
  }

  /** The process exits at once (a second signal): cancel every launch, synchronously. */
  abort(): void {
    for (const l of new Set(this.#launchers)) l?.abort();
  }

  /** Cancel every launch still alive, stop listening. */
  async close(): Promise<void> {
    await Promise.all([...new Set(this.#launchers)].map((l) => l?.close()));
    await this.#server.close();
    if (this.#secretFile !== null) {
      fs.rmSync(this.#secretFile, { force: true });
      try {
        fs.rmdirSync(this.#o.logDir); // only when empty: no worker wrote a log there
      } catch { /* worker logs stay */ }
    }
  }
}

/** The worker program for a task: this blockwise in worker mode, or the Python client. */
function makeLauncher(
  launch: LaunchConfig,
  options: RemoteWorkersOptions,
  task: TaskConfig,
): Launcher | null {
  switch (launch.kind) {
    case "local":
      return null;
    case "slurm":
      return new SlurmLauncher(withWorkerGpus(task.id, launch, task.requires["gpu"] ?? 0), {
        logDir: options.logDir,
        runId: options.runId,
      });
    case "command":
      return new CommandLauncher(launch);
    case "manual":
      return new ManualLauncher();
  }
}

/** Where launched workers' logs go when the run names no --log-dir. */
export function defaultWorkerLogDir(trackingDir: string | null, runId: string): string {
  return trackingDir !== null
    ? join(trackingDir, ".workers", runId)
    : join(os.tmpdir(), `blockwise-workers-${runId}`);
}
