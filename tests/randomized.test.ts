/**
 * Randomized runs of the scheduler over random pipelines: 1-3 axes, 1-3 tasks in random DAG
 * shapes (chains, fan-in, fan-out), random totals and contexts (asymmetric, at least one block
 * wide, smaller than one block), every fit, conflicts on and off. Each run interleaves acquires
 * and releases at random, with random failures, retries, pre-check skips and abandonment, and
 * checks the scheduler's invariants after every event. Every failure message names its seed.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type BlockId, type Fit, FITS, TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi, type Roi } from "../lib/geometry/mod.ts";
import { type BlockRef, buildDag, DependencyGraph } from "../lib/graph/mod.ts";
import { type FailureOutcome, Scheduler } from "../lib/schedule/mod.ts";
import { Rng } from "./fixtures/rng.ts";

// --- random configurations --------------------------------------------------------------------

type Box = { offset: number[]; shape: number[] };

interface TaskSpec {
  id: string;
  upstream: string[];
  total: Box;
  read: Box;
  write: Box;
  fit: Fit;
  conflict: boolean;
  maxRetries: number;
  skipRate: number;
}

interface Config {
  seed: number;
  dims: number;
  shape: string;
  tasks: TaskSpec[];
  failureRate: number;
  abandon: boolean;
  maxConcurrent: number;
}

const SHAPES = ["chain", "fan-in", "fan-out", "independent", "random"] as const;

function randomUpstream(rng: Rng, shape: (typeof SHAPES)[number], i: number): number[] {
  if (i === 0) return [];
  switch (shape) {
    case "chain":
      return [i - 1];
    case "fan-in":
      // Every earlier task feeds the last one; the others are roots.
      return i === 2 || (i === 1 && rng.chance(0.3)) ? Array.from({ length: i }, (_, j) => j) : [];
    case "fan-out":
      return [0];
    case "independent":
      return [];
    case "random":
      return Array.from({ length: i }, (_, j) => j).filter(() => rng.chance(0.6));
  }
}

function randomConfig(seed: number, mode: "success" | "failures" | "abandon"): Config {
  const rng = new Rng(seed);
  const dims = 1 + rng.int(3);
  const shape = rng.pick(SHAPES);
  const taskCount = shape === "fan-in" ? 3 : 1 + rng.int(3);
  const maxGrid = [20, 8, 5][dims - 1]!;
  const base = Array.from({ length: dims }, () => rng.int(9) - 4);
  const tasks: TaskSpec[] = [];
  for (let i = 0; i < taskCount; i++) {
    const w: number[] = [];
    const cb: number[] = [];
    const ce: number[] = [];
    const symmetric = rng.chance(0.25);
    for (let d = 0; d < dims; d++) {
      const wd = 1 + rng.int(3);
      w.push(wd);
      // Contexts up to two blocks wide, so some are at least one block.
      const b = rng.int(2 * wd + 2);
      cb.push(b);
      ce.push(symmetric ? b : rng.int(2 * wd + 2));
    }
    const readOffset = w.map(() => rng.int(5) - 2);
    // Sometimes smaller than one block on one axis; usually a few blocks with a partial one at
    // the end.
    const tinyAxis = rng.chance(0.08) ? rng.int(dims) : -1;
    const totalShape = w.map((wd, d) => {
      const T = d === tinyAxis ? rng.int(wd) - 1 : (1 + rng.int(maxGrid)) * wd + rng.int(wd);
      return Math.max(0, T + cb[d]! + ce[d]!);
    });
    tasks.push({
      id: `t${i}`,
      upstream: randomUpstream(rng, shape, i).map((j) => `t${j}`),
      total: { offset: base.map((b) => b + rng.int(5) - 2), shape: totalShape },
      read: { offset: readOffset, shape: w.map((wd, d) => cb[d]! + wd + ce[d]!) },
      write: { offset: readOffset.map((o, d) => o + cb[d]!), shape: w },
      fit: rng.pick(FITS),
      conflict: rng.chance(0.7),
      maxRetries: rng.int(3),
      skipRate: rng.chance(0.25) ? 0.2 : 0,
    });
  }
  return {
    seed,
    dims,
    shape,
    tasks,
    failureRate: mode === "success" ? 0 : rng.pick([0.05, 0.15, 0.4]),
    abandon: mode === "abandon",
    maxConcurrent: 1 + rng.int(8),
  };
}

// --- helpers ----------------------------------------------------------------------------------

/** A block's identity as one number: task * 2^20 + position (positions here are small). */
function keyOf(task: number, position: number): number {
  return task * 1_048_576 + position;
}

function taskOfKey(key: number): number {
  return Math.floor(key / 1_048_576);
}

function positionOfKey(key: number): number {
  return key % 1_048_576;
}

function overlaps(a: Roi, b: Roi): boolean {
  for (let d = 0; d < a.offset.length; d++) {
    const lo = Math.max(a.offset[d]!, b.offset[d]!);
    const hi = Math.min(a.offset[d]! + a.shape[d]!, b.offset[d]! + b.shape[d]!);
    if (hi <= lo) return false;
  }
  return true;
}

function buildGraph(config: Config): DependencyGraph {
  const dag = buildDag(config.tasks.map((t) => ({ id: t.id, upstream: t.upstream })));
  const layouts = config.tasks.map((t) =>
    new TaskLayout({
      totalRoi: makeRoi(t.total.offset, t.total.shape),
      readRoi: makeRoi(t.read.offset, t.read.shape),
      writeRoi: makeRoi(t.write.offset, t.write.shape),
      fit: t.fit,
      readWriteConflict: t.conflict,
    })
  );
  return new DependencyGraph(dag, layouts);
}

interface Relations {
  up: Map<number, number[]>;
  down: Map<number, number[]>;
}

function refsToKeys(refs: readonly BlockRef[]): number[] {
  return refs.map((r) => keyOf(r.task, r.position));
}

// --- static checks ----------------------------------------------------------------------------

function checkGraph(graph: DependencyGraph, config: Config, label: string): Relations {
  const up = new Map<number, number[]>();
  const down = new Map<number, number[]>();
  graph.layouts.forEach((l, t) => {
    // Every position appears exactly once in allPositions(), level by level.
    const positions = [...l.allPositions()];
    assert.equal(positions.length, l.blockCount, label);
    const sorted = [...positions].sort((a, b) => a - b);
    sorted.forEach((p, i) => assert.equal(p, i, `${label} task ${t}: positions`));
    let sum = 0;
    for (let level = 0; level < l.levelCount; level++) {
      const inLevel = [...l.levelPositions(level)];
      assert.equal(l.levelSize(level), inLevel.length, `${label} task ${t} level ${level}`);
      for (const p of inLevel) assert.equal(l.levelOf(p), level, `${label} task ${t}`);
      sum += inLevel.length;
      // Blocks of one level never touch each other's regions when conflicts are on.
      if (config.tasks[t]!.conflict) {
        for (let i = 0; i < inLevel.length; i++) {
          for (let j = i + 1; j < inLevel.length; j++) {
            const [a, b] = [inLevel[i]!, inLevel[j]!];
            assert.ok(
              !overlaps(l.writeRoiOf(a), l.readRoiOf(b)) &&
                !overlaps(l.readRoiOf(a), l.writeRoiOf(b)),
              `${label} task ${t}: blocks ${a} and ${b} of level ${level} conflict`,
            );
          }
        }
      }
    }
    assert.equal(sum, l.blockCount, label);
    // Block IDs are unique within a task.
    const ids = new Set<BlockId>(positions.map((p) => l.blockIdOf(p)));
    assert.equal(ids.size, l.blockCount, `${label} task ${t}: duplicate IDs`);
    for (const p of positions) {
      const key = keyOf(t, p);
      const u = refsToKeys(graph.upstreamOf(t, p));
      const d = refsToKeys(graph.downstreamOf(t, p));
      assert.equal(new Set(u).size, u.length, `${label} ${key}: duplicate upstream`);
      assert.equal(new Set(d).size, d.length, `${label} ${key}: duplicate downstream`);
      assert.equal(graph.upstreamCount(t, p), u.length, `${label} ${key}: upstreamCount`);
      up.set(key, u);
      down.set(key, d);
    }
  });
  // Upstream and downstream are exact inverses.
  const downSets = new Map([...down].map(([k, v]) => [k, new Set(v)]));
  const upSets = new Map([...up].map(([k, v]) => [k, new Set(v)]));
  for (const [b, ups] of up) {
    for (const u of ups) assert.ok(downSets.get(u)!.has(b), `${label}: ${u} -> ${b} missing down`);
  }
  for (const [b, downs] of down) {
    for (const d of downs) assert.ok(upSets.get(d)!.has(b), `${label}: ${b} -> ${d} missing up`);
  }
  // Cross-task upstream is exactly "upstream write overlaps downstream read", by brute force.
  graph.dag.upstream.forEach((ups, t) => {
    const dl = graph.layouts[t]!;
    for (const u of ups) {
      const ul = graph.layouts[u]!;
      if (dl.blockCount * ul.blockCount > 20_000) continue;
      for (let dp = 0; dp < dl.blockCount; dp++) {
        const read = dl.readRoiOf(dp);
        const expected: number[] = [];
        for (let up2 = 0; up2 < ul.blockCount; up2++) {
          if (overlaps(ul.writeRoiOf(up2), read)) expected.push(keyOf(u, up2));
        }
        const got = up.get(keyOf(t, dp))!.filter((k) => taskOfKey(k) === u).sort((a, b) => a - b);
        assert.deepEqual(got, expected, `${label}: cross-task upstream of ${keyOf(t, dp)}`);
      }
    }
  });
  return { up, down };
}

// --- simulation -------------------------------------------------------------------------------

interface RunResult {
  events: number;
  failed: number;
  orphaned: number;
  skipped: number;
}

function simulate(config: Config): RunResult {
  const label = `seed ${config.seed} ${JSON.stringify(config)}`;
  const graph = buildGraph(config);
  const rel = checkGraph(graph, config, `seed ${config.seed}`);
  const rng = new Rng(config.seed ^ 0x5bd1e995);
  const taskCount = config.tasks.length;

  const succeeded = new Set<number>();
  const failed = new Set<number>();
  const orphanEvents = new Set<number>();
  const handedOut = new Map<number, number>();
  const processing: number[] = [];
  const processingSet = new Set<number>();
  const completedBy = new Array<number>(taskCount).fill(0);
  const failedBy = new Array<number>(taskCount).fill(0);
  const orphanedBy = new Array<number>(taskCount).fill(0);
  const skipped = new Set<number>();
  const abandoned = new Set<number>();
  let abandonCount = 0;

  // Deterministic skip sets, decided up front.
  const skipSets = graph.layouts.map((l, t) => {
    const set = new Set<number>();
    for (let p = 0; p < l.blockCount; p++) {
      if (rng.chance(config.tasks[t]!.skipRate)) set.add(p);
    }
    return set;
  });

  const upstreamDone = (key: number) => rel.up.get(key)!.every((u) => succeeded.has(u));

  /** The pre-check (a skip mask): the runners apply it on acquire, exactly like this. */
  const skipOnAcquire = (t: number, p: number): boolean => {
    if (!skipSets[t]!.has(p)) return false;
    const key = keyOf(t, p);
    assert.ok(upstreamDone(key), `${label}: ${key} pre-checked before its upstream`);
    assert.ok(!succeeded.has(key) && !processingSet.has(key), `${label}: ${key} twice`);
    succeeded.add(key);
    skipped.add(key);
    completedBy[t]!++;
    assert.equal(scheduler.succeed(t, p, "masked"), true, label);
    return true;
  };

  const scheduler = new Scheduler(
    graph,
    config.tasks.map((spec) => ({ maxRetries: spec.maxRetries })),
    {
      onOrphaned: (t, p) => {
        const key = keyOf(t, p);
        assert.ok(!orphanEvents.has(key), `${label}: ${key} orphaned twice`);
        assert.ok(!succeeded.has(key) && !failed.has(key), `${label}: ${key} orphaned late`);
        assert.ok(!processingSet.has(key), `${label}: processing ${key} orphaned`);
        orphanEvents.add(key);
        orphanedBy[t]!++;
      },
    },
  );

  /** Ready and pending blocks of a task, counted from the model alone (not from counters). */
  const modelWaiting = (t: number): { ready: number; pending: number } => {
    let ready = 0;
    let pending = 0;
    for (let p = 0; p < graph.layouts[t]!.blockCount; p++) {
      const key = keyOf(t, p);
      if (succeeded.has(key) || failed.has(key) || orphanEvents.has(key)) continue;
      if (processingSet.has(key)) continue;
      if (upstreamDone(key)) ready++;
      else pending++;
    }
    return { ready, pending };
  };

  const check = (event: string) => {
    scheduler.assertBalanced();
    for (let t = 0; t < taskCount; t++) {
      const c = scheduler.snapshot(t);
      const where = `${label} after ${event}, task ${t}: ${JSON.stringify(c)}`;
      const values = [c.ready, c.processing, c.pending, c.completed, c.failed, c.orphaned];
      for (const v of values) assert.ok(v >= 0, where);
      assert.equal(values.reduce((a, b) => a + b, 0), c.total, where);
      assert.ok(c.skipped <= c.completed, where);
      if (abandoned.has(t)) {
        assert.equal(c.phase, "abandoned", where);
        assert.equal(c.ready + c.processing + c.pending, 0, where);
        continue;
      }
      const mine = processing.filter((k) => taskOfKey(k) === t).length;
      assert.equal(c.processing, mine, where);
      const waiting = modelWaiting(t);
      assert.equal(c.ready, waiting.ready, `ready (model) ${where}`);
      assert.equal(scheduler.queuedCount(t), c.ready, `ready (queue length) ${where}`);
      assert.equal(c.pending, waiting.pending, `pending (model) ${where}`);
      assert.equal(c.completed, completedBy[t], where);
      assert.equal(c.failed, failedBy[t], where);
      assert.equal(c.orphaned, orphanedBy[t], where);
      assert.equal(c.phase === "done", c.completed + c.failed + c.orphaned === c.total, where);
    }
    assert.equal(scheduler.isStalled(), false, `${label}: stalled after ${event}`);
  };

  const tryAcquire = (t: number): boolean => {
    let position = scheduler.acquire(t);
    while (position >= 0 && skipOnAcquire(t, position)) {
      check(`skip ${keyOf(t, position)}`);
      position = scheduler.acquire(t);
    }
    if (position < 0) {
      check(`acquire(${t}) = -1`);
      return false;
    }
    const key = keyOf(t, position);
    const where = `${label}: acquire(${t}) = ${position}`;
    assert.ok(!abandoned.has(t), `${where}: task was abandoned`);
    assert.ok(!processingSet.has(key), `${where}: already processing`);
    assert.ok(!succeeded.has(key) && !failed.has(key), `${where}: already terminal`);
    assert.ok(!orphanEvents.has(key), `${where}: orphaned`);
    assert.ok(upstreamDone(key), `${where}: upstream not all succeeded`);
    const attempts = (handedOut.get(key) ?? 0) + 1;
    assert.ok(attempts <= config.tasks[t]!.maxRetries + 1, `${where}: handed out ${attempts}x`);
    assert.equal(scheduler.attemptOf(t, position), attempts, where);
    handedOut.set(key, attempts);
    if (config.tasks[t]!.conflict) {
      const l = graph.layouts[t]!;
      for (const other of processing) {
        if (taskOfKey(other) !== t) continue;
        const o = positionOfKey(other);
        assert.ok(
          !overlaps(l.writeRoiOf(position), l.readRoiOf(o)) &&
            !overlaps(l.readRoiOf(position), l.writeRoiOf(o)),
          `${where}: conflicts with processing block ${o}`,
        );
      }
    }
    processing.push(key);
    processingSet.add(key);
    check(`acquire(${t}) = ${position}`);
    return true;
  };

  const release = () => {
    const i = rng.int(processing.length);
    const key = processing[i]!;
    processing[i] = processing[processing.length - 1]!;
    processing.pop();
    processingSet.delete(key);
    const t = taskOfKey(key);
    const p = positionOfKey(key);
    const fail = rng.chance(config.failureRate);
    if (abandoned.has(t)) {
      const before = scheduler.snapshot(t);
      if (fail) assert.equal(scheduler.fail(t, p), "dropped", label);
      else assert.equal(scheduler.succeed(t, p), false, label);
      assert.deepEqual(scheduler.snapshot(t), before, `${label}: late release changed counters`);
      check(`late release of ${key}`);
      return;
    }
    if (!fail) {
      assert.ok(!succeeded.has(key), `${label}: ${key} succeeded twice`);
      assert.equal(scheduler.succeed(t, p), true, label);
      succeeded.add(key);
      completedBy[t]!++;
      check(`succeed ${key}`);
      return;
    }
    const attempts = handedOut.get(key)!;
    const expected: FailureOutcome = attempts > config.tasks[t]!.maxRetries ? "failed" : "retry";
    assert.equal(scheduler.fail(t, p), expected, `${label}: fail ${key} attempt ${attempts}`);
    if (expected === "failed") {
      failed.add(key);
      failedBy[t]!++;
    }
    check(`fail ${key}`);
  };

  const abandonOne = () => {
    const running = Array.from({ length: taskCount }, (_, t) => t).filter((t) =>
      scheduler.isRunning(t)
    );
    if (running.length === 0) return;
    const t = rng.pick(running);
    // Expected: t and every running task transitively downstream of it.
    const expected = new Set<number>();
    const stack = [t];
    while (stack.length > 0) {
      const x = stack.pop()!;
      if (expected.has(x) || !scheduler.isRunning(x)) continue;
      expected.add(x);
      stack.push(...graph.dag.downstream[x]!);
    }
    const got = scheduler.abandon(t, { kind: "setup-failed", message: "randomized abandonment" });
    assert.deepEqual(
      [...got].sort((a, b) => a - b),
      [...expected].sort((a, b) => a - b),
      `${label}: abandon(${t})`,
    );
    for (const x of got) abandoned.add(x);
    abandonCount++;
    check(`abandon(${t})`);
  };

  check("construction");
  const totalBlocks = graph.layouts.reduce((n, l) => n + l.blockCount, 0);
  const maxAttempts = Math.max(...config.tasks.map((t) => t.maxRetries + 1));
  const limit = 10 * totalBlocks * maxAttempts + 100;
  let events = 0;
  while (!scheduler.isFinished() || processing.length > 0) {
    assert.ok(events++ < limit, `${label}: the run did not end after ${limit} events`);
    if (config.abandon && abandonCount < 2 && rng.chance(0.01)) {
      abandonOne();
      continue;
    }
    const mustRelease = processing.length >= config.maxConcurrent;
    if (processing.length > 0 && (mustRelease || rng.chance(0.4))) {
      release();
      continue;
    }
    const order = Array.from({ length: taskCount }, (_, t) => t);
    for (let i = order.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    let got = false;
    for (const t of order) {
      if (tryAcquire(t)) {
        got = true;
        break;
      }
    }
    if (got) continue;
    if (processing.length > 0) {
      release();
      continue;
    }
    assert.ok(
      scheduler.isFinished(),
      `${label}: nothing ready or processing but not finished: ${
        JSON.stringify(Array.from({ length: taskCount }, (_, t) => scheduler.snapshot(t)))
      }`,
    );
  }

  // --- end of run ---
  assert.equal(scheduler.isFinished(), true, label);
  assert.equal(scheduler.isStalled(), false, label);
  for (let t = 0; t < taskCount; t++) {
    const c = scheduler.snapshot(t);
    const where = `${label} task ${t}: ${JSON.stringify(c)}`;
    assert.equal(c.completed + c.failed + c.orphaned, c.total, where);
    assert.equal(c.ready + c.processing + c.pending, 0, where);
    assert.equal(c.skipped, [...skipped].filter((k) => taskOfKey(k) === t).length, where);
  }
  const every: number[] = [];
  graph.layouts.forEach((l, t) => {
    for (let p = 0; p < l.blockCount; p++) every.push(keyOf(t, p));
  });
  if (config.failureRate === 0 && abandoned.size === 0) {
    // Every block completed exactly once (succeed asserts it was not completed before).
    assert.equal(succeeded.size, totalBlocks, label);
    for (const k of every) assert.ok(succeeded.has(k), `${label}: ${k} never completed`);
    assert.equal(orphanEvents.size + failed.size, 0, label);
  }
  // Orphans are exactly the transitive downstream closure of the failed blocks.
  const closure = new Set<number>();
  const stack = [...failed];
  while (stack.length > 0) {
    const k = stack.pop()!;
    for (const d of rel.down.get(k)!) {
      if (!closure.has(d)) {
        closure.add(d);
        stack.push(d);
      }
    }
  }
  for (const k of orphanEvents) {
    assert.ok(closure.has(k), `${label}: orphan ${k} is not downstream of a failed block`);
  }
  if (abandoned.size === 0) {
    for (const k of closure) assert.ok(orphanEvents.has(k), `${label}: ${k} should be orphaned`);
    for (const k of every) {
      const states = [succeeded.has(k), failed.has(k), orphanEvents.has(k)].filter((x) => x);
      assert.equal(states.length, 1, `${label}: block ${k} is in ${states.length} end states`);
    }
  }
  return { events, failed: failed.size, orphaned: orphanEvents.size, skipped: skipped.size };
}

// --- the runs ---------------------------------------------------------------------------------

function runMany(first: number, count: number, mode: "success" | "failures" | "abandon") {
  const totals = { events: 0, failed: 0, orphaned: 0, skipped: 0, configs: 0 };
  for (let seed = first; seed < first + count; seed++) {
    const r = simulate(randomConfig(seed, mode));
    totals.events += r.events;
    totals.failed += r.failed;
    totals.orphaned += r.orphaned;
    totals.skipped += r.skipped;
    totals.configs++;
  }
  return totals;
}

describe("randomized scheduler runs", () => {
  it("all-success runs complete every block exactly once", () => {
    const totals = runMany(1, 250, "success");
    assert.ok(totals.events > 5_000, JSON.stringify(totals));
    assert.ok(totals.skipped > 0, JSON.stringify(totals));
  });

  it("runs with failures and retries end with completed + failed + orphaned == total", () => {
    const totals = runMany(10_001, 250, "failures");
    assert.ok(totals.failed > 0 && totals.orphaned > 0, JSON.stringify(totals));
  });

  it("runs with abandonment drop late releases and still end", () => {
    runMany(20_001, 100, "abandon");
  });

  it("the generator covers every axis count, fit, DAG shape and context kind", () => {
    const seen = new Set<string>();
    for (let seed = 1; seed < 151; seed++) {
      const c = randomConfig(seed, "success");
      seen.add(`dims ${c.dims}`);
      seen.add(`shape ${c.shape}`);
      seen.add(`tasks ${c.tasks.length}`);
      for (const t of c.tasks) {
        seen.add(`fit ${t.fit}`);
        seen.add(`conflict ${t.conflict}`);
        const cb = t.write.offset.map((o, d) => o - t.read.offset[d]!);
        const ce = t.read.offset.map((o, d) =>
          o + t.read.shape[d]! - t.write.offset[d]! - t.write.shape[d]!
        );
        if (cb.some((b, d) => b !== ce[d])) seen.add("asymmetric context");
        if (cb.some((b, d) => b >= t.write.shape[d]!)) seen.add("context >= one block");
        if (t.upstream.length > 1) seen.add("fan-in");
      }
      const g = buildGraph(c);
      if (g.layouts.some((l) => l.blockCount === 0)) seen.add("task with no blocks");
    }
    for (
      const k of [
        "dims 1",
        "dims 2",
        "dims 3",
        "shape chain",
        "shape fan-in",
        "shape fan-out",
        "shape independent",
        "shape random",
        "tasks 1",
        "tasks 2",
        "tasks 3",
        "fit valid",
        "fit overhang",
        "fit shrink",
        "conflict true",
        "conflict false",
        "asymmetric context",
        "context >= one block",
        "fan-in",
        "task with no blocks",
      ]
    ) {
      assert.ok(seen.has(k), `no configuration with ${k}`);
    }
  });
});
