/**
 * TCP connections behind one small interface, so that a listener holding thousands of them
 * pays as little as the runtime allows for each.
 *
 * - Bun: `Bun.listen`, the runtime's own sockets (`tcp_bun.ts`). Through `node:net`, Bun wraps
 *   every connection in a Node stream: accepting 2,000 workers and running their handshakes took
 *   0.13 s of the listener's CPU, against 0.04 s with Bun's sockets (docs/design/REMOTE.md).
 * - Deno: `node:net` (`tcp_node.ts`), which passes the backlog on and costs what it costs.
 *
 * Writes never drop bytes: what the kernel does not take at once waits in order for the
 * socket to drain. A connection has one data handler at a time (a handshake hands it to an
 * executor); chunks that arrive while there is none wait for the next.
 */

import { runtimeName } from "./detect.ts";
import type {
  TcpConnection,
  TcpConnectOptions,
  TcpListener,
  TcpListenOptions,
} from "./tcp_connection.ts";
import { connectNodeTcp, listenNodeTcp } from "./tcp_node.ts";
import { connectBunTcp, listenBunTcp } from "./tcp_bun.ts";

export type {
  TcpConnection,
  TcpConnectOptions,
  TcpListener,
  TcpListenOptions,
} from "./tcp_connection.ts";

/** Listen; rejects with the system's error when the address cannot be used. */
export function listenTcp(options: TcpListenOptions): Promise<TcpListener> {
  return runtimeName() === "bun" ? listenBunTcp(options) : listenNodeTcp(options);
}

/** Connect; rejects with the system's error (or "timed out"). */
export function connectTcp(options: TcpConnectOptions): Promise<TcpConnection> {
  return runtimeName() === "bun" ? connectBunTcp(options) : connectNodeTcp(options);
}
