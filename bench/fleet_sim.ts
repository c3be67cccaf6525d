/**
 * One process of the simulated fleet of `bench/fleet.ts`: it holds many remote workers, each a
 * TCP connection to the run (`lib/runtime/tcp.ts`, as `blockwise worker` connects) that speaks
 * the real protocol with the real codec
 * (`lib/execute/protocol/frames.ts`) and the real proofs (`lib/remote/auth.ts`): hello,
 * challenge checked, auth, init, ready, heartbeats every second from init, blocks run in the
 * order sent, results flushed as `workers/block_worker.ts` flushes them (when its queue runs
 * dry, at 512 records, or 5 ms after the first unreported one, and before a block starts when
 * 5 ms passed since the last flush), recall and stop as `lib/execute/worker_relay.ts` answers
 * them, and a scheduler that says it is busy is retried with the backoff of
 * `lib/remote/remote_worker.ts`. What it does not do is run user code: a block is a no-op, or
 * a timer of `--block-ms` per connection, so hundreds of workers share one event loop.
 *
 * It is started by `FleetLauncher` (bench/fleet_launcher.ts), never by hand. stdin: one JSON
 * `SimCommand` per line (a launch carries what a real `blockwise worker` gets in its
 * environment); stdout: one JSON `SimEvent` per line.
 *
 *   bun bench/fleet_sim.ts --block-ms MS        deno run -A bench/fleet_sim.ts --block-ms MS
 */

import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { connectTcp, type TcpConnection } from "../lib/runtime/tcp.ts";
import process from "node:process";
import {
  encodeFrame,
  type SessionFrame,
  workerSideDecoder,
} from "../lib/execute/protocol/frames.ts";
import {
  type FromWorker,
  type InitMessage,
  PROTOCOL_VERSION,
  RECORD_STRIDE_PLAIN,
  RESULT_RECORDS,
  STATUS_DONE,
  type ToWorker,
} from "../lib/execute/protocol/messages.ts";
import { parseHostPort } from "../lib/remote/address.ts";
import {
  isNonce,
  newNonce,
  sameMac,
  schedulerProof,
  secretFromEnvironment,
  workerProof,
} from "../lib/remote/auth.ts";
import { CONNECT_ENV, SLOT_ENV } from "../lib/remote/remote_workers.ts";
import type { SimCommand, SimEvent, SimReport } from "./fleet_launcher.ts";

/** As in workers/block_worker.ts. */
const FLUSH_AFTER_MS = 5;
/** As in lib/execute/worker_relay.ts. */
const HEARTBEAT_MS = 1000;
/** As in lib/remote/remote_worker.ts: coming back to a busy scheduler, and reaching one. */
const BUSY_PATIENCE_MS = 120_000;
const CONNECT_PATIENCE_MS = 30_000;
/** Busy time is summed in buckets this long, so the driver can cut any window out of it. */
const BUCKET_MS = 10;
/** A simulated worker's frame decoder starts this small (a real worker's, alone in its process, at 64 KiB). */
const SESSION_DECODER_BYTES = 16 * 1024;

const argBlockMs = process.argv.indexOf("--block-ms");
const blockMs = argBlockMs > 0 ? Number(process.argv[argBlockMs + 1]) : 0;

/** Milliseconds since the epoch with sub-millisecond resolution, comparable across processes. */
const epoch = (): number => performance.timeOrigin + performance.now();
const simStart = epoch();

// ---- what the driver reads at the end -------------------------------------------------------

let blocksRun = 0;
let lastBlockEnd = 0;
/** When each worker got init (epoch ms), for the report. */
const upAt: number[] = [];
let lateMs = 0;
let busyRetries = 0;
let connectRetries = 0;
let batches = 0;
let resultFrames = 0;
/** Busy milliseconds (timed blocks), and blocks finished, per BUCKET_MS since simStart. */
let busy = new Float64Array(1024);
let finished = new Float64Array(1024);

function bucket(t: number): number {
  const b = Math.floor((t - simStart) / BUCKET_MS);
  if (b >= busy.length) {
    const size = Math.max(2 * busy.length, b + 1);
    const grow = (a: Float64Array) => {
      const next = new Float64Array(size);
      next.set(a);
      return next;
    };
    busy = grow(busy);
    finished = grow(finished);
  }
  return b;
}

/**
 * A block's time as its worker reports it, [start, end): a timer that fires late (Deno's are
 * about a millisecond late, Bun's a tenth) lengthens the block, as a slow block would, rather
 * than counting against the scheduler; the driver prints the mean lateness beside it.
 */
function addBusy(start: number, to: number): void {
  let from = start;
  while (from < to) {
    const b = bucket(from);
    const end = Math.min(to, simStart + (b + 1) * BUCKET_MS);
    busy[b]! += end - from;
    from = end;
  }
}

// ---- events to the driver, batched: a write per turn, not per worker -------------------------

let pending: string[] = [];
function emit(event: SimEvent): void {
  if (pending.length === 0) setTimeout(flushEvents, 0);
  pending.push(JSON.stringify(event));
}
function flushEvents(): void {
  if (pending.length === 0) return;
  process.stdout.write(pending.join("\n") + "\n");
  pending = [];
}

// ---- the pipeline check a real worker makes on init (once per file here: same bytes) -------

const pipelineSha = new Map<string, string>();
function pipelineProblem(init: InitMessage): string | null {
  let sha = pipelineSha.get(init.pipeline);
  if (sha === undefined) {
    try {
      sha = createHash("sha256").update(fs.readFileSync(init.pipeline)).digest("hex");
    } catch (error) {
      return `Cannot read the pipeline file ${init.pipeline}: ${(error as Error).message}`;
    }
    pipelineSha.set(init.pipeline, sha);
  }
  return init.pipelineSha256 === null || init.pipelineSha256 === sha
    ? null
    : `The pipeline file ${init.pipeline} differs from the scheduler's`;
}

// ---- one simulated worker --------------------------------------------------------------------

const workers = new Map<number, SimWorker>();
const NO_RECORDS = new Float64Array(0);
let noOpRecords: Float64Array<ArrayBuffer> | null = null;

class SimWorker {
  readonly #id: number;
  readonly #host: string;
  readonly #localAddress: string | undefined;
  readonly #secret: string;
  readonly #slot: string;
  readonly #connect: { host: string; port: number };
  #socket: TcpConnection | null = null;
  #nonce = ""; // each session's own, made when it starts
  #admitted = false;
  #serving = false;
  #retry = false;
  #stopped = false;
  #ended = false;
  #busyDeadline = 0;
  #busyWait = 250;
  #heartbeat: ReturnType<typeof setInterval> | null = null;
  // Blocks to run: a ring of (position, attempt) pairs, as in the Web Worker.
  #queue = new Float64Array(2 * 64);
  #head = 0;
  #size = 0;
  // Results not reported yet: made for the first block (most of a big fleet may never run one).
  #records = NO_RECORDS;
  #recordCount = 0;
  #firstUnflushedAt = 0;
  #lastFlushAt = 0;
  /** The timed block running now: its position, start, timer. */
  #running = -1;
  #runningSince = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #recall = false;
  /** A final recall: start nothing sent later. */
  #final = false;

  constructor(id: number, node: number, env: Readonly<Record<string, string>>) {
    this.#id = id;
    this.#host = `sim-node-${node}`;
    // One loopback address per simulated node: the server's per-address handshake cap sees
    // nodes, as it would on a cluster (node < 0: all from 127.0.0.1, one big node).
    this.#localAddress = node < 0
      ? undefined
      : `127.${1 + (node >> 16)}.${(node >> 8) & 255}.${node & 255}`;
    this.#secret = secretFromEnvironment(env);
    const slot = env[SLOT_ENV];
    if (slot === undefined) throw new Error(`${SLOT_ENV} is not set`);
    this.#slot = slot;
    this.#connect = parseHostPort(env[CONNECT_ENV] ?? "", "--connect", false);
    this.#busyDeadline = Date.now() + BUSY_PATIENCE_MS;
  }

  start(): void {
    this.#connectOnce(Date.now() + CONNECT_PATIENCE_MS, 200);
  }

  /** The launcher cancels it (scancel, SIGTERM): the connection just goes. */
  cancel(): void {
    this.#end("cancelled by the launcher");
  }

  #connectOnce(deadline: number, wait: number): void {
    if (this.#ended) return;
    connectTcp({
      host: this.#connect.host,
      port: this.#connect.port,
      ...(this.#localAddress === undefined ? {} : { localAddress: this.#localAddress }),
      timeoutMs: 10_000,
    }).then((socket) => {
      if (this.#ended) socket.destroy();
      else this.#session(socket);
    }, (error: Error) => {
      if (Date.now() + wait > deadline) {
        this.#end(`cannot connect: ${error.message}`);
        return;
      }
      connectRetries++;
      setTimeout(() => this.#connectOnce(deadline, Math.min(2 * wait, 2000)), wait);
    });
  }

  #session(socket: TcpConnection): void {
    this.#socket = socket;
    // 16 KiB, growing as frames need: hundreds of decoders share this process.
    const decoder = workerSideDecoder(undefined, SESSION_DECODER_BYTES);
    this.#nonce = newNonce();
    this.#admitted = false;
    this.#retry = false;
    socket.setOnData((chunk: Uint8Array) => {
      if (this.#socket !== socket) return;
      let messages: (ToWorker | SessionFrame)[];
      try {
        messages = decoder.push(chunk);
      } catch (error) {
        this.#refuse(`the scheduler broke the protocol: ${(error as Error).message}`);
        return;
      }
      for (const m of messages) if (this.#socket === socket) this.#receive(m);
    });
    socket.onClose(() => {
      if (this.#socket === socket) this.#closed();
    });
    this.#write({
      kind: "hello",
      protocol: PROTOCOL_VERSION,
      client: "blockwise fleet simulator",
      pid: process.pid,
      host: this.#host,
      slot: this.#slot,
      nonce: this.#nonce,
    });
  }

  /** The connection went: retry a busy scheduler with backoff, else the session is over. */
  #closed(): void {
    this.#socket = null;
    if (this.#retry && !this.#ended && Date.now() + this.#busyWait <= this.#busyDeadline) {
      busyRetries++;
      const pause = this.#busyWait / 2 + Math.random() * this.#busyWait / 2;
      this.#busyWait = Math.min(2 * this.#busyWait, 5_000);
      setTimeout(() => this.start(), pause);
      return;
    }
    this.#end(this.#stopped ? "stopped" : "the connection closed");
  }

  #receive(m: ToWorker | SessionFrame): void {
    if (!this.#admitted) {
      if (m.kind === "challenge") {
        if (
          !isNonce(m.nonce) || !sameMac(m.proof, schedulerProof(this.#secret, this.#nonce, m.nonce))
        ) {
          return this.#refuse("the scheduler could not prove it knows this run's secret");
        }
        this.#admitted = true;
        this.#write({
          kind: "auth",
          mac: workerProof(this.#secret, m.nonce, this.#nonce, this.#slot),
        });
        return;
      }
      if (m.kind === "error") {
        this.#retry = m.retry === true;
        this.#socket?.destroy();
        return;
      }
      return this.#refuse(`the scheduler sent "${m.kind}" before the handshake`);
    }
    switch (m.kind) {
      case "init":
        return this.#init(m);
      case "blocks":
        if (!this.#serving) return this.#refuse(`the scheduler sent blocks before "init"`);
        batches++;
        // No-op blocks run at once from their frame: nothing is held between turns.
        if (blockMs === 0 && !this.#recall) return this.#runNoOp(m.blocks, m.count);
        this.#enqueue(m.blocks, m.count);
        if (this.#final) return this.#handBack();
        return this.#run();
      case "recall":
        this.#recall = true;
        if (m.final) this.#final = true;
        if (this.#running < 0) this.#handBack();
        return;
      case "stop":
        this.#stopped = true;
        this.#socket?.destroy();
        return;
      case "error":
        this.#socket?.destroy();
        return;
      case "challenge":
      case "auth":
        return this.#refuse(`the scheduler sent "${m.kind}" outside the handshake`);
    }
  }

  #init(init: InitMessage): void {
    if (this.#serving) return this.#refuse(`the scheduler sent "init" twice`);
    if (init.protocol !== PROTOCOL_VERSION) return this.#refuse("protocol mismatch");
    const problem = pipelineProblem(init);
    if (problem !== null) {
      this.#write({ kind: "setup-failed", message: problem });
      this.#socket?.destroy();
      return;
    }
    this.#serving = true;
    upAt.push(epoch());
    // Every HEARTBEAT_MS from init, as the relay's clock does (the first a second after init):
    // the workers' inits are spread over the handshakes already.
    this.#heartbeat = setInterval(() => this.#beat(), HEARTBEAT_MS);
    this.#write({ kind: "ready" });
  }

  /** Name the running block only once every block before it is reported (as the relay does). */
  #beat(): void {
    const named = this.#running >= 0 && this.#recordCount === 0;
    this.#write({
      kind: "heartbeat",
      running: named ? this.#running : -1,
      runningFor: named ? (performance.now() - this.#runningSince) / 1000 : 0,
    });
  }

  #enqueue(blocks: Float64Array, count: number): void {
    if (2 * (this.#size + count) > this.#queue.length) {
      const next = new Float64Array(Math.max(2 * this.#queue.length, 2 * (this.#size + count)));
      for (let i = 0; i < 2 * this.#size; i++) {
        next[i] = this.#queue[(this.#head + i) % this.#queue.length]!;
      }
      this.#queue = next;
      this.#head = 0;
    }
    const q = this.#queue;
    for (let i = 0; i < 2 * count; i++) {
      q[(this.#head + 2 * this.#size + i) % q.length] = blocks[i]!;
    }
    this.#size += count;
  }

  #take(): number {
    const position = this.#queue[this.#head]!;
    this.#head = (this.#head + 2) % this.#queue.length;
    this.#size--;
    return position;
  }

  #record(position: number, seconds: number, now: number): void {
    if (this.#records === NO_RECORDS) {
      // A no-op batch is reported before its callback returns: one buffer serves every worker.
      noOpRecords ??= new Float64Array(RESULT_RECORDS * RECORD_STRIDE_PLAIN);
      this.#records = blockMs === 0
        ? noOpRecords
        : new Float64Array(RESULT_RECORDS * RECORD_STRIDE_PLAIN);
    }
    const at = this.#recordCount * RECORD_STRIDE_PLAIN;
    this.#records[at] = position;
    this.#records[at + 1] = STATUS_DONE;
    this.#records[at + 2] = seconds;
    this.#recordCount++;
    if (this.#recordCount === 1) this.#firstUnflushedAt = now;
    blocksRun++;
  }

  /** Timed blocks start when none runs; no-op blocks that came while a recall waits go back. */
  #run(): void {
    if (blockMs === 0) return this.#handBack();
    if (this.#running < 0) this.#next();
  }

  /**
   * No-op blocks: the Web Worker's drain loop, synchronous as it is for a sync `process`. They
   * are read from the frame, not copied to the queue first (its ring and a simulated worker's
   * results are the memory a real worker has in its own process).
   */
  #runNoOp(blocks: Float64Array, count: number): void {
    const before = blocksRun;
    // As the Web Worker does: the 5 ms count from the start of this batch's work.
    this.#lastFlushAt = performance.now();
    for (let i = 0; i < count; i++) {
      if (this.#recordCount > 0 && performance.now() - this.#lastFlushAt >= FLUSH_AFTER_MS) {
        this.#flush();
      }
      const t0 = performance.now();
      const now = performance.now();
      this.#record(blocks[2 * i]!, (now - t0) / 1000, now);
      if (
        i === count - 1 || this.#recordCount >= RESULT_RECORDS ||
        now - this.#firstUnflushedAt >= FLUSH_AFTER_MS
      ) this.#flush();
    }
    lastBlockEnd = epoch();
    finished[bucket(lastBlockEnd)]! += blocksRun - before;
  }

  /** Start the next timed block, or report what finished when there is none. */
  #next(): void {
    if (this.#recall || this.#size === 0) {
      if (this.#recall) this.#handBack();
      this.#flush();
      return;
    }
    const position = this.#take();
    if (this.#recordCount > 0 && performance.now() - this.#lastFlushAt >= FLUSH_AFTER_MS) {
      this.#flush();
    }
    this.#running = position;
    this.#runningSince = performance.now();
    const startedAt = epoch();
    this.#timer = setTimeout(() => {
      this.#timer = null;
      const now = performance.now();
      const took = now - this.#runningSince;
      lateMs += took - blockMs;
      lastBlockEnd = epoch();
      addBusy(startedAt, lastBlockEnd);
      finished[bucket(lastBlockEnd)]! += 1;
      this.#running = -1;
      this.#record(position, took / 1000, now);
      if (
        this.#size === 0 || this.#recordCount >= RESULT_RECORDS ||
        now - this.#firstUnflushedAt >= FLUSH_AFTER_MS
      ) this.#flush();
      this.#next();
    }, blockMs);
  }

  #flush(): void {
    if (this.#recordCount === 0) return;
    this.#lastFlushAt = performance.now();
    resultFrames++;
    this.#write({
      kind: "results",
      count: this.#recordCount,
      stride: RECORD_STRIDE_PLAIN,
      records: this.#records,
      errors: [],
      cpuSeconds: 0,
    });
    this.#recordCount = 0;
  }

  /** Hand back the blocks not started, in the order sent (after the results before them). */
  #handBack(): void {
    const positions = new Float64Array(this.#size);
    for (let i = 0; i < this.#size; i++) {
      positions[i] = this.#queue[(this.#head + 2 * i) % this.#queue.length]!;
    }
    const count = this.#size;
    this.#head = 0;
    this.#size = 0;
    this.#flush();
    this.#write({ kind: "returned", positions, count });
    this.#recall = false;
    // A final recall holds: blocks sent later go back at once.
    if (this.#final) this.#recall = true;
  }

  #write(message: FromWorker | SessionFrame): void {
    if (this.#socket !== null && !this.#socket.closed) this.#socket.write(encodeFrame(message));
  }

  #refuse(why: string): void {
    this.#write({ kind: "error", message: why });
    this.#socket?.destroy();
  }

  #end(reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#heartbeat !== null) clearInterval(this.#heartbeat);
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#socket?.destroy();
    this.#socket = null;
    workers.delete(this.#id);
    emit({ ev: "end", id: this.#id, reason, stopped: this.#stopped });
  }
}

// ---- commands from the driver ----------------------------------------------------------------

function report(): SimReport {
  const used = (v: number, i: number) => v > 0 || busy[i]! > 0;
  const first = finished.findIndex(used);
  const last = finished.findLastIndex(used);
  const cut = (a: Float64Array) =>
    first < 0 ? [] : Array.from(a.subarray(first, last + 1), (v) => Math.round(v));
  return {
    ev: "report",
    blocks: blocksRun,
    lastBlockEnd,
    lateMs: blocksRun === 0 ? 0 : lateMs / blocksRun,
    busyRetries,
    connectRetries,
    batches,
    resultFrames,
    bucketMs: BUCKET_MS,
    bucketsFrom: first < 0 ? simStart : simStart + first * BUCKET_MS,
    busy: cut(busy),
    finished: cut(finished),
    upAt,
  };
}

function command(c: SimCommand): void {
  switch (c.op) {
    case "launch": {
      let worker: SimWorker;
      try {
        worker = new SimWorker(c.id, c.node, c.env);
      } catch (error) {
        emit({ ev: "end", id: c.id, reason: (error as Error).message, stopped: false });
        return;
      }
      workers.set(c.id, worker);
      worker.start();
      return;
    }
    case "cancel":
      workers.get(c.id)?.cancel();
      return;
    case "report":
      emit(report());
      return;
    case "quit":
      for (const w of [...workers.values()]) w.cancel();
      flushEvents();
      process.exit(0);
  }
}

let carry = "";
process.stdin.on("data", (chunk: Uint8Array | string) => {
  const text = carry + (typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk));
  const lines = text.split("\n");
  carry = lines.pop()!;
  for (const line of lines) if (line !== "") command(JSON.parse(line) as SimCommand);
});
// The driver gone: nothing left to simulate for.
process.stdin.on("end", () => process.exit(0));
// Nonces and proofs load their modules on first use: here, not in the first handshake.
workerProof(newNonce(), newNonce(), newNonce(), "warm-up");
process.stdout.write(JSON.stringify({ ev: "alive" } satisfies SimEvent) + "\n");
