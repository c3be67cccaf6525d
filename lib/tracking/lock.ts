/**
 * One writer per tracking store (DESIGN.md section 6): the file `<store>/blockwise.lock` holds
 * the owner's `LockHolder` as JSON, created so it is never half-made while its creator lives
 * (`lock_files.ts`). Zarr readers ignore unknown files, so the lock lives inside the group
 * folder; `status` only reads it (`readStoreLock`).
 *
 * A second writer is refused with a StoreError (exit 3) naming the holder's pid, host, start time
 * and command, and saying when it is safe to remove the file. A lock is stale, and is taken over
 * with a notice, when:
 * - its holder is on this host and its pid is no longer running (`kill(pid, 0)` fails with
 *   ESRCH, or the pid is a zombie not yet reaped, as a run killed with its parent is for about a
 *   second; EPERM means the pid exists), or it names this process's pid but predates this process
 *   (an earlier process that had the same pid, as happens to pid 1 in a restarted container);
 * - it is empty or not a lock (a run killed between creating and writing it, where the file
 *   system has no hard links) and either every creator file beside it names a dead process, or
 *   it is older than `CORRUPT_STALE_MS` (no creator known). One younger, with a live creator, is
 *   a run creating its lock right now: after a short wait it is refused.
 * A holder on another host cannot be checked from here and is always refused, as is this same
 * process holding the lock already (two runs in one process must not write one store).
 *
 * Taking a stale lock over happens under a short-lived guard file (`blockwise.lock.takeover`,
 * created like the lock and naming its run), so that two runs finding the same stale lock cannot
 * both win: the guard holder re-reads the lock, checks it is still the stale one it judged,
 * renames its own lock over it, then re-reads to confirm. A guard is stale, and removed, when
 * its run is gone (dead pid on this host, or this very process, which holds no guard between
 * calls), when it is half-made by a dead creator, or when it is older than `GUARD_STALE_MS`.
 *
 * A dead holder's pid reused by a later process is told apart by that process's start time
 * (Linux: after the lock's `started_at`, it is not the holder). Limits: without /proc a reused
 * pid looks alive (the refusal says to remove the file then); hosts are told apart by
 * `os.hostname()` only.
 */

import { Buffer } from "node:buffer";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { messageOf, StoreError } from "../errors.ts";
import {
  createLockFile,
  type CreateOptions,
  creatorState,
  isHolderAlive,
  LOCK_FILE,
  type LockHolder,
  parseHolder,
  readLockFile,
  removeLeftovers,
} from "./lock_files.ts";
import { ensureFolder, refusingSystemErrors } from "./tracking_paths.ts";
import { invocation } from "../runtime/self_command.ts";

export { isHolderAlive, LOCK_FILE, type LockHolder, type LockStep } from "./lock_files.ts";

export interface StoreLock {
  /** The lock file. */
  readonly path: string;
  /** What this lock wrote into it. */
  readonly holder: LockHolder;
  /** Remove the lock file if it still names this lock; idempotent, never throws for a lost lock. */
  release(): void;
  /**
   * Check that the lock file still names this lock, rewriting it when it was removed meanwhile
   * (with a notice); throws StoreError when another run holds the store now.
   */
  refresh(): void;
}

/** Time for the lock's staleness checks and its settle wait; tests inject a manual one. */
export interface LockClock {
  /** Milliseconds since the epoch, compared with lock files' modification times. */
  now(): number;
  /** Block this thread for `ms` milliseconds while another run's lock settles. */
  sleep(ms: number): void;
}

export const SYSTEM_LOCK_CLOCK: LockClock = {
  now: () => Date.now(),
  sleep(ms) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  },
};

export interface AcquireStoreLockOptions extends CreateOptions {
  /** Recorded in the lock for the refusal message; default: this process's argv. */
  readonly command?: string;
  /** Told when a stale lock is taken over or a removed lock is rewritten. */
  readonly onNotice?: (message: string) => void;
  /** Default: the system clock, sleeping synchronously. */
  readonly clock?: LockClock;
}

/** What `inspectStoreLock` found. */
export type LockState =
  | { readonly state: "free" }
  | { readonly state: "held"; readonly holder: LockHolder; readonly raw: string }
  | {
    readonly state: "corrupt";
    readonly raw: string;
    /** Last modification, ms since the epoch. */
    readonly modified_ms: number;
  };

/** An empty or unreadable lock file of no known creator older than this is stale. */
export const CORRUPT_STALE_MS = 5_000;
/** A takeover guard of no known state older than this was left by a crash during a takeover. */
export const GUARD_STALE_MS = 10_000;
/** How long to wait for a lock being created or taken over by another run to settle. */
const SETTLE_MS = 1_000;
const POLL_MS = 25;

const LOCK_STEPS = { written: "lock-creator-written", empty: "lock-created-empty" } as const;
const GUARD_STEPS = { written: "guard-creator-written", empty: "guard-created-empty" } as const;

function lockPathOf(storeDir: string): string {
  return path.join(storeDir, LOCK_FILE);
}

/** The lock file's state, without taking or changing anything. */
export function inspectStoreLock(storeDir: string): LockState {
  const file = readLockFile(storeDir, lockPathOf(storeDir));
  if (file === null) return { state: "free" };
  const holder = parseHolder(file.raw);
  if (holder === null) return { state: "corrupt", raw: file.raw, modified_ms: file.mtime };
  return { state: "held", holder, raw: file.raw };
}

/** A lock file that is empty or not a lock, as `status` reports it. */
export interface UnreadableLock {
  readonly bytes: number;
  readonly modified_at: string;
  /**
   * What the next run does: "takes it over" (its creator is gone, or it is older than
   * CORRUPT_STALE_MS), or "refuses" (a run may be writing it right now).
   */
  readonly next_run: "takes it over" | "refuses";
}

/** The store's lock file when it is empty or not a lock, else null. */
export function unreadableStoreLock(
  storeDir: string,
  now: number = Date.now(),
): UnreadableLock | null {
  const state = inspectStoreLock(storeDir);
  if (state.state !== "corrupt") return null;
  return {
    bytes: Buffer.byteLength(state.raw),
    modified_at: new Date(state.modified_ms).toISOString(),
    next_run: corruptIsStale(lockPathOf(storeDir), state.modified_ms, now)
      ? "takes it over"
      : "refuses",
  };
}

/**
 * The run writing the store right now (its lock's holder, when alive or on another host), or
 * null: read-only commands label what they read then as a moment of a live run.
 */
export function liveWriter(storeDir: string): LockHolder | null {
  const holder = readStoreLock(storeDir);
  return holder !== null && isHolderAlive(holder) !== false ? holder : null;
}

/** How read-only commands name a live writer: `pid 12 on host n1, started 2026-...`. */
export function describeLiveWriter(holder: LockHolder): string {
  return `pid ${holder.pid} on host ${holder.host}, started ${holder.started_at}`;
}

/** Who holds the store's lock, or null when it is free or the file is not a valid lock. */
export function readStoreLock(storeDir: string): LockHolder | null {
  const state = inspectStoreLock(storeDir);
  return state.state === "held" ? state.holder : null;
}

function describeHolder(holder: LockHolder): string {
  return `pid ${holder.pid} on host ${holder.host} (started ${holder.started_at}, command ${
    JSON.stringify(holder.command)
  })`;
}

function refusal(storeDir: string, lockPath: string, holder: LockHolder): StoreError {
  const here = os.hostname();
  if (holder.host === here && holder.pid === process.pid) {
    return new StoreError(
      `Tracking store ${storeDir} is already in use by this process: ${
        describeHolder(holder)
      }. Two runs in one process must not write the same store; finish the first run before starting another on this store.`,
      storeDir,
    );
  }
  const why = holder.host === here
    ? "which is still running"
    : `which cannot be checked from host ${here}`;
  return new StoreError(
    `Tracking store ${storeDir} is in use by another run: ${
      describeHolder(holder)
    }, ${why}. Wait for that run to finish, or if it is no longer running on ${holder.host}, remove ${lockPath}`,
    storeDir,
  );
}

/** Whether a guard found in place was left by a run that is gone (then it may be removed). */
function guardIsStale(guard: string, raw: string, mtime: number, now: number): boolean {
  const holder = parseHolder(raw);
  if (holder !== null) {
    // This process holds no guard between calls, so one naming it is an earlier process's.
    const ours = holder.host === os.hostname() && holder.pid === process.pid;
    if (ours || isHolderAlive(holder) === false) return true;
    if (isHolderAlive(holder) === true) return false;
  } else if (creatorState(guard) === "dead") {
    return true;
  }
  return now - mtime > GUARD_STALE_MS;
}

/**
 * Remove the stale guard that held `raw`: moved aside first, and put back if what was moved is
 * not it (another run replaced it meanwhile), so a fresh guard is never deleted.
 */
function removeStaleGuard(guard: string, raw: string): void {
  const aside = `${guard}.${process.pid}.${Math.random().toString(36).slice(2)}.gone`;
  try {
    fs.renameSync(guard, aside);
  } catch {
    return; // removed by another run already
  }
  try {
    if (fs.readFileSync(aside, "utf8") !== raw) fs.linkSync(aside, guard);
  } catch {
    // A newer guard is in place (EEXIST), or the file vanished: nothing to put back.
  } finally {
    fs.rmSync(aside, { force: true });
  }
}

type TakeoverResult = "taken" | "changed" | "busy";

/**
 * Replace the lock file, which held `staleRaw`, with `text`: under the takeover guard, only if it
 * still holds `staleRaw`, by renaming a temporary file over it; then confirm by reading it back.
 */
function takeOver(
  storeDir: string,
  lockPath: string,
  staleRaw: string,
  text: string,
  options: CreateOptions,
  clock: LockClock,
): TakeoverResult {
  const guard = `${lockPath}.takeover`;
  if (!createLockFile(storeDir, guard, text, GUARD_STEPS, options)) {
    const found = readLockFile(storeDir, guard);
    if (found === null) return "changed";
    if (!guardIsStale(guard, found.raw, found.mtime, clock.now())) return "busy";
    removeStaleGuard(guard, found.raw);
    return "changed";
  }
  options.onStep?.("guard-created");
  const tmp = `${lockPath}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    const current = readLockFile(storeDir, lockPath);
    if (current === null || current.raw !== staleRaw) return "changed";
    fs.writeFileSync(tmp, text, { flag: "wx", mode: 0o644 });
    fs.renameSync(tmp, lockPath);
    options.onStep?.("lock-replaced");
    const confirm = readLockFile(storeDir, lockPath);
    return confirm !== null && confirm.raw === text ? "taken" : "changed";
  } catch (error) {
    if (error instanceof StoreError) throw error;
    throw new StoreError(
      `Cannot take over the stale lock ${lockPath} of tracking store ${storeDir}: ${
        messageOf(error)
      }`,
      storeDir,
    );
  } finally {
    fs.rmSync(tmp, { force: true });
    fs.rmSync(guard, { force: true });
  }
}

/** Whether a lock found empty or unreadable is stale: its creator is gone, or it is old. */
function corruptIsStale(lockPath: string, modifiedMs: number, now: number): boolean {
  const creator = creatorState(lockPath);
  if (creator === "dead") return true;
  return now - modifiedMs >= CORRUPT_STALE_MS;
}

function staleNotice(storeDir: string, state: LockState, now: number): string {
  if (state.state === "held") {
    const h = state.holder;
    const which = h.pid === process.pid ? "an earlier process with this pid" : "which";
    return `Took over a stale lock on ${storeDir} left by pid ${h.pid} on host ${h.host} (started ${h.started_at}), ${which} is no longer running`;
  }
  if (state.state === "corrupt") {
    const what = state.raw.trim() === "" ? "was empty" : "was not a valid lock";
    const age = Math.round((now - state.modified_ms) / 1000);
    return `Took over a stale lock on ${storeDir}: ${LOCK_FILE} ${what} (last written ${
      new Date(state.modified_ms).toISOString()
    }, ${age} s ago), left by a run that stopped while creating it`;
  }
  return `Took over a stale lock on ${storeDir}`;
}

/**
 * Take the store's write lock, creating the store folder if it is missing. Throws StoreError when
 * another run (or this process) holds it; takes a stale lock over, telling `onNotice`.
 */
export function acquireStoreLock(
  storeDir: string,
  options: AcquireStoreLockOptions = {},
): StoreLock {
  // A read-only or full file system, or missing permissions, refuse the store (exit 3).
  return refusingSystemErrors(
    storeDir,
    "take the write lock of the tracking store",
    () => acquireLock(storeDir, options),
  );
}

function acquireLock(storeDir: string, options: AcquireStoreLockOptions): StoreLock {
  const lockPath = lockPathOf(storeDir);
  const notice = options.onNotice ?? (() => {});
  const clock = options.clock ?? SYSTEM_LOCK_CLOCK;
  ensureFolder(storeDir, "a tracking store folder");
  const holder: LockHolder = {
    pid: process.pid,
    host: os.hostname(),
    started_at: new Date().toISOString(),
    command: options.command ?? invocation(),
  };
  const text = `${JSON.stringify(holder)}\n`;
  const settleBy = clock.now() + SETTLE_MS;
  const acquired = (): StoreLock => {
    removeLeftovers(storeDir);
    return makeLock(storeDir, lockPath, holder, text, notice);
  };
  for (;;) {
    if (createLockFile(storeDir, lockPath, text, LOCK_STEPS, options)) return acquired();
    const state = inspectStoreLock(storeDir);
    const now = clock.now();
    let busy: string;
    if (state.state === "free") {
      // Released between our create and our read; a dangling symlink looks like this forever.
      busy = `${lockPath} exists but cannot be read (is it a dangling symbolic link?)`;
    } else {
      let stale: boolean;
      if (state.state === "held") {
        if (isHolderAlive(state.holder) !== false) throw refusal(storeDir, lockPath, state.holder);
        stale = true;
      } else {
        stale = corruptIsStale(lockPath, state.modified_ms, now);
      }
      const result = stale ? takeOver(storeDir, lockPath, state.raw, text, options, clock) : "busy";
      if (result === "taken") {
        notice(staleNotice(storeDir, state, now));
        return acquired();
      }
      busy = state.state === "corrupt" && !stale
        ? `its lock file ${lockPath} is ${
          state.raw.trim() === "" ? "empty" : "not a valid lock"
        } and was written ${
          Math.round(now - state.modified_ms)
        } ms ago, so another run is probably creating it right now`
        : `another run is taking over its stale lock right now (${LOCK_FILE}.takeover exists)`;
    }
    // A lock being created, released or taken over by another run right now: let it settle.
    if (clock.now() < settleBy) {
      clock.sleep(POLL_MS);
      continue;
    }
    throw new StoreError(
      `Tracking store ${storeDir} is being locked by another run: ${busy}. Try again in a few seconds; a lock file left empty is taken over automatically once its run is gone (or it is ${
        CORRUPT_STALE_MS / 1000
      } s old), a takeover guard likewise (or after ${
        GUARD_STALE_MS / 1000
      } s), or remove ${lockPath} if no other run uses this store.`,
      storeDir,
    );
  }
}

function makeLock(
  storeDir: string,
  lockPath: string,
  holder: LockHolder,
  text: string,
  notice: (message: string) => void,
): StoreLock {
  let released = false;
  const ours = (): boolean => readLockFile(storeDir, lockPath)?.raw === text;
  return {
    path: lockPath,
    holder,
    release(): void {
      if (released) return;
      released = true;
      try {
        if (ours()) fs.rmSync(lockPath, { force: true });
      } catch {
        // A lock we cannot read or remove any more is not ours to worry about at release.
      }
    },
    refresh(): void {
      if (released) throw new Error(`refresh() on the released lock ${lockPath}`);
      const state = inspectStoreLock(storeDir);
      if (state.state === "held" && state.raw === text) return;
      if (state.state === "free" && createLockFile(storeDir, lockPath, text, LOCK_STEPS)) {
        notice(`The lock file ${lockPath} had been removed while this run held it; rewrote it`);
        return;
      }
      const other = readStoreLock(storeDir);
      throw new StoreError(
        `Tracking store ${storeDir} lost its lock while this run was writing it: ${
          other === null
            ? `${lockPath} no longer names this run`
            : `it is now held by ${describeHolder(other)}`
        }. Stop one of the runs; the store may need \`rm -rf ${storeDir}\` if both wrote it.`,
        storeDir,
      );
    },
  };
}
