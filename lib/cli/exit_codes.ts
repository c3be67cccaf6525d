/** The one place where outcomes and errors become process exit codes (DESIGN.md section 8). */

import { CommanderError } from "commander";
import { createFailureAdvice, errorCode, InputError, StoreError } from "../errors.ts";
import type { RunOutcome } from "../run/run_types.ts";

export const EXIT_OK = 0;
export const EXIT_BLOCKS_FAILED = 1;
export const EXIT_INVALID_INPUT = 2;
export const EXIT_STORE_REFUSED = 3;
export const EXIT_SIGINT = 130;
export const EXIT_SIGTERM = 143;

/** A bug: an exception nobody expected (the stack is printed). */
export const EXIT_INTERNAL_ERROR = 70;

export function exitCodeForOutcome(outcome: RunOutcome): number {
  switch (outcome) {
    case "complete":
      return EXIT_OK;
    case "incomplete":
      return EXIT_BLOCKS_FAILED;
    case "interrupted-sigint":
      return EXIT_SIGINT;
    case "interrupted-sigterm":
      return EXIT_SIGTERM;
  }
}

/** Exit code of a run stopped by a signal before its loop started (or a second signal). */
export function exitCodeForSignal(signal: "SIGINT" | "SIGTERM"): number {
  return signal === "SIGINT" ? EXIT_SIGINT : EXIT_SIGTERM;
}

/** Exit code for an error that ended a command; null when it is a bug (print the stack). */
export function exitCodeForError(error: unknown): number | null {
  if (error instanceof StoreError) return EXIT_STORE_REFUSED;
  if (error instanceof InputError) return EXIT_INVALID_INPUT;
  if (error instanceof CommanderError) {
    return error.exitCode === 0 ? EXIT_OK : EXIT_INVALID_INPUT;
  }
  return null;
}

/** Error codes of a file system refusing an operation (not bugs: the machine's state). */
const FILE_SYSTEM_CODES = new Set([
  "EROFS",
  "EACCES",
  "EPERM",
  "ENOSPC",
  "EDQUOT",
  "ENOTDIR",
  "EISDIR",
  "EEXIST",
  "ENOENT",
  "ENAMETOOLONG",
  "ELOOP",
  "EMFILE",
  "ENFILE",
  "EIO",
]);

/**
 * The last line of defence for a file system refusal that no command turned into a sentence of
 * its own (a read-only or full disk, permissions, a file where a folder should be): `Cannot
 * <operation> <path>: <why and the fix>`, exit 3, instead of an internal error. Null for
 * anything else.
 */
export function fileSystemFailure(error: unknown): { message: string; code: number } | null {
  const code = errorCode(error);
  if (code === undefined || !FILE_SYSTEM_CODES.has(code)) return null;
  const fields = error as { path?: unknown; syscall?: unknown };
  if (typeof fields.path !== "string") return null;
  const operation = typeof fields.syscall === "string" ? fields.syscall : "use";
  let advice = createFailureAdvice(error, fields.path);
  if (code === "EMFILE" || code === "ENFILE") {
    advice = `too many open files (${code}). Raise the limit (ulimit -n) and run again`;
  } else if (code === "EIO") {
    advice = `the disk reported an I/O error (EIO). Check the disk and run again`;
  } else if (code === "EISDIR") {
    advice = `it is a folder, not a file (EISDIR). Move the folder away or choose another path`;
  }
  return {
    message: `Cannot ${operation} ${fields.path}: ${advice}`,
    code: EXIT_STORE_REFUSED,
  };
}
