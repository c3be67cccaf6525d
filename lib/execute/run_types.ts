/** What a run reports while it goes and when it ends, shared by the serial and parallel runners. */

import type { CounterSnapshot } from "../schedule/mod.ts";
import type { BlockId } from "../blocks/mod.ts";
import type { UtilizationReport } from "./run_stats.ts";

export interface BlockFailure {
  readonly taskId: string;
  readonly blockId: BlockId;
  readonly index: readonly number[];
  /** The attempt that failed, 1-based. */
  readonly attempt: number;
  readonly message: string;
  readonly stack?: string;
  /** True when no retry is left: the block is failed for this run. */
  readonly permanent: boolean;
}

export interface TaskResult {
  readonly id: string;
  readonly counters: CounterSnapshot;
}

export type StopReason = "SIGINT" | "SIGTERM";

export interface RunResult {
  /** Tasks in display order. */
  readonly tasks: readonly TaskResult[];
  /** Permanently failed blocks, with their last error. */
  readonly failures: readonly BlockFailure[];
  readonly seconds: number;
  /** Set when a signal stopped the run early. */
  readonly stoppedBy: StopReason | null;
  /** Parallel runs only: where the time went. */
  readonly utilization?: UtilizationReport;
}

export interface RunObserver {
  runStarted?(tasks: readonly TaskResult[]): void;
  blockFailed?(failure: BlockFailure): void;
  /** Called after state changes; observers throttle themselves. */
  progress?(tasks: readonly TaskResult[]): void;
  notice?(message: string): void;
  runFinished?(result: RunResult): void;
}

/** True when every block of every task completed (done or skipped). */
export function runSucceeded(result: RunResult): boolean {
  return result.stoppedBy === null &&
    result.tasks.every((t) => t.counters.completed === t.counters.total);
}

export function errorParts(error: unknown): { message: string; stack?: string } {
  if (error instanceof Error) {
    return error.stack === undefined
      ? { message: error.message }
      : { message: error.message, stack: error.stack };
  }
  return { message: `non-Error value thrown: ${String(error)}` };
}
