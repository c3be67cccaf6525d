/**
 * What a run reports while it goes and when it ends, shared by the serial and parallel runners
 * (lib/execute) and by what keeps or shows it: the tracking store's `runs.jsonl`, the outputs'
 * errors log, the report. Pure data and small pure helpers, below all of those, so that each
 * imports it downwards; the figures it names (a temporary task's bytes, a reconcile's counts,
 * the utilisation table's) are defined here too, and their makers in lib/outputs and
 * lib/execute fill them in.
 */

import type { CounterSnapshot } from "../schedule/mod.ts";
import type { BlockId } from "../blocks/mod.ts";

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

/** A block that succeeded (its outputs, if any, committed), for observers that want each one. */
export interface BlockDone {
  readonly taskId: string;
  readonly blockId: BlockId;
  readonly index: readonly number[];
  /** The attempt that succeeded, 1-based. */
  readonly attempt: number;
  /** The worker that ran it; null when it ran in the coordinator (--serial). */
  readonly workerId: number | null;
  /** Seconds the block ran (process, command or Python function). */
  readonly seconds: number;
}

export interface TaskResult {
  readonly id: string;
  readonly counters: CounterSnapshot;
  /** Blocks running right now (processing counts also those queued in a worker or committing). */
  readonly running: number;
  /** Remote workers waiting in the cluster's queue (0 without remote workers). */
  readonly queued?: number;
  /** An elastic task's workers (`launch.workers`); absent for other tasks. */
  readonly workers?: WorkerCounts;
  /** Workers that crashed, timed out or failed setup, and how many were replaced (parallel runs). */
  readonly workerFailures?: number;
  readonly restarts?: number;
  /** A temporary task's live and deleted outputs (pipelines with `temporary` tasks). */
  readonly temporary?: TemporaryStats;
}

/** An elastic task's workers: submitted and not connected, connected (or starting), let go. */
export interface WorkerCounts {
  readonly queued: number;
  readonly running: number;
  readonly released: number;
}

/**
 * What the progress line, the summary and the pacing of its task see of a temporary task
 * (`TemporaryBytes` in lib/outputs/temporary_files.ts counts it).
 */
export interface TemporaryStats {
  readonly liveBlocks: number;
  readonly liveBytes: number;
  readonly peakBytes: number;
  readonly deletedBlocks: number;
  readonly deletedBytes: number;
  readonly regenerated: number;
  /** Blocks due for deletion whose files are not removed yet. */
  readonly removing: number;
}

export type StopReason = "SIGINT" | "SIGTERM";

/** How a run ended, decided once (`outcomeOf`); `lib/cli/exit_codes.ts` maps it to an exit code. */
export type RunOutcome = "complete" | "incomplete" | "interrupted-sigint" | "interrupted-sigterm";

/** The word the events file and `runs.jsonl` use for an outcome. */
export function outcomeWord(outcome: RunOutcome): "complete" | "incomplete" | "interrupted" {
  return outcome === "interrupted-sigint" || outcome === "interrupted-sigterm"
    ? "interrupted"
    : outcome;
}

/** A stopped run is interrupted; otherwise complete when every block completed (done or skipped). */
export function outcomeOf(tasks: readonly TaskResult[], stoppedBy: StopReason | null): RunOutcome {
  if (stoppedBy === "SIGINT") return "interrupted-sigint";
  if (stoppedBy === "SIGTERM") return "interrupted-sigterm";
  return tasks.every((t) => t.counters.completed === t.counters.total) ? "complete" : "incomplete";
}

export interface RunResult {
  /** Tasks in display order. */
  readonly tasks: readonly TaskResult[];
  /** Permanently failed blocks, with their last error. */
  readonly failures: readonly BlockFailure[];
  readonly seconds: number;
  /** Set when a signal stopped the run early. */
  readonly stoppedBy: StopReason | null;
  readonly outcome: RunOutcome;
  /** Parallel runs only: where the time went. */
  readonly utilization?: UtilizationReport;
}

/** Parallel runs: where the time went, per task and per worker (lib/execute/run_stats.ts). */
export interface UtilizationReport {
  readonly wallSeconds: number;
  readonly processCpuSeconds: number;
  readonly peakRssBytes: number;
  readonly ioReadBytes: number;
  readonly ioWriteBytes: number;
  readonly tasks: readonly {
    readonly id: string;
    readonly blocks: number;
    readonly workersSpawned: number;
    readonly maxConcurrent: number;
    readonly restarts: number;
    /** Workers of the task that crashed, timed out or failed setup. */
    readonly workerFailures: number;
    readonly meanMs: number;
    readonly slopeMs: number;
    readonly busySeconds: number;
    readonly cpuSeconds: number;
    readonly wallSeconds: number;
    /** Mean minor page faults per measured block, or NaN without resource tracking. */
    readonly faultsPerBlock: number;
  }[];
  readonly workers: readonly WorkerStats[];
}

/** One worker's lifetime and work (`WorkerLifetimes` in lib/execute/run_stats.ts keeps it). */
export interface WorkerStats {
  readonly workerId: number;
  readonly taskId: string;
  readonly startedAt: number;
  endedAt: number;
  blocks: number;
  failedBlocks: number;
  cpuSeconds: number;
  /** Seconds it sat parked, idle and out of the budget (not part of its working lifetime). */
  parkedSeconds: number;
  exit: "clean" | "crashed" | "killed" | "running";
  reason?: string;
}

/**
 * What reconciling a task's outputs with its manifest and the disk found at the start of a run
 * (`reconcileTask` in lib/outputs/reconcile.ts), told to `RunObserver.outputsReconciled`.
 */
export interface ReconcileSummary {
  readonly task: string;
  readonly recordedAndPresent: number;
  readonly adopted: number;
  readonly recordedNotPresent: number;
  /** Recorded, present, but other bytes than recorded (written after the record): rebuilt. */
  readonly recordedChanged: number;
  readonly rolledBack: number;
  readonly neverBuilt: number;
  /** Blocks `blockwise reset` dropped: they run again (their old files are not unexpected). */
  readonly reset: number;
  readonly unexpected: number;
  readonly unexpectedExamples: readonly string[];
  readonly stagingRemoved: number;
  readonly unreadableLines: number;
  /** Of those, lines no blockwise append makes (see ManifestContents), with the first few numbers. */
  readonly foreignLines: readonly number[];
  readonly foreignCount: number;
  /** Blocks of a temporary task whose outputs were deleted (done, tombstoned). */
  readonly deletedTemporaries: number;
}

export interface RunObserver {
  runStarted?(tasks: readonly TaskResult[]): void;
  blockFailed?(failure: BlockFailure): void;
  /** Only observers that define it are told of each completed block (it costs per block). */
  blockDone?(done: BlockDone): void;
  /** Called after state changes; observers throttle themselves. */
  progress?(tasks: readonly TaskResult[]): void;
  notice?(message: string): void;
  /** Outputs were reconciled with the manifest and the disk at the start (one per task). */
  outputsReconciled?(summaries: readonly ReconcileSummary[]): void;
  runFinished?(result: RunResult): void;
}

/**
 * What a failure records of a thrown value: its message and stack, each followed by its
 * `cause` chain (`outer; caused by TypeError: inner`), which a wrapped error would otherwise
 * hide. Followed 8 deep at most, and never round a cycle.
 */
export function errorParts(error: unknown): { message: string; stack?: string } {
  if (!(error instanceof Error)) return { message: `non-Error value thrown: ${String(error)}` };
  let message = error.message;
  let stack = error.stack;
  const seen = new Set<unknown>([error]);
  for (let cause = error.cause, depth = 0; cause !== undefined && depth < 8; depth++) {
    if (seen.has(cause)) break;
    seen.add(cause);
    const text = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
    message += `; caused by ${text}`;
    if (stack !== undefined) {
      const causeStack = cause instanceof Error ? cause.stack ?? text : text;
      stack += `\nCaused by: ${
        causeStack.startsWith(text) ? causeStack : `${text}\n${causeStack}`
      }`;
    }
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return stack === undefined ? { message } : { message, stack };
}
