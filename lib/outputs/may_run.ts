/**
 * Which blocks may run in a run with temporaries: those certain to run (not done, stale,
 * forced) and everything downstream of them, whose upstream content may change. Each one is a
 * reader the temporary blocks it reads wait for.
 */

import type { DependencyGraph } from "../graph/mod.ts";

/** Per task, 1 for each block that may run, 0 for the others. */
export function blocksThatMayRun(
  graph: DependencyGraph,
  certain: (task: number, position: number) => boolean,
): Uint8Array[] {
  const layouts = graph.layouts;
  const mayRun = layouts.map((l) => new Uint8Array(l.blockCount));
  // Blocks not marked yet, per task: once a task's downstream tasks are all marked (a first
  // run: every block is certain), flooding from its blocks can mark nothing more.
  const unmarked = layouts.map((l) => l.blockCount);
  const stack: number[] = [];
  for (const t of graph.dag.order) {
    for (let p = 0; p < layouts[t]!.blockCount; p++) {
      if (certain(t, p)) {
        mayRun[t]![p] = 1;
        unmarked[t]!--;
        stack.push(t, p);
      }
    }
  }
  const downstream = graph.dag.downstream;
  while (stack.length > 0) {
    const p = stack.pop()!;
    const t = stack.pop()!;
    if (downstream[t]!.every((d) => unmarked[d] === 0)) continue;
    graph.forEachDownstream(t, p, (d, q) => {
      if (d === t || mayRun[d]![q] === 1) return;
      mayRun[d]![q] = 1;
      unmarked[d]!--;
      stack.push(d, q);
    });
  }
  return mayRun;
}
