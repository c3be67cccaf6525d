/**
 * One writer per tracking store (DESIGN.md section 6): the file `<store>/blockwise.lock`, created
 * atomically with O_EXCL, holds the owner's `LockHolder` as JSON. Zarr readers ignore unknown
 * files, so the lock lives inside the group folder; `status` only reads it (`readStoreLock`).
 *
 * A second writer is refused with a StoreError (exit 3) naming the holder's pid, host, start time
 * and command, and saying when it is safe to remove the file. A lock is stale, and is taken over
 * with a notice, when:
 * - its holder is on this host and its pid is no longer running (`kill(pid, 0)` fails with
 *   ESRCH; EPERM means the pid exists), or it names this process's pid but predates this process
 *   (an earlier process that had the same pid, as happens to pid 1 in a restarted container);
 * - the file is empty or not a lock, and older than a few seconds: a crash between the O_EXCL
 *   create and the write. A younger one is a run creating its lock right now, so after a short
 *   wait it is refused.
 * A holder on another host cannot be checked from here and is always refused, as is this same
 * process holding the lock already (two runs in one process must not write one store).
 *
 * Taking a stale lock over happens under a short-lived O_EXCL guard file
 * (`blockwise.lock.takeover`), so that two runs finding the same stale lock cannot both win: the
 * guard holder re-reads the lock, checks it is still the stale one it judged, writes its own lock
 * to a temporary file and renames it over, then re-reads to confirm. A guard left by a crash in
 * that window (milliseconds) is removed once older than `GUARD_STALE_MS`.
 *
 * Limits: a dead holder's pid reused by an unrelated process on the same host looks alive (the
 * refusal says to remove the file in that case); hosts are told apart by `os.hostname()` only.
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { errorCode, messageOf, StoreError } from "../errors.ts";

/** The lock file's name inside a store folder. */
export const LOCK_FILE = "blockwise.lock";

/** What the lock file holds, as JSON. */
export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  /** ISO 8601, when the lock was taken. */
  readonly started_at: string;
  readonly command: string;
}

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

export interface AcquireStoreLockOptions {
  /** Recorded in the lock for the refusal message; default: this process's argv. */
  readonly command?: string;
  /** Told when a stale lock is taken over or a removed lock is rewritten. */
  readonly onNotice?: (message: string) => void;
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

/** An empty or unreadable lock file older than this is stale (a crash while creating it). */
export const CORRUPT_STALE_MS = 5_000;
/** A takeover guard older than this was left by a crash during a takeover. */
export const GUARD_STALE_MS = 10_000;
/** How long to wait for a lock being created or taken over by another run to settle. */
const SETTLE_MS = 1_000;
const POLL_MS = 25;
/** Slack between a lock's `started_at` and this process's start when telling them apart. */
const CLOCK_SLACK_MS = 2_000;

function lockPathOf(storeDir: string): string {
  return path.join(storeDir, LOCK_FILE);
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function parseHolder(raw: string): LockHolder | null {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  const { pid, host, started_at, command } = v;
  if (typeof pid !== "number" || !Number.isSafeInteger(pid) || pid <= 0) return null;
  if (typeof host !== "string" || host === "") return null;
  if (typeof started_at !== "string" || typeof command !== "string") return null;
  return { pid, host, started_at, command };
}

function readLockFile(storeDir: string, lockPath: string): { raw: string; mtime: number } | null {
  let fd: number;
  try {
    fd = fs.openSync(lockPath, "r");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw new StoreError(
      `Cannot read the lock file ${lockPath} of tracking store ${storeDir}: ${messageOf(error)}`,
      storeDir,
    );
  }
  try {
    const mtime = fs.fstatSync(fd).mtimeMs;
    return { raw: fs.readFileSync(fd, "utf8"), mtime };
  } catch (error) {
    throw new StoreError(
      `Cannot read the lock file ${lockPath} of tracking store ${storeDir}: ${messageOf(error)}`,
      storeDir,
    );
  } finally {
    fs.closeSync(fd);
  }
}

/** The lock file's state, without taking or changing anything. */
export function inspectStoreLock(storeDir: string): LockState {
  const file = readLockFile(storeDir, lockPathOf(storeDir));
  if (file === null) return { state: "free" };
  const holder = parseHolder(file.raw);
  if (holder === null) return { state: "corrupt", raw: file.raw, modified_ms: file.mtime };
  return { state: "held", holder, raw: file.raw };
}

/** Who holds the store's lock, or null when it is free or the file is not a valid lock. */
export function readStoreLock(storeDir: string): LockHolder | null {
  const state = inspectStoreLock(storeDir);
  return state.state === "held" ? state.holder : null;
}

function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // ESRCH: no such process. EPERM (and anything unexpected): it exists, or we cannot tell.
    return errorCode(error) !== "ESRCH";
  }
}

/** Whether the holder's process is running; "unknown" for a holder on another host. */
export function isHolderAlive(holder: LockHolder): boolean | "unknown" {
  if (holder.host !== os.hostname()) return "unknown";
  if (holder.pid === process.pid) return !predatesThisProcess(holder);
  return isPidAlive(holder.pid);
}

/** A lock naming this pid, taken before this process started: an earlier process's. */
function predatesThisProcess(holder: LockHolder): boolean {
  const taken = Date.parse(holder.started_at);
  const processStarted = Date.now() - process.uptime() * 1000;
  return Number.isFinite(taken) && taken < processStarted - CLOCK_SLACK_MS;
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

/**
 * Create `lockPath` holding `text`, atomically and never empty: the text goes to a temporary
 * file first, which is then hard-linked to the lock's name (the link fails when the lock
 * exists). A run killed at any moment leaves either no lock or a complete one. Falls back to an
 * exclusive create where the filesystem has no hard links.
 */
function tryCreate(storeDir: string, lockPath: string, text: string): boolean {
  const tmp = `${lockPath}.${process.pid}.${Math.random().toString(36).slice(2)}.new`;
  try {
    fs.writeFileSync(tmp, text, { flag: "wx", mode: 0o644 });
    fs.linkSync(tmp, lockPath);
    return true;
  } catch (error) {
    const code = errorCode(error);
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "EXDEV") {
      throw new StoreError(
        `Cannot create the lock file ${lockPath} for tracking store ${storeDir}: ${
          messageOf(error)
        }. Check that the folder is writable.`,
        storeDir,
      );
    }
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  return tryCreateExclusive(storeDir, lockPath, text);
}

function tryCreateExclusive(storeDir: string, lockPath: string, text: string): boolean {
  let fd: number;
  try {
    fd = fs.openSync(lockPath, "wx", 0o644);
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    throw new StoreError(
      `Cannot create the lock file ${lockPath} for tracking store ${storeDir}: ${
        messageOf(error)
      }. Check that the folder is writable.`,
      storeDir,
    );
  }
  try {
    fs.writeSync(fd, text);
  } catch (error) {
    fs.closeSync(fd);
    fs.rmSync(lockPath, { force: true });
    throw new StoreError(
      `Cannot write the lock file ${lockPath} for tracking store ${storeDir}: ${messageOf(error)}`,
      storeDir,
    );
  }
  fs.closeSync(fd);
  return true;
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
): TakeoverResult {
  const guard = `${lockPath}.takeover`;
  // The guard names its holder (written atomically like the lock), so a guard left by a run
  // killed mid-takeover is recognised as stale at once instead of blocking for a while.
  if (!tryCreate(storeDir, guard, text)) {
    try {
      const holder = parseHolder(fs.readFileSync(guard, "utf8"));
      const dead = holder !== null && holder.host === os.hostname() && holder.pid !== process.pid &&
        isHolderAlive(holder) === false;
      if (dead || Date.now() - fs.statSync(guard).mtimeMs > GUARD_STALE_MS) {
        fs.rmSync(guard, { force: true });
        return "changed";
      }
    } catch (statError) {
      if (errorCode(statError) === "ENOENT") return "changed";
      throw statError;
    }
    return "busy";
  }
  const tmp = `${lockPath}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    const current = readLockFile(storeDir, lockPath);
    if (current === null || current.raw !== staleRaw) return "changed";
    fs.writeFileSync(tmp, text, { flag: "wx", mode: 0o644 });
    fs.renameSync(tmp, lockPath);
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
  const lockPath = lockPathOf(storeDir);
  const notice = options.onNotice ?? (() => {});
  try {
    fs.mkdirSync(storeDir, { recursive: true });
  } catch (error) {
    throw new StoreError(
      `Cannot create the tracking store folder ${storeDir}: ${messageOf(error)}`,
      storeDir,
    );
  }
  const holder: LockHolder = {
    pid: process.pid,
    host: os.hostname(),
    started_at: new Date().toISOString(),
    command: options.command ?? process.argv.join(" "),
  };
  const text = `${JSON.stringify(holder)}\n`;
  const settleBy = Date.now() + SETTLE_MS;
  for (;;) {
    if (tryCreate(storeDir, lockPath, text)) {
      return makeLock(storeDir, lockPath, holder, text, notice);
    }
    const state = inspectStoreLock(storeDir);
    const now = Date.now();
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
        stale = now - state.modified_ms >= CORRUPT_STALE_MS;
      }
      const result = stale ? takeOver(storeDir, lockPath, state.raw, text) : "busy";
      if (result === "taken") {
        notice(staleNotice(storeDir, state, now));
        return makeLock(storeDir, lockPath, holder, text, notice);
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
    if (Date.now() < settleBy) {
      sleepSync(POLL_MS);
      continue;
    }
    throw new StoreError(
      `Tracking store ${storeDir} is being locked by another run: ${busy}. Try again in a few seconds; a lock file left empty is taken over automatically once it is ${
        CORRUPT_STALE_MS / 1000
      } s old (a takeover guard after ${
        GUARD_STALE_MS / 1000
      } s, or at once when its run is gone), or remove ${lockPath} if no other run uses this store.`,
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
      if (state.state === "free" && tryCreate(storeDir, lockPath, text)) {
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
