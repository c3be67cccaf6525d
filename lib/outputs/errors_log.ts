/**
 * `errors.jsonl` in each task's tracking store: one JSON line per failed attempt, kept across
 * runs, so `status --failed` can name each failed block's last error after the run that saw it
 * has ended. Appended by the main thread as failures arrive (no fsync: it is a report, the
 * ledger's `failures` counts are what decisions use); a torn last line is skipped on reading.
 *
 *   {"task":"seg","block":"17","index":[1,2],"attempt":3,"run_id":"<uuid>",
 *    "at":"<ISO 8601>","message":"...","stack":["Error: ...","    at ..."],"permanent":true}
 */

import * as fs from "node:fs";
import * as path from "node:path";
import type { BlockFailure, RunObserver } from "../run/run_types.ts";
import { checkHostByteOrder, streamBlockRuns } from "../tracking/chunk_reads.ts";
import { readStoreMetadata } from "../tracking/store_metadata.ts";
import { indexKey } from "./manifest.ts";

export const ERRORS_FILE = "errors.jsonl";
/** Stack lines kept per failed attempt. */
export const STACK_LINES = 8;

export interface ErrorRecord {
  readonly task: string;
  readonly block: string;
  readonly index: readonly number[];
  readonly attempt: number;
  readonly run_id: string;
  readonly at: string;
  readonly message: string;
  readonly stack: readonly string[];
  readonly permanent: boolean;
}

export interface ErrorsLogOptions {
  /** The store folder of a task (by id), or null when it is not tracked. */
  readonly storeOf: (taskId: string) => string | null;
  readonly runId: string;
  /** Failures that are not attempts (a quarantined block refused unrun): not logged. */
  readonly ignore?: (failure: BlockFailure) => boolean;
  readonly now?: () => Date;
  /** Told once per file when a record cannot be appended (a full disk): the run goes on. */
  readonly onNotice?: (message: string) => void;
}

/** A run observer that appends every failed attempt to its task's errors.jsonl. */
export function errorsLogObserver(options: ErrorsLogOptions): RunObserver {
  const now = options.now ?? (() => new Date());
  const checked = new Set<string>();
  const unwritable = new Set<string>();
  return {
    blockFailed(failure) {
      if (options.ignore?.(failure) === true) return;
      const store = options.storeOf(failure.taskId);
      if (store === null) return;
      const record: ErrorRecord = {
        task: failure.taskId,
        block: String(failure.blockId),
        index: failure.index,
        attempt: failure.attempt,
        run_id: options.runId,
        at: now().toISOString(),
        message: failure.message,
        stack: stackLines(failure.stack),
        permanent: failure.permanent,
      };
      const file = path.join(store, ERRORS_FILE);
      try {
        // A kill mid-append leaves a torn last line: end it before this run's first record.
        const lead = checked.has(file) || endsLine(file) ? "" : "\n";
        checked.add(file);
        fs.appendFileSync(file, lead + JSON.stringify(record) + "\n");
      } catch (error) {
        // The failure itself still reaches the summary, the events and the exit code; only its
        // history in the store is lost, which must not end the run.
        if (unwritable.has(file)) return;
        unwritable.add(file);
        options.onNotice?.(
          `warning: could not append a failed attempt of block ${record.block} (task "${record.task}") to ${file}: ${
            (error as Error).message
          }; the failure is still reported, but \`status --failed\` will not list it (free space on that disk, then rerun)`,
        );
      }
    },
  };
}

/** Whether the file is missing, empty or ends with a newline. */
function endsLine(file: string): boolean {
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch {
    return true;
  }
  try {
    const size = fs.fstatSync(fd).size;
    if (size === 0) return true;
    const last = new Uint8Array(1);
    fs.readSync(fd, last, 0, 1, size - 1);
    return last[0] === 0x0a;
  } finally {
    fs.closeSync(fd);
  }
}

/** The first STACK_LINES lines of the error's stack and of each of its causes' stacks. */
function stackLines(stack: string | undefined): string[] {
  if (stack === undefined) return [];
  const segments: string[][] = [];
  for (const line of stack.split("\n")) {
    if (line.trim() === "") continue;
    if (segments.length === 0 || line.startsWith("Caused by: ")) segments.push([]);
    segments.at(-1)!.push(line);
  }
  return segments.flatMap((segment) => segment.slice(0, STACK_LINES));
}

/**
 * The last error record of each block of `keys` (grid index keys) that has one. The file is read
 * from its end, each line's index found by a string search (the records are written by this
 * module, `index` before `message`), and only the lines of wanted blocks are parsed; the scan
 * stops once every block is found. A 10^8-block store's 130 MB log of 200,000 failures is read
 * 2-3 times faster than by parsing every line, and faster still when few blocks are wanted.
 * A line whose index cannot be found that way is parsed whole.
 */
export function lastErrorsOf(
  storeDir: string,
  keys: ReadonlySet<string>,
): Map<string, ErrorRecord> {
  const last = new Map<string, ErrorRecord>();
  if (keys.size === 0) return last;
  let text: string;
  try {
    text = fs.readFileSync(path.join(storeDir, ERRORS_FILE), "utf8");
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return last;
    throw error;
  }
  let end = text.length;
  while (end > 0 && last.size < keys.size) {
    const start = text.lastIndexOf("\n", end - 1) + 1;
    const line = text.slice(start, end);
    end = start - 1;
    if (line === "") continue;
    const key = indexKeyOfLine(line);
    if (key !== null && (!keys.has(key) || last.has(key))) continue;
    try {
      const r = JSON.parse(line) as ErrorRecord;
      if (!Array.isArray(r.index) || typeof r.message !== "string") continue;
      const k = indexKey(r.index);
      if (keys.has(k) && !last.has(k)) last.set(k, r);
    } catch {
      // A torn or foreign line (a crash mid-append): skipped.
    }
  }
  return last;
}

const INDEX_FIELD = '"index":[';

/** The grid index key of a record line, found without parsing it, or null. */
function indexKeyOfLine(line: string): string | null {
  const at = line.indexOf(INDEX_FIELD);
  if (at < 0) return null;
  const close = line.indexOf("]", at + INDEX_FIELD.length);
  if (close < 0) return null;
  const key = line.slice(at + INDEX_FIELD.length, close);
  return /^-?\d+(,-?\d+)*$/.test(key) ? key : null;
}

/**
 * The first `i` in `from .. length - 1` whose cell `offset + i` is not done and has failed
 * attempts, else `length`. A top-level loop (no closure) so that scanning 10^8 cells stays fast.
 */
function nextFailed(
  done: Uint8Array,
  failures: Uint32Array,
  offset: number,
  from: number,
  length: number,
): number {
  for (let i = from; i < length; i++) {
    const c = offset + i;
    if (failures[c] !== 0 && done[c] !== 1) return i;
  }
  return length;
}

/** A failed block as `status --failed` and `status --json` report it. */
export interface FailedBlockReport {
  readonly block: string;
  readonly index: readonly number[];
  /** Failed attempts over all runs (the store's `failures` count). */
  readonly attempts: number;
  readonly last_error: {
    readonly message: string;
    readonly stack: readonly string[];
    readonly attempt: number;
    readonly run_id: string;
    readonly at: string;
  } | null;
}

/**
 * The blocks of a store that are not done and have failed attempts, in grid order, with their
 * last error from errors.jsonl; at most `limit` of them (`total` counts all). Read-only.
 */
export function failedBlocks(
  storeDir: string,
  limit = Infinity,
): { readonly blocks: readonly FailedBlockReport[]; readonly total: number } {
  checkHostByteOrder(storeDir);
  const meta = readStoreMetadata(storeDir);
  const layout = meta.layout;
  // The failed blocks first (position and attempts), then the last errors of those listed.
  const listed: { position: number; attempts: number }[] = [];
  let total = 0;
  // Streamed window by window: only the failed blocks are kept.
  streamBlockRuns(meta, (position, length, done, failures, offset) => {
    for (
      let i = nextFailed(done, failures, offset, 0, length);
      i < length;
      i = nextFailed(done, failures, offset, i + 1, length)
    ) {
      total++;
      if (listed.length < limit) {
        listed.push({ position: position + i, attempts: failures[offset + i]! });
      }
    }
  });
  const indexes = listed.map((b) => layout.gridIndexOf(b.position));
  const last = lastErrorsOf(meta.path, new Set(indexes.map(indexKey)));
  const blocks: FailedBlockReport[] = listed.map((b, k) => {
    const index = indexes[k]!;
    const r = last.get(indexKey(index)) ?? null;
    return {
      block: String(layout.blockIdOf(b.position)),
      index,
      attempts: b.attempts,
      last_error: r === null ? null : {
        message: r.message,
        stack: r.stack,
        attempt: r.attempt,
        run_id: r.run_id,
        at: r.at,
      },
    };
  });
  return { blocks, total };
}
