/**
 * Temporary intermediates (`temporary: true`), freed block by block. A temporary block's
 * outputs are deleted once every block that reads it (every block of a downstream task whose
 * read ROI meets its write ROI) has committed, in this run or an earlier one: a spatial
 * reference count. The deletion is a tombstone in the manifest that keeps the content hash, so
 * the readers' provenance still matches and nothing is rebuilt for it (Drake's rule, without
 * timestamps).
 *
 * When a reader must run again (new, stale, output missing, forced), exactly the deleted
 * temporary blocks it reads are regenerated first, recursively through temporary tasks; the
 * start of the run finds them (`plan`): every block that will or may run (certain to run, and
 * everything downstream of those, whose upstream content may change) asks for the deleted
 * temporary blocks it reads. Regenerated blocks are deleted again once their readers commit.
 * A regenerated block whose content differs from its tombstone is reported as
 * non-deterministic; its readers then see a changed upstream digest and are stale. A stale
 * reader that also reads a block which stayed deleted cannot run in this run (RunOutputs
 * refuses it); the manifest records the task as non-deterministic, and from then on the start
 * regenerates, for every regenerated block of it, the inputs of all its readers too, so the
 * next run completes instead of moving the staleness one block further each run.
 */

import { type DependencyGraph, PositionList } from "../graph/mod.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { OUTPUTS_DELETED, OUTPUTS_PRESENT, type TrackingStore } from "../tracking/store.ts";
import { crashPoint } from "./crash_points.ts";
import type { ManifestFile, ManifestWriter } from "./manifest.ts";
import { indexKey, readManifest } from "./manifest.ts";
import type { OutputPlan } from "./output_plan.ts";
import { blocksThatMayRun } from "./may_run.ts";
import { finalLocation } from "./staging.ts";
import { bytesOf, OutputRemover, TemporaryBytes } from "./temporary_files.ts";
import type { TemporaryStats } from "../run/run_types.ts";

/** What temporaries read of a store (a run's mapped store, or plan's snapshot). */
export type TemporaryStore = Pick<TrackingStore, "path" | "done" | "provenance">;
/** Where tombstones go: a store's manifest writer (plan passes one that is never called). */
export type TombstoneLog = Pick<ManifestWriter, "append" | "write">;

interface TempTask {
  readonly task: number;
  readonly store: TemporaryStore;
  readonly manifest: TombstoneLog;
  readonly plans: readonly OutputPlan[];
  /** Readers of each block that have not committed yet (-1: not live, nothing to count). */
  readonly remaining: Int32Array;
  /** Bytes and files of each live block (from the manifest, or its commit in this run). */
  readonly files: Map<number, readonly ManifestFile[]>;
  /** Blocks regenerated in this run (they were deleted temporaries a reader needs). */
  readonly regenerate: Uint8Array;
  /** Content hash recorded when each regenerated block was deleted. */
  readonly tombstones: Map<number, string>;
  /** Bytes each regenerated block had when it was deleted. */
  readonly tombstoneBytes: Map<number, number>;
  /** Content hash of each live block (kept in its tombstone when it is deleted). */
  readonly contents: Map<number, string>;
  /** Regenerated blocks may come back with other content (recorded in the manifest). */
  nondeterministic: boolean;
  readonly bytes: TemporaryBytes;
  regenerated: number;
  removing: number;
}

export interface TemporariesOptions {
  readonly pipeline: PipelineConfig;
  readonly graph: DependencyGraph;
  readonly stores: readonly (TemporaryStore | null)[];
  readonly plans: readonly (readonly OutputPlan[])[];
  readonly manifests: readonly (TombstoneLog | null)[];
  /** Blocks that will run in this run whatever happens upstream (not done, stale, forced). */
  readonly certain: (task: number, position: number) => boolean;
  /** `--keep-temp`: delete nothing in this run. */
  readonly keep: boolean;
  /**
   * Per task: blocks a reader left out of the run (`--tasks`) still needs; they stay
   * (lib/outputs/outside_readers.ts). Absent: the run has every task.
   */
  readonly held?: readonly (Uint8Array | null)[];
  readonly onNotice: (message: string) => void;
}

export class Temporaries {
  readonly #o: TemporariesOptions;
  readonly #tasks: (TempTask | null)[];
  #pending: { t: TempTask; position: number }[] = [];
  /** The deletions in progress, one batch after another. */
  #flushes: Promise<void> = Promise.resolve();

  private constructor(o: TemporariesOptions, tasks: (TempTask | null)[]) {
    this.#o = o;
    this.#tasks = tasks;
  }

  /** The temporaries of a run, or null when no task is temporary. */
  static open(o: TemporariesOptions): Temporaries | null {
    const { pipeline, graph } = o;
    if (!pipeline.tasks.some((t) => t.temporary)) return null;
    const tasks = pipeline.tasks.map((task, t): TempTask | null => {
      const store = o.stores[t] ?? null;
      const manifest = o.manifests[t] ?? null;
      if (!task.temporary || store === null || store.provenance === null || manifest === null) {
        return null;
      }
      const n = graph.layouts[t]!.blockCount;
      return {
        task: t,
        store,
        manifest,
        plans: o.plans[t]!,
        remaining: new Int32Array(n).fill(-1),
        files: new Map(),
        regenerate: new Uint8Array(n),
        tombstones: new Map(),
        contents: new Map(),
        tombstoneBytes: new Map(),
        nondeterministic: readManifest(store.path).nondeterministic,
        bytes: new TemporaryBytes(),
        regenerated: 0,
        removing: 0,
      };
    });
    const temporaries = new Temporaries(o, tasks);
    temporaries.#start();
    return temporaries;
  }

  /** A done block of a temporary task whose deleted outputs a reader needs in this run. */
  mustRegenerate(task: number, position: number): boolean {
    return this.#tasks[task]?.regenerate[position] === 1;
  }

  /** Whether every temporary block `task`/`position` reads has its outputs in place. */
  inputsPresent(task: number, position: number): string | null {
    // Counted as a reader and not counted off: what it reads was regenerated or is held for it.
    if (this.#mayRun[task]![position] === 1) return null;
    let missing: string | null = null;
    this.#o.graph.forEachUpstream(task, position, (u, p) => {
      if (missing !== null || u === task) return;
      const m = this.#tasks[u] ?? null;
      if (m === null) return;
      const cell = this.#o.graph.layouts[u]!.trackingCellOf(p);
      if (cell >= 0 && m.store.provenance!.outputs[cell] === OUTPUTS_DELETED) {
        missing = `${this.#o.pipeline.tasks[u]!.id}/${
          String(this.#o.graph.layouts[u]!.blockIdOf(p))
        }`;
      }
    });
    return missing;
  }

  /**
   * A block about to run, every input in place, that holds no count on them (the start did not
   * count it: it turned stale; or a retry after its commit failed past its renames): count it.
   */
  claim(task: number, position: number): void {
    const mayRun = this.#mayRun[task]!;
    if (mayRun[position] === 1) return;
    mayRun[position] = 1;
    this.#o.graph.forEachUpstream(task, position, (u, p) => {
      if (u === task) return;
      const m = this.#tasks[u] ?? null;
      if (m !== null && m.remaining[p]! >= 0) m.remaining[p] = m.remaining[p]! + 1;
    });
  }

  /** Whether the block was counted off what it reads (`readerDone`): a retry after its commit. */
  countedOff(task: number, position: number): boolean {
    return this.#mayRun[task]![position] === 2;
  }

  stats(task: number): TemporaryStats | null {
    const m = this.#tasks[task] ?? null;
    return m === null ? null : m.bytes.stats(m.regenerated, m.removing);
  }

  /** A block of a temporary task began its commit: its files count as on disk from now on. */
  commitStarted(task: number, position: number, files: readonly ManifestFile[]): void {
    this.#tasks[task]?.bytes.staging(position, files);
  }

  /** Its commit ended, done (`committed` follows) or failed. */
  commitEnded(task: number, position: number): void {
    this.#tasks[task]?.bytes.settled(position);
  }

  /** Blocks of the task due for deletion whose files are not removed yet (read by pacing). */
  removing(task: number): number {
    return this.#tasks[task]?.removing ?? 0;
  }

  /** A block of a temporary task committed its outputs (new, or regenerated). */
  committed(task: number, position: number, files: readonly ManifestFile[], content: string): void {
    const m = this.#tasks[task] ?? null;
    if (m === null) return;
    const before = m.tombstones.get(position);
    if (before !== undefined && before !== content) {
      m.manifest.append([{
        t: "nondeterministic",
        index: this.#o.graph.layouts[task]!.gridIndexOf(position),
        was: before,
        now: content,
      }]);
      m.nondeterministic = true;
      this.#o.onNotice(
        `warning: Task "${this.#o.pipeline.tasks[task]!.id}": block ${
          String(this.#o.graph.layouts[task]!.blockIdOf(position))
        } was regenerated with other content than before it was deleted (non-deterministic output); the blocks reading it are stale and run again (those that read another deleted temporary block in the next run, which regenerates it first)`,
      );
    }
    if (m.regenerate[position] === 1 && m.tombstones.has(position)) {
      // Live again: no longer among the deleted.
      m.regenerated++;
      m.bytes.deleted(m.tombstoneBytes.get(position) ?? 0, -1);
    }
    if (m.remaining[position]! < 0) {
      m.remaining[position] = this.#readersToCome(task, position);
      m.bytes.live(files, +1);
    }
    m.files.set(position, files);
    m.contents.set(position, content);
    if (m.remaining[position] === 0) this.#delete(m, position);
  }

  /** Whether a task has deleted blocks to regenerate in this run (it cannot skip dispatch). */
  anyRegenerate(task: number): boolean {
    const m = this.#tasks[task] ?? null;
    return m !== null && m.regenerate.includes(1);
  }

  /** A reader's files reached their place, or it was found done and fresh: count it off once. */
  readerDone(task: number, position: number): void {
    const mayRun = this.#mayRun[task]!;
    if (mayRun[position] !== 1) return;
    mayRun[position] = 2;
    const { graph } = this.#o;
    const read = this.#read;
    for (const u of graph.dag.upstream[task]!) {
      const m = this.#tasks[u] ?? null;
      if (m === null) continue;
      graph.upstreamBlocksOf(task, position, u, read);
      for (let i = 0; i < read.length; i++) {
        const p = read.positions[i]!;
        const left = m.remaining[p]!;
        if (left <= 0) continue;
        m.remaining[p] = left - 1;
        if (left === 1) this.#delete(m, p);
      }
    }
  }

  /** Scratch lists of the blocks a block reads and of those that read it. */
  readonly #read = new PositionList();
  readonly #readers = new PositionList();
  /** Removes the files of each deletion batch. */
  readonly #remover = new OutputRemover();

  /**
   * Delete what fell due: tombstones appended (their fsync off the run loop), then the files
   * removed. Batches run one after another; the promise settles when this one is done.
   */
  flush(): Promise<void> {
    const next = this.#flushes.then(async () => {
      const due = this.#pending;
      this.#pending = [];
      try {
        await this.#flushOnce(due);
      } finally {
        for (const { t } of due) t.removing--;
      }
    });
    this.#flushes = next.catch(() => {});
    return next;
  }

  async #flushOnce(due: readonly { t: TempTask; position: number }[]): Promise<void> {
    // A block claimed since it fell due (a reader that turned stale) stays.
    const batch = due.filter(({ t, position }) => t.remaining[position] === 0);
    if (batch.length === 0) return;
    const layouts = this.#o.graph.layouts;
    for (const { t, position } of batch) {
      // Being deleted: no reader may claim it any more, and one that asks finds it gone.
      t.remaining[position] = -1;
      const cell = layouts[t.task]!.trackingCellOf(position);
      if (cell >= 0) t.store.provenance!.outputs[cell] = OUTPUTS_DELETED;
    }
    crashPoint("temp:due");
    const byManifest = new Map<TombstoneLog, { t: TempTask; position: number }[]>();
    for (const item of batch) {
      const list = byManifest.get(item.t.manifest) ?? [];
      list.push(item);
      byManifest.set(item.t.manifest, list);
    }
    // The tombstone first, without waiting for the disk: a crash that keeps the files but
    // loses nothing leaves files reconcile deletes, and one that loses the tombstone after the
    // files went leaves a committed temporary block without files, which reconcile also takes
    // for deleted (never a rebuild). The next barrier of the commits, or the end, makes it
    // durable.
    for (const [manifest, items] of byManifest) {
      manifest.write(items.map(({ t, position }) => ({
        t: "tombstone" as const,
        index: layouts[t.task]!.gridIndexOf(position),
        content: t.contents.get(position) ?? "",
      })));
    }
    crashPoint("temp:tombstoned");
    // Removed as a batch (OutputRemover: on the loop while unlinks are fast); a folder goes whole.
    const removals = batch.map(({ t, position }) =>
      (t.files.get(position) ?? []).flatMap(([output, rel]) => {
        const plan = t.plans.find((p) => p.name === output);
        return plan === undefined ? [] : [finalLocation(plan, rel)];
      })
    );
    await this.#remover.removeBlocks(removals, (i) => {
      const { t, position } = batch[i]!;
      const files = t.files.get(position) ?? [];
      t.bytes.live(files, -1);
      t.bytes.deleted(bytesOf(files), +1);
      t.files.delete(position);
    });
    crashPoint("temp:deleted");
  }

  #delete(m: TempTask, position: number): void {
    if (this.#o.keep) return;
    this.#pending.push({ t: m, position });
    m.removing++;
  }

  /**
   * Readers of a temporary block that will or may run in this run (the rest committed), and one
   * more while a reader left out of the run needs it.
   */
  #readersToCome(task: number, position: number): number {
    // A reader left out of the run holds its inputs for the whole run: one count never counted off.
    let n = this.#o.held?.[task]?.[position] ?? 0;
    const { graph } = this.#o;
    const readers = this.#readers;
    for (const d of graph.dag.downstream[task]!) {
      const mayRun = this.#mayRun[d]!;
      graph.downstreamBlocksOf(task, position, d, readers);
      for (let i = 0; i < readers.length; i++) if (mayRun[readers.positions[i]!] === 1) n++;
    }
    return n;
  }

  #mayRun: Uint8Array[] = [];

  /** Mark a block and everything downstream of it as may-run; each one newly marked asks. */
  #flood(task: number, position: number, ask: number[]): void {
    if (this.#mayRun[task]![position] === 1) return;
    this.#mayRun[task]![position] = 1;
    ask.push(task, position);
    const stack = [task, position];
    while (stack.length > 0) {
      const p = stack.pop()!;
      const t = stack.pop()!;
      this.#o.graph.forEachDownstream(t, p, (d, q) => {
        if (d === t || this.#mayRun[d]![q] === 1) return;
        this.#mayRun[d]![q] = 1;
        ask.push(d, q);
        stack.push(d, q);
      });
    }
  }

  /**
   * The start: which blocks may run (certain ones and everything downstream of them), which
   * deleted temporary blocks they need (regenerated, recursively), and how many readers each
   * live temporary block still waits for; live blocks nobody will read again are deleted now.
   */
  #start(): void {
    const { pipeline, graph } = this.#o;
    const layouts = graph.layouts;
    this.#mayRun = blocksThatMayRun(graph, this.#o.certain);
    // Deleted temporary blocks that a block which may run reads: regenerate them (and what
    // they read in turn). Nothing to look for when no temporary block is deleted.
    const ask: number[] = [];
    const anyDeleted = this.#tasks.some((m) =>
      m !== null && m.store.provenance!.outputs.includes(OUTPUTS_DELETED)
    );
    pipeline.tasks.forEach((_, t) => {
      if (!anyDeleted || !graph.dag.upstream[t]!.some((u) => this.#tasks[u] !== null)) return;
      for (let p = 0; p < layouts[t]!.blockCount; p++) {
        if (this.#mayRun[t]![p] === 1) ask.push(t, p);
      }
    });
    while (ask.length > 0) {
      const p = ask.pop()!;
      const t = ask.pop()!;
      graph.forEachUpstream(t, p, (u, q) => {
        if (u === t) return;
        const m = this.#tasks[u] ?? null;
        if (m === null || m.regenerate[q] === 1) return;
        const cell = layouts[u]!.trackingCellOf(q);
        if (cell < 0 || m.store.provenance!.outputs[cell] !== OUTPUTS_DELETED) return;
        m.regenerate[q] = 1;
        this.#mayRun[u]![q] = 1;
        ask.push(u, q);
        if (!m.nondeterministic) return;
        // It may come back with other content: every reader of it may run, and needs its
        // other inputs.
        graph.forEachDownstream(u, q, (d, r) => {
          if (d !== u) this.#flood(d, r, ask);
        });
      });
    }
    // Live temporary blocks: their files and their readers still to come.
    for (const m of this.#tasks) {
      if (m === null) continue;
      const entries = readManifest(m.store.path).blocks;
      const contents = m.contents;
      const layout = layouts[m.task]!;
      for (let p = 0; p < layout.blockCount; p++) {
        const cell = layout.trackingCellOf(p);
        if (cell < 0) continue;
        // A first run has no manifest entries: no key to build for each block.
        const entry = entries.size === 0 ? undefined : entries.get(indexKey(layout.gridIndexOf(p)));
        if (entry?.intent != null) contents.set(p, entry.intent.content);
        const state = m.store.provenance!.outputs[cell];
        if (state === OUTPUTS_DELETED) {
          const bytes = bytesOf(entry?.intent?.files ?? []);
          m.bytes.deleted(bytes, +1);
          if (m.regenerate[p] === 1 && entry?.intent != null) {
            m.tombstones.set(p, entry.intent.content);
            m.tombstoneBytes.set(p, bytes);
          }
          continue;
        }
        if (
          state !== OUTPUTS_PRESENT || m.store.done[cell] !== 1 || this.#mayRun[m.task]![p] === 1
        ) {
          continue;
        }
        const files = entry?.intent?.files ?? [];
        m.files.set(p, files);
        m.remaining[p] = this.#readersToCome(m.task, p);
        m.bytes.live(files, +1);
        if (m.remaining[p] === 0) this.#delete(m, p);
      }
    }
    void this.flush();
  }
}
