/**
 * Outputs and provenance of one run, as the run's CompletionSink in front of the tracking
 * session: at the start it resolves every task's declared outputs, reconciles them against
 * the manifest and the disk, and opens the provenance model; during the run a done block with
 * outputs is committed (group commit) before the ledger marks it done, and every done block of
 * a task with provenance records what it was made from; at the end it waits for the last
 * commits and removes this run's staging folders.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { type DependencyGraph, readsMarked } from "../graph/mod.ts";
import { InputError } from "../errors.ts";
import { makeBlock } from "../pipeline/block.ts";
import type { BlockReport, CompletionSink } from "../run/block_report.ts";
import type { PrecheckRefusal } from "./precheck_refusal.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import type { TrackingSession } from "../tracking/session.ts";
import { OutputCommitter } from "./committer.ts";
import { ManifestWriter } from "./manifest.ts";
import { claimOutputFolders } from "./output_owners.ts";
import { writeOutputLocations } from "./output_locations.ts";
import {
  checkOutputWritable,
  type OutputPlan,
  planOutputs,
  STAGING_FOLDER,
} from "./output_plan.ts";
import { ProvenanceModel } from "./provenance.ts";
import { reconcileTask } from "./reconcile.ts";
import type { ReconcileSummary, TemporaryStats } from "../run/run_types.ts";
import { crashPoint } from "./crash_points.ts";
import type { ForcedBlocks } from "./forced.ts";
import { Temporaries } from "./temporaries.ts";
import { OUTPUTS_PRESENT } from "../tracking/store.ts";
import type { SkipReason } from "../schedule/mod.ts";

export interface RunOutputsOptions {
  readonly forced: ForcedBlocks;
  /** `--keep-temp`: delete no temporary outputs in this run. */
  readonly keepTemp: boolean;
  /** Per task: temporary blocks a reader left out by `--tasks` still needs (kept). */
  readonly held?: readonly (Uint8Array | null)[];
  readonly onNotice: (message: string) => void;
}

/**
 * How long deletions that fell due wait for more to share their tombstones' write: none beyond
 * the turn of the loop, since the blocks of a commit group resolve together (2 ms kept the
 * deleted blocks on disk that much longer).
 */
const DELETION_BATCH_MS = 0;

export class RunOutputs implements CompletionSink {
  readonly plans: readonly (readonly OutputPlan[])[];
  readonly provenance: ProvenanceModel;
  readonly summaries: readonly ReconcileSummary[];
  /** Per task, positions whose recorded outputs were found missing at the start. */
  readonly missing: readonly ReadonlySet<number>[];
  readonly #pipeline: PipelineConfig;
  readonly #graph: DependencyGraph;
  readonly #session: TrackingSession;
  readonly #manifests: (ManifestWriter | null)[];
  readonly #committer: OutputCommitter;
  readonly #runId: string;
  readonly #temporaries: Temporaries | null;
  readonly #onNotice: (message: string) => void;
  #flushScheduled = false;
  #onRemoved: () => void = () => {};
  #onRenamed: ((task: number, position: number) => void) | null = null;
  readonly #quarantined = new Set<string>();
  /** Per task: whether it reads a temporary task (its blocks free their inputs at the rename). */
  readonly #readsTemporaries: readonly boolean[];

  private constructor(
    pipeline: PipelineConfig,
    graph: DependencyGraph,
    session: TrackingSession,
    plans: OutputPlan[][],
    manifests: (ManifestWriter | null)[],
    summaries: ReconcileSummary[],
    missing: ReadonlySet<number>[],
    options: RunOutputsOptions,
  ) {
    this.#pipeline = pipeline;
    this.#graph = graph;
    this.#session = session;
    this.plans = plans;
    this.#manifests = manifests;
    this.summaries = summaries;
    this.missing = missing;
    this.#runId = session.runId;
    this.#onNotice = options.onNotice;
    this.#readsTemporaries = readsMarked(graph.dag, (u) => pipeline.tasks[u]!.temporary);
    this.#committer = new OutputCommitter(session.runId);
    const stores = pipeline.tasks.map((_, t) => session.store(t));
    this.provenance = ProvenanceModel.open(pipeline, graph, stores);
    this.provenance.onDamagedDigest = (_task, warning) => options.onNotice(`warning: ${warning}`);
    const forced = options.forced;
    this.#temporaries = Temporaries.open({
      pipeline,
      graph,
      stores,
      plans,
      manifests,
      certain: (t, p) => {
        const store = stores[t] ?? null;
        if (store === null) return true;
        const cell = graph.layouts[t]!.trackingCellOf(p);
        return cell < 0 || store.done[cell] !== 1 || forced.has(t, p) ||
          !this.provenance.fresh(t, p);
      },
      keep: options.keepTemp,
      ...(options.held === undefined ? {} : { held: options.held }),
      onNotice: options.onNotice,
    });
  }

  /** Read on every dispatch to a temporary task: a counter, not a `stats` object. */
  removalBacklog(task: number): number {
    return this.#temporaries?.removing(task) ?? 0;
  }

  /** Median duration of the output commits' recent barriers (ms). */
  barrierMs(): number {
    return this.#committer.barrierMs;
  }

  onRemoved(listener: () => void): void {
    this.#onRemoved = listener;
  }

  onRenamed(listener: (task: number, position: number) => void): void {
    this.#onRenamed = listener;
  }

  /** What the progress line and summary show of a temporary task, or null. */
  temporaryStats(task: number): TemporaryStats | null {
    return this.#temporaries?.stats(task) ?? null;
  }

  /**
   * Resolve, check and reconcile every task's outputs. Refuses (InputError) outputs without a
   * tracking store, and outputs that cannot be written as declared.
   */
  static open(
    pipeline: PipelineConfig,
    graph: DependencyGraph,
    session: TrackingSession,
    options: RunOutputsOptions,
  ): RunOutputs {
    const plans = pipeline.tasks.map((task, t) => {
      if (task.outputs.length === 0) return [];
      if (session.store(t) === null) {
        throw new InputError(
          `Task "${task.id}" declares outputs, which need a tracking store (their manifest lives there); run with --tracking-dir DIR, or give the task tracking: "path/to/store".`,
        );
      }
      const planned = planOutputs(task, graph.layouts[t]!);
      for (const plan of planned) checkOutputWritable(task.id, plan);
      return planned;
    });
    // This run owns its output folders before anything there is swept or staged.
    claimOutputFolders(
      session.runId,
      pipeline.tasks.flatMap((task, t) =>
        plans[t]!.length === 0
          ? []
          : [{ taskId: task.id, store: session.store(t)!.path, plans: plans[t]! }]
      ),
    );
    const manifests: (ManifestWriter | null)[] = [];
    const summaries: ReconcileSummary[] = [];
    const missing: ReadonlySet<number>[] = [];
    pipeline.tasks.forEach((task, t) => {
      const store = session.store(t);
      if (plans[t]!.length === 0 || store === null) {
        manifests.push(null);
        missing.push(new Set());
        return;
      }
      writeOutputLocations(store.path, plans[t]!);
      const manifest = new ManifestWriter(store.path);
      manifests.push(manifest);
      const result = reconcileTask(task, graph.layouts[t]!, plans[t]!, store, manifest);
      summaries.push(result.summary);
      missing.push(result.missing);
      session.recount(t);
    });
    return new RunOutputs(pipeline, graph, session, plans, manifests, summaries, missing, options);
  }

  /**
   * The done-marker pre-check with provenance and --force on top: a done block that is stale
   * (its recipe, upstream content or inputs changed) or forced runs again.
   */
  precheck(
    task: number,
    done: ((position: number) => "done" | null) | undefined,
    forced: ForcedBlocks,
  ): ((position: number) => "done" | PrecheckRefusal | null) | undefined {
    if (done === undefined) return undefined;
    const model = this.provenance;
    const temporaries = this.#temporaries;
    const regenerate = temporaries !== null && temporaries.anyRegenerate(task);
    const quarantine = this.#quarantine(task, done, forced);
    if (
      !model.enabled(task) && !forced.any(task) && !regenerate && temporaries === null &&
      quarantine === null
    ) {
      return done;
    }
    const runs = (p: number): boolean =>
      forced.has(task, p) || (regenerate && temporaries.mustRegenerate(task, p)) ||
      done(p) !== "done" || !model.fresh(task, p);
    return (p) => {
      if (!runs(p)) return "done";
      const quarantined = quarantine?.(p) ?? null;
      if (quarantined !== null) return quarantined;
      // The start regenerates every deleted temporary a block that may run reads; a block
      // that turned stale during the run (a regenerated input came back with other content),
      // or whose commit failed after its renames freed its inputs, can still read one that is
      // deleted. It waits for the next run, which regenerates that input first (or adopts the
      // files of the block whose commit failed).
      if (temporaries === null) return null;
      const deleted = temporaries.inputsPresent(task, p);
      if (deleted === null) {
        temporaries.claim(task, p);
        return null;
      }
      if (temporaries.countedOff(task, p)) {
        return {
          refuse:
            `its commit failed after its files were in place, which freed ${deleted} and the other temporary blocks it reads; run blockwise again: the next start adopts its files if they are intact, else regenerates ${deleted} first`,
        };
      }
      return {
        refuse:
          `it became stale in this run (a temporary block it reads was regenerated with other content) and reads ${deleted}, which was deleted; run blockwise again: the next run regenerates ${deleted} first`,
      };
    };
  }

  /**
   * Whether the done marker alone says a block is done (no provenance, `--force` or
   * temporaries on top of it): a resume may then skip done blocks in bulk.
   */
  markersDecide(task: number, forced: ForcedBlocks): boolean {
    return !this.provenance.enabled(task) && !forced.any(task) && this.#temporaries === null;
  }

  /**
   * `quarantineAfter: N`: a block that is not done, not forced and has N failed attempts over
   * all runs is refused unrun (no attempt counted) until `reset --failed` or `--force`.
   */
  #quarantine(
    task: number,
    done: (position: number) => "done" | null,
    forced: ForcedBlocks,
  ): ((position: number) => PrecheckRefusal | null) | null {
    const config = this.#pipeline.tasks[task]!;
    const after = config.quarantineAfter;
    const store = this.#session.store(task);
    if (after === null || store === null) return null;
    const layout = this.#graph.layouts[task]!;
    const failures = store.failures;
    return (p) => {
      if (done(p) === "done" || forced.has(task, p)) return null;
      const cell = layout.trackingCellOf(p);
      const n = cell < 0 ? 0 : failures[cell]!;
      if (n < after) return null;
      this.#quarantined.add(`${task}:${p}`);
      return {
        refuse:
          `Quarantined: it failed ${n} attempts across runs (quarantineAfter: ${after}), so it was not run; fix the cause, then run blockwise reset ${store.path} --failed, or run with --force ${config.id}`,
      };
    };
  }

  /** Whether this run refused the block as quarantined (its failure is not an attempt). */
  wasQuarantined(task: number, position: number): boolean {
    return this.#quarantined.has(`${task}:${position}`);
  }

  /**
   * Whether a task whose every block was done at the start may skip dispatch entirely: nothing
   * of it is forced, and with provenance every block is fresh and so is every task upstream.
   */
  fullyFresh(task: number, fullyDone: (task: number) => boolean, forced: ForcedBlocks): boolean {
    const memo = new Map<number, boolean>();
    const visit = (t: number): boolean => {
      const known = memo.get(t);
      if (known !== undefined) return known;
      let ok = fullyDone(t) && !forced.any(t) && this.#temporaries?.anyRegenerate(t) !== true;
      if (ok && this.provenance.enabled(t)) {
        ok = this.#graph.dag.upstream[t]!.every((u) => !this.provenance.enabled(u) || visit(u)) &&
          this.provenance.allFreshAtStart(t, () => true);
      }
      memo.set(t, ok);
      return ok;
    };
    return visit(task);
  }

  /** Done blocks are marked only once their outputs are in place and recorded. */
  done(report: BlockReport): void | Promise<void> {
    const t = report.task;
    const manifest = this.#manifests[t] ?? null;
    if (manifest === null) {
      this.provenance.record(t, report.position, null);
      this.#session.done(report);
      this.#readerDone(t, report.position);
      return;
    }
    const commit = report.commit;
    if (commit === null) {
      return Promise.reject(
        new Error("the worker reported no outputs for a task that declares them"),
      );
    }
    const copy: BlockReport = {
      ...report,
      usage: report.usage === null ? null : report.usage.slice(),
      gpu: report.gpu == null ? null : { ...report.gpu },
    };
    const block = makeBlock(
      this.#pipeline.tasks[t]!.id,
      this.#graph.layouts[t]!,
      report.position,
      report.attempt,
    );
    const provenance = this.provenance.provenanceHash(t, report.position);
    // What it was made from goes into the (mapped) arrays now, before its commit record can be
    // durable: a kill after that record then leaves a block that is done and fresh, not one
    // that runs again for want of provenance. Until the block is done nothing reads them.
    this.provenance.record(t, report.position, commit.content);
    // A temporary task's readers start once its files are in place, a barrier before the block
    // is done: pacing keeps the task just ahead of them, so they would otherwise wait for every
    // one of its commits (docs/design/TEMPORARIES.md, Early release). Its outputs are present
    // from then on: a reader that claims it (`inputsPresent`) must not find it deleted. A
    // reader frees the temporary blocks it reads at the same step of its own commit.
    const renamed = this.#onRenamed;
    const release = renamed !== null && this.#pipeline.tasks[t]!.temporary;
    const free = this.#readsTemporaries[t]!;
    const early = release || free
      ? {
        onRenamed: () => {
          if (release) {
            this.#markPresent(t, copy.position);
            renamed(t, copy.position);
          }
          if (free) this.#readerDone(t, copy.position);
        },
      }
      : {};
    const files = commit.files.map((f) => [f.output, f.path, f.size, f.sha256] as const);
    // A temporary block's files are on disk from now on; its commit ending settles them.
    const temporaries = this.#pipeline.tasks[t]!.temporary ? this.#temporaries : null;
    temporaries?.commitStarted(t, copy.position, files);
    return this.#committer.commit({
      block,
      plans: this.plans[t]!,
      commit,
      manifest,
      provenance,
      recipe: this.provenance.recipeIndex(t),
      seconds: report.seconds,
      ...early,
    }).then(() => {
      this.#markPresent(t, copy.position);
      this.#session.done(copy);
      crashPoint("commit:done");
      temporaries?.commitEnded(t, copy.position);
      temporaries?.committed(t, copy.position, files, commit.content);
      this.#readerDone(t, copy.position);
    }, (error: unknown) => {
      temporaries?.commitEnded(t, copy.position);
      throw error;
    });
  }

  #markPresent(task: number, position: number): void {
    const store = this.#session.store(task);
    const cell = this.#graph.layouts[task]!.trackingCellOf(position);
    if (store?.provenance != null && cell >= 0) store.provenance.outputs[cell] = OUTPUTS_PRESENT;
  }

  /** A block skipped as done (or masked) no longer needs the temporaries it reads. */
  skipped(task: number, position: number, _reason: SkipReason): void {
    this.#readerDone(task, position);
  }

  #readerDone(task: number, position: number): void {
    const temporaries = this.#temporaries;
    if (temporaries === null) return;
    temporaries.readerDone(task, position);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    // Deletions that fall due in one turn share one tombstone write (one per completion would
    // cost more than the deletions themselves).
    setTimeout(() => {
      this.#flushScheduled = false;
      temporaries.flush().catch((error: unknown) =>
        this.#onNotice(
          `warning: deleting temporary outputs failed: ${
            (error as Error).message
          }; they stay, and the next run deletes them`,
        )
      ).then(() => this.#onRemoved());
    }, DELETION_BATCH_MS);
  }

  failed(report: BlockReport, permanent: boolean): void {
    // A quarantined block was not run: its refusal is no new attempt.
    if (report.workerId < 0 && this.wasQuarantined(report.task, report.position)) return;
    this.#session.failed(report, permanent);
  }

  /** Wait for the last commits, then remove this run's staging folders. */
  async close(): Promise<void> {
    await this.#committer.drain();
    await this.#temporaries?.flush();
    // The last tombstones were written without waiting for the disk.
    await Promise.all(this.#manifests.map((manifest) => manifest?.sync()));
    for (const manifest of this.#manifests) manifest?.close();
    for (let t = 0; t < this.plans.length; t++) {
      for (const base of new Set(this.plans[t]!.map((p) => p.base))) {
        const mine = path.join(base, STAGING_FOLDER, this.#runId);
        fs.rmSync(mine, { recursive: true, force: true });
        try {
          fs.rmdirSync(path.join(base, STAGING_FOLDER));
        } catch {
          // Another run's or task's staging is still there.
        }
      }
    }
  }
}
