/**
 * What the parallel run loop drives: an executor runs the blocks of one task, a few in flight
 * at a time. Two kinds exist: a Web Worker running the task's `process` function
 * (`worker_executor.ts`) and a slot running the task's `command` per block
 * (`command_executor.ts`).
 */

import type { BlockError } from "./worker_protocol.ts";

export type ExecutorState = "starting" | "ready" | "dead";

export interface InFlightBlock {
  readonly attempt: number;
  /** Scheduler clock (`Date.now()`), when the block was handed to the executor. */
  readonly sentAt: number;
}

export interface ExecutorEvents {
  ready(executor: Executor): void;
  setupFailed(executor: Executor, message: string, stack: string | undefined): void;
  results(
    executor: Executor,
    done: Float64Array,
    durations: Float64Array,
    usage: Float64Array,
    failed: readonly BlockError[],
    cpuSeconds: number,
  ): void;
  /** Blocks handed back unstarted after `recall()`. */
  returned(executor: Executor, positions: Float64Array): void;
  /** The executor died unexpectedly; `reason` says how. */
  crashed(executor: Executor, reason: string): void;
  output(executor: Executor, stream: "stdout" | "stderr", text: string): void;
}

export interface Executor {
  /** Run-wide worker number (0, 1, 2, ... across all tasks). */
  readonly id: number;
  readonly task: number;
  readonly state: ExecutorState;
  /** Blocks sent and not yet reported, in the order they were sent. */
  readonly inFlight: Map<number, InFlightBlock>;
  /** How many blocks may be in flight at once. */
  window: number;
  /** Hand over blocks: pairs of (position, attempt), already recorded in `inFlight`. */
  send(blocks: readonly number[]): void;
  /** Position of the block running now, or -1. */
  runningPosition(): number;
  /** `Date.now()` when the running block started, or NaN. */
  runningSince(): number;
  /**
   * Hand back the blocks it has not started; `returned` reports them. `final` (the run is
   * stopping) also makes it start nothing it is sent later.
   */
  recall(final?: boolean): void;
  /** Ask it to finish its blocks and exit. */
  stop(): void;
  /** End it now; no event fires afterwards. */
  kill(): void;
}
