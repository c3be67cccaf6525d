/**
 * Why each block would run or not, as the start of a run would decide it, computed on
 * read-only snapshots of the stores (lib/outputs/explain_stores.ts): reconcile replayed in
 * memory (output missing), the provenance model read-only (stale and why), the failures
 * counts (failed last run, quarantined), `--force`, skip masks and the temporaries a block
 * that may run needs (regenerate). Nothing is locked, written or deleted.
 *
 * The decision follows the run's pre-check: a block runs when it is forced, a deleted temporary
 * to regenerate, not done, or stale; a block that would run and is masked is skipped; a block
 * quarantined is refused. A done, fresh block downstream of one that runs may run too: its
 * upstream content may change (the run decides after the upstream block commits: identical
 * content stops the cascade).
 */

import type { DependencyGraph } from "../graph/mod.ts";
import type { SkipMask } from "../masks/mod.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { resolveTrackingPath } from "../tracking/session.ts";
import { readStoreSnapshot, type StoreSnapshot } from "./explain_stores.ts";
import type { ForcedBlocks } from "./forced.ts";
import type { ManifestRecord } from "./manifest.ts";
import { planOutputs } from "./output_plan.ts";
import { needsProvenance, ProvenanceModel, UPSTREAM_CHANGED } from "./provenance.ts";
import { damagedDigestWarning } from "./digest_suspicion.ts";
import { describeLiveWriter, liveWriter } from "../tracking/lock.ts";
import { reconcileTask } from "./reconcile.ts";
import { Temporaries } from "./temporaries.ts";

export type ReasonKind =
  | "done"
  | "new"
  | "reset"
  | "stale"
  | "upstream_may_change"
  | "output_missing"
  | "failed"
  | "quarantined"
  | "masked"
  | "forced"
  | "regenerate"
  | "blocked";

/** Kinds of blocks the run processes (certainly, or maybe for `upstream_may_change`). */
export const RUNS: Readonly<Record<ReasonKind, boolean>> = {
  done: false,
  new: true,
  reset: true,
  stale: true,
  upstream_may_change: true,
  output_missing: true,
  failed: true,
  quarantined: false,
  masked: false,
  forced: true,
  regenerate: true,
  blocked: false,
};

export interface Reason {
  readonly kind: ReasonKind;
  /** In plan's words, e.g. "stale: params.threshold" or "failed last run (3 attempts)". */
  readonly text: string;
  /** The per-task summary groups blocks by this (the text without per-block detail). */
  readonly group: string;
}

export interface TaskExplanation {
  readonly task: string;
  /** The task's tracking store, or null when it is not tracked. */
  readonly store: string | null;
  /** Why the whole task reads as it does (no store yet, another layout), or null. */
  readonly note: string | null;
  readonly blocks: number;
  /** The reason of each block (by grid position). */
  reason(position: number): Reason;
  /** Blocks per group, in first-seen order. */
  readonly counts: ReadonlyMap<string, { readonly kind: ReasonKind; blocks: number }>;
  /** Blocks that run (certainly or maybe). */
  readonly runs: number;
}

export interface ExplainOptions {
  readonly trackingDir: string | null;
  readonly masks: readonly (SkipMask | null)[];
  readonly forced: ForcedBlocks;
}

/** Explain every task of a pipeline (null per task without any store to read). */
export function explainPipeline(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  options: ExplainOptions,
): TaskExplanation[] {
  const needs = needsProvenance(pipeline, graph);
  const notes: (string | null)[] = [];
  const paths: (string | null)[] = [];
  const snapshots = pipeline.tasks.map((_, t): StoreSnapshot | null => {
    const dir = resolveTrackingPath(pipeline, t, options.trackingDir);
    paths.push(dir);
    if (dir === null) {
      notes.push("not tracked: every block runs");
      return null;
    }
    const writer = liveWriter(dir);
    const snap = readStoreSnapshot(dir, graph.layouts[t]!, needs[t] === true);
    if (snap.kind === "store") {
      notes.push(
        writer === null
          ? null
          : `a run is writing ${dir} now (${
            describeLiveWriter(writer)
          }): this is a moment of it, and blocks it is committing may show as to run; plan again when it ends`,
      );
      return snap.store;
    }
    notes.push(snap.kind === "missing" ? `no tracking store at ${dir} yet` : snap.note);
    return null;
  });
  const plans = pipeline.tasks.map((task, t) => planOutputs(task, graph.layouts[t]!));
  const reconciled = pipeline.tasks.map((task, t) => {
    const snap = snapshots[t] ?? null;
    if (snap === null || plans[t]!.length === 0) return null;
    return reconcileTask(task, graph.layouts[t]!, plans[t]!, snap, null);
  });
  const missing = reconciled.map((r) => r?.missing ?? new Set<number>());
  const reset = reconciled.map((r) => r?.reset ?? new Set<number>());
  const model = ProvenanceModel.open(pipeline, graph, snapshots, false);
  const forced = options.forced;
  const isDone = (t: number, p: number): boolean => {
    const snap = snapshots[t] ?? null;
    const cell = graph.layouts[t]!.trackingCellOf(p);
    return snap !== null && cell >= 0 && snap.done[cell] === 1;
  };
  const temporaries = Temporaries.open({
    pipeline,
    graph,
    stores: snapshots,
    plans,
    manifests: snapshots.map((s, t) =>
      s === null || plans[t]!.length === 0 ? null : {
        // keep: true deletes nothing, so no tombstone is ever appended.
        append: (_records: readonly ManifestRecord[]) => {
          throw new Error("plan must not write a manifest");
        },
        write: (_records: readonly ManifestRecord[]) => {
          throw new Error("plan must not write a manifest");
        },
      }
    ),
    certain: (t, p) => !isDone(t, p) || forced.has(t, p) || !model.fresh(t, p),
    keep: true,
    onNotice: () => {},
  });
  const out: TaskExplanation[] = [];
  for (const t of graph.dag.order) {
    const task = pipeline.tasks[t]!;
    const layout = graph.layouts[t]!;
    const table = new ReasonTable();
    const codes = new Uint32Array(layout.blockCount);
    const snap = snapshots[t] ?? null;
    const mask = options.masks[t] ?? null;
    const quarantineAfter = task.quarantineAfter;
    let upstreamStale = 0;
    for (let p = 0; p < layout.blockCount; p++) {
      const cell = layout.trackingCellOf(p);
      const done = isDone(t, p);
      const failures = snap === null || cell < 0 ? 0 : snap.failures[cell]!;
      const force = forced.has(t, p);
      const regenerate = temporaries?.mustRegenerate(t, p) === true;
      const stale = done && !force && !regenerate ? model.staleReason(t, p) : null;
      let reason: Reason;
      const blocker = quarantinedUpstream(pipeline, graph, out, t, p);
      if (blocker !== null) {
        // The run refuses the quarantined block, which orphans everything reading it.
        reason = {
          kind: "blocked",
          text: `blocked: reads quarantined ${blocker}`,
          group: "blocked",
        };
      } else if (done && !force && !regenerate && stale === null) {
        reason = upstreamRuns(graph, out, t, p) ? MAY_CHANGE : DONE;
      } else if (mask !== null && mask.isMasked(p)) {
        reason = MASKED;
      } else if (
        !done && !force && quarantineAfter !== null && failures >= quarantineAfter
      ) {
        reason = {
          kind: "quarantined",
          text: `quarantined (${failures} failed attempts)`,
          group: "quarantined",
        };
      } else if (force) {
        reason = FORCED;
      } else if (missing[t]!.has(p)) {
        reason = MISSING;
      } else if (!done) {
        reason = failures > 0
          ? {
            kind: "failed",
            text: `failed last run (${failures} attempt${failures === 1 ? "" : "s"})`,
            group: "failed last run",
          }
          : reset[t]!.has(p)
          ? RESET
          : NEW;
      } else if (regenerate) {
        reason = { kind: "regenerate", text: "regenerate (temporary)", group: "regenerate" };
      } else {
        reason = { kind: "stale", text: stale!, group: stale! };
      }
      if (stale === UPSTREAM_CHANGED) upstreamStale++;
      codes[p] = table.code(reason);
    }
    let note = notes[t] ?? null;
    if (upstreamStale > 0 && model.upstreamMustMatch(t)) {
      const warning = `warning: ${damagedDigestWarning(task.id, paths[t]!, upstreamStale)}`;
      note = note === null ? warning : `${note}; ${warning}`;
    }
    out[t] = new Explained(task.id, paths[t] ?? null, note, table, codes);
  }
  // Which reader needs each regenerated temporary block (known once every task is explained).
  for (const t of graph.dag.order) {
    const e = out[t] as Explained;
    if (!e.hasKind("regenerate")) continue;
    for (let p = 0; p < graph.layouts[t]!.blockCount; p++) {
      if (e.reason(p).kind !== "regenerate") continue;
      let reader: string | null = null;
      graph.forEachDownstream(t, p, (d, q) => {
        if (reader !== null || d === t || !RUNS[out[d]!.reason(q).kind]) return;
        reader = `${pipeline.tasks[d]!.id}/${String(graph.layouts[d]!.blockIdOf(q))}`;
      });
      if (reader !== null) e.retext(p, `regenerate (temporary, read by ${reader})`);
    }
  }
  return graph.dag.order.map((t) => out[t]!);
}

const DONE: Reason = { kind: "done", text: "done", group: "done" };
const NEW: Reason = { kind: "new", text: "new", group: "new" };
const RESET: Reason = { kind: "reset", text: "reset (blockwise reset)", group: "reset" };
const MASKED: Reason = { kind: "masked", text: "masked", group: "masked" };
const FORCED: Reason = { kind: "forced", text: "forced", group: "forced" };
const MISSING: Reason = { kind: "output_missing", text: "output missing", group: "output missing" };
const MAY_CHANGE: Reason = {
  kind: "upstream_may_change",
  text: "upstream may change",
  group: "upstream may change",
};

/** A block of another task this block reads will run, or may run. */
function upstreamRuns(
  graph: DependencyGraph,
  explained: readonly TaskExplanation[],
  task: number,
  position: number,
): boolean {
  let runs = false;
  graph.forEachUpstream(task, position, (u, q) => {
    if (runs || u === task) return;
    const kind = explained[u]?.reason(q).kind;
    // A regenerated temporary comes back with its recorded content (a non-deterministic one
    // is found by the run, which reruns its readers then).
    runs = kind !== undefined && RUNS[kind] && kind !== "regenerate";
  });
  return runs;
}

/** The first block of another task this block reads that is quarantined or blocked, or null. */
function quarantinedUpstream(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  explained: readonly TaskExplanation[],
  task: number,
  position: number,
): string | null {
  let found: string | null = null;
  graph.forEachUpstream(task, position, (u, q) => {
    if (found !== null || u === task) return;
    const r = explained[u]?.reason(q);
    if (r === undefined) return;
    if (r.kind === "blocked") found = r.text.slice("blocked: reads quarantined ".length);
    else if (r.kind === "quarantined") {
      found = `${pipeline.tasks[u]!.id}/${String(graph.layouts[u]!.blockIdOf(q))}`;
    }
  });
  return found;
}

class ReasonTable {
  readonly reasons: Reason[] = [];
  readonly #index = new Map<string, number>();

  code(reason: Reason): number {
    const key = `${reason.kind}\0${reason.text}`;
    let at = this.#index.get(key);
    if (at === undefined) {
      at = this.reasons.length;
      this.reasons.push(reason);
      this.#index.set(key, at);
    }
    return at;
  }
}

class Explained implements TaskExplanation {
  readonly task: string;
  readonly store: string | null;
  readonly note: string | null;
  readonly blocks: number;
  readonly #table: ReasonTable;
  readonly #codes: Uint32Array;

  constructor(
    task: string,
    store: string | null,
    note: string | null,
    table: ReasonTable,
    codes: Uint32Array,
  ) {
    this.task = task;
    this.store = store;
    this.note = note;
    this.blocks = codes.length;
    this.#table = table;
    this.#codes = codes;
  }

  reason(position: number): Reason {
    return this.#table.reasons[this.#codes[position]!]!;
  }

  hasKind(kind: ReasonKind): boolean {
    return this.#table.reasons.some((r) => r.kind === kind);
  }

  retext(position: number, text: string): void {
    const r = this.reason(position);
    this.#codes[position] = this.#table.code({ ...r, text });
  }

  get counts(): ReadonlyMap<string, { readonly kind: ReasonKind; blocks: number }> {
    const perCode = new Uint32Array(this.#table.reasons.length);
    for (const c of this.#codes) perCode[c]!++;
    const out = new Map<string, { kind: ReasonKind; blocks: number }>();
    this.#table.reasons.forEach((r, i) => {
      if (perCode[i] === 0) return;
      const entry = out.get(r.group) ?? { kind: r.kind, blocks: 0 };
      entry.blocks += perCode[i]!;
      out.set(r.group, entry);
    });
    return out;
  }

  get runs(): number {
    let n = 0;
    for (const c of this.#codes) if (RUNS[this.#table.reasons[c]!.kind]) n++;
    return n;
  }
}
