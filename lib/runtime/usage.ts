/**
 * CPU, memory and I/O figures, from the APIs both runtimes share (reference runtime-notes §6):
 * `process.threadCpuUsage()` is per thread, so a worker measures exactly its own block time.
 */

import * as fs from "node:fs";
import process from "node:process";

interface ThreadCpu {
  user: number;
  system: number;
}

type ProcessWithThreadCpu = typeof process & { threadCpuUsage?: () => ThreadCpu };

/** CPU seconds used by the calling thread, or NaN where the runtime cannot tell. */
export function threadCpuSeconds(): number {
  const p = process as ProcessWithThreadCpu;
  if (typeof p.threadCpuUsage !== "function") return Number.NaN;
  const u = p.threadCpuUsage();
  return (u.user + u.system) / 1e6;
}

/** CPU seconds used by the whole process. */
export function processCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** Peak resident set size of the process, in bytes. */
export function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024;
}

export function currentRssBytes(): number {
  return process.memoryUsage.rss();
}

export interface IoBytes {
  readonly read: number;
  readonly write: number;
}

/**
 * Bytes read and written through syscalls by this thread (`/proc/thread-self/io`), or by the
 * process when `thread` is false. Zero where the platform or permissions do not allow it (Deno
 * needs `-A` to read /proc).
 */
export function ioBytes(thread: boolean): IoBytes {
  try {
    const text = fs.readFileSync(thread ? "/proc/thread-self/io" : "/proc/self/io", "utf8");
    let read = 0;
    let write = 0;
    for (const line of text.split("\n")) {
      const [key, value] = line.split(":");
      if (key === "rchar") read = Number(value);
      else if (key === "wchar") write = Number(value);
    }
    return { read, write };
  } catch {
    return { read: 0, write: 0 };
  }
}

/**
 * Per-block figures of the calling thread at a few microseconds a reading and no garbage: the
 * `/proc` files are kept open and re-read in place into one buffer, and numbers are parsed from
 * the bytes (a fresh `readFileSync`, a decoded string or `process.resourceUsage()` per block
 * would leave megabytes of garbage over a million blocks). CPU comes from
 * `/proc/thread-self/schedstat` (nanoseconds on CPU) where it can be read, else from
 * `process.threadCpuUsage()`. Create it in the thread it measures: `/proc/thread-self` resolves
 * when the file is opened.
 */
export class ThreadMeter {
  readonly #ioFd: number | null;
  readonly #schedFd: number | null;
  readonly #statFd: number | null;
  readonly #buffer = new Uint8Array(1024);
  /** Bytes the meter itself read so far: they count in rchar and are subtracted. */
  #ownBytes = 0;
  #rss = 0;
  #rssAt = Number.NEGATIVE_INFINITY;
  /** The last `io()` reading, overwritten by each call. */
  readonly lastIo = { read: 0, write: 0 };

  constructor() {
    this.#ioFd = openQuietly("/proc/thread-self/io");
    this.#schedFd = openQuietly("/proc/thread-self/schedstat");
    this.#statFd = openQuietly("/proc/thread-self/stat");
  }

  /** Minor page faults of this thread so far (`/proc/thread-self/stat`), or NaN if unknown. */
  minorFaults(): number {
    if (this.#statFd === null) return Number.NaN;
    const n = this.#read(this.#statFd);
    return n > 0 ? minorFaultsOf(this.#buffer, n) : Number.NaN;
  }

  /** CPU seconds of this thread, or NaN where the platform cannot tell. */
  cpuSeconds(): number {
    if (this.#schedFd !== null) {
      const n = this.#read(this.#schedFd);
      const ns = n > 0 ? numberAfter(this.#buffer, n, 0) : Number.NaN;
      if (Number.isFinite(ns)) return ns / 1e9;
    }
    return threadCpuSeconds();
  }

  /** Bytes read and written through syscalls by this thread, in `lastIo` (zeros if unknown). */
  io(): IoBytes {
    const out = this.lastIo;
    out.read = 0;
    out.write = 0;
    if (this.#ioFd === null) return out;
    const own = this.#ownBytes; // this read's own bytes appear in rchar only from the next read
    const n = this.#read(this.#ioFd);
    if (n <= 0) return out;
    out.read = fieldOfBytes(this.#buffer, n, RCHAR) - own;
    out.write = fieldOfBytes(this.#buffer, n, WCHAR);
    return out;
  }

  /**
   * Peak resident set size of the process: it only ever grows, so a reading at most 25 ms old
   * is as good as a new one and costs nothing per block.
   */
  peakRssBytes(): number {
    const now = performance.now();
    if (now - this.#rssAt > 25) {
      this.#rss = peakRssBytes();
      this.#rssAt = now;
    }
    return this.#rss;
  }

  close(): void {
    for (const fd of [this.#ioFd, this.#schedFd, this.#statFd]) if (fd !== null) fs.closeSync(fd);
  }

  #read(fd: number): number {
    try {
      const n = fs.readSync(fd, this.#buffer, 0, this.#buffer.length, 0);
      this.#ownBytes += n;
      return n;
    } catch {
      return -1;
    }
  }
}

const RCHAR = Array.from("rchar:", (c) => c.charCodeAt(0));
const WCHAR = Array.from("wchar:", (c) => c.charCodeAt(0));

/** The number after `key` in `bytes[0, n)`, or 0. */
function fieldOfBytes(bytes: Uint8Array, n: number, key: readonly number[]): number {
  outer: for (let i = 0; i + key.length <= n; i++) {
    for (let k = 0; k < key.length; k++) if (bytes[i + k] !== key[k]) continue outer;
    return numberAfter(bytes, n, i + key.length);
  }
  return 0;
}

const CLOSE_PAREN = 41;
const SPACE = 32;

/**
 * `minflt` of a `/proc/.../stat` line: the 8th field after the command name's closing
 * parenthesis (state ppid pgrp session tty_nr tpgid flags minflt), or NaN.
 */
export function minorFaultsOf(bytes: Uint8Array, n: number): number {
  let i = bytes.lastIndexOf(CLOSE_PAREN, n - 1);
  if (i < 0) return Number.NaN;
  for (let field = 0; field < 8; field++) {
    i = bytes.indexOf(SPACE, i + 1);
    if (i < 0 || i >= n) return Number.NaN;
  }
  return numberAfter(bytes, n, i + 1);
}

/** The decimal integer starting at or after `at` (spaces skipped), or 0. */
function numberAfter(bytes: Uint8Array, n: number, at: number): number {
  let i = at;
  while (i < n && bytes[i] === 32) i++;
  let value = 0;
  let digits = 0;
  for (; i < n; i++) {
    const d = bytes[i]! - 48;
    if (d < 0 || d > 9) break;
    value = value * 10 + d;
    digits++;
  }
  return digits === 0 ? Number.NaN : value;
}

function openQuietly(file: string): number | null {
  try {
    return fs.openSync(file, "r");
  } catch {
    return null;
  }
}
