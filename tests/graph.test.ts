/**
 * The pipeline DAG and the block dependency graph (reference §4, §9.3; catalogue 5, 6, 48, 49,
 * 67-70), including the daisy defects blockwise fixes (§3.6, §4.4, §4.5).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type BlockId, type Fit, TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi, roiToString } from "../lib/geometry/mod.ts";
import {
  type BlockRef,
  buildDag,
  DagError,
  type DagInput,
  DependencyGraph,
  PositionList,
} from "../lib/graph/mod.ts";
import { Scheduler } from "../lib/schedule/mod.ts";

type Box = readonly [readonly number[], readonly number[]];

interface TaskSpec {
  id: string;
  upstream?: string[];
  total: Box;
  read: Box;
  write: Box;
  fit?: Fit;
  conflict?: boolean;
}

function layoutOf(t: TaskSpec): TaskLayout {
  return new TaskLayout({
    totalRoi: makeRoi(t.total[0], t.total[1]),
    readRoi: makeRoi(t.read[0], t.read[1]),
    writeRoi: makeRoi(t.write[0], t.write[1]),
    fit: t.fit ?? "valid",
    readWriteConflict: t.conflict ?? true,
  });
}

function graphOf(tasks: TaskSpec[]): DependencyGraph {
  const dag = buildDag(tasks.map((t) => ({ id: t.id, upstream: t.upstream ?? [] })));
  return new DependencyGraph(dag, tasks.map(layoutOf));
}

function ids(graph: DependencyGraph, refs: readonly BlockRef[], task?: number): BlockId[] {
  return refs.filter((r) => task === undefined || r.task === task).map((r) => graph.blockIdOf(r));
}

function positionWithWrite(layout: TaskLayout, offset: readonly number[]): number {
  for (const p of layout.allPositions()) {
    const w = layout.writeRoiOf(p);
    if (w.offset.every((o, d) => o === offset[d])) return p;
  }
  throw new Error(`No block writes at (${offset.join(", ")})`);
}

function positionWithId(layout: TaskLayout, id: BlockId): number {
  for (const p of layout.allPositions()) if (layout.blockIdOf(p) === id) return p;
  throw new Error(`No block has ID ${id}`);
}

function has(refs: readonly BlockRef[], task: number, position: number): boolean {
  return refs.some((r) => r.task === task && r.position === position);
}

/** Positive-volume overlap of two boxes. */
function overlaps(
  a: { offset: readonly number[]; shape: readonly number[] },
  b: { offset: readonly number[]; shape: readonly number[] },
): boolean {
  return a.offset.every((o, d) => {
    const lo = Math.max(o, b.offset[d]!);
    const hi = Math.min(o + a.shape[d]!, b.offset[d]! + b.shape[d]!);
    return hi > lo;
  });
}

const TASK_2D: Omit<TaskSpec, "id"> = {
  total: [[0, 0], [6, 6]],
  read: [[0, 0], [3, 3]],
  write: [[1, 1], [1, 1]],
};

describe("pipeline DAG", () => {
  const order = (tasks: DagInput[]) => {
    const dag = buildDag(tasks);
    return dag.order.map((i) => dag.ids[i]);
  };

  it("A+B+C displays as A, B, C (catalogue 67)", () => {
    assert.deepEqual(
      order([{ id: "C", upstream: ["B"] }, { id: "A", upstream: [] }, {
        id: "B",
        upstream: ["A"],
      }]),
      ["A", "B", "C"],
    );
  });

  it("C|A|B displays alphabetically as A, B, C (catalogue 68)", () => {
    assert.deepEqual(
      order([{ id: "C", upstream: [] }, { id: "A", upstream: [] }, { id: "B", upstream: [] }]),
      ["A", "B", "C"],
    );
  });

  it("(A+B)|(C+D) displays as A, B, C, D (catalogue 69)", () => {
    assert.deepEqual(
      order([
        { id: "C", upstream: [] },
        { id: "D", upstream: ["C"] },
        { id: "A", upstream: [] },
        { id: "B", upstream: ["A"] },
      ]),
      ["A", "B", "C", "D"],
    );
  });

  it("((A+B)|(C+D))+E displays as A, B, C, D, E (catalogue 70)", () => {
    assert.deepEqual(
      order([
        { id: "E", upstream: ["B", "D"] },
        { id: "D", upstream: ["C"] },
        { id: "C", upstream: [] },
        { id: "B", upstream: ["A"] },
        { id: "A", upstream: [] },
      ]),
      ["A", "B", "C", "D", "E"],
    );
  });

  it("records upstream and downstream task indices", () => {
    const dag = buildDag([
      { id: "a", upstream: [] },
      { id: "b", upstream: [] },
      { id: "c", upstream: ["a", "b"] },
      { id: "d", upstream: ["c"] },
    ]);
    assert.deepEqual(dag.ids, ["a", "b", "c", "d"]);
    assert.deepEqual(dag.upstream.map((u) => [...u]), [[], [], [0, 1], [2]]);
    assert.deepEqual(dag.downstream.map((d) => [...d]), [[2], [2], [3], []]);
  });

  it("rejects duplicate task ids", () => {
    assert.throws(
      () => buildDag([{ id: "a", upstream: [] }, { id: "a", upstream: [] }]),
      (e: unknown) => e instanceof DagError && e.field === "id" && e.taskId === "a",
    );
  });

  it("rejects an unknown upstream id, naming it", () => {
    assert.throws(
      () => buildDag([{ id: "a", upstream: ["nope"] }]),
      (e: unknown) =>
        e instanceof DagError && e.field === "upstream" && e.taskId === "a" &&
        e.message.includes('"nope"'),
    );
  });

  it("rejects a task listing itself as upstream", () => {
    assert.throws(
      () => buildDag([{ id: "a", upstream: ["a"] }]),
      (e: unknown) => e instanceof DagError && e.field === "upstream" && e.taskId === "a",
    );
  });

  it("rejects an upstream listed twice", () => {
    assert.throws(
      () => buildDag([{ id: "a", upstream: [] }, { id: "b", upstream: ["a", "a"] }]),
      (e: unknown) => e instanceof DagError && e.taskId === "b",
    );
  });

  it("rejects a cycle with a message containing 'cycle' (catalogue 25)", () => {
    assert.throws(
      () => buildDag([{ id: "a", upstream: ["b"] }, { id: "b", upstream: ["a"] }]),
      (e: unknown) => e instanceof DagError && /cycle/i.test(e.message),
    );
    // A cycle behind a healthy root, with a task hanging off it: the message names the cycle.
    assert.throws(
      () =>
        buildDag([
          { id: "root", upstream: [] },
          { id: "x", upstream: ["root", "z"] },
          { id: "y", upstream: ["x"] },
          { id: "z", upstream: ["y"] },
          { id: "tail", upstream: ["x"] },
        ]),
      (e: unknown) =>
        e instanceof DagError && /cycle/i.test(e.message) && e.message.includes('"x"') &&
        e.message.includes('"y"') && e.message.includes('"z"') && !e.message.includes('"root"'),
    );
  });

  it("requires linked tasks to have the same number of axes", () => {
    assert.throws(
      () =>
        graphOf([
          { id: "a", total: [[0], [10]], read: [[0], [5]], write: [[0], [5]] },
          { id: "b", upstream: ["a"], ...TASK_2D },
        ]),
      RangeError,
    );
  });
});

describe("intra-task dependencies (§4.3)", () => {
  const worked: TaskSpec = { id: "t", total: [[0], [50]], read: [[0], [12]], write: [[1], [10]] };

  it("worked example 1: upstream(#0) = {#1}, upstream(#2) = {#1, #3}", () => {
    const g = graphOf([worked]);
    const l = g.layouts[0]!;
    const up = (id: number) => ids(g, g.upstreamOf(0, positionWithId(l, id)));
    assert.deepEqual(up(0), [1]);
    assert.deepEqual(up(2), [1, 3]);
    assert.deepEqual(up(1), []);
    assert.deepEqual(up(3), []);
  });

  it("worked example 1: downstream(#1) = {#0, #2}, downstream(#3) = {#2}", () => {
    const g = graphOf([worked]);
    const l = g.layouts[0]!;
    const down = (id: number) => ids(g, g.downstreamOf(0, positionWithId(l, id)));
    // Sorted by ID (daisy's Scheduler.dependency_graph lists are sorted).
    assert.deepEqual(down(1), [0, 2]);
    assert.deepEqual(down(3), [2]);
    assert.deepEqual(down(0), []);
    assert.deepEqual(down(2), []);
    assert.equal(g.upstreamCount(0, positionWithId(l, 2)), 2);
  });

  it("overhang block #4 has upstream {#3}", () => {
    const g = graphOf([{ ...worked, fit: "overhang" }]);
    const l = g.layouts[0]!;
    const p4 = positionWithId(l, 4);
    assert.equal(roiToString(l.writeRoiOf(p4)), roiToString(makeRoi([41], [10])));
    assert.deepEqual(ids(g, g.upstreamOf(0, p4)), [3]);
    assert.deepEqual(ids(g, g.downstreamOf(0, positionWithId(l, 3))), [2, 4]);
  });

  it("shrink: every downstream block lists its upstream block and back (catalogue 6)", () => {
    const g = graphOf([{
      id: "s",
      total: [[0], [100]],
      read: [[0], [7]],
      write: [[1], [5]],
      fit: "shrink",
    }]);
    const l = g.layouts[0]!;
    let pairs = 0;
    for (const b of l.allPositions()) {
      for (const d of g.downstreamOf(0, b)) {
        assert.ok(has(g.upstreamOf(d.task, d.position), 0, b), `block ${l.blockIdOf(b)}`);
        pairs++;
      }
      for (const u of g.upstreamOf(0, b)) {
        assert.ok(has(g.downstreamOf(u.task, u.position), 0, b), `block ${l.blockIdOf(b)}`);
      }
    }
    assert.ok(pairs > 0);
  });

  it("task_2d: level-2 blocks depend on the four diagonal level-1 blocks", () => {
    const g = graphOf([{ id: "t", ...TASK_2D }]);
    const l = g.layouts[0]!;
    // #24 (grid (2,2) from the total write ROI, level 3) depends on #18 and #31 ... of level 2.
    const p = positionWithId(l, 24);
    assert.equal(l.levelOf(p), 3);
    assert.deepEqual(ids(g, g.upstreamOf(0, p)), [18, 31]);
    // #18 (level 2) depends on the level-1 diagonal neighbours that exist.
    const q = positionWithId(l, 18);
    assert.equal(l.levelOf(q), 2);
    assert.deepEqual(ids(g, g.upstreamOf(0, q)), [8, 17, 19, 32]);
    assert.deepEqual(ids(g, g.downstreamOf(0, q)), [13, 24]);
  });
});

describe("inter-task dependencies (§4.4)", () => {
  it("get_subgraph_blocks of [6,6]+[3,3] is the four blocks around it (catalogue 5)", () => {
    // daisy's BlockwiseDependencyGraph.get_subgraph_blocks(roi) is, in blockwise, the upstream
    // box of a downstream block whose read ROI is exactly that ROI.
    const g = graphOf([
      { id: "test", total: [[0, 0], [16, 16]], read: [[0, 0], [4, 4]], write: [[1, 1], [2, 2]] },
      {
        id: "probe",
        upstream: ["test"],
        total: [[6, 6], [3, 3]],
        read: [[0, 0], [3, 3]],
        write: [[0, 0], [3, 3]],
      },
    ]);
    const probe = g.layouts[1]!;
    assert.equal(probe.blockCount, 1);
    assert.equal(roiToString(probe.readRoiOf(0)), roiToString(makeRoi([6, 6], [3, 3])));
    const up = g.upstreamOf(1, 0);
    const test = g.layouts[0]!;
    const got = up.map((r) => ({
      id: g.blockIdOf(r),
      read: roiToString(test.readRoiOf(r.position)),
      write: roiToString(test.writeRoiOf(r.position)),
    }));
    const R = (o: number[], s: number[]) => roiToString(makeRoi(o, s));
    assert.deepEqual(got, [
      { id: 12, read: R([4, 4], [4, 4]), write: R([5, 5], [2, 2]) },
      { id: 17, read: R([4, 6], [4, 4]), write: R([5, 7], [2, 2]) },
      { id: 18, read: R([6, 4], [4, 4]), write: R([7, 5], [2, 2]) },
      { id: 24, read: R([6, 6], [4, 4]), write: R([7, 7], [2, 2]) },
    ]);
    assert.equal(g.upstreamCount(1, 0), 4);
    for (const r of up) assert.ok(has(g.downstreamOf(0, r.position), 1, 0));
  });

  const chained = () =>
    graphOf([
      { id: "first", ...TASK_2D },
      { id: "second", upstream: ["first"], ...TASK_2D, total: [[1, 1], [4, 4]] },
    ]);

  it("chained_task: the second task has IDs 4, 7, 8, 12 in four levels", () => {
    const g = chained();
    const second = g.layouts[1]!;
    assert.equal(second.blockCount, 4);
    assert.equal(second.levelCount, 4);
    const byLevel = [0, 1, 2, 3].map((l) =>
      [...second.levelPositions(l)].map((p) => second.blockIdOf(p))
    );
    assert.deepEqual(byLevel, [[12], [8], [7], [4]]);
  });

  it("upstream of the second block writing (3,3) is the first's 3x3 window (catalogue 48)", () => {
    const g = chained();
    const p = positionWithWrite(g.layouts[1]!, [3, 3]);
    assert.equal(g.layouts[1]!.blockIdOf(p), 12);
    const up = g.upstreamOf(1, p);
    assert.deepEqual(ids(g, up, 0), [12, 17, 18, 23, 24, 25, 31, 32, 40]);
    // #12 is level 0 of the second task: no same-task upstream.
    assert.deepEqual(ids(g, up, 1), []);
    assert.equal(g.upstreamCount(1, p), 9);
  });

  it("downstream of the first's #24 is the whole second task (catalogue 49)", () => {
    const g = chained();
    const p = positionWithWrite(g.layouts[0]!, [3, 3]);
    assert.equal(g.layouts[0]!.blockIdOf(p), 24);
    const down = g.downstreamOf(0, p);
    assert.deepEqual(ids(g, down, 1), [4, 7, 8, 12]);
    assert.deepEqual(ids(g, down, 0), []);
  });

  it("multi-task lists are sorted by block ID across tasks", () => {
    const g = chained();
    const p = positionWithId(g.layouts[1]!, 4);
    const all = ids(g, g.upstreamOf(1, p)).map((id) => Number(id));
    assert.deepEqual(all, [...all].sort((a, b) => a - b));
    // The second's #4 reads first {4, 7, 11, 8, 12, 17, 13, 18, 24} and depends on second #7.
    assert.deepEqual(ids(g, g.upstreamOf(1, p), 0), [4, 7, 8, 11, 12, 13, 17, 18, 24]);
    // Level 3 conflicts are (0, -1) and (0, 1); only (0, 1) is inside the 2x2 grid.
    assert.deepEqual(ids(g, g.upstreamOf(1, p), 1), [7]);
  });

  it("is exactly 'the upstream write ROI overlaps the downstream read ROI' for every fit", () => {
    // Starts smaller than some boxes: the list grows.
    const list = new PositionList();
    list.positions = new Float64Array(1);
    for (const upFit of ["valid", "overhang", "shrink"] as const) {
      for (const downFit of ["valid", "overhang", "shrink"] as const) {
        const g = graphOf([
          {
            id: "u",
            total: [[0, 2], [23, 19]],
            read: [[0, 0], [5, 4]],
            write: [[1, 2], [3, 2]],
            fit: upFit,
          },
          {
            id: "d",
            upstream: ["u"],
            total: [[-3, 1], [29, 17]],
            read: [[0, 0], [7, 3]],
            write: [[1, 0], [2, 2]],
            fit: downFit,
          },
        ]);
        const [u, d] = [g.layouts[0]!, g.layouts[1]!];
        for (const dp of d.allPositions()) {
          const expected: number[] = [];
          for (const up of u.allPositions()) {
            if (overlaps(u.writeRoiOf(up), d.readRoiOf(dp))) expected.push(up);
          }
          const got = g.upstreamOf(1, dp).filter((r) => r.task === 0).map((r) => r.position);
          assert.deepEqual(
            [...got].sort((a, b) => a - b),
            expected.sort((a, b) => a - b),
            `${upFit}->${downFit} block ${dp}`,
          );
          for (const up of expected) assert.ok(has(g.downstreamOf(0, up), 1, dp));
          g.upstreamBlocksOf(1, dp, 0, list);
          assert.deepEqual(
            [...list.positions.subarray(0, list.length)].sort((a, b) => a - b),
            expected,
            `upstreamBlocksOf ${upFit}->${downFit} block ${dp}`,
          );
        }
        for (const up of u.allPositions()) {
          const readers: number[] = [];
          for (const dp of d.allPositions()) {
            if (overlaps(u.writeRoiOf(up), d.readRoiOf(dp))) readers.push(dp);
          }
          g.downstreamBlocksOf(0, up, 1, list);
          assert.deepEqual(
            [...list.positions.subarray(0, list.length)].sort((a, b) => a - b),
            readers.sort((a, b) => a - b),
            `downstreamBlocksOf ${upFit}->${downFit} block ${up}`,
          );
        }
      }
    }
  });
});

describe("daisy defects blockwise fixes", () => {
  it("asymmetric downstream context: downstream(u) contains every b with u in upstream(b)", () => {
    // daisy grows u's write ROI by D's (context_begin, context_end) instead of
    // (context_end, context_begin), so with B's context (0, 2) some B blocks are missing from
    // downstream(u) although u is in upstream(b); those B blocks are never queued and the
    // distributed run never terminates (reference §4.4).
    const g = graphOf([
      { id: "A", total: [[0], [40]], read: [[0], [10]], write: [[0], [10]] },
      { id: "B", upstream: ["A"], total: [[0], [40]], read: [[0], [12]], write: [[0], [10]] },
    ]);
    const [a, b] = [g.layouts[0]!, g.layouts[1]!];
    assert.deepEqual([...b.contextBegin, ...b.contextEnd], [0, 2]);
    let pairs = 0;
    for (const bp of b.allPositions()) {
      for (const u of g.upstreamOf(1, bp)) {
        assert.ok(has(g.downstreamOf(u.task, u.position), 1, bp), `B block ${b.blockIdOf(bp)}`);
        pairs++;
      }
    }
    assert.ok(pairs > 0);
    // B #0 reads [0,12): A #0 and A #1.
    assert.deepEqual(ids(g, g.upstreamOf(1, positionWithId(b, 0)), 0), [0, 1]);
    assert.deepEqual(ids(g, g.downstreamOf(0, positionWithId(a, 1)), 1), [0, 1]);
  });

  it("asymmetric downstream context: releasing A in order 0, 2, 3, 1 readies every B block", () => {
    // daisy: B blocks 0 and 2 are stranded after this order and the run never ends (§4.4).
    const g = graphOf([
      { id: "A", total: [[0], [40]], read: [[0], [10]], write: [[0], [10]] },
      { id: "B", upstream: ["A"], total: [[0], [40]], read: [[0], [12]], write: [[0], [10]] },
    ]);
    const s = new Scheduler(g, [{ maxRetries: 0 }, { maxRetries: 0 }]);
    const a = g.layouts[0]!;
    const handed: number[] = [];
    for (let i = 0; i < a.blockCount; i++) handed.push(s.acquire(0));
    assert.deepEqual(handed.map((p) => a.blockIdOf(p)), [0, 1, 2, 3]);
    for (const id of [0, 2, 3, 1]) s.succeed(0, positionWithId(a, id));
    assert.equal(s.snapshot(0).phase, "done");
    const b = g.layouts[1]!;
    const done = new Set<BlockId>();
    for (let guard = 0; guard < 100 && !s.isFinished(); guard++) {
      const p = s.acquire(1);
      assert.notEqual(p, -1, `B stalled: ${JSON.stringify(s.snapshot(1))}`);
      done.add(b.blockIdOf(p));
      s.succeed(1, p);
    }
    assert.deepEqual([...done].map(Number).sort((x, y) => x - y), [0, 1, 2]);
    assert.equal(s.snapshot(1).completed, b.blockCount);
    assert.equal(s.isFinished(), true);
    assert.equal(s.isStalled(), false);
  });

  it("a downstream block whose read ROI overlaps no upstream block is initial-ready", () => {
    // daisy: only root tasks get a root generator, so such a block is never scheduled and the
    // distributed run hangs (serial mode returns False) (reference §4.5).
    const g = graphOf([
      { id: "U", total: [[0], [20]], read: [[0], [10]], write: [[0], [10]] },
      { id: "D", upstream: ["U"], total: [[0], [50]], read: [[0], [12]], write: [[1], [10]] },
    ]);
    const d = g.layouts[1]!;
    // D level 0 is #1 (reads [10,22), overlaps U #1) and #3 (reads [30,42), overlaps nothing).
    assert.deepEqual([...d.levelPositions(0)].map((p) => d.blockIdOf(p)), [1, 3]);
    const p3 = positionWithId(d, 3);
    assert.equal(g.upstreamCount(1, p3), 0);
    assert.deepEqual([...g.initialPositions(1)], [p3]);
    assert.equal(g.initialCount(1), 1);

    const s = new Scheduler(g, [{ maxRetries: 0 }, { maxRetries: 0 }]);
    assert.equal(s.readyCount(1), 1);
    // It runs before any upstream block has finished.
    assert.equal(s.acquire(1), p3);
    s.succeed(1, p3);
    let guard = 0;
    while (!s.isFinished() && guard++ < 100) {
      let progressed = false;
      for (const t of [0, 1]) {
        const p = s.acquire(t);
        if (p >= 0) {
          s.succeed(t, p);
          progressed = true;
        }
      }
      assert.ok(progressed, "stalled");
    }
    assert.equal(s.snapshot(0).completed, g.layouts[0]!.blockCount);
    assert.equal(s.snapshot(1).completed, d.blockCount);
  });

  it("a root task smaller than one block with conflicts finishes with 0 blocks", () => {
    // daisy: zero levels, and Scheduler construction panics (index out of bounds counting roots)
    // (reference §3.6).
    for (const fit of ["valid", "overhang", "shrink"] as const) {
      const g = graphOf([
        {
          id: "tiny",
          total: [[0, 0], [5, 1]],
          read: [[0, 0], [10, 12]],
          write: [[0, 1], [10, 10]],
          fit,
        },
        {
          id: "after",
          upstream: ["tiny"],
          total: [[0, 0], [20, 20]],
          read: [[0, 0], [10, 10]],
          write: [[0, 0], [10, 10]],
        },
      ]);
      assert.equal(g.layouts[0]!.blockCount, 0, fit);
      const s = new Scheduler(g, [{ maxRetries: 0 }, { maxRetries: 0 }]);
      assert.equal(s.acquire(0), -1);
      const snap = s.snapshot(0);
      assert.equal(snap.phase, "done");
      assert.equal(snap.total, 0);
      // The downstream task has no upstream blocks, so all its level-0 blocks start ready.
      assert.equal(s.readyCount(1), g.layouts[1]!.levelSize(0));
      let guard = 0;
      for (let p = s.acquire(1); p >= 0 && guard++ < 100; p = s.acquire(1)) s.succeed(1, p);
      assert.equal(s.snapshot(1).completed, g.layouts[1]!.blockCount);
      assert.equal(s.isFinished(), true);
      assert.equal(s.isStalled(), false);
    }
  });
});
