/**
 * `blockwise run --events FILE`: one JSON object per line (JSON Lines) for dashboards and
 * scripts. Lines are written synchronously as things happen, so they stay in order and survive a
 * crash of the run; a file without a `run_end` line belongs to a run that did not finish.
 *
 * Schema. Every line has `event` (its type) and `time` (seconds since the Unix epoch, a float),
 * first, then the fields of its type:
 *
 * - `run_start`: `pipeline` (the pipeline file as given), `tasks` (array of task counters, see
 *   below, in display order).
 * - `task_progress`: the counters of one task (see below, flattened into the line). Written only
 *   when that task's counters changed since its previous line, at most one line per task every
 *   0.5 s; the state a task ends in is always written, before `run_end`.
 * - `block_failed`: `task`, `block_id` (a number; a decimal string when above 2^53 - 1),
 *   `index` (the block's grid index, array of numbers), `attempt` (1-based), `permanent` (true
 *   when no retry is left: the block failed for this run), `error`: {`message`, `stack`
 *   (string or null)}. Written for every failed attempt, including retried ones.
 * - `block_done` (only with `blocks: true`, `run --events-blocks`): `task`, `block_id`, `index`,
 *   `attempt`, `worker` (the worker's run-wide number; null for --serial), `wall_seconds`.
 *   Written when the block's completion is durable, one line per completed block (blocks found
 *   done or skipped get none: they are in the counters).
 * - `notice`: `message` (a human-readable remark from the run: worker restarts, abandoned
 *   tasks, setup failures, stop requests).
 * - `run_end`: `outcome` ("complete": every block done or skipped; "incomplete": some block
 *   failed, was orphaned or did not run; "interrupted": stopped by a signal), `stopped_by`
 *   ("SIGINT", "SIGTERM" or null), `exit_code` (the process exit code), `seconds` (run wall
 *   time), `tasks` (array of task counters, final).
 *
 * Task counters: `task` (id), `phase` ("running", "done" or "abandoned"), `total`, `ready`
 * (may start now), `processing` (in a worker), `pending` (waiting on upstream blocks),
 * `completed` (done or skipped), `skipped` (counted in completed too), `failed`, `orphaned`
 * (will not run because an upstream block failed or the task was abandoned), `failed_attempts`
 * (failed attempts including retried ones), `running` (blocks running now), `queued` (remote
 * workers waiting in the cluster's queue, only while there are some), `workers` (only for a task
 * with elastic workers, `launch.workers`: {`queued` (submitted, not connected), `running`
 * (started and not queued), `released` (idle workers let go so far)}), `temporary` (a
 * temporary task's live/peak/deleted outputs), and `abandon_reason` (string) only when the task
 * was abandoned. `total = ready + processing + pending + completed + failed + orphaned`.
 *
 * Example:
 *
 * ```
 * {"event":"run_start","time":1767225600.123,"pipeline":"pipeline.ts","tasks":[{"task":"extract","phase":"running","total":64,"ready":64,"processing":0,"pending":0,"completed":0,"skipped":0,"failed":0,"orphaned":0,"failed_attempts":0}]}
 * {"event":"task_progress","time":1767225600.640,"task":"extract","phase":"running","total":64,"ready":56,"processing":4,"pending":0,"completed":4,"skipped":0,"failed":0,"orphaned":0,"failed_attempts":0}
 * {"event":"block_failed","time":1767225600.701,"task":"extract","block_id":7,"index":[1,3],"attempt":1,"permanent":false,"error":{"message":"bad block","stack":"Error: bad block\n    at ..."}}
 * {"event":"run_end","time":1767225610.002,"outcome":"complete","stopped_by":null,"exit_code":0,"seconds":9.88,"tasks":[...]}
 * ```
 */

import * as fs from "node:fs";
import { dirname } from "node:path";
import process from "node:process";
import type { BlockId } from "../blocks/mod.ts";
import { InputError } from "../errors.ts";
import { describeAbandonReason } from "../schedule/mod.ts";
import {
  type BlockDone,
  type BlockFailure,
  outcomeWord,
  type RunObserver,
  type RunResult,
  type TaskResult,
} from "../run/run_types.ts";
import { type RunClock, SYSTEM_CLOCK } from "../execute/run_clock.ts";

export interface EventLog extends RunObserver {
  /** Write the final task states and the `run_end` line. Later calls do nothing. */
  finish(result: RunResult, exitCode: number): void;
  /** Close the file. Idempotent; every call after it does nothing. */
  close(): void;
}

export interface EventLogOptions {
  /** Clock for `time`, and the timer that writes held-back states (default: the system's). */
  readonly clock?: RunClock;
  /** Minimum seconds between two `task_progress` lines of one task (default 0.5). */
  readonly throttleSeconds?: number;
  /**
   * Called once when a write fails during the run (disk full, file removed...); no events are
   * written after that. Default: a warning on stderr. The run itself is never interrupted.
   */
  readonly onError?: (error: Error) => void;
  /** Also a `block_done` line per completed block (default false). */
  readonly blocks?: boolean;
}

export const EVENT_THROTTLE_SECONDS = 0.5;

type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

interface TaskLine {
  readonly [key: string]: Json;
}

function taskCounters(
  { id, counters: c, running, queued, temporary, workers }: TaskResult,
): TaskLine {
  const line: Record<string, Json> = {
    task: id,
    phase: c.phase,
    total: c.total,
    ready: c.ready,
    processing: c.processing,
    pending: c.pending,
    completed: c.completed,
    skipped: c.skipped,
    failed: c.failed,
    orphaned: c.orphaned,
    failed_attempts: c.failedAttempts,
  };
  if (running !== undefined) line.running = running;
  // Remote workers waiting in the cluster's queue: only while there are some.
  if (queued !== undefined && queued > 0) line.queued = queued;
  if (workers !== undefined) {
    line.workers = { queued: workers.queued, running: workers.running, released: workers.released };
  }
  if (temporary !== undefined) {
    line.temporary = {
      live_blocks: temporary.liveBlocks,
      live_bytes: temporary.liveBytes,
      peak_bytes: temporary.peakBytes,
      deleted_blocks: temporary.deletedBlocks,
      deleted_bytes: temporary.deletedBytes,
      regenerated: temporary.regenerated,
    };
  }
  if (c.abandonReason !== undefined) line.abandon_reason = describeAbandonReason(c.abandonReason);
  return line;
}

/** A block id as JSON: a number while it is exact, a decimal string beyond 2^53 - 1. */
export function blockIdJson(id: BlockId): number | string {
  if (typeof id === "bigint") {
    return id <= BigInt(Number.MAX_SAFE_INTEGER) && id >= -BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(id)
      : id.toString();
  }
  return Number.isSafeInteger(id) || !Number.isInteger(id) ? id : BigInt(id).toString();
}

function reasonOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  switch (code) {
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "EISDIR":
      return "it is a directory";
    case "ENOTDIR":
    case "EEXIST": // from mkdir: a parent exists but is a file
      return "a parent of it is not a directory";
    case "ENOENT":
      return "its directory does not exist";
    case "EROFS":
      return "the file system is read-only";
    case "ENOSPC":
      return "no space left on the device";
  }
  return error instanceof Error ? error.message : String(error);
}

function openLog(path: string): number {
  try {
    fs.mkdirSync(dirname(path), { recursive: true });
    return fs.openSync(path, "w");
  } catch (error) {
    throw new InputError(
      `Cannot write the events file "${path}": ${reasonOf(error)}. ` +
        "Pass --events a file path in a directory you can write to (it is created if missing).",
    );
  }
}

function writeAll(fd: number, text: string): void {
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  while (offset < bytes.length) {
    offset += fs.writeSync(fd, bytes, offset, bytes.length - offset);
  }
}

interface TaskState {
  /** Counters last written for the task, and when (ms since the epoch). */
  writtenKey: string;
  writtenAt: number;
  /** Newer counters held back by the throttle. */
  held: TaskResult | null;
}

function countersKey(t: TaskResult): string {
  return JSON.stringify(taskCounters(t));
}

/**
 * Open `path` for the events of one run (truncating it; parent directories are created) and
 * return the observer that writes them. Throws an InputError (exit 2) naming the path when it
 * cannot be opened for writing, so `run` refuses before anything runs.
 */
export function createEventLog(
  path: string,
  pipelinePath: string,
  options: EventLogOptions = {},
): EventLog {
  const clock = options.clock ?? SYSTEM_CLOCK;
  const throttle = (options.throttleSeconds ?? EVENT_THROTTLE_SECONDS) * 1000;
  const onError = options.onError ?? ((error: Error) => {
    process.stderr.write(`warning: ${error.message}\n`);
  });
  let fd: number | null = openLog(path);
  let finished = false;
  const tasks = new Map<string, TaskState>();
  let cancelTimer: (() => void) | null = null;

  function close(): void {
    cancelTimer?.();
    cancelTimer = null;
    if (fd === null) return;
    const open = fd;
    fd = null;
    try {
      fs.closeSync(open);
    } catch {
      // Nothing left to save: every line was written synchronously.
    }
  }

  function write(
    event: string,
    fields: { readonly [key: string]: Json },
    time = clock.now(),
  ): void {
    if (fd === null) return;
    const line = JSON.stringify({ event, time: time / 1000, ...fields }) + "\n";
    try {
      writeAll(fd, line);
    } catch (error) {
      close();
      onError(
        new Error(
          `Could not write the events file "${path}": ${reasonOf(error)}; ` +
            "no further events are written to it.",
        ),
      );
    }
  }

  function writeProgress(t: TaskResult, state: TaskState, key: string, time: number): void {
    state.writtenKey = key;
    state.writtenAt = time;
    state.held = null;
    write("task_progress", taskCounters(t), time);
  }

  /** Write held-back states whose throttle window has passed (all of them with `force`). */
  function flushHeld(force: boolean): void {
    const time = clock.now();
    let wait = Number.POSITIVE_INFINITY;
    for (const state of tasks.values()) {
      if (state.held === null) continue;
      const due = state.writtenAt + throttle;
      if (force || time >= due) writeProgress(state.held, state, countersKey(state.held), time);
      else wait = Math.min(wait, due - time);
    }
    schedule(wait);
  }

  function schedule(waitMs: number): void {
    cancelTimer?.();
    cancelTimer = null;
    if (!Number.isFinite(waitMs) || fd === null) return;
    cancelTimer = clock.after(Math.max(1, Math.ceil(waitMs)), () => {
      cancelTimer = null;
      flushHeld(false);
    });
  }

  function progress(list: readonly TaskResult[], force: boolean): void {
    if (fd === null) return;
    const time = clock.now();
    let held = false;
    for (const t of list) {
      const key = countersKey(t);
      let state = tasks.get(t.id);
      if (state === undefined) {
        state = { writtenKey: "", writtenAt: Number.NEGATIVE_INFINITY, held: null };
        tasks.set(t.id, state);
      }
      if (key === state.writtenKey) {
        state.held = null;
        continue;
      }
      // A task's last state (done or abandoned) is written at once, whatever the throttle.
      if (force || t.counters.phase !== "running" || time - state.writtenAt >= throttle) {
        writeProgress(t, state, key, time);
      } else {
        state.held = t;
        held = true;
      }
    }
    if (held && cancelTimer === null) flushHeld(false);
  }

  const blockDone = options.blocks === true
    ? {
      blockDone(d: BlockDone) {
        write("block_done", {
          task: d.taskId,
          block_id: blockIdJson(d.blockId),
          index: [...d.index],
          attempt: d.attempt,
          worker: d.workerId,
          wall_seconds: d.seconds,
        });
      },
    }
    : {};

  return {
    ...blockDone,
    runStarted(list) {
      const time = clock.now();
      for (const t of list) {
        tasks.set(t.id, { writtenKey: countersKey(t), writtenAt: time, held: null });
      }
      write("run_start", { pipeline: pipelinePath, tasks: list.map(taskCounters) }, time);
    },
    progress(list) {
      progress(list, false);
    },
    blockFailed(f: BlockFailure) {
      write("block_failed", {
        task: f.taskId,
        block_id: blockIdJson(f.blockId),
        index: [...f.index],
        attempt: f.attempt,
        permanent: f.permanent,
        error: { message: f.message, stack: f.stack ?? null },
      });
    },
    notice(message) {
      write("notice", { message });
    },
    outputsReconciled(summaries) {
      for (const s of summaries) {
        write("outputs_reconciled", {
          task: s.task,
          recorded_and_present: s.recordedAndPresent,
          adopted: s.adopted,
          recorded_not_present: s.recordedNotPresent,
          recorded_changed: s.recordedChanged,
          rolled_back: s.rolledBack,
          never_built: s.neverBuilt,
          reset: s.reset,
          unexpected: s.unexpected,
          unexpected_examples: [...s.unexpectedExamples],
          staging_removed: s.stagingRemoved,
          unreadable_lines: s.unreadableLines,
        });
      }
    },
    runFinished(result) {
      flushHeld(true);
      progress(result.tasks, true);
    },
    finish(result, exitCode) {
      if (finished || fd === null) return;
      finished = true;
      flushHeld(true);
      progress(result.tasks, true);
      write("run_end", {
        outcome: outcomeWord(result.outcome),
        stopped_by: result.stoppedBy,
        exit_code: exitCode,
        seconds: result.seconds,
        tasks: result.tasks.map(taskCounters),
      });
    },
    close,
  };
}
