/**
 * A byte stream between the run loop and a worker: a TCP connection, a pipe pair to a child
 * process, or (in tests) an in-process pair. Frames (`protocol/frames.ts`) travel over it.
 */

import type { Socket } from "node:net";

export interface ByteChannel {
  write(bytes: Uint8Array): void;
  /** Chunks in arrival order. */
  onData(handler: (chunk: Uint8Array) => void): void;
  /** Called once, when the stream ends for any reason (`reason` says which). */
  onClose(handler: (reason: string) => void): void;
  /** End the stream; `onClose` fires. */
  close(): void;
}

/** A TCP (or Unix) socket as a channel, with Nagle's algorithm off: batches are latency-bound. */
export function socketChannel(socket: Socket): ByteChannel {
  socket.setNoDelay(true);
  let closed = false;
  const closeHandlers: ((reason: string) => void)[] = [];
  let lastError = "";
  const fire = (reason: string) => {
    if (closed) return;
    closed = true;
    for (const h of closeHandlers) h(reason);
  };
  socket.on("error", (error: Error) => (lastError = error.message));
  socket.on(
    "close",
    () => fire(lastError === "" ? "the connection closed" : `the connection failed: ${lastError}`),
  );
  return {
    write(bytes) {
      if (!closed) socket.write(bytes);
    },
    onData(handler) {
      socket.on("data", (chunk: Uint8Array) => handler(chunk));
    },
    onClose(handler) {
      closeHandlers.push(handler);
    },
    close() {
      socket.destroy();
    },
  };
}
