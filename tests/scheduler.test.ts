/**
 * The scheduler against daisy's test_scheduler.py (catalogue 42-54) and its own contract:
 * retries at the back of the queue, pre-check skips, abandonment and late releases.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type BlockId, type Fit, TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi, roiToString } from "../lib/geometry/mod.ts";
import { buildDag, DependencyGraph } from "../lib/graph/mod.ts";
import {
  type AbandonReason,
  type CounterSnapshot,
  describeAbandonReason,
  Scheduler,
  type SchedulerEvents,
} from "../lib/schedule/mod.ts";
import { BlockSource, type Precheck } from "../lib/execute/block_source.ts";
import { BlockCompletion } from "../lib/execute/completion.ts";
import type { TaskConfig } from "../lib/pipeline/spec.ts";

type Box = readonly [readonly number[], readonly number[]];

interface TaskSpec {
  id: string;
  upstream?: string[];
  total: Box;
  read: Box;
  write: Box;
  fit?: Fit;
  conflict?: boolean;
  maxRetries?: number;
}

function build(tasks: TaskSpec[], events: SchedulerEvents = {}): Scheduler {
  const dag = buildDag(tasks.map((t) => ({ id: t.id, upstream: t.upstream ?? [] })));
  const layouts = tasks.map((t) =>
    new TaskLayout({
      totalRoi: makeRoi(t.total[0], t.total[1]),
      readRoi: makeRoi(t.read[0], t.read[1]),
      writeRoi: makeRoi(t.write[0], t.write[1]),
      fit: t.fit ?? "valid",
      readWriteConflict: t.conflict ?? true,
    })
  );
  const graph = new DependencyGraph(dag, layouts);
  return new Scheduler(
    graph,
    tasks.map((t) => ({ maxRetries: t.maxRetries ?? 2 })),
    events,
  );
}

function idOf(s: Scheduler, task: number, position: number): BlockId {
  return s.graph.layouts[task]!.blockIdOf(position);
}

/** Acquire and return the block ID (or null when nothing is ready). */
function acquireId(s: Scheduler, task: number): { id: BlockId; position: number } | null {
  const position = s.acquire(task);
  return position < 0 ? null : { id: idOf(s, task, position), position };
}

function positionWithId(s: Scheduler, task: number, id: BlockId): number {
  const l = s.graph.layouts[task]!;
  for (const p of l.allPositions()) if (l.blockIdOf(p) === id) return p;
  throw new Error(`No block with ID ${id}`);
}

/** The runners' block source over `s` with one pre-check for task 0 (done marker, mask). */
function prechecked(s: Scheduler, precheck: Precheck): BlockSource {
  const completion = new BlockCompletion({
    scheduler: s,
    layouts: s.graph.layouts,
    taskIds: s.graph.dag.ids,
    sink: null,
    observer: {},
    onSettled: () => {},
    onBug: (error) => {
      throw error;
    },
  });
  const tasks = s.graph.dag.ids.map((id) => ({ id, check: null })) as unknown as TaskConfig[];
  return new BlockSource({
    scheduler: s,
    completion,
    tasks,
    layouts: s.graph.layouts,
    prechecks: [precheck],
    observer: {},
    accepting: () => true,
    onAnswer: (apply) => apply(),
  });
}

function assertConserved(s: Scheduler): void {
  s.assertBalanced();
  for (let t = 0; t < s.taskCount; t++) {
    const c = s.snapshot(t);
    assert.equal(s.queuedCount(t), c.ready, `ready vs queue length: ${JSON.stringify(c)}`);
    const sum = c.ready + c.processing + c.pending + c.completed + c.failed + c.orphaned;
    assert.equal(sum, c.total, JSON.stringify(c));
    for (const v of [c.ready, c.processing, c.pending, c.completed, c.failed, c.orphaned]) {
      assert.ok(v >= 0, JSON.stringify(c));
    }
    assert.ok(c.skipped <= c.completed);
  }
}

function isDone(c: CounterSnapshot): boolean {
  return c.completed + c.failed + c.orphaned === c.total;
}

const TASK_1D: Omit<TaskSpec, "id"> = { total: [[0], [4]], read: [[0], [3]], write: [[1], [1]] };
const TASK_2D: Omit<TaskSpec, "id"> = {
  total: [[0, 0], [6, 6]],
  read: [[0, 0], [3, 3]],
  write: [[1, 1], [1, 1]],
};
const ZERO_LEVELS: Omit<TaskSpec, "id"> = {
  total: [[0, 0], [10, 10]],
  read: [[0, 0], [9, 9]],
  write: [[4, 4], [1, 1]],
  fit: "overhang",
  maxRetries: 0,
};

const R = (o: number[], s: number[]) => roiToString(makeRoi(o, s));

describe("daisy test_scheduler.py (catalogue 42-54)", () => {
  it("test_simple_no_conflicts: IDs 1 then 2 (catalogue 42)", () => {
    const s = build([{ id: "test_1d", ...TASK_1D, conflict: false }]);
    const l = s.graph.layouts[0]!;
    const a = s.acquire(0);
    assert.equal(l.blockIdOf(a), 1);
    assert.equal(roiToString(l.readRoiOf(a)), R([0], [3]));
    assert.equal(roiToString(l.writeRoiOf(a)), R([1], [1]));
    const b = s.acquire(0);
    assert.equal(l.blockIdOf(b), 2);
    assert.equal(roiToString(l.readRoiOf(b)), R([1], [3]));
    assert.equal(roiToString(l.writeRoiOf(b)), R([2], [1]));
    assert.equal(s.acquire(0), -1);
  });

  it("test_simple_acquire_block: the first block is ID 2 (catalogue 43)", () => {
    const s = build([{ id: "test_1d", ...TASK_1D }]);
    const l = s.graph.layouts[0]!;
    const a = s.acquire(0);
    assert.equal(l.blockIdOf(a), 2);
    assert.equal(roiToString(l.readRoiOf(a)), R([1], [3]));
    assert.equal(roiToString(l.writeRoiOf(a)), R([2], [1]));
    assert.equal(s.acquire(0), -1);
  });

  it("test_retries (catalogue 44)", () => {
    const s = build([{ id: "test_1d", ...TASK_1D }]);
    const first = acquireId(s, 0)!;
    assert.equal(first.id, 2);
    assert.equal(s.fail(0, first.position), "retry");
    const retry = acquireId(s, 0)!;
    assert.equal(retry.id, 2);
    assert.equal(s.attemptOf(0, retry.position), 2);
    assert.equal(s.succeed(0, retry.position), true);
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const b = acquireId(s, 0)!;
      assert.equal(b.id, 1);
      assert.equal(s.attemptOf(0, b.position), i + 1);
      outcomes.push(s.fail(0, b.position));
      assertConserved(s);
    }
    assert.deepEqual(outcomes, ["retry", "retry", "failed"]);
    assert.equal(s.acquire(0), -1);
    const c = s.snapshot(0);
    assert.equal(c.completed, 1);
    assert.equal(c.failed, 1);
    assert.equal(c.orphaned, 0);
    assert.equal(c.failedAttempts, 4);
    assert.equal(c.phase, "done");
  });

  it("test_orphan_count (catalogue 45)", () => {
    const s = build([{ id: "test_1d", ...TASK_1D }]);
    for (let i = 0; i < 3; i++) {
      const b = acquireId(s, 0)!;
      assert.equal(b.id, 2);
      s.fail(0, b.position);
    }
    assert.equal(s.acquire(0), -1);
    const c = s.snapshot(0);
    assert.equal(c.completed, 0);
    assert.equal(c.failed, 1);
    assert.equal(c.orphaned, 1);
    assert.equal(c.phase, "done");
    assert.equal(s.isFinished(), true);
  });

  it("test_simple_release_block: after ID 2 succeeds the next is ID 1 (catalogue 46)", () => {
    const s = build([{ id: "test_1d", ...TASK_1D }]);
    const a = acquireId(s, 0)!;
    s.succeed(0, a.position);
    const b = s.acquire(0);
    const l = s.graph.layouts[0]!;
    assert.equal(l.blockIdOf(b), 1);
    assert.equal(roiToString(l.readRoiOf(b)), R([0], [3]));
    assert.equal(roiToString(l.writeRoiOf(b)), R([1], [1]));
  });

  it("test_complete_task: task_2d runs level by level (catalogue 47)", () => {
    const s = build([{ id: "test_2d", ...TASK_2D }]);
    const levels = [[12, 23, 25, 40], [8, 17, 19, 32], [7, 16, 18, 31], [4, 11, 13, 24]];
    for (const level of levels) {
      const got: { id: BlockId; position: number }[] = [];
      for (let i = 0; i < level.length; i++) got.push(acquireId(s, 0)!);
      assert.deepEqual(got.map((b) => b.id), level);
      assert.equal(s.acquire(0), -1);
      assert.equal(s.isStalled(), false);
      for (const b of got) s.succeed(0, b.position);
      assertConserved(s);
    }
    assert.equal(isDone(s.snapshot(0)), true);
    assert.equal(s.snapshot(0).phase, "done");
    assert.equal(s.isFinished(), true);
  });

  const chained = () =>
    build([
      { id: "first", ...TASK_2D },
      { id: "second", upstream: ["first"], ...TASK_2D, total: [[1, 1], [4, 4]] },
    ]);

  it("test_downstream / test_upstream through the scheduler's graph (catalogue 48, 49)", () => {
    const s = chained();
    const g = s.graph;
    const second = positionWithId(s, 1, 12);
    assert.deepEqual(
      g.upstreamOf(1, second).filter((r) => r.task === 0).map((r) => g.blockIdOf(r)),
      [12, 17, 18, 23, 24, 25, 31, 32, 40],
    );
    const first = positionWithId(s, 0, 24);
    assert.deepEqual(
      g.downstreamOf(0, first).filter((r) => r.task === 1).map((r) => g.blockIdOf(r)),
      [4, 7, 8, 12],
    );
  });

  it("test_chained_tasks (catalogue 50)", () => {
    const s = chained();
    for (const level of [[12, 23, 25, 40], [8, 17, 19, 32], [7, 16, 18, 31]]) {
      const got = level.map(() => acquireId(s, 0)!);
      assert.deepEqual(got.map((b) => b.id), level);
      for (const b of got) s.succeed(0, b.position);
      assert.equal(s.acquire(1), -1, "second must get nothing before first's last level");
    }
    const last = [4, 11, 13, 24].map(() => acquireId(s, 0)!);
    assert.deepEqual(last.map((b) => b.id), [4, 11, 13, 24]);
    const frees: [number, number][] = [[3, 12], [2, 8], [1, 7], [0, 4]];
    for (const [index, secondId] of frees) {
      assert.equal(s.acquire(1), -1);
      s.succeed(0, last[index]!.position);
      const b = acquireId(s, 1);
      assert.ok(b !== null, `releasing first/${last[index]!.id} must free second/${secondId}`);
      assert.equal(b.id, secondId);
      s.succeed(1, b.position);
      assertConserved(s);
    }
    assert.equal(s.snapshot(0).phase, "done");
    assert.equal(s.snapshot(1).phase, "done");
    assert.equal(s.snapshot(1).completed, 4);
    assert.equal(s.isFinished(), true);
  });

  it("test_overlapping_tasks: alternating acquisition completes 12 + 12 (catalogue 51)", () => {
    const spec: Omit<TaskSpec, "id"> = {
      total: [[0], [100]],
      read: [[0], [10]],
      write: [[1], [8]],
    };
    const s = build([{ id: "task1", ...spec }, { id: "task2", upstream: ["task1"], ...spec }]);
    for (let i = 0; i < 24; i++) {
      let task = 0;
      let p = s.acquire(0);
      if (p < 0) {
        task = 1;
        p = s.acquire(1);
      }
      assert.ok(p >= 0, `step ${i}: ${JSON.stringify([s.snapshot(0), s.snapshot(1)])}`);
      s.succeed(task, p);
      assertConserved(s);
    }
    assert.equal(s.snapshot(0).completed, 12);
    assert.equal(s.snapshot(1).completed, 12);
    assert.equal(s.isFinished(), true);
  });

  it("test_zero_levels: four levels of one block each (catalogue 52)", () => {
    const s = build([{ id: "test_zero_levels", ...ZERO_LEVELS }]);
    assert.equal(s.snapshot(0).total, 4);
    for (let i = 0; i < 4; i++) {
      assert.equal(s.readyCount(0), 1);
      const p = s.acquire(0);
      assert.ok(p >= 0);
      s.succeed(0, p);
    }
    assert.equal(s.acquire(0), -1);
    assert.equal(s.snapshot(0).completed, 4);
  });

  it("test_zero_levels_failure: failed + orphaned == total (catalogue 53)", () => {
    const s = build([{ id: "test_zero_levels", ...ZERO_LEVELS }]);
    assert.equal(s.readyCount(0), 1);
    const p = s.acquire(0);
    assert.ok(p >= 0);
    assert.equal(s.fail(0, p), "failed");
    assert.equal(s.acquire(0), -1);
    const c = s.snapshot(0);
    assert.equal(c.failed, 1);
    assert.equal(c.orphaned, 3);
    assert.equal(c.failed + c.orphaned, c.total);
    assert.equal(c.phase, "done");
  });

  it("test_orphan_double_counting: 16 failed + 345 orphaned == 361 (catalogue 54)", () => {
    const s = build([{
      id: "test_orphans",
      total: [[0, 0], [25, 25]],
      read: [[0, 0], [7, 7]],
      write: [[3, 3], [1, 1]],
    }]);
    let guard = 0;
    for (let p = s.acquire(0); p >= 0 && guard++ < 10_000; p = s.acquire(0)) {
      s.fail(0, p);
      assertConserved(s);
    }
    const c = s.snapshot(0);
    assert.equal(c.total, 361);
    assert.equal(c.failed, 16);
    assert.equal(c.orphaned, 345);
    assert.equal(c.failed + c.orphaned, c.total);
    assert.equal(c.failedAttempts, 16 * 3);
    assert.equal(s.isFinished(), true);
  });
});

describe("Scheduler contract", () => {
  it("appends retries at the back of the queue, after the remaining roots", () => {
    const s = build([{ id: "t", ...TASK_2D }]);
    const first = acquireId(s, 0)!;
    assert.equal(first.id, 12);
    assert.equal(s.attemptOf(0, first.position), 1);
    assert.equal(s.fail(0, first.position), "retry");
    assert.equal(s.attemptOf(0, first.position), 2);
    assert.equal(s.snapshot(0).ready, 4);
    const next = [0, 1, 2, 3].map(() => acquireId(s, 0)!.id);
    assert.deepEqual(next, [23, 25, 40, 12]);
    assert.equal(s.attemptOf(0, first.position), 2);
  });

  it("retries blocks in the order their attempts failed", () => {
    const s = build([{ id: "test_1d", ...TASK_1D, conflict: false, maxRetries: 1 }]);
    const a = s.acquire(0);
    const b = s.acquire(0);
    assert.equal(s.fail(0, a), "retry");
    assert.equal(s.fail(0, b), "retry");
    assert.equal(s.acquire(0), a);
    assert.equal(s.attemptOf(0, a), 2);
    assert.equal(s.fail(0, a), "failed");
    assert.equal(s.acquire(0), b);
    assert.equal(s.succeed(0, b), true);
    const c = s.snapshot(0);
    assert.deepEqual([c.completed, c.failed, c.orphaned, c.failedAttempts], [1, 1, 0, 3]);
  });

  it("resets attemptOf after a success", () => {
    const s = build([{ id: "test_1d", ...TASK_1D, conflict: false }]);
    const a = s.acquire(0);
    s.fail(0, a);
    assert.equal(s.acquire(0), 1 - a);
    assert.equal(s.acquire(0), a);
    assert.equal(s.attemptOf(0, a), 2);
    s.succeed(0, a);
    assert.equal(s.attemptOf(0, a), 1);
  });

  for (const reason of ["done", "masked", "checked"] as const) {
    it(`counts a '${reason}' pre-check skip as completed and skipped`, () => {
      const seen: number[] = [];
      const s = build([{ id: "t", ...TASK_2D }]);
      const source = prechecked(s, (p) => {
        seen.push(p);
        return [12, 23, 25, 40, 8].includes(Number(idOf(s, 0, p))) ? reason : null;
      });
      // Level 0 is skipped entirely; the first block handed out is #17 of level 1 (#8 is skipped
      // too), and skipped blocks release their downstream blocks.
      assert.equal(idOf(s, 0, source.nextPrechecked(0)), 17);
      const c = s.snapshot(0);
      assert.equal(c.completed, 5);
      assert.equal(c.skipped, 5);
      assert.equal(c.processing, 1);
      assert.equal(c.started, true);
      assertConserved(s);
      assert.deepEqual(seen.map((p) => idOf(s, 0, p)), [12, 23, 25, 40, 8, 17]);
    });
  }

  it("finishes a task whose every block is skipped without handing one out", () => {
    let calls = 0;
    const s = build([{ id: "t", ...TASK_2D }]);
    const source = prechecked(s, () => {
      calls++;
      return "done";
    });
    assert.equal(source.nextPrechecked(0), -1);
    const c = s.snapshot(0);
    assert.equal(calls, 16);
    assert.equal(c.completed, 16);
    assert.equal(c.skipped, 16);
    assert.equal(c.processing, 0);
    assert.equal(c.phase, "done");
    assert.equal(s.isFinished(), true);
  });

  it("abandon orphans the remaining blocks and every downstream task", () => {
    const finished: number[] = [];
    const s = build(
      [
        { id: "up", ...TASK_2D },
        { id: "down", upstream: ["up"], ...TASK_2D, total: [[1, 1], [4, 4]] },
        { id: "further", upstream: ["down"], ...TASK_2D },
        { id: "other", ...TASK_1D },
      ],
      { onTaskFinished: (t) => finished.push(t) },
    );
    const a = s.acquire(0);
    const b = s.acquire(0);
    s.succeed(0, a);
    assert.equal(s.fail(0, b), "retry");
    const inFlight = s.acquire(0);
    assert.ok(inFlight >= 0);
    const reason: AbandonReason = { kind: "workers-failed", failures: 3, maxWorkerRestarts: 2 };
    const abandoned = s.abandon(0, reason);
    assert.deepEqual([...abandoned].sort((x, y) => x - y), [0, 1, 2]);
    assert.deepEqual([...finished].sort((x, y) => x - y), [0, 1, 2]);
    const up = s.snapshot(0);
    assert.equal(up.phase, "abandoned");
    assert.deepEqual(up.abandonReason, reason);
    assert.equal(
      describeAbandonReason(reason),
      "its workers failed 3 times and maxWorkerRestarts (2) is spent",
    );
    assert.equal(up.completed, 1);
    assert.equal(up.orphaned, 15);
    assert.equal(up.ready, 0);
    assert.equal(up.processing, 0);
    assert.equal(up.pending, 0);
    for (const t of [1, 2]) {
      const c = s.snapshot(t);
      assert.equal(c.phase, "abandoned");
      assert.equal(c.orphaned, c.total);
      assert.deepEqual(c.abandonReason, { kind: "upstream-abandoned", upstream: "up" });
    }
    assert.equal(s.snapshot(3).phase, "running");
    assert.equal(s.isFinished(), false);
    assertConserved(s);
    // Abandoned tasks hand out nothing; abandoning twice is a no-op.
    assert.equal(s.acquire(0), -1);
    assert.equal(s.acquire(1), -1);
    assert.deepEqual(s.abandon(0, { kind: "setup-failed", message: "again" }), []);
    assert.deepEqual(s.snapshot(0).abandonReason, reason);
    // The independent task still runs to completion.
    for (let p = s.acquire(3); p >= 0; p = s.acquire(3)) s.succeed(3, p);
    assert.equal(s.snapshot(3).phase, "done");
    assert.equal(s.isFinished(), true);
    assert.equal(s.isStalled(), false);
  });

  it("drops a late succeed or fail after abandon and leaves the counters unchanged", () => {
    const s = build([{ id: "t", ...TASK_2D }, { id: "d", upstream: ["t"], ...TASK_2D }]);
    const a = s.acquire(0);
    const b = s.acquire(0);
    s.abandon(0, { kind: "setup-failed", message: "gone" });
    const before = [s.snapshot(0), s.snapshot(1)];
    assert.equal(s.succeed(0, a), false);
    assert.equal(s.fail(0, b), "dropped");
    assert.deepEqual([s.snapshot(0), s.snapshot(1)], before);
    assert.equal(s.attemptOf(0, b), 1);
    assertConserved(s);
  });

  it("does not push ready blocks into an abandoned downstream task", () => {
    const s = build([{ id: "t", ...TASK_2D }, { id: "d", upstream: ["t"], ...TASK_2D }]);
    s.abandon(1, { kind: "setup-failed", message: "downstream setup failed" });
    assert.equal(s.snapshot(0).phase, "running");
    let guard = 0;
    for (let p = s.acquire(0); p >= 0 && guard++ < 100; p = s.acquire(0)) {
      s.succeed(0, p);
      assert.equal(s.snapshot(1).ready, 0);
      assertConserved(s);
    }
    assert.equal(s.snapshot(0).completed, 16);
    assert.equal(s.snapshot(1).orphaned, 16);
    assert.equal(s.isFinished(), true);
  });

  it("releases a block's downstream early once, and nothing more when it succeeds", () => {
    const s = build([
      { id: "first", ...TASK_2D, conflict: false },
      { id: "second", upstream: ["first"], ...TASK_2D, conflict: false, total: [[1, 1], [4, 4]] },
    ]);
    const firsts: number[] = [];
    for (let p = s.acquire(0); p >= 0; p = s.acquire(0)) firsts.push(p);
    assert.equal(firsts.length, 16);
    // Half are released early (their files in place), the other half succeed outright.
    const early = firsts.filter((_, i) => i % 2 === 0);
    for (const p of early) assert.equal(s.releaseEarly(0, p), true);
    assert.equal(s.releasedEarly(0), 8);
    for (const p of early) assert.equal(s.releaseEarly(0, p), false, "released twice");
    for (const p of firsts.filter((_, i) => i % 2 === 1)) s.succeed(0, p);
    // Every second block reads early-released blocks and succeeded ones: ready, once each.
    assert.equal(s.snapshot(1).ready, 4);
    assert.equal(s.snapshot(0).completed, 8);
    assertConserved(s);
    for (const p of early) s.succeed(0, p);
    assert.equal(s.releasedEarly(0), 0);
    assert.equal(s.snapshot(1).ready, 4, "a success released its readers again");
    assert.equal(s.queuedCount(1), 4);
    for (let p = s.acquire(1); p >= 0; p = s.acquire(1)) s.succeed(1, p);
    assert.equal(s.isFinished(), true);
    assertConserved(s);
  });

  it("a block released early that fails orphans none of its readers, retried or not", () => {
    const orphans: number[] = [];
    const s = build(
      [
        { id: "first", ...TASK_2D, conflict: false, maxRetries: 1 },
        { id: "second", upstream: ["first"], ...TASK_2D, conflict: false, total: [[1, 1], [4, 4]] },
      ],
      { onOrphaned: (_t, p) => orphans.push(p) },
    );
    const firsts: number[] = [];
    for (let p = s.acquire(0); p >= 0; p = s.acquire(0)) firsts.push(p);
    const twelve = positionWithId(s, 0, 12 as BlockId);
    s.releaseEarly(0, twelve);
    assert.equal(s.fail(0, twelve), "retry");
    assert.equal(s.acquire(0), twelve);
    assert.equal(s.releaseEarly(0, twelve), false, "the retry released its readers again");
    assert.equal(s.fail(0, twelve), "failed");
    assert.equal(s.releasedEarly(0), 0);
    assert.deepEqual(orphans, [], "its readers had its files and were orphaned");
    for (const p of firsts) if (p !== twelve) s.succeed(0, p);
    assert.equal(s.snapshot(1).ready, 4);
    for (let p = s.acquire(1); p >= 0; p = s.acquire(1)) s.succeed(1, p);
    assert.deepEqual([s.snapshot(0).failed, s.snapshot(1).completed], [1, 4]);
    assert.equal(s.isFinished(), true);
    assertConserved(s);
  });

  it("orphans downstream-task blocks when an upstream block fails permanently", () => {
    const orphans: [number, number][] = [];
    const s = build(
      [
        { id: "first", ...TASK_2D, maxRetries: 0 },
        { id: "second", upstream: ["first"], ...TASK_2D, total: [[1, 1], [4, 4]] },
      ],
      { onOrphaned: (t, p) => orphans.push([t, p]) },
    );
    // #12 of first is read by every second block.
    const p = s.acquire(0);
    assert.equal(idOf(s, 0, p), 12);
    assert.equal(s.fail(0, p), "failed");
    const second = orphans.filter(([t]) => t === 1).map(([t, q]) => idOf(s, t, q));
    assert.deepEqual([...second].map(Number).sort((x, y) => x - y), [4, 7, 8, 12]);
    assert.equal(s.snapshot(1).orphaned, 4);
    assert.equal(s.snapshot(1).phase, "done");
    assertConserved(s);
  });

  it("reports the same orphans when an onOrphaned handler queries the graph", () => {
    // Observers (progress bars, tracking writers) naturally look a block up in the graph.
    const plain: string[] = [];
    const spec = [{ id: "t", ...TASK_2D, maxRetries: 0 }];
    const s1 = build(spec, { onOrphaned: (t, p) => plain.push(`${t}/${p}`) });
    s1.fail(0, s1.acquire(0));
    const querying: string[] = [];
    const s2: Scheduler = build(spec, {
      onOrphaned: (t, p) => {
        querying.push(`${t}/${p}`);
        s2.graph.upstreamOf(t, p);
      },
    });
    s2.fail(0, s2.acquire(0));
    assert.deepEqual([...querying].sort(), [...plain].sort());
    assert.deepEqual(s2.snapshot(0), s1.snapshot(0));
  });

  it("a zero-block task is done at once", () => {
    const s = build([{ id: "empty", total: [[0], [5]], read: [[0], [10]], write: [[0], [10]] }]);
    const c = s.snapshot(0);
    assert.equal(c.total, 0);
    assert.equal(c.phase, "done");
    assert.equal(c.started, false);
    assert.equal(s.isFinished(), true);
    assert.equal(s.isStalled(), false);
    assert.equal(s.acquire(0), -1);
  });

  it("marks started on the first acquire and reports processing counts", () => {
    const s = build([{ id: "t", ...TASK_2D }]);
    assert.equal(s.snapshot(0).started, false);
    assert.equal(s.taskId(0), "t");
    assert.equal(s.taskCount, 1);
    const p = s.acquire(0);
    assert.equal(s.snapshot(0).started, true);
    assert.equal(s.processingCount(0), 1);
    assert.equal(s.readyCount(0), 3);
    assert.equal(s.isRunning(0), true);
    s.succeed(0, p);
    assert.equal(s.processingCount(0), 0);
  });

  it("refuses options for the wrong number of tasks", () => {
    const s = build([{ id: "t", ...TASK_2D }]);
    assert.throws(() => new Scheduler(s.graph, []), RangeError);
  });
});
