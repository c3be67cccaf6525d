/** The run loop's per-task state, shared by the executor pool, dispatch and result intake. */

import type { TaskConfig } from "../pipeline/spec.ts";
import type { Executor } from "./executor.ts";
import type { WorkerCounts } from "../run/run_types.ts";
import { TaskStats } from "./run_stats.ts";

export class TaskRuntime {
  readonly config: TaskConfig;
  readonly stats = new TaskStats();
  readonly executors = new Set<Executor>();
  /** Mean seconds per block (moving average), for batch sizing. */
  meanSeconds = Number.NaN;

  constructor(config: TaskConfig) {
    this.config = config;
  }

  /** Blocks held by the task's executors. */
  inFlight(): number {
    let n = 0;
    for (const e of this.executors) n += e.inFlight.size;
    return n;
  }

  /** Blocks running right now: an executor runs one block at a time, the oldest it holds. */
  running(): number {
    let n = 0;
    for (const e of this.executors) if (e.state === "ready" && e.inFlight.size > 0) n++;
    return n;
  }

  /** Remote workers whose batch jobs wait in the cluster's queue. */
  queued(): number {
    let n = 0;
    for (const e of this.executors) if (e.queued?.() === true) n++;
    return n;
  }

  /** An elastic task's (`launch.workers`) worker counts, or null for a fixed count. */
  workerCounts(): WorkerCounts | null {
    if (!("workers" in this.config.launch)) return null;
    const queued = this.queued();
    return { queued, running: this.executors.size - queued, released: this.stats.released };
  }

  /** Fold a batch's mean block time into the moving average. */
  observeMean(seconds: number, blocks: number): void {
    const mean = seconds / blocks;
    this.meanSeconds = Number.isNaN(this.meanSeconds) ? mean : 0.7 * this.meanSeconds + 0.3 * mean;
  }
}
