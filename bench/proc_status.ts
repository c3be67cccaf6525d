/** Memory figures of a running process, for the benches that watch a child's resident size. */

import * as fs from "node:fs";

/** A `/proc/PID/status` field in kB (VmRSS, VmHWM, RssAnon, ...), or 0 once the process is gone. */
export function statusKb(pid: number, field: string): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status);
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}
