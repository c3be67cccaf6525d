/**
 * Folders a run needs before it can create or lock a store (a `--tracking-dir`, a task's
 * tracking path, a store's parent), and how a failure of the file system becomes a refusal
 * that names the path and the fix (StoreError, exit 3) instead of an internal error.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { createFailureAdvice, errorCode, StoreError } from "../errors.ts";

/** The nearest of `dir` and its parents that exists, or null. */
function nearestExisting(dir: string): { path: string; stat: fs.Stats } | null {
  for (let p = path.resolve(dir);; p = path.dirname(p)) {
    try {
      return { path: p, stat: fs.statSync(p) };
    } catch {
      if (path.dirname(p) === p) return null;
    }
  }
}

/**
 * Make sure `dir` is a folder, creating it and its parents when missing. `role` says what it
 * is for in the message, e.g. `the tracking directory (--tracking-dir)`. StoreError when it is
 * a file, sits below a file, or cannot be created (permissions, read-only or full disk).
 */
export function ensureFolder(dir: string, role: string): void {
  const abs = path.resolve(dir);
  const found = nearestExisting(abs);
  if (found !== null && !found.stat.isDirectory()) {
    const where = found.path === abs ? `${abs} is a file` : `${found.path}, above it, is a file`;
    throw new StoreError(
      `Cannot use ${abs} as ${role}: ${where}, not a folder. Choose a folder (it is created if missing), or move the file away`,
      abs,
    );
  }
  if (found?.path === abs) return;
  try {
    fs.mkdirSync(abs, { recursive: true });
  } catch (error) {
    throw new StoreError(
      `Cannot create ${role} ${abs}: ${createFailureAdvice(error, abs)}`,
      abs,
    );
  }
}

/**
 * Run `action`; a system error from the file system (an error with a code such as EACCES)
 * becomes a StoreError saying what failed on `dir` and how to fix it. Anything else (a bug)
 * passes through.
 */
export function refusingSystemErrors<T>(dir: string, what: string, action: () => T): T {
  try {
    return action();
  } catch (error) {
    if (error instanceof StoreError || errorCode(error) === undefined) throw error;
    throw new StoreError(`Cannot ${what} ${dir}: ${createFailureAdvice(error, dir)}`, dir);
  }
}
