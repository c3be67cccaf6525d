/**
 * The tracking stores of one run: which tasks have one (opt-in exactly as seed 000 says), the
 * lock on each, the pre-check and the recorder the run loop calls, periodic flushes, and the
 * `runs.jsonl` record at the end.
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { randomUUID } from "node:crypto";
import type { TaskLayout } from "../blocks/mod.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import type { MmapKind } from "../runtime/mod.ts";
import { outcomeWord, type RunResult, type StopReason } from "../run/run_types.ts";
import { VERSION } from "../version.ts";
import { acquireStoreLock, type StoreLock } from "./lock.ts";
import { appendRunRecord } from "./runs_log.ts";
import { TrackingStore } from "./store.ts";
import { GpuFigureWriter } from "./gpu_figures.ts";
import type { BlockReport, CompletionSink } from "../run/block_report.ts";
import { recoverInterruptedMigration } from "./migrate.ts";
import { StoreError } from "../errors.ts";
import { ensureFolder, refusingSystemErrors } from "./tracking_paths.ts";
import { doneBytesOf, type DoneScan, scanDoneMarkers } from "./done_scan.ts";
import { invocation } from "../runtime/self_command.ts";

export interface TrackingOptions {
  /** `--tracking-dir`: stores at `<dir>/<task id>` for tasks without their own setting. */
  readonly trackingDir: string | null;
  /** `--resource-tracking`: for tasks that do not set `resourceTracking`. */
  readonly resourceTracking: boolean;
  readonly mmap?: MmapKind | "auto";
  /** Tasks whose stores keep per-block provenance (lib/outputs/provenance.ts). */
  readonly provenance?: (task: number) => boolean;
  readonly command?: string;
  readonly onNotice?: (message: string) => void;
  /** Milliseconds between flushes (msync or fs write-back). */
  readonly flushIntervalMs?: number;
}

/** Where a task's store lives, or null when the task is not tracked. */
export function resolveTrackingPath(
  pipeline: PipelineConfig,
  task: number,
  trackingDir: string | null,
): string | null {
  const config = pipeline.tasks[task]!;
  if (config.tracking === false) return null;
  if (typeof config.tracking === "string") {
    return path.resolve(path.dirname(pipeline.path), config.tracking);
  }
  return trackingDir === null ? null : path.join(path.resolve(trackingDir), config.id);
}

interface Tracked {
  readonly store: TrackingStore;
  readonly lock: StoreLock;
  /** Done blocks when the run started; null until `countDone` counted them. */
  doneAtStart: number | null;
}

export interface CountDoneOptions {
  /**
   * Per task, which blocks that are not done to list (the scan's `kept`), or null to list none.
   */
  readonly keep?: (task: number) => ((position: number) => boolean) | null;
  /** List at most this many blocks per task. */
  readonly limit?: number;
  /** Awaited between windows of the scan (yield, and throw to stop). */
  readonly pause?: () => Promise<void>;
}

/** Blocks recorded between two flushes that also drop the mapped pages from memory. */
const RESIDENT_CELLS = 16_384;

export class TrackingSession implements CompletionSink {
  #sinceDrop = 0;
  /** Per task, the writer of its blocks' GPU figures (made on a task's first figures). */
  readonly #gpu = new Map<number, GpuFigureWriter | null>();
  private readonly tracked: (Tracked | null)[];
  private readonly layouts: readonly TaskLayout[];
  private timer: ReturnType<typeof setInterval> | null = null;
  private readonly runId_ = randomUUID();
  private readonly startedAt = new Date();
  private closed = false;

  private constructor(
    private readonly pipeline: PipelineConfig,
    layouts: readonly TaskLayout[],
    tracked: (Tracked | null)[],
    private readonly options: TrackingOptions,
  ) {
    this.layouts = layouts;
    this.tracked = tracked;
  }

  /** Open (or create) and lock every task's store; refuses with StoreError, releasing all. */
  static async open(
    pipeline: PipelineConfig,
    layouts: readonly TaskLayout[],
    options: TrackingOptions,
  ): Promise<TrackingSession> {
    const tracked: (Tracked | null)[] = [];
    const seen = new Map<string, string>();
    const trackingDir = options.trackingDir === null ? null : path.resolve(options.trackingDir);
    try {
      for (let t = 0; t < pipeline.tasks.length; t++) {
        const task = pipeline.tasks[t]!;
        const dir = resolveTrackingPath(pipeline, t, options.trackingDir);
        if (dir === null) {
          tracked.push(null);
          continue;
        }
        const other = seen.get(dir);
        if (other !== undefined) {
          throw new StoreError(
            `Tasks "${other}" and "${task.id}" would share the tracking store ${dir}; give each task its own tracking path`,
            dir,
          );
        }
        seen.set(dir, task.id);
        if (trackingDir !== null && path.dirname(dir) === trackingDir) {
          ensureFolder(trackingDir, "the tracking directory (--tracking-dir)");
        }
        const openStore = () =>
          TrackingStore.open(dir, {
            taskId: task.id,
            layout: layouts[t]!,
            resourceTracking: task.resourceTracking ?? options.resourceTracking,
            provenance: options.provenance?.(t) === true,
            ...(options.mmap === undefined ? {} : { mmap: options.mmap }),
            ...(options.onNotice === undefined ? {} : { onNotice: options.onNotice }),
          });
        const lockStore = () =>
          acquireStoreLock(dir, {
            command: options.command ?? invocation(),
            ...(options.onNotice === undefined ? {} : { onNotice: options.onNotice }),
          });
        const recovered = refusingSystemErrors(
          dir,
          "recover an interrupted migration of the tracking store",
          () => recoverInterruptedMigration(dir),
        );
        if (recovered !== null) options.onNotice?.(recovered);
        // An existing store is locked before it is read or changed; a new one is created
        // (atomically, by rename) and then locked.
        let lock: StoreLock | null = fs.existsSync(path.join(dir, "zarr.json"))
          ? lockStore()
          : null;
        let store: TrackingStore | null = null;
        try {
          store = await openStore();
          lock ??= lockStore();
        } catch (error) {
          store?.close();
          lock?.release();
          throw error;
        }
        // A store made by this run has nothing done; others are counted by `countDone`.
        tracked.push({ store, lock, doneAtStart: store.created ? 0 : null });
      }
    } catch (error) {
      for (const t of tracked) {
        t?.store.close();
        t?.lock.release();
      }
      throw error;
    }
    const session = new TrackingSession(pipeline, layouts, tracked, options);
    session.timer = setInterval(() => session.flush(), options.flushIntervalMs ?? 2000);
    return session;
  }

  /** Names this run in runs.jsonl and in the staging folders of its outputs. */
  get runId(): string {
    return this.runId_;
  }

  /** The task's done blocks changed (reconciliation): `countDone` counts them again. */
  recount(task: number): void {
    const t = this.tracked[task];
    if (t !== null && t !== undefined) t.doneAtStart = null;
  }

  /**
   * Count the done blocks of every store not counted yet, streaming its done bytes window by
   * window (`scanDoneMarkers`), then say which tasks resume. Returns each task's scan (null for
   * tasks without a store and for stores this run created, which have nothing done).
   */
  async countDone(options: CountDoneOptions = {}): Promise<(DoneScan | null)[]> {
    const scans: (DoneScan | null)[] = [];
    for (let t = 0; t < this.tracked.length; t++) {
      const tracked = this.tracked[t];
      if (tracked === null || tracked === undefined || tracked.doneAtStart !== null) {
        scans.push(null);
        continue;
      }
      const keep = options.keep?.(t) ?? null;
      const scan = await scanDoneMarkers(doneBytesOf(tracked.store), this.layouts[t]!, {
        keep,
        ...(options.limit === undefined ? {} : { limit: options.limit }),
        ...(options.pause === undefined ? {} : { pause: options.pause }),
      });
      tracked.doneAtStart = scan.done;
      scans.push(scan);
    }
    this.announceResumes(scans);
    return scans;
  }

  /** Done blocks of the task when the run started (0 without a store). */
  doneAtStart(task: number): number {
    const t = this.tracked[task];
    if (t === null || t === undefined) return 0;
    if (t.doneAtStart === null) {
      throw new Error(`Internal error: task ${task}'s done blocks were not counted (countDone)`);
    }
    return t.doneAtStart;
  }

  store(task: number): TrackingStore | null {
    return this.tracked[task]?.store ?? null;
  }

  /** Every block of the task was done before the run started. */
  fullyDone(task: number): boolean {
    if (this.store(task) === null) return false;
    const done = this.doneAtStart(task);
    return done === this.layouts[task]!.blockCount && done > 0;
  }

  /** The done-marker pre-check for a task, or undefined when it is not tracked. */
  precheck(task: number): ((position: number) => "done" | null) | undefined {
    const store = this.store(task);
    if (store === null) return undefined;
    const layout = this.layouts[task]!;
    const done = store.done;
    return (position) => {
      const cell = layout.trackingCellOf(position);
      return cell >= 0 && done[cell] === 1 ? "done" : null;
    };
  }

  measures(task: number): boolean {
    return this.store(task)?.resourceTracking ?? false;
  }

  /** A block succeeded: its done byte is set only now (CompletionSink). */
  done(report: BlockReport): void {
    const store = this.store(report.task);
    if (store === null) return;
    const cell = this.layouts[report.task]!.trackingCellOf(report.position);
    if (cell < 0) return;
    store.recordBlock(cell, report.sentAt, report.returnedAt, report.workerId, report.usage);
    if (report.gpu != null) this.#recordGpu(report, store, cell);
    store.markDone(cell);
    this.#recorded(store);
  }

  /** The block's GPU figures (`gpu_util_pct`, `gpu_mem_bytes`), into a resource-tracking store. */
  #recordGpu(report: BlockReport, store: TrackingStore, cell: number): void {
    let writer = this.#gpu.get(report.task);
    if (writer === undefined) this.#gpu.set(report.task, writer = GpuFigureWriter.of(store));
    writer?.write(cell, report.gpu!.utilPct, report.gpu!.memBytes);
  }

  /**
   * Every RESIDENT_CELLS blocks recorded, write the store back and drop its pages from the
   * resident set, so memory follows the frontier, not the million cells written so far.
   */
  #recorded(store: TrackingStore): void {
    if (++this.#sinceDrop < RESIDENT_CELLS) return;
    this.#sinceDrop = 0;
    store.flushAndDropResident();
  }

  /** An attempt failed: counted in `failures`, kept across runs (CompletionSink). */
  failed(report: BlockReport, _permanent = false): void {
    const store = this.store(report.task);
    if (store === null) return;
    const cell = this.layouts[report.task]!.trackingCellOf(report.position);
    if (cell < 0) return;
    store.addFailure(cell);
    store.recordBlock(cell, report.sentAt, report.returnedAt, report.workerId, report.usage);
    if (report.gpu != null) this.#recordGpu(report, store, cell);
    this.#recorded(store);
  }

  flush(): void {
    for (const t of this.tracked) t?.store.flush();
  }

  /**
   * Flush, close and unlock every store and append the run record: `result` null when the run
   * never ran its loop (`stoppedBy` the signal that stopped it before, or null when it failed).
   */
  close(
    result: RunResult | null,
    exitCode: number | null,
    skipMask: (task: number) => { source: string; skipped: number } | null = () => null,
    stoppedBy: StopReason | null = null,
  ): void {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    for (let t = 0; t < this.tracked.length; t++) {
      const tracked = this.tracked[t];
      if (tracked === null || tracked === undefined) continue;
      try {
        tracked.store.flush();
        try {
          appendRunRecord(tracked.store.path, {
            ...this.runRecord(t, result, exitCode, stoppedBy),
            skip_mask: skipMask(t),
          });
        } catch (error) {
          // A run record that cannot be appended (a full disk) loses only that line of
          // `runs.jsonl`: the ledger is flushed, and every other store must still close.
          if (!(error instanceof StoreError) || this.options.onNotice === undefined) throw error;
          this.options.onNotice(`warning: ${error.message}; this run's record is missing there`);
        }
      } finally {
        tracked.store.close();
        tracked.lock.release();
      }
    }
  }

  private announceResumes(scanned: readonly (DoneScan | null)[]): void {
    for (let t = 0; t < this.tracked.length; t++) {
      const tracked = this.tracked[t];
      if (scanned[t] == null || tracked == null || !tracked.doneAtStart) continue;
      const total = this.layouts[t]!.blockCount;
      this.options.onNotice?.(
        `Task "${
          this.pipeline.tasks[t]!.id
        }": resumed, ${tracked.doneAtStart}/${total} blocks already done in ${tracked.store.path} (blockwise reset ${tracked.store.path} reprocesses them)`,
      );
    }
  }

  private runRecord(
    task: number,
    result: RunResult | null,
    exitCode: number | null,
    stoppedBy: StopReason | null,
  ): Record<string, unknown> {
    const id = this.pipeline.tasks[task]!.id;
    const counters = result?.tasks.find((r) => r.id === id)?.counters;
    const utilization = result?.utilization;
    const ended = new Date();
    return {
      kind: "run",
      run_id: this.runId_,
      task: id,
      started_at: this.startedAt.toISOString(),
      ended_at: ended.toISOString(),
      seconds: (ended.getTime() - this.startedAt.getTime()) / 1000,
      outcome: result === null
        ? stoppedBy === null ? "aborted" : "interrupted"
        : outcomeWord(result.outcome) === "interrupted"
        ? "interrupted"
        : counters !== undefined && counters.completed === counters.total
        ? "complete"
        : "incomplete",
      stopped_by: result?.stoppedBy ?? stoppedBy,
      exit_code: exitCode,
      blockwise_version: VERSION,
      host: os.hostname(),
      pid: process.pid,
      pipeline: this.pipeline.path,
      temporary: this.pipeline.tasks[task]!.temporary,
      tracking_io: this.tracked[task]?.store.mmapKind ?? null,
      // null: the run stopped before it counted them.
      done_at_start: this.tracked[task]?.doneAtStart ?? null,
      blocks: counters === undefined ? null : {
        total: counters.total,
        completed: counters.completed,
        skipped: counters.skipped,
        failed: counters.failed,
        orphaned: counters.orphaned,
        failed_attempts: counters.failedAttempts,
      },
      aggregates: utilization?.tasks.find((t) => t.id === id) ?? null,
      workers: utilization?.workers.filter((w) => w.taskId === id) ?? [],
    };
  }
}
