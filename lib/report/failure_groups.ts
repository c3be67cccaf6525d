/**
 * Identical failures, told once: a task whose blocks all fail the same way (a missing file, a
 * misconfigured model) would print a line per block per attempt. On the terminal the first
 * failure with a message is printed in full, the next few as `same error as task/39`, then
 * they are only counted, and the run's end says how many more there were. (The summary lists
 * each distinct error once: `groupFailures` in summary.ts.)
 */

import type { BlockFailure } from "../run/run_types.ts";
import { firstLine, formatFailureLine, paint } from "./progress_format.ts";

/** Repeats of one error printed as a short line before the rest are only counted. */
export const REPEATS_SHOWN = 3;

interface Group {
  /** The block whose failure was printed in full, e.g. `threshold/39`. */
  first: string;
  /** Blocks that failed for good with this error. */
  failed: number;
  /** Of them, not printed. */
  hidden: number;
  /** A failure for good with this error was printed in full (not only a retry). */
  shownInFull: boolean;
}

function keyOf(taskId: string, message: string): string {
  return `${taskId}\u0000${firstLine(message)}`;
}

/** The terminal side: what to print for each failed attempt, and what is left at the end. */
export class RepeatedFailures {
  readonly #groups = new Map<string, Group>();

  /** The line for this failed attempt, or null when it only adds to a count. */
  line(f: BlockFailure, color: boolean): string | null {
    const key = keyOf(f.taskId, f.message);
    const name = `${f.taskId}/${f.blockId}`;
    let group = this.#groups.get(key);
    if (group === undefined) {
      group = { first: name, failed: 0, hidden: 0, shownInFull: false };
      this.#groups.set(key, group);
    } else if (!f.permanent) {
      return null; // a retry of an error already shown
    }
    if (!f.permanent) return formatFailureLine(f, color);
    group.failed++;
    if (!group.shownInFull) {
      group.shownInFull = true;
      group.first = name;
      return formatFailureLine(f, color);
    }
    if (group.failed > REPEATS_SHOWN + 1) {
      group.hidden++;
      return null;
    }
    const attempts = f.attempt === 1 ? "1 attempt" : `${f.attempt} attempts`;
    return `${paint("✗", "red", color)} ${name} (${
      f.index.join(", ")
    }) failed after ${attempts}: same error as ${group.first}`;
  }

  /** One line per error whose repeats were only counted. */
  closing(color: boolean): string[] {
    const lines: string[] = [];
    for (const [key, group] of this.#groups) {
      if (group.hidden === 0) continue;
      const task = key.slice(0, key.indexOf("\u0000"));
      lines.push(
        `${paint("✗", "red", color)} ${group.hidden} more block${
          group.hidden === 1 ? "" : "s"
        } of "${task}" failed with the same error as ${group.first} (${group.failed} in all)`,
      );
    }
    return lines;
  }
}
