/**
 * Where connections wait for their handshake when the worker server already runs as many as it
 * lets run at once: accepted and paused (their hello stays in the kernel), oldest first. A job
 * array's workers arrive together; refusing the ones over the bound made each connect again and
 * again (4,400 busy refusals, each a connect, an accept and an error frame, for 2,000 workers
 * arriving at once; none with the room). The room is bounded in all and per address, so that one
 * host (a scanner, a health check gone wrong) cannot fill it and turn every worker away, and
 * each connection waits at most WAITING_MS. A peer that leaves while it waits is noticed at once
 * under Bun; under Deno a paused socket reports no close, so it goes when its turn or its
 * WAITING_MS comes.
 */

import type { TcpConnection } from "../runtime/tcp.ts";

/** Connections that may wait for a handshake to end; more are refused. */
export const MAX_WAITING = 16_384;
/** Of those, from one address; a node's workers beyond it are told to come back. */
export const MAX_WAITING_PER_ADDRESS = 1024;
/** A connection that waited this long for its handshake to start is refused (busy). */
export const WAITING_MS = 30_000;

export interface WaitingConnection {
  readonly socket: TcpConnection;
  readonly address: string;
  readonly peer: string;
}

export interface WaitingRoomOptions {
  readonly max: number;
  readonly perAddress: number;
  /** Starts a deadline; returns its cancel (tests inject a manual one). */
  readonly deadline: (ms: number, expire: () => void) => () => void;
  /** A connection waited WAITING_MS: the server refuses it. */
  readonly expired: (connection: WaitingConnection) => void;
}

interface Waiting extends WaitingConnection {
  /** Stop its deadline and stop watching its close. */
  readonly stop: () => void;
}

export class WaitingRoom {
  readonly #o: WaitingRoomOptions;
  readonly #waiting = new Map<TcpConnection, Waiting>();
  readonly #from = new Map<string, number>();

  constructor(options: WaitingRoomOptions) {
    this.#o = options;
  }

  get size(): number {
    return this.#waiting.size;
  }

  get full(): boolean {
    return this.#waiting.size >= this.#o.max;
  }

  /** Let the connection wait; returns why it cannot (its address's share is taken), else null. */
  enter(socket: TcpConnection, address: string, peer: string): string | null {
    const fromHere = this.#from.get(address) ?? 0;
    if (fromHere >= this.#o.perAddress) {
      return `busy: ${fromHere} other connections from ${address} wait for a handshake`;
    }
    socket.pause();
    const stopWatching = socket.onClose(() => this.#leave(socket));
    const cancel = this.#o.deadline(WAITING_MS, () => {
      const waiting = this.#leave(socket);
      if (waiting !== undefined) this.#o.expired(waiting);
    });
    const stop = () => {
      cancel();
      stopWatching();
    };
    this.#waiting.set(socket, { socket, address, peer, stop });
    this.#from.set(address, fromHere + 1);
    return null;
  }

  /** The oldest waiting connection still open, out of the room (paused: resume it to read). */
  next(): WaitingConnection | undefined {
    for (const socket of this.#waiting.keys()) {
      const waiting = this.#leave(socket)!;
      if (!socket.closed) return waiting;
    }
    return undefined;
  }

  /** Let every waiting connection go, through `farewell` (the server closes). */
  close(farewell: (socket: TcpConnection) => void = (socket) => socket.destroy()): void {
    for (const socket of [...this.#waiting.keys()]) {
      this.#leave(socket);
      farewell(socket);
    }
  }

  /** Take a connection out of the room; undefined when it was not there. */
  #leave(socket: TcpConnection): Waiting | undefined {
    const waiting = this.#waiting.get(socket);
    if (waiting === undefined) return undefined;
    this.#waiting.delete(socket);
    waiting.stop();
    const left = (this.#from.get(waiting.address) ?? 1) - 1;
    if (left <= 0) this.#from.delete(waiting.address);
    else this.#from.set(waiting.address, left);
    return waiting;
  }
}
