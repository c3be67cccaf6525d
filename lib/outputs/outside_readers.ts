/**
 * A run of some tasks (`--tasks`) deletes only what every downstream task of the whole pipeline
 * no longer needs. A task left out of the run does not run, so what its blocks read cannot be
 * counted off in this run: every block of a temporary task in the run that a block of a left-out
 * reader reads, and that reader block is not done, is held for the whole run (never deleted, and
 * swept by no start until that reader is done). The left-out readers' done bytes are read once,
 * from read-only snapshots of their stores, as `plan` reads them; a reader without a store, or
 * with a store of another layout, has nothing done.
 */

import type { DependencyGraph } from "../graph/mod.ts";
import { PositionList } from "../graph/mod.ts";
import type { TaskSelection } from "../pipeline/task_selection.ts";
import { resolveTrackingPath } from "../tracking/session.ts";
import { readStoreSnapshot } from "./explain_stores.ts";

/**
 * Per task of the run (`selection.pipeline`'s indices): its blocks that a left-out reader still
 * needs (1), or null when no left-out task reads it or it is not temporary.
 * `wholeGraph` is the dependency graph of `selection.whole`.
 */
export function heldByLeftOutReaders(
  selection: TaskSelection,
  wholeGraph: DependencyGraph,
  trackingDir: string | null,
): (Uint8Array | null)[] {
  const { whole, pipeline } = selection;
  const held = pipeline.tasks.map((): Uint8Array | null => null);
  if (selection.leftOut.length === 0) return held;
  const indexIn = new Map(whole.tasks.map((t, i) => [t.id, i]));
  const doneOf = new Map<number, Uint8Array | null>();
  const done = (d: number): Uint8Array | null => {
    if (!doneOf.has(d)) {
      const dir = resolveTrackingPath(whole, d, trackingDir);
      const snap = dir === null ? null : readStoreSnapshot(dir, wholeGraph.layouts[d]!, false);
      doneOf.set(d, snap?.kind === "store" ? snap.store.done : null);
    }
    return doneOf.get(d)!;
  };
  const read = new PositionList();
  pipeline.tasks.forEach((task, t) => {
    if (!task.temporary) return;
    const u = indexIn.get(task.id)!;
    for (const d of wholeGraph.dag.downstream[u]!) {
      if (!selection.leftOut.includes(whole.tasks[d]!.id)) continue;
      const marks = held[t] ?? new Uint8Array(wholeGraph.layouts[u]!.blockCount);
      held[t] = marks;
      const layout = wholeGraph.layouts[d]!;
      const doneBytes = done(d);
      for (let q = 0; q < layout.blockCount; q++) {
        const cell = layout.trackingCellOf(q);
        if (doneBytes !== null && cell >= 0 && doneBytes[cell] === 1) continue;
        wholeGraph.upstreamBlocksOf(d, q, u, read);
        for (let i = 0; i < read.length; i++) marks[read.positions[i]!] = 1;
      }
    }
  });
  return held;
}
