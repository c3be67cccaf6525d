/**
 * The launcher of `bench/fleet.ts`: instead of a process (or a batch job) per worker, it hands
 * each launch (what a real `blockwise worker` gets: `BLOCKWISE_SECRET`, `BLOCKWISE_WORKER_SLOT`,
 * `BLOCKWISE_CONNECT` in its environment) to one of a few simulator processes
 * (`bench/fleet_sim.ts`), which opens one more connection for it. The run's side is the real
 * one: `RemoteWorkers` draws the slot and the environment, the `WorkerServer` admits the
 * connection, a `StreamExecutor` drives it. A launch runs until its simulated worker's session
 * ends; cancelling it drops the connection, as scancel or SIGTERM would.
 */

import { type ChildProcess, spawn } from "node:child_process";
import process from "node:process";
import { fileURLToPath } from "node:url";
import type { LaunchHandle } from "../lib/execute/stream_executor.ts";
import { CommandLauncher, type Launcher, type WorkerLaunchSpec } from "../lib/remote/launcher.ts";
import { runtimeName } from "../lib/runtime/mod.ts";

/** Driver -> simulator, one JSON object per line. */
export type SimCommand =
  | {
    readonly op: "launch";
    readonly id: number;
    /** Simulated node (its loopback address), or -1 for 127.0.0.1. */
    readonly node: number;
    readonly env: Readonly<Record<string, string>>;
  }
  | { readonly op: "cancel"; readonly id: number }
  | { readonly op: "report" }
  | { readonly op: "quit" };

/** What a simulator process counted, asked for once the run is over. */
export interface SimReport {
  readonly ev: "report";
  readonly blocks: number;
  /** When its last block ended (ms since the epoch). */
  readonly lastBlockEnd: number;
  /** Mean lateness of a timed block's timer (ms): the simulator's own overload. */
  readonly lateMs: number;
  /** Connections refused as busy and tried again; connects that failed and were tried again. */
  readonly busyRetries: number;
  readonly connectRetries: number;
  /** Blocks messages received and results messages sent. */
  readonly batches: number;
  readonly resultFrames: number;
  /** Busy milliseconds of its workers per bucket, from `bucketsFrom` (epoch ms). */
  readonly bucketMs: number;
  readonly bucketsFrom: number;
  readonly busy: readonly number[];
  /** Blocks finished per bucket, from `bucketsFrom`. */
  readonly finished: readonly number[];
  /** When each of its workers was admitted (it got init; epoch ms): told after the run, so
   * that the scheduler's process does not read a line per worker while it runs. */
  readonly upAt: readonly number[];
}

/** Simulator -> driver, one JSON object per line. */
export type SimEvent =
  | { readonly ev: "alive" }
  | { readonly ev: "end"; readonly id: number; readonly reason: string; readonly stopped: boolean }
  | SimReport;

export interface FleetOptions {
  /** Simulator processes. */
  readonly processes: number;
  /** Workers per simulated node (one loopback address each); 0: all from 127.0.0.1. */
  readonly perNode: number;
  /** Each block's time (ms); 0 for no-op blocks. */
  readonly blockMs: number;
}

const SIM = fileURLToPath(new URL("./fleet_sim.ts", import.meta.url));
/** As CommandLauncher: workers told to stop get this long to go before they are cancelled. */
const EXIT_GRACE_MS = 3000;

class FleetLaunch implements LaunchHandle {
  readonly label: string;
  #reason: string | null = null;
  readonly #cancel: () => void;

  constructor(label: string, cancel: () => void) {
    this.label = label;
    this.#cancel = cancel;
  }

  phase(): "queued" | "running" | "ended" {
    return this.#reason === null ? "running" : "ended";
  }

  endReason(): string {
    return this.#reason ?? "";
  }

  cancel(): void {
    if (this.#reason === null) this.#cancel();
  }

  ended(reason: string): void {
    this.#reason ??= reason;
  }
}

class Sim {
  readonly child: ChildProcess;
  readonly alive: Promise<void>;
  readonly exited: Promise<void>;
  #lines: string[] = [];

  constructor(blockMs: number, onEvent: (e: SimEvent) => void) {
    const argv = runtimeName() === "deno"
      ? ["run", "-A", "--quiet", SIM, "--block-ms", String(blockMs)]
      : [SIM, "--block-ms", String(blockMs)];
    this.child = spawn(process.execPath, argv, { stdio: ["pipe", "pipe", "inherit"] });
    let carry = "";
    let markAlive = (): void => {};
    this.alive = new Promise((resolve) => (markAlive = resolve));
    this.exited = new Promise((resolve) => this.child.once("exit", () => resolve()));
    this.child.stdout!.setEncoding("utf8");
    this.child.stdout!.on("data", (chunk: string) => {
      const lines = (carry + chunk).split("\n");
      carry = lines.pop()!;
      for (const line of lines) {
        if (line === "") continue;
        const event = JSON.parse(line) as SimEvent;
        if (event.ev === "alive") markAlive();
        else onEvent(event);
      }
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Commands are written once per turn: a spawn loop of thousands of launches is one write. */
  send(command: SimCommand): void {
    if (this.#lines.length === 0) {
      queueMicrotask(() => {
        this.child.stdin!.write(this.#lines.join("\n") + "\n");
        this.#lines = [];
      });
    }
    this.#lines.push(JSON.stringify(command));
  }
}

export class FleetLauncher implements Launcher {
  readonly name = "simulated fleet";
  readonly #o: FleetOptions;
  readonly #sims: Sim[];
  readonly #launches = new Map<number, FleetLaunch>();
  readonly #reports: SimReport[] = [];
  #reported: (() => void) | null = null;
  /** When the first launch was asked for, and when each worker was admitted (epoch ms). */
  firstLaunchAt = Number.NaN;
  readonly upAt: number[] = [];
  /** Why sessions ended, counted ("stopped" for a clean stop). */
  readonly endings = new Map<string, number>();

  private constructor(options: FleetOptions) {
    this.#o = options;
    this.#sims = Array.from(
      { length: options.processes },
      () => new Sim(options.blockMs, (e) => this.#event(e)),
    );
  }

  /** Start the simulator processes and wait until each reads its commands. */
  static async start(options: FleetOptions): Promise<FleetLauncher> {
    const fleet = new FleetLauncher(options);
    await Promise.all(fleet.#sims.map((s) => s.alive));
    return fleet;
  }

  get pids(): number[] {
    return this.#sims.map((s) => s.pid);
  }

  /**
   * RemoteWorkers makes its launcher from the task's `launch` field and takes none from outside,
   * so the bench's task says `launch: { kind: "command", argv: ["{worker}"] }` and the command
   * launcher's launches come here; everything else RemoteWorkers does is left as it is.
   */
  takeOverCommandLaunches(): void {
    CommandLauncher.prototype.launch = (spec: WorkerLaunchSpec) => this.launch(spec);
    CommandLauncher.prototype.close = () => this.close();
    CommandLauncher.prototype.abort = () => this.abort();
  }

  launch(spec: WorkerLaunchSpec): LaunchHandle {
    if (Number.isNaN(this.firstLaunchAt)) {
      this.firstLaunchAt = performance.timeOrigin + performance.now();
    }
    const id = spec.workerId;
    const sim = this.#sims[id % this.#sims.length]!;
    const node = this.#o.perNode > 0 ? Math.floor(id / this.#o.perNode) : -1;
    const launch = new FleetLaunch(
      `simulated worker ${id} (fleet process ${sim.pid})`,
      () => sim.send({ op: "cancel", id }),
    );
    this.#launches.set(id, launch);
    sim.send({ op: "launch", id, node, env: spec.env });
    return launch;
  }

  /** Give stopped workers a moment to end their sessions, then cancel the rest. */
  async close(): Promise<void> {
    const deadline = Date.now() + EXIT_GRACE_MS;
    while (this.#running() > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    for (const l of this.#launches.values()) l.cancel();
  }

  abort(): void {
    for (const l of this.#launches.values()) l.cancel();
  }

  /** What each simulator process counted. */
  async reports(): Promise<SimReport[]> {
    const done = new Promise<void>((resolve) => (this.#reported = resolve));
    for (const s of this.#sims) s.send({ op: "report" });
    await done;
    return this.#reports;
  }

  async quit(): Promise<void> {
    for (const s of this.#sims) s.send({ op: "quit" });
    await Promise.all(this.#sims.map((s) => s.exited));
  }

  #running(): number {
    let n = 0;
    for (const l of this.#launches.values()) if (l.phase() !== "ended") n++;
    return n;
  }

  #event(e: SimEvent): void {
    switch (e.ev) {
      case "end": {
        this.#launches.get(e.id)?.ended(e.reason);
        const key = e.stopped ? "stopped" : e.reason;
        this.endings.set(key, (this.endings.get(key) ?? 0) + 1);
        return;
      }
      case "report":
        this.#reports.push(e);
        this.upAt.push(...e.upAt);
        if (this.#reports.length === this.#sims.length) this.#reported?.();
        return;
      case "alive":
        return;
    }
  }
}
