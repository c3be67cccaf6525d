/**
 * When a done block's recorded `upstream_digest` cannot legitimately differ from its upstream
 * blocks' content now, a mismatch means the array was damaged, not that upstream changed: a task
 * without upstream tasks always records the same digest; for any other task, when the task's own
 * last run completed (every block it found stale was rebuilt, after the upstream blocks it read
 * were made) and every upstream store's latest run is that run or an earlier one, no upstream
 * block was made since. Then the stale blocks would be rebuilt silently; a warning names the
 * file.
 */

import * as path from "node:path";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { readRunRecords } from "../tracking/runs_log.ts";

/** The latest run recorded in a store: its id, start (ms) and outcome, or null. */
function latestRun(storeDir: string): { id: string; started: number; complete: boolean } | null {
  let records: readonly Record<string, unknown>[];
  try {
    records = readRunRecords(storeDir).records;
  } catch {
    return null; // an unreadable run log: nothing can be said (the run warns about it)
  }
  const last = records.at(-1);
  if (last === undefined) return null;
  const started = Date.parse(String(last["started_at"]));
  const id = last["run_id"];
  if (!Number.isFinite(started) || typeof id !== "string") return null;
  return { id, started, complete: last["outcome"] === "complete" };
}

/**
 * Whether task `t`'s upstream digests must all still match (see the module comment).
 * `storeOf(t)` is each task's store folder, or null when it has none.
 */
export function upstreamUnchanged(
  pipeline: PipelineConfig,
  t: number,
  storeOf: (task: number) => string | null,
): boolean {
  const upstream = pipeline.tasks[t]!.upstream;
  if (upstream.length === 0) return true;
  const own = storeOf(t);
  const mine = own === null ? null : latestRun(own);
  if (mine === null || !mine.complete) return false;
  return upstream.every((id) => {
    const u = pipeline.tasks.findIndex((task) => task.id === id);
    const store = u < 0 ? null : storeOf(u);
    const theirs = store === null ? null : latestRun(store);
    return theirs !== null && (theirs.id === mine.id || theirs.started < mine.started);
  });
}

/**
 * The warning for a task whose upstream digests do not match although they must; `stale` is
 * how many blocks (plan counts them), or null (a run warns at the first).
 */
export function damagedDigestWarning(
  taskId: string,
  storeDir: string,
  stale: number | null,
): string {
  const which = stale === null ? "done blocks" : `${stale} done block${stale === 1 ? "" : "s"}`;
  return `Task "${taskId}": ${which} do not match their upstream blocks' content, although no upstream block was made since this task's last run: ${
    path.join(storeDir, "upstream_digest")
  } is probably damaged. Those blocks will be rebuilt; to keep them instead, restore the file, or run blockwise accept (which records them as made from the upstream content now)`;
}
