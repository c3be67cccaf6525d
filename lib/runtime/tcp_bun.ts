/**
 * `tcp.ts` through `Bun.listen`. Bun's own sockets have no stream around them: a write returns
 * how many bytes the kernel took, and the rest is the caller's to send on `drain`; `end` with
 * bytes still unsent would cut them off, so it waits for the queue to empty.
 */

import {
  CloseHandlers,
  DataSlot,
  type TcpConnection,
  type TcpConnectOptions,
  type TcpListener,
  type TcpListenOptions,
} from "./tcp_connection.ts";

interface BunSocket {
  data: BunConnection;
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** Bytes the kernel took (less than asked when its buffer is full; -1 when closed). */
  write(bytes: Uint8Array): number;
  end(): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  setNoDelay(noDelay: boolean): boolean;
}

interface BunListener {
  readonly hostname: string;
  readonly port: number;
  stop(closeActiveConnections?: boolean): void;
}

interface BunSocketHandlers {
  open(socket: BunSocket): void;
  data(socket: BunSocket, chunk: Uint8Array): void;
  drain(socket: BunSocket): void;
  close(socket: BunSocket, error?: Error): void;
  error(socket: BunSocket, error: Error): void;
}

interface BunNet {
  listen(options: { hostname: string; port: number; socket: BunSocketHandlers }): BunListener;
  connect(options: {
    hostname: string;
    port: number;
    localAddress?: string;
    socket: BunSocketHandlers;
  }): Promise<BunSocket>;
}

const bun = (): BunNet => (globalThis as unknown as { Bun: BunNet }).Bun;

/** One set of handlers for every socket: the connection object travels as `socket.data`. */
function handlers(opened: (connection: BunConnection) => void): BunSocketHandlers {
  return {
    open(socket) {
      socket.data = new BunConnection(socket);
      opened(socket.data);
    },
    data: (socket, chunk) => socket.data.received(chunk),
    drain: (socket) => socket.data.drained(),
    close: (socket, error) => socket.data?.ended(error),
    error: (socket, error) => socket.data?.failed(error),
  };
}

/** What listen(2) failures mean, as `node:net` words them. */
const LISTEN_FAILURES: Readonly<Record<string, string>> = {
  EADDRINUSE: "address already in use",
  EADDRNOTAVAIL: "address not available",
  EACCES: "permission denied",
};

class BunConnection implements TcpConnection {
  readonly #socket: BunSocket;
  readonly #data = new DataSlot();
  readonly #closes = new CloseHandlers();
  /** Bytes the kernel has not taken yet, in order. */
  #unsent: Uint8Array[] = [];
  #ending = false;

  constructor(socket: BunSocket) {
    this.#socket = socket;
    socket.setNoDelay(true);
  }

  get remoteAddress(): string {
    return this.#socket.remoteAddress ?? "";
  }

  get remotePort(): number {
    return this.#socket.remotePort ?? 0;
  }

  get closed(): boolean {
    return this.#closes.fired;
  }

  write(bytes: Uint8Array): void {
    if (this.#closes.fired || this.#ending || bytes.length === 0) return;
    if (this.#unsent.length > 0) {
      this.#unsent.push(bytes);
      return;
    }
    const taken = this.#socket.write(bytes);
    if (taken >= 0 && taken < bytes.length) this.#unsent.push(bytes.subarray(taken));
  }

  end(last?: Uint8Array): void {
    if (this.#closes.fired || this.#ending) return;
    if (last !== undefined) this.write(last);
    this.#ending = true;
    if (this.#unsent.length === 0) this.#socket.end();
  }

  destroy(): void {
    if (this.#closes.fired) return;
    this.#unsent = [];
    this.#ending = true;
    this.#socket.end();
  }

  pause(): void {
    this.#socket.pause();
  }

  resume(): void {
    this.#socket.resume();
  }

  setOnData(handler: ((chunk: Uint8Array) => void) | null): void {
    this.#data.set(handler);
  }

  onClose(handler: (failure: string | null) => void): () => void {
    return this.#closes.add(handler);
  }

  // ---- from the listener's handlers -----------------------------------------------------

  received(chunk: Uint8Array): void {
    if (!this.#closes.fired) this.#data.deliver(chunk);
  }

  drained(): void {
    while (this.#unsent.length > 0) {
      const next = this.#unsent[0]!;
      const taken = this.#socket.write(next);
      if (taken < 0) return;
      if (taken < next.length) {
        this.#unsent[0] = next.subarray(taken);
        return;
      }
      this.#unsent.shift();
    }
    if (this.#ending) this.#socket.end();
  }

  failed(error: Error): void {
    this.#closes.failed(error.message);
  }

  ended(error: Error | undefined): void {
    if (error !== undefined) this.#closes.failed(error.message);
    this.#unsent = [];
    this.#closes.fire();
  }
}

export function listenBunTcp(options: TcpListenOptions): Promise<TcpListener> {
  let listener: BunListener;
  try {
    listener = bun().listen({
      hostname: options.host,
      port: options.port,
      socket: handlers(options.onConnection),
    });
  } catch (error) {
    const code = (error as { code?: string }).code ?? "";
    const meaning = LISTEN_FAILURES[code];
    return Promise.reject(
      meaning === undefined
        ? error
        : new Error(`listen ${code}: ${meaning} ${options.host}:${options.port}`),
    );
  }
  return Promise.resolve({
    address: { host: listener.hostname, port: listener.port },
    close: () => {
      listener.stop(false);
      return Promise.resolve();
    },
  });
}

export function connectBunTcp(options: TcpConnectOptions): Promise<TcpConnection> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(new Error("timed out"));
    }, options.timeoutMs);
    bun().connect({
      hostname: options.host,
      port: options.port,
      ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }),
      socket: handlers((connection) => {
        clearTimeout(timer);
        if (settled) connection.destroy(); // it connected after the caller gave up
        else resolve(connection);
        settled = true;
      }),
    }).catch((error: Error) => {
      clearTimeout(timer);
      // Bun says only "Failed to connect"; its code says why, as node:net's message does.
      const code = (error as { code?: string }).code;
      if (!settled) {
        reject(
          code === undefined ? error : new Error(`connect ${code} ${options.host}:${options.port}`),
        );
      }
      settled = true;
    });
  });
}
