/**
 * Messages between the run loop and a block worker. Blocks travel as positions (the worker
 * rebuilds IDs and ROIs from the task layout), many per message, so dispatch is not one round
 * trip per block. A shared status array tells the main thread which block a worker is running
 * and since when, without a message: that is how timeouts and crashes are attributed to the
 * right block.
 */

import type { LayoutSpec } from "../blocks/mod.ts";

export interface InitMessage {
  readonly kind: "init";
  /** URL of the pipeline module to import. */
  readonly pipelineUrl: string;
  readonly taskId: string;
  readonly layout: LayoutSpec;
  readonly workerId: number;
  /** `STATUS_SLOTS` float64 values, see `StatusSlot`. */
  readonly status: SharedArrayBuffer;
  /** Measure CPU, RSS and I/O per block (resource tracking). */
  readonly measure: boolean;
}

export interface BlocksMessage {
  readonly kind: "blocks";
  /** Pairs of (position, attempt). */
  readonly blocks: Float64Array;
}

export interface StopMessage {
  readonly kind: "stop";
}

export type ToWorker = InitMessage | BlocksMessage | StopMessage;

export interface ReadyMessage {
  readonly kind: "ready";
}

export interface SetupFailedMessage {
  readonly kind: "setup-failed";
  readonly message: string;
  readonly stack?: string;
}

export interface BlockError {
  readonly position: number;
  readonly message: string;
  readonly stack?: string;
  readonly seconds: number;
  /** `USAGE_FIELDS` figures when measuring, else empty. */
  readonly usage: readonly number[];
}

/** Per-block figures, `USAGE_FIELDS` values per block in `usage`, aligned with `done`. */
export const USAGE_FIELDS = 6;
export const enum Usage {
  WallSeconds = 0,
  CpuSeconds = 1,
  PeakRssBytes = 2,
  IoReadBytes = 3,
  IoWriteBytes = 4,
  FinishedAt = 5,
}

/** Per-block figures measured by a worker (resource tracking). */
export interface BlockUsage {
  readonly wallSeconds: number;
  readonly cpuSeconds: number;
  readonly peakRssBytes: number;
  readonly ioReadBytes: number;
  readonly ioWriteBytes: number;
}

export function usageFromFigures(figures: ArrayLike<number> | null): BlockUsage | null {
  if (figures === null || figures.length < USAGE_FIELDS) return null;
  return {
    wallSeconds: figures[Usage.WallSeconds]!,
    cpuSeconds: figures[Usage.CpuSeconds]!,
    peakRssBytes: figures[Usage.PeakRssBytes]!,
    ioReadBytes: figures[Usage.IoReadBytes]!,
    ioWriteBytes: figures[Usage.IoWriteBytes]!,
  };
}

export interface ResultsMessage {
  readonly kind: "results";
  /** Positions that succeeded, in completion order. */
  readonly done: Float64Array;
  /** Wall seconds of each done block, aligned with `done`. */
  readonly durations: Float64Array;
  /** `USAGE_FIELDS` figures per done block, in the order of `done`; empty when not measuring. */
  readonly usage: Float64Array;
  readonly failed: readonly BlockError[];
  /** CPU seconds the worker thread used since its previous results message (NaN if unknown). */
  readonly cpuSeconds: number;
}

export interface OutputMessage {
  readonly kind: "output";
  readonly stream: "stdout" | "stderr";
  readonly text: string;
}

/** The worker is about to close itself (user code called `self.close()` or `process.exit`). */
export interface ClosingMessage {
  readonly kind: "closing";
  readonly reason: string;
}

/** Blocks handed back unstarted after a recall. */
export interface ReturnedMessage {
  readonly kind: "returned";
  readonly positions: Float64Array;
}

export type FromWorker =
  | ReturnedMessage
  | ReadyMessage
  | SetupFailedMessage
  | ResultsMessage
  | OutputMessage
  | ClosingMessage;

export const STATUS_SLOTS = 6;
export const enum StatusSlot {
  /** 1 while a block runs, 0 otherwise. */
  Running = 0,
  Position = 1,
  /** `Date.now()` when the running block started. */
  StartedAt = 2,
  BlocksDone = 3,
  /** Set to 1 by the main thread: hand back every block not started yet (the run is stopping). */
  Recall = 4,
  /** Set to 1 by the main thread when the run stops; never reset: nothing new is started. */
  Stop = 5,
}
