/**
 * `tcp.ts` through `node:net`: Deno's listener, and any `net.Socket` (a worker's connection to
 * its scheduler) as a `TcpConnection`.
 */

import * as net from "node:net";
import {
  CloseHandlers,
  DataSlot,
  type TcpConnection,
  type TcpConnectOptions,
  type TcpListener,
  type TcpListenOptions,
} from "./tcp_connection.ts";

/** A `net.Socket` as a connection, with Nagle's algorithm off: frames are latency-bound. */
export function nodeConnection(socket: net.Socket): TcpConnection {
  socket.setNoDelay(true);
  const data = new DataSlot();
  const closes = new CloseHandlers();
  socket.on("data", (chunk: Uint8Array) => data.deliver(chunk));
  socket.on("error", (error: Error) => closes.failed(error.message));
  socket.on("close", () => closes.fire());
  return {
    get remoteAddress() {
      return socket.remoteAddress ?? "";
    },
    get remotePort() {
      return socket.remotePort ?? 0;
    },
    get closed() {
      return closes.fired || socket.destroyed;
    },
    write(bytes) {
      if (!socket.destroyed && socket.writable) socket.write(bytes);
    },
    end(last) {
      if (socket.destroyed) return;
      if (last === undefined) socket.end();
      else socket.end(last);
    },
    destroy() {
      socket.destroy();
    },
    pause() {
      socket.pause();
    },
    resume() {
      socket.resume();
    },
    setOnData(handler) {
      data.set(handler);
    },
    onClose(handler) {
      return closes.add(handler);
    },
  };
}

export function listenNodeTcp(options: TcpListenOptions): Promise<TcpListener> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => options.onConnection(nodeConnection(socket)));
    server.once("error", reject);
    server.listen({ port: options.port, host: options.host, backlog: options.backlog }, () => {
      server.off("error", reject);
      server.on("error", options.onError);
      const a = server.address();
      if (a === null || typeof a === "string") {
        reject(new Error(`the listener on ${options.host}:${options.port} has no TCP address`));
        return;
      }
      resolve({
        address: { host: a.address, port: a.port },
        close: () => new Promise((done) => server.close(() => done())),
      });
    });
  });
}

export function connectNodeTcp(options: TcpConnectOptions): Promise<TcpConnection> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({
      host: options.host,
      port: options.port,
      ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }),
    });
    const fail = (error: Error) => {
      socket.destroy();
      reject(error);
    };
    socket.once("error", fail);
    socket.setTimeout(options.timeoutMs, () => fail(new Error("timed out")));
    socket.once("connect", () => {
      socket.off("error", fail);
      socket.setTimeout(0);
      resolve(nodeConnection(socket));
    });
  });
}
