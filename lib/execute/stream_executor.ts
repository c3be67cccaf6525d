/**
 * An executor whose worker sits at the other end of a byte stream (a TCP connection, a pipe to
 * a child process): the same protocol as a Web Worker's, as frames (`protocol/frames.ts`).
 * With no shared memory, liveness and "which block runs now" come from heartbeats: a worker that
 * sends nothing for the lease is lost like a crashed one, and the running block is the oldest
 * one held while the worker says it is running a block.
 *
 * A remote worker is launched first (a batch job, a process) and connects later: until the
 * worker server attaches its authenticated connection, the executor watches the launch instead
 * (a job that ends, or a worker that never connects, is lost like a crashed one).
 */

import type { Executor, ExecutorSpec, ExecutorState } from "./executor.ts";
import type { ByteChannel } from "./byte_channel.ts";
import { InFlightQueue } from "./in_flight.ts";
import {
  encodeBlocks,
  encodeFrame,
  type FrameDecoder,
  schedulerSideDecoder,
  type SessionFrame,
} from "./protocol/frames.ts";
import { type FromWorker, PROTOCOL_VERSION, type ToWorker } from "./protocol/messages.ts";
import { RunningBlockWatch } from "./running_block_watch.ts";
import type { HelloMessage, PythonInit } from "./protocol/messages.ts";
import type { StartStage } from "../schedule/mod.ts";
import { describeStartFailure, type StartFailure } from "./start_failure.ts";
import { NO_PROCESS, type ProcessMatch } from "../runtime/nvml.ts";

/** How a launched remote worker is doing before (and while) it is connected. */
/** A session's frame decoder starts this small (a results frame of 512 no-op blocks is 12 KiB). */
const SESSION_BUFFER_BYTES = 16 * 1024;
/** The batch every stream executor fills and sends (`batchBuffer`). */
let sharedBatch = new Float64Array(256);

export interface LaunchHandle {
  /** Names it in messages, e.g. "SLURM job 1234" or "process 4242". */
  readonly label: string;
  /** "queued": waiting for the cluster (shown as queued); "ended": gone, see `endReason`. */
  phase(): "queued" | "running" | "ended";
  endReason(): string;
  /** Once ended before its worker connected: how, with its first output lines, if known. */
  startFailure?(): StartFailure | null;
  /** End it now (scancel, kill); idempotent. */
  cancel(): void;
  /** A local process: settles once it has exited. */
  readonly exited?: Promise<void>;
  /** A local process's pid (its GPU figures' process). */
  readonly pid?: number | undefined;
}

/** Without a frame for this long, a stream worker counts as lost. */
export const DEFAULT_LEASE_MS = 15_000;

export interface StreamExecutorOptions {
  readonly spec: ExecutorSpec;
  /** The connection, or null for a launched worker that connects later (`attach`). */
  readonly channel: ByteChannel | null;
  /** SHA-256 of the pipeline file, for a worker that loads it from a shared filesystem. */
  readonly pipelineSha256: string | null;
  /** A Python task's module and functions, sent in `init` to the Python client. */
  readonly python?: PythonInit;
  readonly leaseMs?: number;
  readonly frameCap?: number;
  /** Called once when the executor ends (stop, kill or loss): end the process, the job, ... */
  readonly onEnd?: () => void;
  /** A launched worker's job or process, watched until it connects. */
  readonly launch?: LaunchHandle;
  /**
   * Once its launch runs (no longer queued), how long a worker may take to connect before it
   * counts as lost (ms; default 120 s: a binary start and a module import on a slow shared disk).
   */
  readonly connectTimeoutMs?: number;
  /**
   * Whether the worker server holds connections back for lack of need (`worker_server.ts`):
   * this worker may be one of them, connected but not read, so its connect timeout waits.
   */
  readonly connectHeld?: () => boolean;
  /** Its worker joins by hand (`launch: "manual"`): see `Executor.joined`. */
  readonly joined?: boolean;
  /** See `Executor.batchMs`. */
  readonly batchMs?: number;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 120_000;

export class StreamExecutor implements Executor {
  readonly id: number;
  readonly task: number;
  readonly inFlight = new InFlightQueue();
  window = 1;
  #state: ExecutorState = "starting";
  #greeted = false;
  readonly #o: StreamExecutorOptions;
  /**
   * Made when the worker connects: a decoder holds a 64 KiB buffer, and a fleet of workers whose
   * jobs wait in the cluster's queue (thousands) need none yet.
   */
  #decoder: FrameDecoder<FromWorker | SessionFrame> | null = null;
  readonly #watch: RunningBlockWatch;
  readonly #leaseMs: number;
  #lastHeard: number;
  #recalling = false;
  /** Records received so far: identifies the running block (the oldest held) between results. */
  #recordsReceived = 0;
  #heartbeatRunning = -1;
  #heartbeatStartedAt = 0;
  #ended = false;
  #channel: ByteChannel | null = null;
  /** When the launch was first seen running (not queued), for the connect timeout. */
  #runningSince = Number.NaN;

  constructor(options: StreamExecutorOptions) {
    this.#o = options;
    this.id = options.spec.id;
    this.task = options.spec.task;
    this.#leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    this.#watch = new RunningBlockWatch(options.spec.config.timeout);
    this.#lastHeard = options.spec.clock.now();
    if (options.channel !== null) this.attach(options.channel, null);
  }

  get batchMs(): number | undefined {
    return this.#o.batchMs;
  }

  get exited(): Promise<void> | undefined {
    return this.#o.launch?.exited;
  }

  get joined(): boolean {
    return this.#o.joined === true;
  }

  /** Its launch's process, or none of its own (a daisy script's thread). */
  gpuProcess(): ProcessMatch {
    return this.#o.launch?.pid ?? NO_PROCESS;
  }

  get state(): ExecutorState {
    return this.#state;
  }

  /** Whether its launch waits in the cluster's queue (not connected yet). */
  queued(): boolean {
    return this.#channel === null && this.#state === "starting" &&
      this.#o.launch?.phase() === "queued";
  }

  /**
   * The worker connected (and, for a remote worker, authenticated): `hello` is its greeting
   * when the handshake already read it. Returns false when the executor is gone.
   */
  attach(channel: ByteChannel, hello: HelloMessage | null): boolean {
    if (this.#state === "dead" || this.#channel !== null) {
      channel.close();
      return false;
    }
    this.#channel = channel;
    // Small at first, doubling as frames need: 2,000 connected workers held 64 KiB each.
    this.#decoder = schedulerSideDecoder(this.#o.frameCap, SESSION_BUFFER_BYTES);
    this.#lastHeard = this.#o.spec.clock.now();
    channel.onData((chunk) => this.#onData(chunk));
    channel.onClose((reason) => this.#die(reason));
    if (hello !== null) this.#receive(hello);
    return true;
  }

  batchBuffer(pairs: number): Float64Array {
    // The frame encoder copies the batch before the next is filled, so one buffer serves every
    // executor's batches: 2,000 workers allocated and zeroed 2,000 of them.
    if (sharedBatch.length < 2 * pairs) sharedBatch = new Float64Array(2 * pairs);
    return sharedBatch;
  }

  /**
   * Straight to the blocks encoder: through `encodeFrame`, the hot path's switch was compiled for
   * blocks frames and deoptimised, then compiled again, when a fleet's init, recall and stop
   * frames came through it after the first thousand batches.
   */
  send(batch: Float64Array, count: number): void {
    this.#channel?.write(encodeBlocks(batch, count));
  }

  runningPosition(): number {
    const head = this.inFlight.positionAt(0);
    return this.#heartbeatRunning >= 0 && head === this.#heartbeatRunning ? head : -1;
  }

  checkHealth(now: number): void {
    if (this.#state === "dead") return;
    if (this.#channel === null) {
      this.#checkLaunch(now);
      return;
    }
    if (now - this.#lastHeard > this.#leaseMs) {
      this.#die(
        `the worker sent nothing for ${
          Math.round((now - this.#lastHeard) / 1000)
        } s (its lease is ${this.#leaseMs / 1000} s)`,
      );
      return;
    }
    const running = this.runningPosition() >= 0;
    const overdue = this.#watch.observe(
      now,
      running ? this.#recordsReceived : -1,
      this.#heartbeatStartedAt,
    );
    if (overdue !== null) this.#die(overdue);
  }

  /** Before the worker connects: its job may end, or it may never connect. */
  #checkLaunch(now: number): void {
    const launch = this.#o.launch;
    if (launch === undefined) return;
    const phase = launch.phase();
    if (phase === "ended") {
      const failure = launch.startFailure?.() ?? null;
      if (failure !== null) {
        const { message, details } = describeStartFailure(failure, this.#o.python !== undefined);
        return this.#failedToStart(message, details, "start");
      }
      this.#die(`${launch.label} ended before its worker connected: ${launch.endReason()}`);
      return;
    }
    if (phase === "queued") {
      this.#runningSince = Number.NaN;
      return;
    }
    if (Number.isNaN(this.#runningSince) || this.#o.connectHeld?.() === true) {
      this.#runningSince = now;
    }
    const limit = this.#o.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    if (now - this.#runningSince > limit) {
      this.#die(
        `${launch.label} started but its worker did not connect within ${
          Math.round(limit / 1000)
        } s; check the job's log, and that the worker can reach this machine`,
      );
    }
  }

  recall(final = false): void {
    if (this.#state === "dead" || (this.#recalling && !final)) return;
    this.#recalling = true;
    this.#write({ kind: "recall", final });
  }

  /** A connected worker finishes and exits on its own; one still queued is cancelled. */
  stop(): void {
    if (this.#state !== "dead" && this.#channel !== null) {
      this.#write({ kind: "stop" });
      this.#state = "dead";
      this.#channel.close();
      this.#end();
      return;
    }
    this.kill();
  }

  kill(): void {
    // A joiner killed before it holds blocks (its task ended while it started) leaves cleanly.
    if (this.#state !== "dead" && this.joined && this.inFlight.size === 0) {
      this.#write({ kind: "stop" });
    }
    this.#state = "dead";
    this.#channel?.close();
    this.#o.launch?.cancel();
    this.#end();
  }

  #isDead(): boolean {
    return this.#state === "dead";
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#o.onEnd?.();
  }

  #write(message: ToWorker | SessionFrame): void {
    this.#channel?.write(encodeFrame(message));
  }

  #failedToStart(message: string, stack: string | undefined, stage?: StartStage): void {
    this.#state = "dead";
    this.#channel?.close();
    this.#o.launch?.cancel();
    this.#end();
    this.#o.spec.events.setupFailed(this, message, stack, stage);
  }

  #die(reason: string): void {
    if (this.#state === "dead") return;
    this.#state = "dead";
    this.#channel?.close();
    this.#o.launch?.cancel();
    this.#end();
    this.#o.spec.events.crashed(this, reason);
  }

  #onData(chunk: Uint8Array): void {
    if (this.#state === "dead") return;
    this.#lastHeard = this.#o.spec.clock.now();
    let messages: (FromWorker | SessionFrame)[];
    try {
      messages = this.#decoder!.push(chunk);
    } catch (error) {
      this.#die(`the worker broke the protocol: ${(error as Error).message}`);
      return;
    }
    for (const message of messages) {
      if (this.#isDead()) return;
      this.#receive(message);
    }
  }

  #receive(message: FromWorker | SessionFrame): void {
    const { spec } = this.#o;
    const events = spec.events;
    if (message.kind !== "hello" && !this.#greeted) {
      this.#die(`the worker sent "${message.kind}" before "hello"`);
      return;
    }
    switch (message.kind) {
      case "hello":
        if (this.#greeted) return this.#die(`the worker said "hello" twice`);
        this.#greeted = true;
        if (message.protocol !== PROTOCOL_VERSION) {
          const why =
            `the worker (${message.client}) speaks protocol ${message.protocol} but this blockwise speaks ${PROTOCOL_VERSION}; run the same blockwise version on both sides`;
          this.#write({ kind: "error", message: why });
          return this.#die(why);
        }
        this.#write({
          kind: "init",
          protocol: PROTOCOL_VERSION,
          taskId: spec.config.id,
          workerId: spec.id,
          pipeline: spec.pipelinePath,
          pipelineSha256: this.#o.pipelineSha256,
          layout: spec.config.layout,
          measure: spec.measure,
          outputs: spec.outputs,
          runId: spec.runId,
          params: spec.config.params,
          ...(this.#o.python === undefined ? {} : { python: this.#o.python }),
        });
        return;
      case "ready":
        if (this.#state !== "starting") return this.#die(`the worker said "ready" twice`);
        this.#state = "ready";
        events.ready(this);
        return;
      case "setup-failed":
        return this.#failedToStart(message.message, message.stack, message.stage);
      case "results":
        this.#recordsReceived += message.count;
        this.#heartbeatRunning = -1;
        events.results(this, message);
        return;
      case "returned":
        this.#recalling = false;
        events.returned(this, message.positions, message.count);
        return;
      case "output":
        events.output(this, message.stream, message.text);
        return;
      case "closing":
        return this.#die(message.reason);
      case "leaving":
        events.leaving(this, message.reason);
        return;
      case "heartbeat":
        if (message.running !== this.#heartbeatRunning) {
          this.#heartbeatStartedAt = spec.clock.now() - message.runningFor * 1000;
        }
        this.#heartbeatRunning = message.running;
        return;
      case "error":
        return this.#die(`the worker refused: ${message.message}`);
      case "challenge":
      case "auth":
        return this.#die(`the worker sent "${message.kind}" outside the handshake`);
    }
  }
}
