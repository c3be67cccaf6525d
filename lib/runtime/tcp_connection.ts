/**
 * The parts of `tcp.ts` both adapters share: the connection and listener types, a
 * connection's data handler slot and its close handlers.
 */

export interface TcpConnection {
  /** The peer's address as the system gives it ("" when unknown). */
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** True once the connection closed, by either side. */
  readonly closed: boolean;
  /**
   * Send `bytes` after what is already queued; nothing once the connection closes or ends.
   * The connection keeps `bytes` until the kernel has taken them: they must not change (a
   * frame is encoded for its write).
   */
  write(bytes: Uint8Array): void;
  /** Send what is queued and `last`, then close. */
  end(last?: Uint8Array): void;
  /** Close now: bytes the kernel has not taken yet are dropped. */
  destroy(): void;
  /** Stop reading: the peer's bytes stay in the kernel until `resume`. */
  pause(): void;
  resume(): void;
  /** The one handler of arriving chunks; null holds them until a handler is set. */
  setOnData(handler: ((chunk: Uint8Array) => void) | null): void;
  /** `handler` runs once when the connection closes, with why it failed (null: it just closed). */
  onClose(handler: (failure: string | null) => void): () => void;
}

export interface TcpListener {
  /** The address bound (the port the system chose for port 0). */
  readonly address: { readonly host: string; readonly port: number };
  /** Stop listening; open connections stay open. */
  close(): Promise<void>;
}

export interface TcpListenOptions {
  readonly host: string;
  readonly port: number;
  /** Asked of listen(2) where the runtime passes it (see `accept_queue.ts` for Bun). */
  readonly backlog: number;
  readonly onConnection: (connection: TcpConnection) => void;
  /** The listener failed after it started listening. */
  readonly onError: (error: Error) => void;
}

export interface TcpConnectOptions {
  readonly host: string;
  readonly port: number;
  /** The local address to connect from (one of this host's), else the system's choice. */
  readonly localAddress?: string;
  /** Give up (rejecting with "timed out") when not connected by then. */
  readonly timeoutMs: number;
}

/**
 * Chunks that arrived while a connection had no data handler, and the handler's slot: the
 * part of `setOnData` both adapters share.
 */
export class DataSlot {
  #handler: ((chunk: Uint8Array) => void) | null = null;
  #held: Uint8Array[] = [];

  set(handler: ((chunk: Uint8Array) => void) | null): void {
    this.#handler = handler;
    while (this.#handler !== null && this.#held.length > 0) {
      const held = this.#held;
      this.#held = [];
      for (let i = 0; i < held.length; i++) {
        if (this.#handler === null) {
          this.#held = held.slice(i).concat(this.#held);
          return;
        }
        this.#handler(held[i]!);
      }
    }
  }

  deliver(chunk: Uint8Array): void {
    if (this.#handler !== null) this.#handler(chunk);
    else this.#held.push(chunk);
  }
}

/** Close handlers of one connection, run once. */
export class CloseHandlers {
  readonly #handlers = new Set<(failure: string | null) => void>();
  #failure: string | null = null;
  #fired = false;

  get fired(): boolean {
    return this.#fired;
  }

  /** A connection closed already calls `handler` soon (not before `add` returns). */
  add(handler: (failure: string | null) => void): () => void {
    if (this.#fired) {
      let cancelled = false;
      queueMicrotask(() => cancelled || handler(this.#failure));
      return () => (cancelled = true);
    }
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  }

  failed(message: string): void {
    this.#failure ??= message;
  }

  fire(): void {
    if (this.#fired) return;
    this.#fired = true;
    for (const h of [...this.#handlers]) h(this.#failure);
    this.#handlers.clear();
  }
}
