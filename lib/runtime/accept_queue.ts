/**
 * The accept queue of a TCP listener: how many connections the kernel completes and holds
 * while the process has not yet accepted them. When it is full the kernel drops the next
 * connection's handshake and the peer waits for TCP to send it again: 1 s, then 3 s, then 7 s.
 * A fleet connecting at once (a job array's elements starting together, thousands of workers
 * in one second) while the scheduler is busy for a few milliseconds fills a short queue: with
 * 512, 1,200-1,450 of 2,000 simulated workers were dropped in every run of `bench/fleet.ts`.
 *
 * - Deno: `node:net` passes `backlog` to listen(2): the listener asks for it when it listens.
 * - Bun (1.4): `node:net` and `Bun.listen` ignore `backlog` and ask for 512. On Linux a second
 *   listen(2) on a listening socket sets its backlog anew, so `widenAcceptQueue` finds the
 *   listener among this process's sockets (/proc/self/fd; getsockname and SO_ACCEPTCONN tell
 *   its port and that it listens) and calls listen(2), all through bun:ffi. Reading the
 *   listener from /proc/net/tcp instead took 20-35 ms on a node with thousands of sockets.
 *
 * The kernel caps any backlog at `net.core.somaxconn` (4,096 by default since Linux 5.4).
 */

import * as fs from "node:fs";
import process from "node:process";
import { runtimeName } from "./detect.ts";

/** What a listener for a fleet asks for (the kernel caps it at net.core.somaxconn). */
export const FLEET_BACKLOG = 8192;

/** Linux's SOL_SOCKET and SO_ACCEPTCONN, the same on the architectures Bun runs on. */
const SOL_SOCKET = 1;
const SO_ACCEPTCONN = 30;
const AF_INET = 2;
const AF_INET6 = 10;

interface SocketCalls {
  listen(fd: number, backlog: number): number;
  getsockname(fd: number, address: Uint8Array, length: Uint32Array): number;
  getsockopt(
    fd: number,
    level: number,
    name: number,
    value: Int32Array,
    length: Uint32Array,
  ): number;
}
interface BunFfi {
  dlopen(
    library: string,
    symbols: Readonly<Record<keyof SocketCalls, { args: readonly string[]; returns: string }>>,
  ): { readonly symbols: SocketCalls };
}

/**
 * Make the listener on `port` (of this process) keep up to `backlog` connections not yet
 * accepted, where the runtime did not when it listened. Returns null when it did (or had no
 * need to), else why not, for a notice: the listener works as before with the runtime's queue.
 */
export async function widenAcceptQueue(port: number, backlog: number): Promise<string | null> {
  if (runtimeName() !== "bun") return null; // Deno's node:net passed backlog to listen(2)
  // Elsewhere the runtime's queue of 512 stays: the constants below are Linux's.
  if (process.platform !== "linux" || !["x64", "arm64"].includes(process.arch)) return null;
  let calls: SocketCalls;
  try {
    const ffi = await import("bun:ffi" as string) as BunFfi;
    calls = ffi.dlopen("libc.so.6", {
      listen: { args: ["i32", "i32"], returns: "i32" },
      getsockname: { args: ["i32", "ptr", "ptr"], returns: "i32" },
      getsockopt: { args: ["i32", "i32", "i32", "ptr", "ptr"], returns: "i32" },
    }).symbols;
  } catch (error) {
    return `libc cannot be reached through bun:ffi: ${(error as Error).message}`;
  }
  const fd = socketDescriptors().find((fd) => listensOn(calls, fd, port));
  if (fd === undefined) return `no descriptor of this process listens on port ${port}`;
  return calls.listen(fd, backlog) === 0 ? null : `listen(${fd}, ${backlog}) failed`;
}

/** This process's socket descriptors (a few: it has just started listening). */
function socketDescriptors(): number[] {
  const fds: number[] = [];
  let names: string[];
  try {
    names = fs.readdirSync("/proc/self/fd");
  } catch {
    return fds;
  }
  for (const name of names) {
    try {
      if (fs.readlinkSync(`/proc/self/fd/${name}`).startsWith("socket:")) fds.push(Number(name));
    } catch {
      // closed since the listing
    }
  }
  return fds;
}

/** Whether `fd` is an IPv4 or IPv6 socket listening on `port`. */
function listensOn(calls: SocketCalls, fd: number, port: number): boolean {
  const address = new Uint8Array(128);
  const length = new Uint32Array([address.length]);
  if (calls.getsockname(fd, address, length) !== 0) return false;
  const family = address[0]! | (address[1]! << 8); // sa_family_t, little-endian on x64 and arm64
  if (family !== AF_INET && family !== AF_INET6) return false;
  if (((address[2]! << 8) | address[3]!) !== port) return false; // network byte order
  const accepting = new Int32Array(1);
  const size = new Uint32Array([4]);
  return calls.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, accepting, size) === 0 &&
    accepting[0] === 1;
}
