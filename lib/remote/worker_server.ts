/**
 * Where remote workers connect: a TCP listener that admits a connection only after the worker
 * proves it knows the run's secret (HMAC challenge-response, `auth.ts`) and claims a slot the
 * run launched a worker for. Everything before that is a stranger: frames are capped small, the
 * whole handshake has a deadline (a slow-loris client is dropped) and so has its first frame
 * (an idle connection is dropped within HELLO_MS), the number of connections still in their
 * handshake is bounded in all and per address (so that idle connections from one address cannot
 * starve the workers). A connection over the bound in all waits, accepted and unread, in the
 * waiting room (`waiting_room.ts`) until a handshake ends. One refused (its address over a
 * bound, the waiting room full, or waiting too long) is told to come back (the worker retries
 * with backoff; it is not a crash). Refusals are logged at a bounded rate, closed without
 * touching the run. An admitted connection is handed to the executor that waits
 * on its slot. The listener asks the kernel for an accept queue of FLEET_BACKLOG
 * (lib/runtime/accept_queue.ts): with the 512 Bun asks for, most of 2,000 workers connecting at
 * once were dropped by the kernel and waited 1 s or more for TCP to try again. Connections are
 * the runtime's own where it has them (lib/runtime/tcp.ts): under Bun, `node:net` cost three
 * times the CPU per worker admitted.
 */

import { type ByteChannel, connectionChannel } from "../execute/byte_channel.ts";
import { FLEET_BACKLOG, widenAcceptQueue } from "../runtime/accept_queue.ts";
import { listenTcp, type TcpConnection, type TcpListener } from "../runtime/tcp.ts";
import {
  encodeFrame,
  type FrameDecoder,
  schedulerSideDecoder,
  type SessionFrame,
} from "../execute/protocol/frames.ts";
import {
  type FromWorker,
  type HelloMessage,
  PROTOCOL_VERSION,
} from "../execute/protocol/messages.ts";
import { isNonce, joinSlot, newNonce, sameMac, schedulerProof, workerProof } from "./auth.ts";
import type { HostPort } from "./address.ts";
import { RateLimitedLog } from "./log_limit.ts";
import { MAX_WAITING, MAX_WAITING_PER_ADDRESS, WAITING_MS, WaitingRoom } from "./waiting_room.ts";

/** Frames before authentication are small: a hello and an auth fit easily. */
export const HANDSHAKE_FRAME_CAP = 16 * 1024;
/** A hello and an auth take a few hundred bytes: a handshake's decoder starts this small. */
const HANDSHAKE_BUFFER_BYTES = 1024;
export const DEFAULT_HANDSHAKE_MS = 10_000;
export const DEFAULT_MAX_HANDSHAKES = 256;
/** Connections from one address in their handshake at once. */
export const MAX_HANDSHAKES_PER_ADDRESS = 64;
/** A connection that sent no hello by then is dropped (it holds a handshake slot). */
export const HELLO_MS = 2_000;

/** Hands an admitted connection over; returns false when nobody wants it any more. */
export type SlotClaim = (channel: ByteChannel, hello: HelloMessage) => boolean;

/** Where an authenticated worker joining by hand goes, or why it is turned away. */
export type JoinAnswer =
  | { readonly claim: SlotClaim }
  /** `later`: the run may want it later (task full or finished): the worker exits 0. */
  | { readonly refusal: string; readonly later: boolean };
export type JoinHandler = (hello: HelloMessage) => JoinAnswer;

export interface WorkerServerOptions {
  readonly listen: HostPort;
  readonly secret: string;
  /** Refusals and other notices (a stranger on the network is worth a line, never a crash). */
  readonly log: (message: string) => void;
  readonly handshakeMs?: number;
  readonly maxHandshakes?: number;
  /** Connections over `maxHandshakes` that wait for a handshake to end (MAX_WAITING). */
  readonly maxWaiting?: number;
  /** Of those, from one address (MAX_WAITING_PER_ADDRESS). */
  readonly maxWaitingPerAddress?: number;
  /** Starts the handshake deadline; returns its cancel (tests inject a manual one). */
  readonly deadline?: (ms: number, expire: () => void) => () => void;
}

/** A refused connection's last frame has this long to leave before the connection is dropped. */
const LAST_FRAME_MS = 1000;

/** Send `last` and close; the connection goes within LAST_FRAME_MS whatever the peer does. */
function endWith(socket: TcpConnection, last: Uint8Array): void {
  socket.end(last);
  setTimeout(() => socket.destroy(), LAST_FRAME_MS).unref?.();
}

const realDeadline = (ms: number, expire: () => void): () => void => {
  const timer = setTimeout(expire, ms);
  return () => clearTimeout(timer);
};

export class WorkerServer {
  readonly #o: WorkerServerOptions;
  readonly #listener: TcpListener;
  readonly #slots = new Map<string, SlotClaim>();
  readonly #handshakes = new Set<TcpConnection>();
  readonly #perAddress = new Map<string, number>();
  /** Connections over the handshake cap, accepted and not read, oldest first. */
  readonly #waiting: WaitingRoom;
  readonly #refusals: RateLimitedLog;
  #refused = 0;
  /** Connections the server drops as it closes are not refusals. */
  #closing = false;
  #joiners: JoinHandler | null = null;

  private constructor(options: WorkerServerOptions, listener: TcpListener) {
    this.#o = options;
    this.#listener = listener;
    this.#refusals = new RateLimitedLog(options.log, "refused worker connections");
    const max = options.maxHandshakes ?? DEFAULT_MAX_HANDSHAKES;
    this.#waiting = new WaitingRoom({
      max: options.maxWaiting ?? MAX_WAITING,
      perAddress: options.maxWaitingPerAddress ?? MAX_WAITING_PER_ADDRESS,
      deadline: options.deadline ?? realDeadline,
      expired: ({ socket, peer }) =>
        this.#refuse(
          socket,
          peer,
          `busy: it waited ${
            WAITING_MS / 1000
          } s for one of ${max} handshakes to end; connect again later`,
          true,
          true,
        ),
    });
  }

  /** Listen where told; refuses (InputError-worthy message) when the address cannot be used. */
  static async start(options: WorkerServerOptions): Promise<WorkerServer> {
    let server: WorkerServer | null = null;
    const early: TcpConnection[] = []; // before the server exists (a fixed port is known)
    const listener = await listenTcp({
      host: options.listen.host,
      port: options.listen.port,
      backlog: FLEET_BACKLOG,
      onConnection: (connection) =>
        server === null ? early.push(connection) : server.#accept(connection),
      onError: (error) => options.log(`The worker server failed: ${error.message}`),
    });
    const why = await widenAcceptQueue(listener.address.port, FLEET_BACKLOG);
    if (why !== null) {
      options.log(`The worker server keeps the runtime's accept queue: ${why}`);
    }
    server = new WorkerServer(options, listener);
    for (const connection of early) server.#accept(connection);
    return server;
  }

  /** The address actually bound (the port the system chose for port 0). */
  get address(): HostPort {
    return this.#listener.address;
  }

  /** Connections refused so far (wrong secret, garbage, too slow, ...). */
  get refused(): number {
    return this.#refused;
  }

  /** Wait for the worker launched with `slot`; returns the function that stops waiting. */
  expect(slot: string, claim: SlotClaim): () => void {
    this.#slots.set(slot, claim);
    return () => {
      if (this.#slots.get(slot) === claim) this.#slots.delete(slot);
    };
  }

  /** Admit workers joining by hand (no slot): `handler` says which executor takes each. */
  acceptJoiners(handler: JoinHandler | null): void {
    this.#joiners = handler;
  }

  /**
   * Stop listening. A worker still in its handshake, or waiting for one, is told the run needs
   * no more workers (`later`): it exits cleanly rather than reporting a lost scheduler, as the
   * hundreds still waiting when a big fleet's run ends would (the connection goes within a
   * second whatever the peer does).
   */
  close(): Promise<void> {
    this.#closing = true;
    const ended = encodeFrame({
      kind: "error",
      message: "refused: the run has ended",
      later: true,
    });
    const farewell = (connection: TcpConnection) => {
      if (connection.closed) return;
      connection.setOnData(null);
      endWith(connection, ended);
    };
    for (const connection of [...this.#handshakes]) farewell(connection);
    this.#handshakes.clear();
    this.#waiting.close(farewell);
    this.#refusals.flush();
    this.#slots.clear();
    return this.#listener.close();
  }

  #accept(socket: TcpConnection): void {
    const address = socket.remoteAddress ?? "?";
    const peer = `${address}:${socket.remotePort ?? "?"}`;
    const max = this.#o.maxHandshakes ?? DEFAULT_MAX_HANDSHAKES;
    if (this.#handshakes.size < max || this.#waiting.full) {
      return this.#handshake(socket, address, peer);
    }
    const refusal = this.#waiting.enter(socket, address, peer);
    if (refusal !== null) this.#refuse(socket, peer, `${refusal}; connect again later`, true, true);
  }

  /** Start the handshakes of waiting connections while there is room. */
  #admitWaiting(): void {
    const max = this.#o.maxHandshakes ?? DEFAULT_MAX_HANDSHAKES;
    while (this.#handshakes.size < max) {
      const next = this.#waiting.next();
      if (next === undefined) return;
      this.#handshake(next.socket, next.address, next.peer);
      next.socket.resume();
    }
  }

  #handshake(socket: TcpConnection, address: string, peer: string): void {
    const max = this.#o.maxHandshakes ?? DEFAULT_MAX_HANDSHAKES;
    const fromHere = this.#perAddress.get(address) ?? 0;
    if (this.#handshakes.size >= max || fromHere >= MAX_HANDSHAKES_PER_ADDRESS) {
      const why = this.#handshakes.size >= max
        ? `busy: ${max} other connections are still in their handshake and ${this.#waiting.size} wait`
        : `busy: ${fromHere} other connections from ${address} are still in their handshake`;
      this.#refuse(socket, peer, `${why}; connect again later`, true, true);
      return;
    }
    this.#handshakes.add(socket);
    this.#perAddress.set(address, fromHere + 1);
    // The address's count is of handshakes: it drops when this one ends, however it ends. Were it
    // dropped only when the connection closes, every admitted worker would hold its address's
    // slot for its whole session, and no node could ever have more than 16 workers connected.
    let counted = true;
    const handshakeOver = () => {
      if (!counted) return;
      counted = false;
      stopWatching();
      const left = (this.#perAddress.get(address) ?? 1) - 1;
      if (left <= 0) this.#perAddress.delete(address);
      else this.#perAddress.set(address, left);
    };
    const stopWatching = socket.onClose(handshakeOver);
    const ms = this.#o.handshakeMs ?? DEFAULT_HANDSHAKE_MS;
    new Handshake(socket, this.#o.secret, ms, this.#o.deadline ?? realDeadline, {
      admitted: (hello) => {
        handshakeOver();
        this.#admit(socket, peer, hello);
      },
      refused: (why, tell) => {
        handshakeOver();
        this.#refuse(socket, peer, why, tell);
      },
    });
  }

  #admit(socket: TcpConnection, peer: string, hello: HelloMessage): void {
    this.#handshakes.delete(socket);
    this.#admitWaiting();
    if (hello.slot === undefined && hello.join !== undefined) {
      return this.#join(socket, peer, hello);
    }
    const slot = hello.slot ?? "";
    const claim = this.#slots.get(slot);
    if (claim === undefined) {
      this.#refuse(
        socket,
        peer,
        `worker ${hello.host}:${hello.pid} claims slot ${
          JSON.stringify(slot.slice(0, 40))
        }, which no worker of this run waits on (a worker that lost its connection does not come back: the run starts a new one)`,
        true,
      );
      return;
    }
    this.#slots.delete(slot);
    if (!claim(connectionChannel(socket), hello)) {
      this.#refuse(socket, peer, `the worker for slot ${slot} is no longer wanted`, true);
    }
  }

  #join(socket: TcpConnection, peer: string, hello: HelloMessage): void {
    const who = `worker ${hello.host}:${hello.pid} joining by hand`;
    const answer: JoinAnswer = this.#joiners?.(hello) ??
      { refusal: "this run takes no workers joining by hand", later: false };
    if ("refusal" in answer) {
      return this.#refuse(socket, peer, `${who}: ${answer.refusal}`, true, false, answer.later);
    }
    if (!answer.claim(connectionChannel(socket), hello)) {
      this.#refuse(socket, peer, `${who}: its place was taken; try again later`, true, false, true);
    }
  }

  #refuse(
    socket: TcpConnection,
    peer: string,
    why: string,
    tell: boolean,
    retry = false,
    later = false,
  ): void {
    if (this.#closing) return socket.destroy();
    if (this.#handshakes.delete(socket)) this.#admitWaiting();
    this.#refused++;
    this.#refusals.line(`Refused a worker connection from ${peer}: ${why}`);
    if (tell && !socket.closed) {
      endWith(
        socket,
        encodeFrame({
          kind: "error",
          message: `refused: ${why}`,
          ...(retry ? { retry } : {}),
          ...(later ? { later } : {}),
        }),
      );
    } else socket.destroy();
  }
}

interface HandshakeEnd {
  admitted(hello: HelloMessage): void;
  /** `tell`: send the peer an error frame first (it spoke the protocol). */
  refused(why: string, tell: boolean): void;
}

/**
 * One connection's handshake: hello (protocol, slot, worker nonce) -> challenge (scheduler
 * nonce, proof) -> auth (worker proof). Any other frame, a frame over the cap, bytes that are not
 * frames, a wrong proof or the deadline passing refuses the connection.
 */
class Handshake {
  readonly #socket: TcpConnection;
  readonly #stopWatching: () => void;
  readonly #secret: string;
  readonly #end: HandshakeEnd;
  readonly #decoder: FrameDecoder<FromWorker | SessionFrame> = schedulerSideDecoder(
    HANDSHAKE_FRAME_CAP,
    HANDSHAKE_BUFFER_BYTES,
  );
  readonly #nonce = newNonce();
  readonly #cancelDeadline: () => void;
  readonly #onData = (chunk: Uint8Array) => this.#data(chunk);
  #hello: HelloMessage | null = null;
  #done = false;

  constructor(
    socket: TcpConnection,
    secret: string,
    ms: number,
    deadline: (ms: number, expire: () => void) => () => void,
    end: HandshakeEnd,
  ) {
    this.#socket = socket;
    this.#secret = secret;
    this.#end = end;
    const whole = deadline(
      ms,
      () => this.#finish(null, `no complete handshake within ${ms / 1000} s`),
    );
    const hello = deadline(Math.min(HELLO_MS, ms), () => {
      if (this.#hello === null) this.#finish(null, `no hello within ${HELLO_MS / 1000} s`);
    });
    this.#cancelDeadline = () => {
      whole();
      hello();
    };
    this.#stopWatching = socket.onClose(() =>
      this.#finish(null, "it closed the connection during the handshake")
    );
    socket.setOnData(this.#onData);
  }

  #data(chunk: Uint8Array): void {
    if (this.#done) return;
    let messages: (FromWorker | SessionFrame)[];
    try {
      messages = this.#decoder.push(chunk);
    } catch (error) {
      this.#finish(null, `it does not speak the blockwise protocol: ${(error as Error).message}`);
      return;
    }
    messages.forEach((m, i) => {
      if (!this.#done) this.#message(m, i === messages.length - 1);
    });
  }

  #message(m: FromWorker | SessionFrame, last: boolean): void {
    if (this.#hello === null) {
      if (m.kind !== "hello") return this.#finish(null, `it sent "${m.kind}" before "hello"`, true);
      if (m.protocol !== PROTOCOL_VERSION) {
        return this.#finish(
          null,
          `it speaks protocol ${m.protocol} but this blockwise speaks ${PROTOCOL_VERSION}; run the same blockwise version on both sides`,
          true,
        );
      }
      if ((m.slot ?? m.join) === undefined || m.nonce === undefined || !isNonce(m.nonce)) {
        return this.#finish(
          null,
          `its hello has no slot and nonce; a remote worker must be started by blockwise's launcher (blockwise worker --connect, with BLOCKWISE_WORKER_SLOT set) or join by hand (--secret-file)`,
          true,
        );
      }
      this.#hello = m;
      this.#socket.write(encodeFrame({
        kind: "challenge",
        nonce: this.#nonce,
        proof: schedulerProof(this.#secret, m.nonce, this.#nonce),
      }));
      return;
    }
    if (m.kind === "error") {
      return this.#finish(null, `the worker refused this scheduler: ${m.message}`);
    }
    if (m.kind !== "auth") return this.#finish(null, `it sent "${m.kind}" instead of "auth"`, true);
    const hello = this.#hello;
    const slot = hello.slot ?? joinSlot(hello.join!);
    const expected = workerProof(this.#secret, this.#nonce, hello.nonce!, slot);
    if (!sameMac(m.mac, expected)) {
      return this.#finish(null, "wrong secret (its proof does not match this run's)", true);
    }
    // A worker sends nothing after auth until it gets init: more frames now break the protocol.
    if (!last || this.#decoder.buffered > 0) {
      return this.#finish(null, "it sent frames after auth before receiving init", true);
    }
    this.#finish(hello, "");
  }

  #finish(hello: HelloMessage | null, why: string, tell = false): void {
    if (this.#done) return;
    this.#done = true;
    this.#cancelDeadline();
    this.#socket.setOnData(null);
    this.#stopWatching();
    if (hello !== null) this.#end.admitted(hello);
    else this.#end.refused(why, tell);
  }
}
