/**
 * Per-block provenance: what a done block was made from, kept in its task's store so a resume
 * knows, block by block, whether it is still valid. A block is **fresh** when
 *   - its recipe (the task's `version`, canonical `params` and declared `inputs`) is the one it
 *     was made with (`recipe` array, a line of `recipes.jsonl`),
 *   - the content hashes of the upstream blocks it reads digest to what it recorded
 *     (`upstream_digest`): a stale upstream block that reproduces the same content changes
 *     nothing downstream (early cutoff), and
 *   - its inputs' fingerprints under its read ROI digest to what it recorded (`inputs_digest`).
 * Geometry is the store's layout hash plus the block's position. Non-semantic fields
 * (`maxWorkers`, `timeout`, `requires`, ...) are in none of these, so they never make anything
 * stale. A task without outputs records a content hash derived from its provenance, so its
 * downstream blocks follow it.
 */

import { createHash } from "node:crypto";
import type { DependencyGraph } from "../graph/mod.ts";
import type { PipelineConfig, TaskConfig } from "../pipeline/spec.ts";
import { makeBlock } from "../pipeline/block.ts";
import type { TrackingStore } from "../tracking/store.ts";
import { RECIPE_NONE } from "../tracking/arrays.ts";
import { Digest64, hexPrefixWords } from "./digest.ts";
import { InputFingerprints } from "./inputs.ts";
import { canonicalJson, type Recipe, RecipeBook, recipeOf } from "./recipes.ts";
import { damagedDigestWarning, upstreamUnchanged } from "./digest_suspicion.ts";

/** What the model reads of a store: a run's mapped store, or `plan`'s read-only snapshot. */
export type ProvenanceStore = Pick<TrackingStore, "path" | "provenance">;

/** The recipe index of a read-only model whose recipe is not in the store's book yet. */
const RECIPE_UNSAVED = 2 ** 32 - 2;

interface TaskModel {
  readonly store: ProvenanceStore;
  readonly recipe: number;
  readonly recipeText: string;
  readonly book: RecipeBook;
  readonly inputs: InputFingerprints;
}

/** `staleReason` of a block whose upstream blocks' content changed. */
export const UPSTREAM_CHANGED = "stale: upstream content changed";

export class ProvenanceModel {
  readonly #pipeline: PipelineConfig;
  readonly #graph: DependencyGraph;
  readonly #tasks: (TaskModel | null)[];
  readonly #digest = new Digest64();
  readonly #words = new Uint32Array(2);
  /** Per task: no upstream block can have changed since its blocks were made (digest_suspicion). */
  readonly #mustMatch: boolean[];
  readonly #warned = new Set<number>();
  /** Told once per task when a digest that must match does not (a damaged array). */
  onDamagedDigest: ((task: number, warning: string) => void) | null = null;

  private constructor(
    pipeline: PipelineConfig,
    graph: DependencyGraph,
    tasks: (TaskModel | null)[],
  ) {
    this.#pipeline = pipeline;
    this.#graph = graph;
    this.#tasks = tasks;
    const storeOf = (t: number) => tasks[t]?.store.path ?? null;
    this.#mustMatch = tasks.map((m, t) => m !== null && upstreamUnchanged(pipeline, t, storeOf));
  }

  /** Whether task `task`'s upstream digests must all match (a mismatch is damage). */
  upstreamMustMatch(task: number): boolean {
    return this.#mustMatch[task] === true;
  }

  #mismatch(task: number): void {
    if (!this.#mustMatch[task] || this.#warned.has(task) || this.onDamagedDigest === null) return;
    this.#warned.add(task);
    const m = this.#tasks[task]!;
    this.onDamagedDigest(
      task,
      damagedDigestWarning(this.#pipeline.tasks[task]!.id, m.store.path, null),
    );
  }

  /**
   * The model of a run. `stores[t]` must have provenance arrays for every task `needsProvenance`
   * names; the current recipe is added to each store's recipes.jsonl when it is new.
   */
  static open(
    pipeline: PipelineConfig,
    graph: DependencyGraph,
    stores: readonly (ProvenanceStore | null)[],
    writable = true,
  ): ProvenanceModel {
    const needs = needsProvenance(pipeline, graph);
    const tasks = pipeline.tasks.map((task, t): TaskModel | null => {
      const store = stores[t] ?? null;
      if (!needs[t] || store === null || store.provenance === null) return null;
      const book = RecipeBook.read(store.path);
      const recipe = recipeOf(task);
      const text = canonicalJson(recipe);
      const found = book.indexOf(text, writable);
      // Read-only (plan): a recipe not recorded yet matches no block, not even one made without.
      const index = !writable && found === RECIPE_NONE ? RECIPE_UNSAVED : found;
      return {
        store,
        recipe: index,
        recipeText: text,
        book,
        inputs: new InputFingerprints(task.id, task.inputs),
      };
    });
    return new ProvenanceModel(pipeline, graph, tasks);
  }

  enabled(task: number): boolean {
    return (this.#tasks[task] ?? null) !== null;
  }

  /** The line of the store's recipes.jsonl this run's recipe is (RECIPE_NONE without). */
  recipeIndex(task: number): number {
    return this.#tasks[task]?.recipe ?? RECIPE_NONE;
  }

  /** The recipe of the task in this run (what `version`/`params`/`inputs` say now). */
  recipe(task: number): Recipe | null {
    const m = this.#tasks[task] ?? null;
    return m === null ? null : (JSON.parse(m.recipeText) as Recipe);
  }

  /** A done block whose recipe and digests are still those it recorded. */
  fresh(task: number, position: number): boolean {
    const m = this.#tasks[task] ?? null;
    if (m === null) return true;
    const cell = this.#graph.layouts[task]!.trackingCellOf(position);
    if (cell < 0) return true;
    const p = m.store.provenance!;
    if (p.recipe[cell] !== m.recipe) return false;
    const w = this.#words;
    this.#upstreamDigest(task, position, w);
    if (p.upstream[2 * cell] !== w[0] || p.upstream[2 * cell + 1] !== w[1]) {
      this.#mismatch(task);
      return false;
    }
    if (m.inputs.count === 0) return true;
    this.#inputsDigest(task, position, w);
    return p.inputs[2 * cell] === w[0] && p.inputs[2 * cell + 1] === w[1];
  }

  /** Why a done block is stale, in `plan`'s words, or null when it is fresh. */
  staleReason(task: number, position: number): string | null {
    const m = this.#tasks[task] ?? null;
    if (m === null) return null;
    const cell = this.#graph.layouts[task]!.trackingCellOf(position);
    if (cell < 0) return null;
    const p = m.store.provenance!;
    const stored = p.recipe[cell]!;
    if (stored !== m.recipe) {
      const before = stored === RECIPE_NONE ? null : m.book.recipe(stored);
      return describeRecipeChange(before, JSON.parse(m.recipeText) as Recipe);
    }
    const w = this.#words;
    this.#upstreamDigest(task, position, w);
    if (p.upstream[2 * cell] !== w[0] || p.upstream[2 * cell + 1] !== w[1]) {
      return UPSTREAM_CHANGED;
    }
    if (m.inputs.count > 0) {
      this.#inputsDigest(task, position, w);
      if (p.inputs[2 * cell] !== w[0] || p.inputs[2 * cell + 1] !== w[1]) {
        const names = this.#pipeline.tasks[task]!.inputs.map((i) => i.written);
        return `stale: input ${names.join(" or ")} changed`;
      }
    }
    return null;
  }

  /**
   * Record what a block was made from (after its outputs are durable). `content` is the
   * block's content hash, or null without outputs (its provenance hash then stands for its
   * content).
   */
  record(task: number, position: number, content: string | null): void {
    const m = this.#tasks[task] ?? null;
    if (m === null) return;
    const cell = this.#graph.layouts[task]!.trackingCellOf(position);
    if (cell < 0) return;
    const p = m.store.provenance!;
    const w = this.#words;
    this.#upstreamDigest(task, position, w);
    p.upstream[2 * cell] = w[0]!;
    p.upstream[2 * cell + 1] = w[1]!;
    if (m.inputs.count > 0) {
      this.#inputsDigest(task, position, w);
      p.inputs[2 * cell] = w[0]!;
      p.inputs[2 * cell + 1] = w[1]!;
    }
    hexPrefixWords(content ?? this.provenanceHash(task, position), p.content, 2 * cell);
    p.recipe[cell] = m.recipe;
  }

  /**
   * `blockwise accept`: take a done block as made by this run's recipe, upstream content and
   * inputs, without running it. Its content hash is kept, so nothing downstream turns stale.
   */
  accept(task: number, position: number): void {
    const m = this.#tasks[task] ?? null;
    if (m === null) return;
    const cell = this.#graph.layouts[task]!.trackingCellOf(position);
    if (cell < 0) return;
    const p = m.store.provenance!;
    const w = this.#words;
    this.#upstreamDigest(task, position, w);
    p.upstream[2 * cell] = w[0]!;
    p.upstream[2 * cell + 1] = w[1]!;
    if (m.inputs.count > 0) {
      this.#inputsDigest(task, position, w);
      p.inputs[2 * cell] = w[0]!;
      p.inputs[2 * cell + 1] = w[1]!;
    }
    p.recipe[cell] = m.recipe;
  }

  /** SHA-256 of the recipe, the block's position and both digests. */
  provenanceHash(task: number, position: number): string {
    const m = this.#tasks[task] ?? null;
    if (m === null) return "";
    const w = this.#words;
    const h = createHash("sha256").update(m.recipeText).update(`\0${position}\0`);
    this.#upstreamDigest(task, position, w);
    h.update(`${w[0]}:${w[1]}\0`);
    if (m.inputs.count > 0) {
      this.#inputsDigest(task, position, w);
      h.update(`${w[0]}:${w[1]}`);
    }
    return h.digest("hex");
  }

  /** Every block of the task is done and fresh, and so is everything upstream of it. */
  allFreshAtStart(task: number, isDone: (position: number) => boolean): boolean {
    const layout = this.#graph.layouts[task]!;
    for (let p = 0; p < layout.blockCount; p++) {
      if (!isDone(p) || !this.fresh(task, p)) return false;
    }
    return true;
  }

  #upstreamDigest(task: number, position: number, out: Uint32Array): void {
    const d = this.#digest.reset();
    this.#graph.forEachUpstream(task, position, this.#foldUpstream(task));
    d.into(out, 0);
  }

  #visitTask = -1;
  readonly #fold = (t: number, p: number): void => {
    if (t === this.#visitTask) return; // same-task neighbours are conflicts, not inputs
    const m = this.#tasks[t] ?? null;
    if (m === null) return; // an upstream task without provenance adds nothing
    const cell = this.#graph.layouts[t]!.trackingCellOf(p);
    if (cell < 0) return;
    const content = m.store.provenance!.content;
    this.#digest.word(t).word(content[2 * cell]!).word(content[2 * cell + 1]!);
  };

  #foldUpstream(task: number): (t: number, p: number) => void {
    this.#visitTask = task;
    return this.#fold;
  }

  #inputsDigest(task: number, position: number, out: Uint32Array): void {
    const m = this.#tasks[task]!;
    const d = this.#digest.reset();
    const config: TaskConfig = this.#pipeline.tasks[task]!;
    m.inputs.fold(makeBlock(config.id, this.#graph.layouts[task]!, position, 1), d);
    d.into(out, 0);
  }
}

/** Tasks that keep provenance: those declaring outputs, version, params or inputs, and every task downstream of one. */
export function needsProvenance(pipeline: PipelineConfig, graph: DependencyGraph): boolean[] {
  const needs = pipeline.tasks.map((t) =>
    t.outputs.length > 0 || t.version !== null || t.params !== null || t.inputs.length > 0
  );
  for (const t of graph.dag.order) {
    if (graph.dag.upstream[t]!.some((u) => needs[u])) needs[t] = true;
  }
  return needs;
}

function describeRecipeChange(before: Recipe | null, now: Recipe): string {
  if (before === null) return "stale: made without provenance";
  if (before.version !== now.version) {
    return `stale: version ${before.version ?? "(none)"} -> ${now.version ?? "(none)"}`;
  }
  const a = before.params ?? {};
  const b = now.params ?? {};
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  const changed = keys.filter((k) => canonicalJson(a[k] ?? null) !== canonicalJson(b[k] ?? null));
  if (changed.length > 0) return `stale: ${changed.map((k) => `params.${k}`).join(", ")}`;
  return "stale: inputs changed";
}
