/**
 * Where remote workers connect: a TCP listener that admits a connection only after the worker
 * proves it knows the run's secret (HMAC challenge-response, `auth.ts`) and claims a slot the
 * run launched a worker for. Everything before that is a stranger: frames are capped small, the
 * whole handshake has a deadline (a slow-loris client is dropped) and so has its first frame
 * (an idle connection is dropped within HELLO_MS), the number of connections still in their
 * handshake is bounded in all and per address (so that idle connections from one address cannot
 * starve the workers). A connection over the bound in all waits, accepted and unread, in the
 * waiting room (`waiting_room.ts`) until a handshake ends, and so does every new connection
 * while the run's admission gate says no task needs another worker (`admitWhen`: the workers
 * spend most of their time waiting, so one more would only cost the scheduler). One refused
 * (its address over a bound, the waiting room full, or waiting too long) is told to come back
 * (the worker retries with backoff; it is not a crash). Refusals are logged at a bounded rate, closed without
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
import { encodeFrame } from "../execute/protocol/frames.ts";
import type { HelloMessage } from "../execute/protocol/messages.ts";
import type { HostPort } from "./address.ts";
import { Handshake } from "./handshake.ts";
import { RateLimitedLog } from "./log_limit.ts";
import { MAX_WAITING, MAX_WAITING_PER_ADDRESS, WAITING_MS, WaitingRoom } from "./waiting_room.ts";

export const DEFAULT_HANDSHAKE_MS = 10_000;
export const DEFAULT_MAX_HANDSHAKES = 256;
/** Connections from one address in their handshake at once. */
export const MAX_HANDSHAKES_PER_ADDRESS = 64;

/** How often connections held back for lack of need ask the gate again (ms). */
export const DEMAND_POLL_MS = 20;

/**
 * Whether the run can use another worker now (admission by need). A connection that arrives
 * while it says no waits in the waiting room, unread; after WAITING_MS it is read (a stranger is
 * refused) and a worker that proves itself waits on, as long as it takes. Either is admitted
 * when the gate says yes again.
 */
export interface AdmissionGate {
  wanted(): boolean;
  /**
   * No worker of the run waits for its connection (the run ended, or retired every one still
   * starting): a held connection could only be refused, so it is told to leave, cleanly.
   */
  needsNone(): boolean;
  /** A connection is being held back (at each hold: the gate says why, once per reason). */
  holding(): void;
}

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
  /** How often held connections ask the gate again (DEMAND_POLL_MS). */
  readonly demandPollMs?: number;
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
  #gate: AdmissionGate | null = null;
  /** Asks the gate again while connections are held back; null when none is. */
  #poll: ReturnType<typeof setTimeout> | null = null;
  /** Workers that proved themselves while the gate said no, oldest first. */
  readonly #proven = new Map<
    TcpConnection,
    { readonly peer: string; readonly hello: HelloMessage; readonly stopWatching: () => void }
  >();

  private constructor(options: WorkerServerOptions, listener: TcpListener) {
    this.#o = options;
    this.#listener = listener;
    this.#refusals = new RateLimitedLog(options.log, "refused worker connections");
    const max = options.maxHandshakes ?? DEFAULT_MAX_HANDSHAKES;
    this.#waiting = new WaitingRoom({
      max: options.maxWaiting ?? MAX_WAITING,
      perAddress: options.maxWaitingPerAddress ?? MAX_WAITING_PER_ADDRESS,
      deadline: options.deadline ?? realDeadline,
      expired: ({ socket, address, peer }) => {
        // Held back for lack of need, it is read now: a stranger is refused, a worker that
        // proves itself waits on, proven (#holdProven). With no handshake slot free it waits on.
        if (!this.#admits()) {
          if (this.#canStart(address)) {
            this.#handshake(socket, address, peer);
            socket.resume();
            return;
          }
          if (this.#waiting.enter(socket, address, peer) === null) return;
        }
        this.#refuse(
          socket,
          peer,
          `busy: it waited ${
            WAITING_MS / 1000
          } s for one of ${max} handshakes to end; connect again later`,
          true,
          true,
        );
      },
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

  /** Admit connections only while `gate` says the run needs another worker (null: always). */
  admitWhen(gate: AdmissionGate | null): void {
    this.#gate = gate;
    this.#admitWaiting();
  }

  /**
   * Connections wait, held back, because no task needs another worker now: a launched worker
   * not connected yet may be one of them, so its connect timeout does not run meanwhile.
   */
  get holding(): boolean {
    return (this.#waiting.size > 0 || this.#proven.size > 0) && !this.#admits();
  }

  /** Connections accepted and not handed to a slot: waiting for a handshake or for need. */
  get waiting(): number {
    return this.#waiting.size + this.#proven.size;
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
    this.#stopPolling();
    this.#sendAway("the run has ended", true);
    this.#refusals.flush();
    this.#slots.clear();
    return this.#listener.close();
  }

  #accept(socket: TcpConnection): void {
    const address = socket.remoteAddress ?? "?";
    const peer = `${address}:${socket.remotePort ?? "?"}`;
    const max = this.#o.maxHandshakes ?? DEFAULT_MAX_HANDSHAKES;
    const room = this.#handshakes.size < max;
    if (this.#waiting.full || (room && this.#admits())) {
      return this.#handshake(socket, address, peer);
    }
    const refusal = this.#waiting.enter(socket, address, peer);
    if (refusal !== null) this.#refuse(socket, peer, `${refusal}; connect again later`, true, true);
    else if (room) this.#holdBack();
  }

  /**
   * Tell every held connection (and, as the server closes, every one in its handshake) that the
   * run wants no more workers, with `later`: each exits 0, not as a worker lost.
   */
  #sendAway(why: string, handshakes: boolean): void {
    const last = encodeFrame({ kind: "error", message: `refused: ${why}`, later: true });
    const farewell = (connection: TcpConnection) => {
      if (connection.closed) return;
      connection.setOnData(null);
      connection.resume(); // held ones are paused: under Deno they would not see the peer close
      endWith(connection, last);
    };
    if (handshakes) {
      for (const connection of [...this.#handshakes]) farewell(connection);
      this.#handshakes.clear();
    }
    for (const [connection, { stopWatching }] of this.#proven) {
      stopWatching();
      farewell(connection);
    }
    this.#proven.clear();
    this.#waiting.close(farewell);
  }

  /** A handshake may start now for a connection from `address`. */
  #canStart(address: string): boolean {
    return this.#handshakes.size < (this.#o.maxHandshakes ?? DEFAULT_MAX_HANDSHAKES) &&
      (this.#perAddress.get(address) ?? 0) < MAX_HANDSHAKES_PER_ADDRESS;
  }

  #admits(): boolean {
    return this.#gate === null || this.#gate.wanted();
  }

  /** A connection waits for need, not for a handshake slot: ask the gate again until it may go. */
  #holdBack(): void {
    this.#gate!.holding();
    if (this.#poll !== null || this.#closing) return;
    this.#poll = setTimeout(() => {
      this.#poll = null;
      this.#admitWaiting();
    }, this.#o.demandPollMs ?? DEMAND_POLL_MS);
  }

  #stopPolling(): void {
    if (this.#poll !== null) clearTimeout(this.#poll);
    this.#poll = null;
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
    if (this.#admits()) this.#claim(socket, peer, hello);
    else this.#holdProven(socket, peer, hello);
    this.#admitWaiting();
  }

  /**
   * A worker proved itself while the gate says no (its handshake began before): it waits, paused
   * (it sends nothing before init), and takes its slot when the gate says yes.
   */
  #holdProven(socket: TcpConnection, peer: string, hello: HelloMessage): void {
    socket.pause();
    const stopWatching = socket.onClose(() => this.#proven.delete(socket));
    this.#proven.set(socket, { peer, hello, stopWatching });
    this.#holdBack();
  }

  #claim(socket: TcpConnection, peer: string, hello: HelloMessage): void {
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

  /** Workers held back after their handshake take their slots first, then waiting ones start. */
  #admitWaiting(): void {
    if (this.#gate?.needsNone() === true && this.waiting > 0) {
      this.#sendAway("the run needs no more workers", false);
    }
    for (const [socket, { peer, hello, stopWatching }] of this.#proven) {
      if (!this.#admits()) return this.#holdBack();
      this.#proven.delete(socket);
      stopWatching();
      if (socket.closed) continue;
      this.#claim(socket, peer, hello);
      socket.resume();
    }
    const max = this.#o.maxHandshakes ?? DEFAULT_MAX_HANDSHAKES;
    while (this.#handshakes.size < max && this.#waiting.size > 0) {
      if (!this.#admits()) return this.#holdBack();
      const next = this.#waiting.next();
      if (next === undefined) return;
      this.#handshake(next.socket, next.address, next.peer);
      next.socket.resume();
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
