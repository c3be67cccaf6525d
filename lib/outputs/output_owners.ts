/**
 * Output folders belong to one run at a time, per task. Two runs of a pipeline with different
 * tracking directories over the same outputs each recorded the files as theirs: the second
 * run's start swept the first one's live staging (whose blocks then failed with ENOENT), and
 * its bytes replaced outputs the first had recorded.
 *
 * A run writes `<output folder>/.blockwise-staging/<run id>/owner.json` (its pid, host, start,
 * and each task's store) before anything is swept or staged, then looks at the other runs'
 * owner files there: one of a live run that writes the same task into another store refuses
 * this run (exit 3, naming that store). The sweep of staging leftovers skips the folders of
 * live runs. The file goes with the run's staging folder when the run ends; a killed run's is
 * swept by the next run, its owner being dead. (Outputs a finished run of another store
 * replaced are found by reconciliation: a file changed after it was recorded is re-hashed.)
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { isRecord, StoreError } from "../errors.ts";
import { isHolderAlive } from "../tracking/lock_files.ts";
import { type OutputPlan, STAGING_FOLDER } from "./output_plan.ts";

export const OWNER_FILE = "owner.json";

interface Owner {
  readonly run_id: string;
  readonly pid: number;
  readonly host: string;
  readonly started_at: string;
  /** Task id to the store that records its outputs. */
  readonly tasks: Readonly<Record<string, string>>;
}

/** One task's outputs and the store that records them. */
export interface OwnedOutputs {
  readonly taskId: string;
  readonly store: string;
  readonly plans: readonly OutputPlan[];
}

/**
 * Records this run as the owner of its output folders and refuses (StoreError) when a live
 * run writes one of the same tasks there into another store. Nothing is left behind on refusal.
 */
export function claimOutputFolders(runId: string, outputs: readonly OwnedOutputs[]): void {
  const byBase = new Map<string, Record<string, string>>();
  for (const o of outputs) {
    for (const plan of o.plans) {
      const tasks = byBase.get(plan.base) ?? {};
      tasks[o.taskId] = path.resolve(o.store);
      byBase.set(plan.base, tasks);
    }
  }
  const started = new Date(Date.now() - process.uptime() * 1000).toISOString();
  const mine: string[] = [];
  try {
    for (const [base, tasks] of byBase) {
      const folder = path.join(base, STAGING_FOLDER, runId);
      fs.mkdirSync(folder, { recursive: true });
      mine.push(folder);
      const owner: Owner = {
        run_id: runId,
        pid: process.pid,
        host: os.hostname(),
        started_at: started,
        tasks,
      };
      fs.writeFileSync(path.join(folder, OWNER_FILE), `${JSON.stringify(owner)}\n`);
    }
    for (const [base, tasks] of byBase) checkOtherRuns(base, runId, tasks);
  } catch (error) {
    for (const folder of mine) fs.rmSync(folder, { recursive: true, force: true });
    for (const base of byBase.keys()) removeIfEmpty(path.join(base, STAGING_FOLDER));
    throw error;
  }
}

function checkOtherRuns(base: string, runId: string, tasks: Record<string, string>): void {
  const staging = path.join(base, STAGING_FOLDER);
  for (const run of fs.readdirSync(staging)) {
    if (run === runId) continue;
    const owner = liveOwner(path.join(staging, run));
    if (owner === null) continue;
    for (const [task, store] of Object.entries(tasks)) {
      const theirs = owner.tasks[task];
      if (theirs === undefined || theirs === store) continue;
      throw new StoreError(
        `The outputs of task "${task}" in ${base} are being written by another run (pid ${owner.pid} on host ${owner.host}, started ${owner.started_at}) into tracking store ${theirs}, not ${store}: two stores recording the same files would overwrite each other's outputs. Wait for that run to end and use its tracking directory, or give this run's outputs another folder`,
        store,
      );
    }
  }
}

/** The owner of a run's staging folder when that run is alive (on another host: assumed), else null. */
export function liveOwner(runFolder: string): Owner | null {
  let value: unknown;
  try {
    value = JSON.parse(fs.readFileSync(path.join(runFolder, OWNER_FILE), "utf8"));
  } catch {
    return null; // no owner file: a run of an older blockwise, or killed while writing it
  }
  if (
    !isRecord(value) || typeof value["pid"] !== "number" || typeof value["host"] !== "string" ||
    typeof value["started_at"] !== "string" || !isRecord(value["tasks"])
  ) {
    return null;
  }
  const owner = value as unknown as Owner;
  const alive = isHolderAlive({
    pid: owner.pid,
    host: owner.host,
    started_at: owner.started_at,
    command: "",
  });
  return alive === false ? null : owner;
}

function removeIfEmpty(folder: string): void {
  try {
    fs.rmdirSync(folder);
  } catch {
    // not empty, or gone
  }
}
