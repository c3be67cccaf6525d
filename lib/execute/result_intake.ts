/**
 * What comes back from executors: result batches (each record is completed through
 * `BlockCompletion`), and blocks handed back unstarted. A record for a block the executor does
 * not hold is a protocol violation: the executor is treated as crashed rather than trusted.
 */

import type { BlockSource } from "./block_source.ts";
import type { BlockCompletion } from "./completion.ts";
import { type BlockGpu, type BlockReport, Usage, USAGE_FIELDS } from "../run/block_report.ts";
import type { GpuWatch } from "./gpu_watch.ts";
import type { Dispatcher } from "./dispatch.ts";
import type { Executor } from "./executor.ts";
import {
  RECORD_POSITION,
  RECORD_SECONDS,
  RECORD_STATUS,
  type ResultsMessage,
  STATUS_DONE,
} from "./protocol/messages.ts";
import type { RunClock } from "./run_clock.ts";
import type { WorkerStats } from "../run/run_types.ts";
import type { TaskRuntime } from "./task_runtime.ts";

export class ResultIntake {
  readonly #tasks: readonly TaskRuntime[];
  readonly #completion: BlockCompletion;
  readonly #source: BlockSource;
  readonly #dispatcher: Dispatcher;
  readonly #clock: RunClock;
  readonly #workerStats: (executor: Executor) => WorkerStats;
  /** One report and one figures record, reused for every block (nothing allocated per block). */
  readonly #report: BlockReport = {
    task: 0,
    position: 0,
    attempt: 0,
    sentAt: 0,
    returnedAt: 0,
    workerId: 0,
    usage: null,
    commit: null,
    seconds: 0,
    gpu: null,
  };
  readonly #figures = new Float64Array(USAGE_FIELDS);
  readonly #gpu: GpuWatch | null;
  readonly #gpuFigures: BlockGpu = { utilPct: Number.NaN, memBytes: 0 };

  constructor(
    tasks: readonly TaskRuntime[],
    completion: BlockCompletion,
    source: BlockSource,
    dispatcher: Dispatcher,
    clock: RunClock,
    workerStats: (executor: Executor) => WorkerStats,
    gpu: GpuWatch | null = null,
  ) {
    this.#gpu = gpu;
    this.#tasks = tasks;
    this.#completion = completion;
    this.#source = source;
    this.#dispatcher = dispatcher;
    this.#clock = clock;
    this.#workerStats = workerStats;
  }

  /**
   * Complete every record of a batch. Returns null, or why the batch broke the protocol (the
   * records before the bad one are kept).
   */
  results(executor: Executor, message: ResultsMessage): string | null {
    const task = this.#tasks[executor.task]!;
    const stats = this.#workerStats(executor);
    const report = this.#report;
    report.task = executor.task;
    report.workerId = executor.id;
    report.returnedAt = this.#clock.now();
    const measured = message.stride > RECORD_SECONDS + 1;
    const gpu = this.#gpu?.of(executor) ?? null;
    // A sample now covers the tail of the batch's last block (its window ended before this).
    gpu?.sample();
    report.gpu = null;
    if (!Number.isNaN(message.cpuSeconds)) {
      task.stats.cpuSeconds += message.cpuSeconds;
      stats.cpuSeconds += message.cpuSeconds;
    }
    const { records, stride } = message;
    let errorAt = 0;
    let doneAt = 0;
    const commits = message.commits;
    let seconds = 0;
    let n = 0;
    for (let i = 0; i < message.count; i++) {
      const at = i * stride;
      const position = records[at + RECORD_POSITION]!;
      if (executor.inFlight.remove(position) < 0) {
        return `the worker reported block position ${position}, which it was not running`;
      }
      const d = records[at + RECORD_SECONDS]!;
      seconds += d;
      n++;
      task.stats.durations.add(d);
      stats.blocks++;
      report.position = position;
      report.seconds = d;
      report.commit = null;
      report.attempt = executor.inFlight.lastAttempt;
      report.sentAt = executor.inFlight.lastSentAt;
      if (measured) {
        for (let k = 0; k < USAGE_FIELDS; k++) this.#figures[k] = records[at + RECORD_SECONDS + k]!;
        report.usage = this.#figures;
        task.stats.addFaults(this.#figures[Usage.MinorFaults]!);
      } else {
        report.usage = null;
      }
      if (gpu !== null) {
        // The block's window: the worker's finished_at - wall_seconds .. finished_at (a worker
        // on this host: the same clock), else its seconds up to its return (a command block).
        const finished = measured ? this.#figures[Usage.FinishedAt]! * 1000 : Number.NaN;
        const wall = measured ? this.#figures[Usage.WallSeconds]! * 1000 : Number.NaN;
        const t1 = finished > 0 && wall >= 0 ? finished : report.returnedAt;
        const f = gpu.figures(t1 - (finished > 0 && wall >= 0 ? wall : d * 1000), t1);
        this.#gpuFigures.utilPct = f.utilPct;
        this.#gpuFigures.memBytes = f.memBytes;
        report.gpu = this.#gpuFigures;
      }
      if (records[at + RECORD_STATUS] === STATUS_DONE) {
        if (commits !== undefined) {
          const commit = commits[doneAt++]!;
          if (commit.position !== position) {
            return `the worker's outputs for block position ${commit.position} do not match its done block ${position}`;
          }
          report.commit = commit;
        }
        this.#completion.done(report);
      } else {
        const error = message.errors[errorAt++]!;
        if (error.position !== position) {
          return `the worker's error for block position ${error.position} does not match its failed block ${position}`;
        }
        stats.failedBlocks++;
        this.#completion.failed(report, error);
      }
    }
    if (n > 0) {
      task.observeMean(seconds, n);
      this.#dispatcher.resize(executor, task.meanSeconds);
    }
    return null;
  }

  /** Blocks handed back unstarted go back to the queue (keeping their `check` answer). */
  returned(executor: Executor, positions: Float64Array, count: number): string | null {
    for (let i = 0; i < count; i++) {
      const position = positions[i]!;
      if (executor.inFlight.remove(position) < 0) {
        return `the worker handed back block position ${position}, which it did not hold`;
      }
      this.#source.handBack(executor.task, position);
    }
    return null;
  }
}
