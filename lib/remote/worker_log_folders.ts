/**
 * Worker processes' log folders, one per run (`<tracking>/.workers/<run id>/`, or
 * `<tmp>/blockwise-workers-<run id>/` without a tracking directory): the last
 * KEPT_WORKER_LOG_RUNS runs' are kept, older ones are removed when a run starts its own, except
 * a folder written to within the last hour (a run that may still be going).
 */

import * as fs from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import process from "node:process";

/** How many runs' worker log folders are kept (the new run's included). */
export const KEPT_WORKER_LOG_RUNS = 10;

/** A folder with a file written this recently is never removed. */
const RECENT_MS = 60 * 60 * 1000;

const RUN_ID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
const IN_TRACKING = new RegExp(`^${RUN_ID}$`);
const IN_TMP = new RegExp(`^blockwise-workers-${RUN_ID}$`);

/**
 * Before a run creates `logDir`: removes its parent's older run folders beyond the newest
 * KEPT_WORKER_LOG_RUNS - 1 (best effort: a folder that cannot be read or removed is left).
 * Returns the folders removed.
 */
export function pruneWorkerLogFolders(logDir: string, now: number = Date.now()): string[] {
  const parent = join(logDir, "..");
  const inTmp = parent === os.tmpdir();
  const pattern = inTmp ? IN_TMP : IN_TRACKING;
  const uid = typeof process.getuid === "function" ? process.getuid() : null;
  let names: string[];
  try {
    names = fs.readdirSync(parent);
  } catch {
    return [];
  }
  const runs: { path: string; newest: number }[] = [];
  for (const name of names) {
    const path = join(parent, name);
    if (!pattern.test(name) || path === logDir) continue;
    try {
      const info = fs.statSync(path);
      if (!info.isDirectory() || (inTmp && uid !== null && info.uid !== uid)) continue;
      runs.push({ path, newest: newestWrite(path, info.mtimeMs) });
    } catch {
      continue;
    }
  }
  runs.sort((a, b) => b.newest - a.newest);
  const removed: string[] = [];
  for (const run of runs.slice(KEPT_WORKER_LOG_RUNS - 1)) {
    if (now - run.newest < RECENT_MS) continue;
    try {
      fs.rmSync(run.path, { recursive: true, force: true });
      removed.push(run.path);
    } catch {
      // left for the next run to try again
    }
  }
  return removed;
}

function newestWrite(folder: string, folderMtime: number): number {
  let newest = folderMtime;
  for (const name of fs.readdirSync(folder)) {
    try {
      newest = Math.max(newest, fs.statSync(join(folder, name)).mtimeMs);
    } catch {
      // removed meanwhile
    }
  }
  return newest;
}
