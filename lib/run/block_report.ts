/**
 * What the places that keep a block's outcome learn of each block: the `CompletionSink` the
 * tracking store and the output manifest implement, and the `BlockReport` the run loop hands
 * it (`BlockCompletion` in lib/execute/completion.ts is its one caller), with the resource
 * figures a worker measured (`Usage` order) and the files the block staged (`BlockCommit`).
 * Pure data, below tracking, outputs and execute, which all speak it.
 */

import type { SkipReason } from "../schedule/mod.ts";

/** One staged file: its output, its path below the output's base (`/`-separated), size, hash. */
export interface StagedFile {
  readonly output: string;
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
}

/** What a block's successful attempt produced, reported with its result. */
export interface BlockCommit {
  readonly position: number;
  readonly files: readonly StagedFile[];
  /** SHA-256 over the sorted "output/path" of every file and that file's SHA-256. */
  readonly content: string;
}

/**
 * Per-block figures (resource tracking), in this order in a worker's result records from
 * `RECORD_SECONDS` (lib/execute/protocol/messages.ts) and in `BlockReport.usage`.
 */
export const USAGE_FIELDS = 7;
export const enum Usage {
  WallSeconds = 0,
  CpuSeconds = 1,
  PeakRssBytes = 2,
  IoReadBytes = 3,
  IoWriteBytes = 4,
  FinishedAt = 5,
  /** Minor page faults of the worker's thread (or process) during the block; NaN if unknown. */
  MinorFaults = 6,
}

/** Per-block figures measured by a worker (resource tracking), by name. */
export interface BlockUsage {
  readonly wallSeconds: number;
  readonly cpuSeconds: number;
  readonly peakRssBytes: number;
  readonly ioReadBytes: number;
  readonly ioWriteBytes: number;
}

/**
 * A block's GPU figures (docs/design/GPU.md): the mean utilisation of the worker's devices over
 * the block (NaN: not read) and the peak device memory of its process (0: not read).
 */
export interface BlockGpu {
  utilPct: number;
  memBytes: number;
}

/**
 * What the sink learns about one block. The run loop reuses one report object: it is valid only
 * during the call, so a sink keeps copies of what it needs.
 */
export interface BlockReport {
  task: number;
  position: number;
  /** 1-based attempt that finished. */
  attempt: number;
  /** Run clock (ms) when the block was handed to an executor, and when its result came back. */
  sentAt: number;
  returnedAt: number;
  /** Run-wide worker number, or -1 (serial runs). */
  workerId: number;
  /** The `Usage` figures of the attempt (resource tracking), or null. */
  usage: Float64Array | null;
  /** What a block with declared outputs staged (its files and hashes), or null. */
  commit: BlockCommit | null;
  /** Seconds the attempt ran (wall time). */
  seconds: number;
  /**
   * Its GPU figures, when the run reads them for its worker (resource tracking of a task that
   * requires GPUs, NVML open); absent or null otherwise.
   */
  gpu?: BlockGpu | null;
}

/** Where outcomes are kept (the tracking store, later the output manifest). */
export interface CompletionSink {
  /**
   * A block succeeded. Return a promise to hold it in `processing` until its completion is
   * durable; a rejection fails the attempt with the rejection's message.
   */
  done(report: BlockReport): void | Promise<void>;
  /** An attempt failed; `permanent` when no retry is left. */
  failed(report: BlockReport, permanent: boolean): void;
  skipped?(task: number, position: number, reason: SkipReason): void;
  /**
   * `count` blocks a resume skipped in bulk (never handed out, never visited one by one). A
   * sink that must see each skipped block keeps the run from skipping in bulk instead.
   */
  skippedInBulk?(task: number, count: number, reason: SkipReason): void;
  orphaned?(task: number, position: number): void;
  /** Blocks of a temporary task due for deletion whose files are not removed yet. */
  removalBacklog?(task: number): number;
  /** Median duration of the recent commit barriers, in ms (0: none, or nothing to commit). */
  barrierMs?(): number;
  /** Call `listener` after each batch of removals (pacing may let a temporary task go on). */
  onRemoved?(listener: () => void): void;
  /**
   * Call `listener` when a block's outputs are in place for its readers, before its completion
   * is durable: its downstream is released then, and nothing more when it succeeds.
   */
  onRenamed?(listener: (task: number, position: number) => void): void;
}
