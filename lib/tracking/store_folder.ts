/**
 * What may stand where a tracking store is created: nothing, an empty folder, or a folder that
 * holds only the daisy API's per-worker logs (`worker_<n>.out` and `.err`), which daisy keeps in
 * the same folder as a task's done marker. The new store takes those logs in.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { errorCode } from "../errors.ts";

/** A log file of a daisy worker thread. */
export function isWorkerLog(name: string): boolean {
  return /^worker_\d+\.(out|err)$/.test(name);
}

/** No folder at `dir`, or one that holds nothing but worker logs. */
export function isMissingOrEmpty(dir: string): boolean {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(dir);
  } catch (error) {
    // ENOTDIR: a file above it; creating the store says so.
    if (errorCode(error) === "ENOENT" || errorCode(error) === "ENOTDIR") return true;
    throw error;
  }
  return stat.isDirectory() && fs.readdirSync(dir).every(isWorkerLog);
}

/** Moves the worker logs of `dir` into the store being built at `building`. */
export function adoptWorkerLogs(dir: string, building: string): void {
  for (const name of fs.readdirSync(dir)) {
    if (isWorkerLog(name)) fs.renameSync(path.join(dir, name), path.join(building, name));
  }
}
