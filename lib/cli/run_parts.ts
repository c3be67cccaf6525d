/**
 * Pieces of `blockwise run` that need nothing of its state: the summary text, the tracking I/O
 * choice and the pre-check order.
 */

import type { Precheck, PrecheckRefusal } from "../execute/mod.ts";
import type { RunResult } from "../run/run_types.ts";
import type { SkipMask } from "../masks/mod.ts";
import { formatExecutionSummary, type RunLocations } from "../report/summary.ts";
import { formatUtilization } from "../report/utilization.ts";
import { type MmapKind, nativeMmapKind } from "../runtime/mod.ts";

/**
 * What a run prints at its end: the utilisation table first (when a worker started), so that the
 * summary's verdict is the last line on the terminal.
 */
export function finalText(
  result: RunResult,
  color: boolean,
  exitCode: number,
  locations: RunLocations,
): string {
  const utilization = result.utilization;
  const table = utilization !== undefined && utilization.tasks.some((t) => t.workersSpawned > 0)
    ? "\n" + formatUtilization(utilization) + "\n"
    : "";
  return table + "\n" + summaryText(result, color, exitCode, locations) + "\n";
}

export function summaryText(
  result: RunResult,
  color: boolean,
  exitCode: number,
  locations?: RunLocations,
): string {
  return formatExecutionSummary(
    result.tasks.map((t) => ({
      id: t.id,
      counters: t.counters,
      ...(t.temporary === undefined ? {} : { temporary: t.temporary }),
    })),
    result.failures.map((f) => ({
      taskId: f.taskId,
      blockId: f.blockId,
      index: f.index,
      attempts: f.attempt,
      message: f.message,
      ...(f.stack === undefined ? {} : { stack: f.stack }),
    })),
    { color, outcome: result.outcome, exitCode, ...(locations === undefined ? {} : { locations }) },
  );
}

export function mmapKindFor(mode: "auto" | "mmap" | "fs"): MmapKind | "auto" {
  if (mode === "fs") return "fs";
  if (mode === "mmap") return nativeMmapKind();
  return "auto";
}

/** Pre-check order (DESIGN.md §6): the done marker, then the skip mask; `check` comes later. */
export function combinePrechecks(
  done: ((position: number) => "done" | PrecheckRefusal | null) | undefined,
  mask: SkipMask | null,
): Precheck | undefined {
  if (mask === null) return done;
  if (done === undefined) return (p) => (mask.isMasked(p) ? "masked" : null);
  return (p) => {
    const answer = done(p);
    // A masked block needs no inputs: the mask wins over a refusal.
    if (answer === "done") return answer;
    return mask.isMasked(p) ? "masked" : answer;
  };
}
