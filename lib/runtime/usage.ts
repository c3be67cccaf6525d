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
