/**
 * The file protocol under the store lock (`lock.ts`): what a lock or takeover-guard file holds,
 * how one is created so that it is never half-made while its creator lives, whether its holder
 * or creator is still running, and the leftovers a killed run leaves.
 *
 * Creating `<file>` (the lock, or the guard `<lock>.takeover`): the holder's JSON is written to
 * a creator file `<file>.<pid>.<random>.new` first, which is then hard-linked to `<file>` (the
 * link fails when `<file>` exists), so `<file>` appears complete. Where the file system has no
 * hard links, `<file>` is created exclusively and written while the creator file stays beside
 * it until then: a `<file>` found empty or unreadable can then be judged by its creator files,
 * and one whose creators are all dead (pid gone on this host) is known to be half-made by a
 * killed run and is taken over at once.
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { createFailureAdvice, errorCode, isRecord, messageOf, StoreError } from "../errors.ts";

/** What a lock file holds, as JSON. */
export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  /** ISO 8601, when the lock was taken. */
  readonly started_at: string;
  readonly command: string;
}

/** The lock file's name inside a store folder. */
export const LOCK_FILE = "blockwise.lock";

/** Slack between a lock's `started_at` and this process's start when telling them apart. */
const CLOCK_SLACK_MS = 2_000;

export function parseHolder(raw: string): LockHolder | null {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return null;
  }
  if (!isRecord(value)) return null;
  const { pid, host, started_at, command } = value;
  if (typeof pid !== "number" || !Number.isSafeInteger(pid) || pid <= 0) return null;
  if (typeof host !== "string" || host === "") return null;
  if (typeof started_at !== "string" || typeof command !== "string") return null;
  return { pid, host, started_at, command };
}

/** `file`'s text and modification time, or null when it does not exist. */
export function readLockFile(
  storeDir: string,
  file: string,
): { raw: string; mtime: number } | null {
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw new StoreError(
      `Cannot read the lock file ${file} of tracking store ${storeDir}: ${messageOf(error)}`,
      storeDir,
    );
  }
  try {
    const mtime = fs.fstatSync(fd).mtimeMs;
    return { raw: fs.readFileSync(fd, "utf8"), mtime };
  } catch (error) {
    throw new StoreError(
      `Cannot read the lock file ${file} of tracking store ${storeDir}: ${messageOf(error)}`,
      storeDir,
    );
  } finally {
    fs.closeSync(fd);
  }
}

function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // ESRCH: no such process. EPERM (and anything unexpected): it exists, or we cannot tell.
    return errorCode(error) !== "ESRCH";
  }
  return !isZombie(pid);
}

/**
 * Whether `pid` has exited and waits to be reaped (Linux: state `Z` in `/proc/PID/stat`). A run
 * killed together with its parent (`timeout -s KILL`, a job script's shell) stays a zombie until
 * init reaps it, about a second here: `kill(pid, 0)` still succeeds, and a rerun started at once
 * was refused as if the dead run held the store.
 */
function isZombie(pid: number): boolean {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return false; // no /proc (not Linux), or gone meanwhile: kill(pid, 0) decided
  }
  // "PID (COMMAND) STATE ...": the command may hold spaces and parentheses; the last ")" ends it.
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z";
}

/** A lock naming this pid, taken before this process started: an earlier process's. */
function predatesThisProcess(holder: LockHolder): boolean {
  const taken = Date.parse(holder.started_at);
  const processStarted = Date.now() - process.uptime() * 1000;
  return Number.isFinite(taken) && taken < processStarted - CLOCK_SLACK_MS;
}

/**
 * Whether the process running as `pid` started after the lock was taken at `startedAt`: then it
 * is a later process that got the dead holder's pid, not the holder. Linux only (the start time
 * in `/proc/PID/stat`, in clock ticks of 1/100 s after the boot time in `/proc/stat`); false
 * wherever it cannot be told.
 */
function startedAfter(pid: number, startedAt: string): boolean {
  const taken = Date.parse(startedAt);
  if (!Number.isFinite(taken)) return false;
  let stat: string;
  let boot: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    boot = fs.readFileSync("/proc/stat", "utf8");
  } catch {
    return false;
  }
  // Fields after "PID (COMMAND) ": state is field 3, starttime field 22.
  const ticks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
  const btime = Number(/^btime (\d+)$/m.exec(boot)?.[1]);
  if (!Number.isFinite(ticks) || !Number.isFinite(btime)) return false;
  return btime * 1000 + ticks * 10 > taken + CLOCK_SLACK_MS;
}

/**
 * Whether the holder's process is running; "unknown" for a holder on another host. A live pid
 * whose process started after the lock was taken is another process (the pid was reused).
 */
export function isHolderAlive(holder: LockHolder): boolean | "unknown" {
  if (holder.host !== os.hostname()) return "unknown";
  if (holder.pid === process.pid) return !predatesThisProcess(holder);
  return isPidAlive(holder.pid) && !startedAfter(holder.pid, holder.started_at);
}

/** Points inside lock handling where a test may stop (and SIGKILL) a process. */
export type LockStep =
  /** The creator file of the lock is written; the lock does not exist yet. */
  | "lock-creator-written"
  /** Without hard links: the lock exists, still empty. */
  | "lock-created-empty"
  /** The creator file of the takeover guard is written; the guard does not exist yet. */
  | "guard-creator-written"
  /** The takeover guard is held; the stale lock is not replaced yet. */
  | "guard-created"
  /** Without hard links: the guard exists, still empty. */
  | "guard-created-empty"
  /** The stale lock is replaced by this run's; the guard is not removed yet. */
  | "lock-replaced";

export interface CreateOptions {
  /** False: create as on a file system without hard links (tests). Default true. */
  readonly hardLinks?: boolean;
  readonly onStep?: (step: LockStep) => void;
}

const LINKLESS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "EXDEV", "ENOSYS"]);

function creatorFile(file: string): string {
  return `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.new`;
}

function cannotCreate(storeDir: string, file: string, error: unknown): StoreError {
  return new StoreError(
    `Cannot create the lock file ${file} for tracking store ${storeDir}: ${
      createFailureAdvice(error, file)
    }`,
    storeDir,
  );
}

/**
 * Create `file` holding `text`, never half-made while this process lives (see the module
 * comment); false when it already exists. `steps` names the steps for `onStep`.
 */
export function createLockFile(
  storeDir: string,
  file: string,
  text: string,
  steps: { readonly written: LockStep; readonly empty: LockStep },
  options: CreateOptions = {},
): boolean {
  const creator = creatorFile(file);
  try {
    fs.writeFileSync(creator, text, { flag: "wx", mode: 0o644 });
  } catch (error) {
    fs.rmSync(creator, { force: true });
    throw cannotCreate(storeDir, file, error);
  }
  try {
    options.onStep?.(steps.written);
    if (options.hardLinks !== false) {
      try {
        fs.linkSync(creator, file);
        return true;
      } catch (error) {
        const code = errorCode(error);
        if (code === "EEXIST") return false;
        if (!LINKLESS.has(code ?? "")) throw cannotCreate(storeDir, file, error);
      }
    }
    return createExclusive(storeDir, file, text, steps.empty, options);
  } finally {
    fs.rmSync(creator, { force: true });
  }
}

function createExclusive(
  storeDir: string,
  file: string,
  text: string,
  empty: LockStep,
  options: CreateOptions,
): boolean {
  let fd: number;
  try {
    fd = fs.openSync(file, "wx", 0o644);
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    throw cannotCreate(storeDir, file, error);
  }
  try {
    options.onStep?.(empty);
    fs.writeSync(fd, text);
  } catch (error) {
    fs.closeSync(fd);
    fs.rmSync(file, { force: true });
    throw new StoreError(
      `Cannot write the lock file ${file} for tracking store ${storeDir}: ${messageOf(error)}`,
      storeDir,
    );
  }
  fs.closeSync(fd);
  return true;
}

/** The creator files beside `file` (see the module comment), with the pid each names. */
function creatorFiles(file: string): { path: string; pid: number }[] {
  const dir = path.dirname(file);
  const prefix = `${path.basename(file)}.`;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const out: { path: string; pid: number }[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.endsWith(".new")) continue;
    const match = /^(\d+)\.[a-z0-9]+\.new$/.exec(name.slice(prefix.length));
    if (match !== null) out.push({ path: path.join(dir, name), pid: Number(match[1]) });
  }
  return out;
}

/**
 * Who is making `file`, found empty or unreadable: `dead` when it has creator files and every
 * one names a process on this host that is gone (a run killed half-way, so `file` is stale
 * now); `alive` when one names a running process, or one on another host; `unknown` when there
 * is no creator file (an older blockwise, or not a lock at all).
 */
export function creatorState(file: string): "dead" | "alive" | "unknown" {
  const creators = creatorFiles(file);
  if (creators.length === 0) return "unknown";
  for (const c of creators) {
    let holder: LockHolder | null = null;
    try {
      holder = parseHolder(fs.readFileSync(c.path, "utf8"));
    } catch {
      // Removed meanwhile: that creator finished or gave up.
      continue;
    }
    if (holder === null || holder.pid !== c.pid || isHolderAlive(holder) !== false) {
      return "alive";
    }
  }
  return "dead";
}

/**
 * Remove the creator and rename files (`<lock>...new`, `<lock>...tmp`) that runs killed while
 * locking left in `storeDir`: those naming a process on this host that is gone.
 */
export function removeLeftovers(storeDir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(storeDir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!/^blockwise\.lock\.(takeover\.)?\d+\.[a-z0-9]+\.(new|tmp)$/.test(name)) continue;
    const file = path.join(storeDir, name);
    try {
      const holder = parseHolder(fs.readFileSync(file, "utf8"));
      if (holder !== null && isHolderAlive(holder) === false) fs.rmSync(file, { force: true });
    } catch {
      // Gone already, or unreadable: leave it.
    }
  }
}
