/**
 * The block-level dependency graph of a whole pipeline: within a task, each block depends on
 * the conflicting blocks of the previous level; across tasks, on the upstream blocks whose
 * write ROI overlaps its read ROI. Nothing is materialised: every query is computed from the
 * layouts in O(neighbours), so a million-block pipeline costs no memory until it runs.
 */

import {
  type BlockId,
  compareBlockIds,
  cursorOf,
  type PositionCursor,
  type TaskLayout,
} from "../blocks/mod.ts";
import {
  boxSize,
  collectBox,
  downstreamBox,
  forEachInBox,
  type PositionList,
  upstreamBox,
} from "./inter_task.ts";
import type { TaskDag } from "./pipeline_dag.ts";

export interface BlockRef {
  readonly task: number;
  readonly position: number;
}

export type BlockVisitor = (task: number, position: number) => void;

/** A set of block positions of one task. */
export interface BlockSet {
  readonly size: number;
  has(position: number): boolean;
  /** Every position, once each. */
  forEach(visit: (position: number) => void): void;
}

/** Lists up to this long are sorted by insertion (stable); longer ones by `Array.sort`. */
const SMALL_SORT = 32;

interface Scratch {
  coords: number[];
  boxCoords: number[];
  lo: number[];
  hi: number[];
  neighbours: number[];
}

function makeScratch(dims: number): Scratch {
  return {
    coords: new Array<number>(dims).fill(0),
    boxCoords: new Array<number>(dims).fill(0),
    lo: new Array<number>(dims).fill(0),
    hi: new Array<number>(dims).fill(0),
    neighbours: [],
  };
}

export class DependencyGraph {
  readonly dag: TaskDag;
  readonly #satisfied = new Set<number>();
  /** Tasks whose every block but these succeeded before the run (see `markSatisfiedExcept`). */
  readonly #exceptions = new Map<number, BlockSet>();
  /** Per task, its initial positions when they cost a walk to find (computed once). */
  readonly #initialCache = new Map<number, readonly number[] | number>();
  readonly layouts: readonly TaskLayout[];
  readonly #dims: number;
  /**
   * One scratch per nesting depth of `forEachUpstream` / `forEachDownstream`: a visitor may
   * query the graph again (an `onOrphaned` observer looking a block up), and the outer walk
   * must not see its neighbour list or box overwritten.
   */
  readonly #visitScratch: Scratch[];
  #visitDepth = 0;
  readonly #countScratch: Scratch;
  readonly #listScratch: Scratch;
  readonly #sortIds: BlockId[] = [];

  constructor(dag: TaskDag, layouts: readonly TaskLayout[]) {
    this.dag = dag;
    this.layouts = layouts;
    dag.upstream.forEach((ups, t) => {
      for (const u of ups) {
        if (layouts[u]!.dims !== layouts[t]!.dims) {
          throw new RangeError(
            `Task "${dag.ids[t]}" has ${layouts[t]!.dims} axes but its upstream "${
              dag.ids[u]
            }" has ${layouts[u]!.dims}; tasks linked by upstream must have the same number of axes`,
          );
        }
      }
    });
    const dims = Math.max(1, ...layouts.map((l) => l.dims));
    this.#dims = dims;
    this.#visitScratch = [makeScratch(dims)];
    this.#countScratch = makeScratch(dims);
    this.#listScratch = makeScratch(dims);
  }

  get taskCount(): number {
    return this.layouts.length;
  }

  /** No upstream task still has blocks to run: its blocks start without waiting. */
  isRoot(task: number): boolean {
    return this.dag.upstream[task]!.every((u) => this.#satisfied.has(u));
  }

  /**
   * Treat every block of a task as already succeeded before the run (a fully resumed task):
   * its downstream blocks stop counting it among their upstream blocks.
   */
  markSatisfied(task: number): void {
    this.#satisfied.add(task);
    this.#exceptions.delete(task);
    this.#initialCache.clear();
  }

  /**
   * Treat every block of a task but `blocks` as already succeeded before the run (a resume
   * that skipped the task's done blocks in bulk): only `blocks` count as upstream blocks, and
   * the task's initial blocks are those of `blocks` with nothing left upstream. Every block
   * downstream of one of `blocks` must be in its own task's set (or its task not satisfied).
   */
  markSatisfiedExcept(task: number, blocks: BlockSet): void {
    if (blocks.size === 0) {
      this.markSatisfied(task);
      return;
    }
    this.#exceptions.set(task, blocks);
    this.#initialCache.clear();
  }

  isSatisfied(task: number): boolean {
    return this.#satisfied.has(task);
  }

  /** The blocks of a task still to succeed when it was satisfied except them, or null. */
  satisfiedExcept(task: number): BlockSet | null {
    return this.#exceptions.get(task) ?? null;
  }

  /** How many blocks (of any task) the block directly depends on and that have not succeeded. */
  upstreamCount(task: number, position: number): number {
    const s = this.#countScratch;
    const layout = this.layouts[task]!;
    const own = this.#exceptions.get(task);
    let n = 0;
    if (own === undefined) {
      n = layout.intraUpstreamCount(position);
    } else {
      const k = layout.intraUpstream(position, s.neighbours);
      for (let i = 0; i < k; i++) if (own.has(s.neighbours[i]!)) n++;
    }
    for (const u of this.dag.upstream[task]!) {
      if (this.#satisfied.has(u)) continue;
      if (upstreamBox(layout, position, this.layouts[u]!, s.coords, s.lo, s.hi)) {
        const except = this.#exceptions.get(u);
        n += except === undefined
          ? boxSize(s.lo, s.hi, layout.dims)
          : countInBox(this.layouts[u]!, s.lo, s.hi, s.boxCoords, except);
      }
    }
    return n;
  }

  /**
   * The blocks of upstream task `u` that block `position` of `task` reads, into `out` in
   * row-major order. For callers that walk the blocks of a whole run: their loop over `out` stays
   * monomorphic, where the visitor call of `forEachUpstream`, shared by every caller, does not
   * (and its compiled code is thrown away and redone as callers add visitors).
   */
  upstreamBlocksOf(task: number, position: number, u: number, out: PositionList): void {
    const s = this.#listScratch;
    out.length = 0;
    if (upstreamBox(this.layouts[task]!, position, this.layouts[u]!, s.coords, s.lo, s.hi)) {
      collectBox(this.layouts[u]!, s.lo, s.hi, s.boxCoords, out);
    }
  }

  /** The blocks of downstream task `d` that read block `position` of `task` (as above). */
  downstreamBlocksOf(task: number, position: number, d: number, out: PositionList): void {
    const s = this.#listScratch;
    out.length = 0;
    if (downstreamBox(this.layouts[task]!, position, this.layouts[d]!, s.coords, s.lo, s.hi)) {
      collectBox(this.layouts[d]!, s.lo, s.hi, s.boxCoords, out);
    }
  }

  /** Same-task upstream first (conflict order), then each upstream task's box in row-major order. */
  forEachUpstream(task: number, position: number, visit: BlockVisitor): void {
    const s = this.#enterVisit();
    try {
      const layout = this.layouts[task]!;
      const n = layout.intraUpstream(position, s.neighbours);
      for (let i = 0; i < n; i++) visit(task, s.neighbours[i]!);
      for (const u of this.dag.upstream[task]!) {
        const up = this.layouts[u]!;
        if (upstreamBox(layout, position, up, s.coords, s.lo, s.hi)) {
          forEachInBox(up, s.lo, s.hi, s.boxCoords, u, visit);
        }
      }
    } finally {
      this.#visitDepth--;
    }
  }

  forEachDownstream(task: number, position: number, visit: BlockVisitor): void {
    const s = this.#enterVisit();
    try {
      const layout = this.layouts[task]!;
      const n = layout.intraDownstream(position, s.neighbours);
      for (let i = 0; i < n; i++) visit(task, s.neighbours[i]!);
      for (const d of this.dag.downstream[task]!) {
        const down = this.layouts[d]!;
        if (downstreamBox(layout, position, down, s.coords, s.lo, s.hi)) {
          forEachInBox(down, s.lo, s.hi, s.boxCoords, d, visit);
        }
      }
    } finally {
      this.#visitDepth--;
    }
  }

  /** The scratch of the next nesting depth; the caller decrements `visitDepth` when done. */
  #enterVisit(): Scratch {
    const depth = this.#visitDepth++;
    let s = this.#visitScratch[depth];
    if (s === undefined) {
      s = makeScratch(this.#dims);
      this.#visitScratch.push(s);
    }
    return s;
  }

  /** Upstream blocks sorted by block ID (stable), as daisy's scheduler lists them. */
  upstreamOf(task: number, position: number): BlockRef[] {
    const refs: BlockRef[] = [];
    this.forEachUpstream(task, position, (t, p) => refs.push({ task: t, position: p }));
    return this.#sortById(refs);
  }

  downstreamOf(task: number, position: number): BlockRef[] {
    const refs: BlockRef[] = [];
    this.forEachDownstream(task, position, (t, p) => refs.push({ task: t, position: p }));
    return this.#sortById(refs);
  }

  blockIdOf(ref: BlockRef): BlockId {
    return this.layouts[ref.task]!.blockIdOf(ref.position);
  }

  #sortById(refs: BlockRef[]): BlockRef[] {
    const n = refs.length;
    if (n < 2) return refs;
    if (n > SMALL_SORT) {
      const keyed = refs.map((r) => ({ r, id: this.blockIdOf(r) }));
      keyed.sort((a, b) => compareBlockIds(a.id, b.id));
      return keyed.map((k) => k.r);
    }
    // Same-task lists have at most 2^dims entries: a stable insertion sort in place, keyed by a
    // reused ID array, avoids the per-call key objects and closure.
    const ids = this.#sortIds;
    for (let i = 0; i < n; i++) {
      const ref = refs[i]!;
      const id = this.blockIdOf(ref);
      let j = i;
      while (j > 0 && ids[j - 1]! > id) {
        ids[j] = ids[j - 1]!;
        refs[j] = refs[j - 1]!;
        j--;
      }
      ids[j] = id;
      refs[j] = ref;
    }
    return refs;
  }

  /**
   * Blocks with no upstream at all: the level-0 blocks of a root task, and the level-0 blocks of
   * a downstream task whose read ROI overlaps no upstream block (daisy never schedules those,
   * reference §4.5). Blocks of later levels always have a same-task upstream block. For a task
   * satisfied except some blocks, those of them with nothing left upstream, level by level.
   */
  *initialPositions(task: number): Generator<number> {
    const own = this.#exceptions.get(task);
    if (own !== undefined) {
      yield* this.#exceptInitial(task, own);
      return;
    }
    const layout = this.layouts[task]!;
    if (this.isRoot(task)) {
      yield* layout.levelPositions(0);
      return;
    }
    const blocked = this.#blockedByExceptions(task);
    const plain = this.#plainUpstream(task);
    for (const p of layout.levelPositions(0)) {
      if (!blocked.has(p) && !this.#touchesAny(task, p, plain)) yield p;
    }
  }

  /**
   * `initialPositions` through a cursor: a root task's level 0 directly, the rest through the
   * generator (their filtering costs more than the generator does).
   */
  initialCursor(task: number): PositionCursor {
    if (!this.#exceptions.has(task) && this.isRoot(task)) return this.layouts[task]!.levelCursor(0);
    return cursorOf(this.initialPositions(task));
  }

  initialCount(task: number): number {
    const own = this.#exceptions.get(task);
    if (own !== undefined) return this.#exceptInitial(task, own).length;
    const layout = this.layouts[task]!;
    if (this.isRoot(task)) return layout.levelSize(0);
    const cached = this.#initialCache.get(task);
    if (typeof cached === "number") return cached;
    let n = 0;
    if (this.#plainUpstream(task).length === 0) {
      // Only satisfied and partly satisfied upstream tasks: level 0 minus the few blocks that
      // wait for one of their remaining blocks, without walking the level.
      n = layout.levelSize(0);
      for (const p of this.#blockedByExceptions(task)) if (layout.levelOf(p) === 0) n--;
    } else {
      for (const _ of this.initialPositions(task)) n++;
    }
    this.#initialCache.set(task, n);
    return n;
  }

  /** Upstream tasks neither satisfied nor satisfied except some blocks. */
  #plainUpstream(task: number): number[] {
    return this.dag.upstream[task]!.filter((u) =>
      !this.#satisfied.has(u) && !this.#exceptions.has(u)
    );
  }

  #touchesAny(task: number, position: number, upstream: readonly number[]): boolean {
    const s = this.#countScratch;
    const layout = this.layouts[task]!;
    for (const u of upstream) {
      if (upstreamBox(layout, position, this.layouts[u]!, s.coords, s.lo, s.hi)) return true;
    }
    return false;
  }

  /** Blocks of `task` downstream of a remaining block of a partly satisfied upstream task. */
  #blockedByExceptions(task: number): Set<number> {
    const blocked = new Set<number>();
    for (const u of this.dag.upstream[task]!) {
      const except = this.#exceptions.get(u);
      if (except === undefined || this.#satisfied.has(u)) continue;
      const s = makeScratch(this.#dims);
      const down = this.layouts[task]!;
      except.forEach((e) => {
        if (downstreamBox(this.layouts[u]!, e, down, s.coords, s.lo, s.hi)) {
          forEachInBox(down, s.lo, s.hi, s.boxCoords, task, (_t, p) => blocked.add(p));
        }
      });
    }
    return blocked;
  }

  #exceptInitial(task: number, own: BlockSet): readonly number[] {
    const cached = this.#initialCache.get(task);
    if (cached !== undefined && typeof cached !== "number") return cached;
    const layout = this.layouts[task]!;
    const found: number[] = [];
    own.forEach((p) => {
      if (this.upstreamCount(task, p) === 0) found.push(p);
    });
    const levels = new Map(found.map((p) => [p, layout.levelOf(p)]));
    found.sort((a, b) => levels.get(a)! - levels.get(b)! || a - b);
    this.#initialCache.set(task, found);
    return found;
  }
}

/** How many positions of the box `set` holds. */
function countInBox(
  layout: TaskLayout,
  lo: readonly number[],
  hi: readonly number[],
  coords: number[],
  set: BlockSet,
): number {
  let n = 0;
  forEachInBox(layout, lo, hi, coords, 0, (_t, p) => {
    if (set.has(p)) n++;
  });
  return n;
}
