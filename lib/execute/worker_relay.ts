/**
 * The worker end of a byte stream (`blockwise worker`): it greets the scheduler, and once told
 * which task to run, runs it in a local Web Worker exactly as a local run would, relaying frames
 * to messages and back. The relay's own thread never runs user code, so it always answers: it
 * sends heartbeats (with the running block) while a block computes for minutes, and a recall
 * reaches the block worker through shared memory at once.
 */

import * as fs from "node:fs";
import { createHash } from "node:crypto";
import * as os from "node:os";
import process from "node:process";
import type { ByteChannel } from "./byte_channel.ts";
import type { Executor, ExecutorEvents } from "./executor.ts";
import type { StartStage } from "../schedule/mod.ts";
import { encodeFrame, type SessionFrame, workerSideDecoder } from "./protocol/frames.ts";
import {
  type FromWorker,
  type InitMessage,
  PROTOCOL_VERSION,
  type ResultsMessage,
  type ToWorker,
} from "./protocol/messages.ts";
import { WorkerExecutor } from "./worker_executor.ts";
import { type RunClock, SYSTEM_CLOCK } from "./run_clock.ts";
import { isNonce, joinSlot, newNonce, sameMac, schedulerProof, workerProof } from "./auth.ts";

export const HEARTBEAT_MS = 1000;

/** A remote worker proves it knows the run's secret and claims the slot it was launched for. */
export interface RelayAuth {
  readonly secret: string;
  readonly slot: string;
  /** A worker joining by hand: the task it asks for ("" for the only one); `slot` is unused. */
  readonly join?: string;
}

/**
 * When the worker's batch job ends (ms since the epoch), and how long before that it stops taking
 * blocks (seconds; null: twice its mean block time, at least 60 s).
 */
export interface RelayWalltime {
  readonly endsAt: number;
  readonly marginSeconds: number | null;
}

export const MIN_WALLTIME_MARGIN_SECONDS = 60;

export interface RelayOptions {
  readonly channel: ByteChannel;
  /** Names this worker in the scheduler's messages, e.g. "blockwise 0.2.0 (bun 1.4.5)". */
  readonly client: string;
  readonly heartbeatMs?: number;
  readonly clock?: RunClock;
  /** Where the relay's own notices go (never the channel). */
  readonly log?: (message: string) => void;
  /** Remote workers: the handshake's secret and slot (without: no handshake, local pipes). */
  readonly auth?: RelayAuth;
  readonly walltime?: RelayWalltime;
}

/** How a session ended: `stopped` when the scheduler sent stop, else why the stream ended. */
export interface RelayEnd {
  readonly stopped: boolean;
  readonly reason: string;
  /** The scheduler refused the connection for being busy: connect again later. */
  readonly retry?: boolean;
  /** The run needs no more workers now (a joiner's task is full or finished): not a failure. */
  readonly later?: boolean;
}

/** Serve one scheduler until the stream ends; resolves with how it ended. */
export function serveWorker(options: RelayOptions): Promise<RelayEnd> {
  return new Promise((resolve) => new Relay(options, resolve).start());
}

class Relay implements ExecutorEvents {
  readonly #o: RelayOptions;
  readonly #resolve: (end: RelayEnd) => void;
  readonly #clock: RunClock;
  readonly #decoder = workerSideDecoder();
  #executor: WorkerExecutor | null = null;
  #stopHeartbeat: (() => void) | null = null;
  #closed = false;
  #token = -1;
  #tokenSince = 0;
  readonly #nonce = newNonce();
  /** Authenticated (or no handshake needed): scheduler messages are accepted. */
  #admitted: boolean;
  #leaving = false;
  /** The scheduler sent stop: the session ended as it should. */
  #stopped = false;
  #blocksDone = 0;
  #secondsDone = 0;
  #retry = false;
  #later = false;

  constructor(options: RelayOptions, resolve: (end: RelayEnd) => void) {
    this.#o = options;
    this.#resolve = resolve;
    this.#clock = options.clock ?? SYSTEM_CLOCK;
    this.#admitted = options.auth === undefined;
  }

  start(): void {
    const { channel } = this.#o;
    channel.onClose((reason) => this.#end(reason));
    channel.onData((chunk) => {
      if (this.#closed) return;
      let messages: (ToWorker | SessionFrame)[];
      try {
        messages = this.#decoder.push(chunk);
      } catch (error) {
        this.#refuse(`the scheduler broke the protocol: ${(error as Error).message}`);
        return;
      }
      for (const m of messages) if (!this.#closed) this.#receive(m);
    });
    this.#write({
      kind: "hello",
      protocol: PROTOCOL_VERSION,
      client: this.#o.client,
      pid: process.pid,
      host: os.hostname(),
      ...(this.#o.auth === undefined
        ? {}
        : this.#o.auth.join !== undefined
        ? { join: this.#o.auth.join, nonce: this.#nonce }
        : { slot: this.#o.auth.slot, nonce: this.#nonce }),
    });
  }

  // ---- events of the local Web Worker -> frames -----------------------------------------------

  ready(): void {
    this.#write({ kind: "ready" });
  }

  setupFailed(
    _executor: Executor,
    message: string,
    stack: string | undefined,
    stage?: StartStage,
  ): void {
    this.#write({
      kind: "setup-failed",
      message,
      ...(stack === undefined ? {} : { stack }),
      ...(stage === "import" ? { stage } : {}),
    });
    this.#o.channel.close();
  }

  results(_executor: Executor, results: ResultsMessage): void {
    for (let i = 0; i < results.count; i++) {
      this.#blocksDone++;
      this.#secondsDone += results.records[i * results.stride + 2]!;
    }
    this.#write(results);
  }

  leaving(_executor: Executor, reason: string): void {
    this.#write({ kind: "leaving", reason });
  }

  returned(_executor: Executor, positions: Float64Array, count: number): void {
    this.#write({ kind: "returned", positions, count });
  }

  crashed(_executor: Executor, reason: string): void {
    this.#write({ kind: "closing", reason });
    this.#o.channel.close();
  }

  output(_executor: Executor, stream: "stdout" | "stderr", text: string): void {
    this.#write({ kind: "output", stream, text });
  }

  // ---- frames from the scheduler --------------------------------------------------------------

  #receive(message: ToWorker | SessionFrame): void {
    if (!this.#admitted) {
      if (message.kind === "challenge") return this.#answer(message.nonce, message.proof);
      if (message.kind === "error") {
        this.#o.log?.(`The scheduler refused this worker: ${message.message}`);
        this.#retry = message.retry === true;
        this.#later = message.later === true;
        this.#o.channel.close();
        return;
      }
      return this.#refuse(`the scheduler sent "${message.kind}" before the handshake`);
    }
    switch (message.kind) {
      case "init":
        if (this.#executor !== null) return this.#refuse(`the scheduler sent "init" twice`);
        this.#init(message);
        return;
      case "blocks":
        if (this.#executor === null) return this.#refuse(`the scheduler sent blocks before "init"`);
        this.#executor.send(message.blocks, message.count);
        return;
      case "recall":
        this.#executor?.recall(message.final);
        if (this.#executor === null) {
          this.#write({ kind: "returned", positions: new Float64Array(0), count: 0 });
        }
        return;
      case "stop":
        this.#stopped = true;
        this.#o.channel.close();
        return;
      case "error":
        this.#o.log?.(`The scheduler refused this worker: ${message.message}`);
        this.#later = message.later === true; // a joiner's task is full or finished
        this.#o.channel.close();
        return;
      case "challenge":
      case "auth":
        return this.#refuse(`the scheduler sent "${message.kind}" outside the handshake`);
    }
  }

  /** The scheduler must prove it knows the secret before this worker runs anything for it. */
  #answer(schedulerNonce: string, proof: string): void {
    const auth = this.#o.auth!;
    if (
      !isNonce(schedulerNonce) ||
      !sameMac(proof, schedulerProof(auth.secret, this.#nonce, schedulerNonce))
    ) {
      return this.#refuse(
        auth.join !== undefined
          ? "the scheduler could not prove it knows this run's secret; do --connect and --secret-file name the same run?"
          : "the scheduler could not prove it knows this run's secret; is BLOCKWISE_CONNECT pointing at the right run?",
      );
    }
    this.#admitted = true;
    this.#write({
      kind: "auth",
      mac: workerProof(
        auth.secret,
        schedulerNonce,
        this.#nonce,
        auth.join !== undefined ? joinSlot(auth.join) : auth.slot,
      ),
    });
  }

  #init(init: InitMessage): void {
    if (init.protocol !== PROTOCOL_VERSION) {
      return this.#refuse(
        `the scheduler speaks protocol ${init.protocol} but this worker speaks ${PROTOCOL_VERSION}; run the same blockwise version on both sides`,
      );
    }
    const problem = pipelineProblem(init);
    if (problem !== null) {
      this.#write({ kind: "setup-failed", message: problem });
      this.#o.channel.close();
      return;
    }
    // Heartbeats start with init (nothing but the handshake comes before it), and go on while
    // the Web Worker imports the module and runs setup, however long that takes.
    this.#stopHeartbeat = this.#clock.every(
      this.#o.heartbeatMs ?? HEARTBEAT_MS,
      () => this.#heartbeat(),
    );
    this.#executor = new WorkerExecutor({
      id: init.workerId,
      task: 0,
      taskId: init.taskId,
      layout: init.layout,
      pipelinePath: init.pipeline,
      measure: init.measure,
      outputs: init.outputs,
      runId: init.runId,
      params: init.params,
      timeout: null, // the scheduler enforces timeouts, on its own clock
      events: this,
    });
  }

  /** Near the job's walltime: take no more blocks, hand back those not started. */
  #checkWalltime(now: number): void {
    const walltime = this.#o.walltime;
    if (walltime === undefined || this.#leaving || this.#executor === null) return;
    const mean = this.#blocksDone === 0 ? 0 : this.#secondsDone / this.#blocksDone;
    const margin = walltime.marginSeconds ??
      Math.max(MIN_WALLTIME_MARGIN_SECONDS, 2 * mean);
    const left = (walltime.endsAt - now) / 1000;
    if (left >= margin) return;
    this.#leaving = true;
    this.#write({
      kind: "leaving",
      reason: `its job ends in ${Math.max(0, Math.round(left))} s, less than the margin of ${
        Math.round(margin)
      } s`,
    });
    this.#executor.recall(true);
  }

  #heartbeat(): void {
    if (this.#closed) return;
    this.#checkWalltime(this.#clock.now());
    if (this.#closed) return;
    const executor = this.#executor;
    const token = executor === null ? -1 : executor.runningToken();
    const now = this.#clock.now();
    if (token !== this.#token) {
      this.#token = token;
      this.#tokenSince = now;
    }
    // A block is named only once every block that ran before it was reported: the scheduler
    // blames the named block if the worker dies, and must never blame one that succeeded.
    const named = token >= 0 && executor!.finishedCount() === this.#blocksDone;
    this.#write({
      kind: "heartbeat",
      running: named ? executor!.runningPosition() : -1,
      runningFor: named ? (now - this.#tokenSince) / 1000 : 0,
    });
  }

  #write(message: FromWorker | SessionFrame): void {
    if (!this.#closed) this.#o.channel.write(encodeFrame(message));
  }

  #refuse(why: string): void {
    this.#write({ kind: "error", message: why });
    this.#o.log?.(why);
    this.#o.channel.close();
  }

  #end(reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopHeartbeat?.();
    this.#executor?.kill();
    this.#resolve({
      stopped: this.#stopped,
      reason,
      ...(this.#retry ? { retry: true } : {}),
      ...(this.#later ? { later: true } : {}),
    });
  }
}

/** A worker on another machine must load exactly the scheduler's pipeline file. */
function pipelineProblem(init: InitMessage): string | null {
  let bytes: Uint8Array;
  try {
    bytes = fs.readFileSync(init.pipeline);
  } catch (error) {
    return `Cannot read the pipeline file ${init.pipeline} on ${os.hostname()}: ${
      (error as Error).message
    }; put the pipeline on a filesystem every worker node shares, at the same path`;
  }
  if (init.pipelineSha256 === null) return null;
  const sha = createHash("sha256").update(bytes).digest("hex");
  if (sha === init.pipelineSha256) return null;
  return `The pipeline file ${init.pipeline} on ${os.hostname()} differs from the scheduler's (SHA-256 ${
    sha.slice(0, 12)
  }... instead of ${
    init.pipelineSha256.slice(0, 12)
  }...); make sure every node sees the same file (a shared filesystem, not a copy)`;
}
