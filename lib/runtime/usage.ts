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
 * Per-block figures of the calling thread at a few microseconds a reading: `/proc` files are
 * kept open and re-read in place (a fresh `readFileSync` costs 6-20 µs), and CPU comes from
 * `/proc/thread-self/schedstat` where `process.threadCpuUsage()` is slow (Deno: ~18 µs).
 * Create it in the thread it measures: `/proc/thread-self` resolves when the file is opened.
 */
export class ThreadMeter {
  private readonly ioFd: number | null;
  private readonly schedFd: number | null;
  private readonly buffer = new Uint8Array(1024);
  private readonly decoder = new TextDecoder();
  /** Bytes the meter itself read so far: they count in rchar and are subtracted. */
  private ownBytes = 0;

  constructor() {
    this.ioFd = openQuietly("/proc/thread-self/io");
    const p = process as ProcessWithThreadCpu;
    const isBun = (globalThis as { Bun?: unknown }).Bun !== undefined;
    this.schedFd = isBun && typeof p.threadCpuUsage === "function"
      ? null
      : openQuietly("/proc/thread-self/schedstat");
  }

  /** CPU seconds of this thread, or NaN where the platform cannot tell. */
  cpuSeconds(): number {
    if (this.schedFd !== null) {
      const text = this.read(this.schedFd);
      const ns = text === null ? Number.NaN : Number(text.slice(0, text.indexOf(" ")));
      if (Number.isFinite(ns)) return ns / 1e9;
    }
    return threadCpuSeconds();
  }

  /** Bytes read and written through syscalls by this thread; zeros where not reported. */
  io(): IoBytes {
    if (this.ioFd === null) return { read: 0, write: 0 };
    const own = this.ownBytes; // this read's own bytes appear in rchar only from the next read
    const text = this.read(this.ioFd);
    if (text === null) return { read: 0, write: 0 };
    return { read: fieldOf(text, "rchar") - own, write: fieldOf(text, "wchar") };
  }

  close(): void {
    for (const fd of [this.ioFd, this.schedFd]) if (fd !== null) fs.closeSync(fd);
  }

  private read(fd: number): string | null {
    try {
      const n = fs.readSync(fd, this.buffer, 0, this.buffer.length, 0);
      this.ownBytes += n;
      return this.decoder.decode(this.buffer.subarray(0, n));
    } catch {
      return null;
    }
  }
}

function openQuietly(file: string): number | null {
  try {
    return fs.openSync(file, "r");
  } catch {
    return null;
  }
}

function fieldOf(text: string, key: string): number {
  const at = text.indexOf(key + ":");
  if (at < 0) return 0;
  const end = text.indexOf("\n", at);
  return Number(text.slice(at + key.length + 1, end < 0 ? undefined : end)) || 0;
}

/**
 * Ask the runtime to collect garbage now, where it allows it (Bun); a no-op elsewhere. The run
 * loop calls it after every 2 MB of result buffers transferred from workers: that external
 * memory is otherwise left to pile up (about 100 MB over a million-block run with resource
 * tracking; measured on a 1 M-block 3-D run: peak RSS ~300 MB without, ~195 MB with).
 */
export function collectGarbage(): void {
  const bun = (globalThis as { Bun?: { gc?: (force: boolean) => void } }).Bun;
  bun?.gc?.(true);
}
