/** The one place where outcomes and errors become process exit codes (DESIGN.md section 8). */

import { CommanderError } from "commander";
import { InputError, StoreError } from "../errors.ts";
import type { RunOutcome } from "../execute/run_types.ts";

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
