/**
 * A byte stream between the run loop and a worker: a TCP connection, a pipe pair to a child
 * process, or (in tests) an in-process pair. Frames (`protocol/frames.ts`) travel over it.
 */

import type { TcpConnection } from "../runtime/tcp.ts";

export interface ByteChannel {
  write(bytes: Uint8Array): void;
  /** Chunks in arrival order. */
  onData(handler: (chunk: Uint8Array) => void): void;
  /** Called once, when the stream ends for any reason (`reason` says which). */
  onClose(handler: (reason: string) => void): void;
  /** End the stream; `onClose` fires. */
  close(): void;
}

/** A TCP connection (`lib/runtime/tcp.ts`: a worker server's or a worker's) as a channel. */
export function connectionChannel(connection: TcpConnection): ByteChannel {
  return {
    write(bytes) {
      connection.write(bytes);
    },
    onData(handler) {
      connection.setOnData(handler);
    },
    onClose(handler) {
      connection.onClose((failure) =>
        handler(failure === null ? "the connection closed" : `the connection failed: ${failure}`)
      );
    },
    close() {
      connection.destroy();
    },
  };
}
