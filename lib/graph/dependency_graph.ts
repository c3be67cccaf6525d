/**
 * The block-level dependency graph of a whole pipeline: within a task, each block depends on
 * the conflicting blocks of the previous level; across tasks, on the upstream blocks whose
 * write ROI overlaps its read ROI. Nothing is materialised: every query is computed from the
 * layouts in O(neighbours), so a million-block pipeline costs no memory until it runs.
 */

import { type BlockId, compareBlockIds, type TaskLayout } from "../blocks/mod.ts";
import { boxSize, downstreamBox, forEachInBox, upstreamBox } from "./inter_task.ts";
import type { TaskDag } from "./pipeline_dag.ts";

export interface BlockRef {
  readonly task: number;
  readonly position: number;
}

export type BlockVisitor = (task: number, position: number) => void;

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
  }

  isSatisfied(task: number): boolean {
    return this.#satisfied.has(task);
  }

  /** How many blocks (of any task) the block directly depends on. */
  upstreamCount(task: number, position: number): number {
    const s = this.#countScratch;
    const layout = this.layouts[task]!;
    let n = layout.intraUpstreamCount(position);
    for (const u of this.dag.upstream[task]!) {
      if (this.#satisfied.has(u)) continue;
      if (upstreamBox(layout, position, this.layouts[u]!, s.coords, s.lo, s.hi)) {
        n += boxSize(s.lo, s.hi, layout.dims);
      }
    }
    return n;
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
   * reference §4.5). Blocks of later levels always have a same-task upstream block.
   */
  *initialPositions(task: number): Generator<number> {
    const layout = this.layouts[task]!;
    const root = this.isRoot(task);
    for (const p of layout.levelPositions(0)) {
      if (root || this.upstreamCount(task, p) === 0) yield p;
    }
  }

  initialCount(task: number): number {
    if (this.isRoot(task)) return this.layouts[task]!.levelSize(0);
    let n = 0;
    for (const _ of this.initialPositions(task)) n++;
    return n;
  }
}
