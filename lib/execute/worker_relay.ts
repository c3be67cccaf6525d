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

export const HEARTBEAT_MS = 1000;

export interface RelayOptions {
  readonly channel: ByteChannel;
  /** Names this worker in the scheduler's messages, e.g. "blockwise 0.2.0 (bun 1.4.5)". */
  readonly client: string;
  readonly heartbeatMs?: number;
  readonly clock?: RunClock;
  /** Where the relay's own notices go (never the channel). */
  readonly log?: (message: string) => void;
}

/** Serve one scheduler until the stream ends; resolves with the reason it ended. */
export function serveWorker(options: RelayOptions): Promise<string> {
  return new Promise((resolve) => new Relay(options, resolve).start());
}

class Relay implements ExecutorEvents {
  readonly #o: RelayOptions;
  readonly #resolve: (reason: string) => void;
  readonly #clock: RunClock;
  readonly #decoder = workerSideDecoder();
  #executor: WorkerExecutor | null = null;
  #stopHeartbeat: (() => void) | null = null;
  #closed = false;
  #token = -1;
  #tokenSince = 0;

  constructor(options: RelayOptions, resolve: (reason: string) => void) {
    this.#o = options;
    this.#resolve = resolve;
    this.#clock = options.clock ?? SYSTEM_CLOCK;
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
    });
    this.#stopHeartbeat = this.#clock.every(
      this.#o.heartbeatMs ?? HEARTBEAT_MS,
      () => this.#heartbeat(),
    );
  }

  // ---- events of the local Web Worker -> frames -----------------------------------------------

  ready(): void {
    this.#write({ kind: "ready" });
  }

  setupFailed(_executor: Executor, message: string, stack: string | undefined): void {
    this.#write({ kind: "setup-failed", message, ...(stack === undefined ? {} : { stack }) });
    this.#o.channel.close();
  }

  results(_executor: Executor, results: ResultsMessage): void {
    const { spare: _spare, ...message } = results;
    this.#write(message);
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
        this.#o.channel.close();
        return;
      case "error":
        this.#o.log?.(`The scheduler refused this worker: ${message.message}`);
        this.#o.channel.close();
        return;
      case "challenge":
      case "auth":
        return this.#refuse(`the scheduler sent "${message.kind}" outside the handshake`);
    }
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

  #heartbeat(): void {
    if (this.#closed) return;
    const executor = this.#executor;
    const token = executor === null ? -1 : executor.runningToken();
    const now = this.#clock.now();
    if (token !== this.#token) {
      this.#token = token;
      this.#tokenSince = now;
    }
    this.#write({
      kind: "heartbeat",
      running: token < 0 ? -1 : executor!.runningPosition(),
      runningFor: token < 0 ? 0 : (now - this.#tokenSince) / 1000,
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
    this.#resolve(reason);
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
