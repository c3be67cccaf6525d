/**
 * `runs.jsonl`, next to a tracking store's arrays (seed "What's stored"; DESIGN.md section 6):
 * append-only, one JSON object per line, ignored by zarr readers. This module owns only the file
 * mechanics; the run report code decides what goes into a record.
 *
 * Crash safety: each record is written with one append of the whole line, so a crash can leave
 * at most a torn LAST line. Readers skip (and count) any line that is not a JSON object; the
 * next append first ends a torn line with "\n", so the new record starts on its own line and the
 * torn fragment stays a single, skipped line.
 *
 * Record shapes (every record has `kind`; readers must ignore unknown kinds and fields, and
 * fields may be added over time):
 *
 * - `kind: "run"`, one per `run` that wrote the store, appended when it ends:
 *   ```
 *   { kind: "run", run_id: string, started_at: ISO string, ended_at: ISO string,
 *     seconds: number, outcome: "done" | "failed" | "interrupted" | ..., exit_code: number,
 *     blockwise_version: string, host: string, pid: number,
 *     temporary: boolean,    // the task's outputs are temporary intermediates
 *     blocks: { total, completed, skipped, failed, orphaned },   // counts for this task
 *     aggregates: { ... },   // per-block resource figures summarised (RUN_STATS.md)
 *     workers: [ ... ] }     // the per-worker timeline
 *   ```
 * - `kind: "reset"`, when blocks were reset: `{ kind: "reset", at: ISO string, host, pid,
 *   blockwise_version, what: "all" | ..., blocks?: number }`, saying what was reset
 *   (all blocks, the failures counts, a selection) and how many blocks it touched.
 * - `kind: "migration"`, when a grown volume's store was migrated in place:
 *   `{ kind: "migration", at: ISO string, host, pid, blockwise_version,
 *     from: { grid_shape, ... }, to: { grid_shape, ... }, blocks_carried: number }`.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { errorCode, isRecord, messageOf, StoreError } from "../errors.ts";

/** The log's file name inside a store folder. */
export const RUNS_LOG_FILE = "runs.jsonl";

export interface RunRecords {
  /** The records, oldest first. */
  readonly records: Record<string, unknown>[];
  /** Lines skipped because they are not a JSON object (a torn last line after a crash). */
  readonly tornLines: number;
}

function logPathOf(storeDir: string): string {
  return path.join(storeDir, RUNS_LOG_FILE);
}

/** Append one record as one line, first ending a torn last line left by a crash. */
export function appendRunRecord(storeDir: string, record: Record<string, unknown>): void {
  const line = JSON.stringify(record);
  if (typeof line !== "string" || !line.startsWith("{")) {
    throw new TypeError(`a run record must serialise to a JSON object, got ${String(line)}`);
  }
  const file = logPathOf(storeDir);
  let fd: number;
  try {
    fd = fs.openSync(file, "a+", 0o644);
  } catch (error) {
    throw new StoreError(`Cannot open the run log ${file}: ${messageOf(error)}`, storeDir);
  }
  try {
    const size = fs.fstatSync(fd).size;
    let prefix = "";
    if (size > 0) {
      const last = new Uint8Array(1);
      fs.readSync(fd, last, 0, 1, size - 1);
      if (last[0] !== 0x0a) prefix = "\n";
    }
    fs.writeSync(fd, `${prefix}${line}\n`);
  } catch (error) {
    throw new StoreError(`Cannot append to the run log ${file}: ${messageOf(error)}`, storeDir);
  } finally {
    fs.closeSync(fd);
  }
}

/** Every record in the log, skipping and counting lines that are not JSON objects. */
export function readRunRecords(storeDir: string): RunRecords {
  const file = logPathOf(storeDir);
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return { records: [], tornLines: 0 };
    throw new StoreError(`Cannot read the run log ${file}: ${messageOf(error)}`, storeDir);
  }
  const records: Record<string, unknown>[] = [];
  let tornLines = 0;
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      tornLines++;
      continue;
    }
    if (isRecord(value)) records.push(value);
    else tornLines++;
  }
  return { records, tornLines };
}

/** The newest record, or the newest of the given `kind`; null when there is none. */
export function lastRunRecord(storeDir: string, kind?: string): Record<string, unknown> | null {
  const { records } = readRunRecords(storeDir);
  for (let i = records.length - 1; i >= 0; i--) {
    const record = records[i];
    if (record !== undefined && (kind === undefined || record["kind"] === kind)) return record;
  }
  return null;
}
