/**
 * Crash points for the crash tests: `BLOCKWISE_TEST_CRASH_AT=<point>:<n>` makes the process kill
 * itself with SIGKILL the n-th time it reaches `<point>` (a step of the output commit, or of
 * deleting temporaries), so every step can be hit exactly rather than by luck;
 * `BLOCKWISE_TEST_FAIL_AT=<point>:<n>` makes it throw there instead, as a failed fsync would.
 * Unset, a crash point costs two comparisons.
 */

import process from "node:process";

export type CrashPoint =
  | "commit:staged"
  | "commit:intent"
  | "commit:rename"
  | "commit:renamed"
  | "commit:recorded"
  | "commit:done"
  | "temp:due"
  | "temp:tombstoned"
  | "temp:deleted";

const wanted = parse(process.env["BLOCKWISE_TEST_CRASH_AT"]);
let seen = 0;
/** `BLOCKWISE_TEST_FAIL_AT=<point>:<n>`: the n-th arrival throws instead (a disk that failed). */
const failing = parse(process.env["BLOCKWISE_TEST_FAIL_AT"]);
let failingSeen = 0;

function parse(value: string | undefined): { point: string; n: number } | null {
  if (value === undefined || value === "") return null;
  const at = value.lastIndexOf(":");
  const n = Number(value.slice(at + 1));
  return at > 0 && Number.isInteger(n) && n >= 1 ? { point: value.slice(0, at), n } : null;
}

export function crashPoint(point: CrashPoint): void {
  if (failing !== null && failing.point === point && ++failingSeen === failing.n) {
    throw new Error(`injected failure at ${point} (BLOCKWISE_TEST_FAIL_AT)`);
  }
  if (wanted === null || wanted.point !== point) return;
  if (++seen === wanted.n) process.kill(process.pid, "SIGKILL");
}

/**
 * `count` arrivals at `point` that happen elsewhere (a helper thread's renames): counts them, and
 * returns after how many of them the process must kill itself (1..count), or -1.
 */
export function crashAfterOf(point: CrashPoint, count: number): number {
  if (wanted === null || wanted.point !== point) return -1;
  const before = seen;
  seen += count;
  return wanted.n > before && wanted.n <= seen ? wanted.n - before : -1;
}
