/**
 * Resuming in bulk (lib/execute/resume_plan.ts) against resuming block by block: random
 * pipelines (1-3 tasks, 1-3 axes, odd sizes, contexts, conflicts on and off), random done
 * markers and skip masks, random permanent failures. For each, the plan's remaining set must be
 * exactly the blocks that are not done-or-masked with everything upstream so (computed here by
 * brute force from the graph), and a run with the plan (fake executors, the counters checked
 * after every event by tests/fixtures/run_rig.ts) must run the same blocks and end with the
 * same counters as a run that pre-checks every block one by one.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  buildPipelineGraph,
  planResume,
  type Precheck,
  type ResumePlan,
  type ResumeTask,
} from "../lib/execute/mod.ts";
import type { TaskDefinition } from "../lib/pipeline/mod.ts";
import { validatePipeline } from "../lib/pipeline/mod.ts";
import type { CounterSnapshot } from "../lib/schedule/mod.ts";
import { scanDoneMarkers } from "../lib/tracking/done_scan.ts";
import { RunRig } from "./fixtures/run_rig.ts";
import { Rng } from "./fixtures/rng.ts";

interface Scenario {
  readonly tasks: TaskDefinition[];
  /** Per task, per tracking cell: 1 when done. */
  readonly done: Uint8Array[];
  readonly masked: Set<number>[];
  readonly failing: Set<number>[];
}

function scenario(seed: number): Scenario {
  const rng = new Rng(seed);
  const dims = 1 + rng.int(3);
  const count = 1 + rng.int(3);
  const tasks: TaskDefinition[] = [];
  for (let t = 0; t < count; t++) {
    const write = Array.from({ length: dims }, () => 2 + rng.int(3));
    const before = Array.from({ length: dims }, () => rng.int(3));
    const after = Array.from({ length: dims }, () => rng.int(3));
    const blocks = Array.from({ length: dims }, () => 1 + rng.int(dims === 1 ? 23 : 6));
    const upstream = t === 0 ? [] : [`t${rng.int(t)}`];
    if (t === 2 && rng.chance(0.5) && !upstream.includes("t0")) upstream.push("t0");
    tasks.push({
      id: `t${t}`,
      totalRoi: {
        offset: Array.from({ length: dims }, () => rng.int(3)),
        shape: blocks.map((b, d) => b * write[d]! + before[d]! + after[d]! + rng.int(2)),
      },
      readRoi: {
        offset: before.map(() => 0),
        shape: write.map((w, d) => w + before[d]! + after[d]!),
      },
      writeRoi: { offset: before, shape: write },
      readWriteConflict: rng.chance(0.7),
      fit: rng.chance(0.5) ? "valid" : "shrink",
      upstream,
      maxRetries: 0,
      maxWorkers: 2,
      process() {},
    });
  }
  const graph = buildPipelineGraph(validatePipeline({ tasks }, "/random/pipeline.ts"));
  const density = [0, 0.5, 0.9, 0.97, 1][rng.int(5)]!;
  const done: Uint8Array[] = [];
  const masked: Set<number>[] = [];
  const failing: Set<number>[] = [];
  graph.layouts.forEach((layout) => {
    const cells = new Uint8Array(layout.trackingCellCount);
    const m = new Set<number>();
    const f = new Set<number>();
    for (let p = 0; p < layout.blockCount; p++) {
      const cell = layout.trackingCellOf(p);
      if (cell >= 0 && rng.chance(density)) cells[cell] = 1;
      else if (rng.chance(0.1)) m.add(p);
      else if (rng.chance(0.08)) f.add(p);
    }
    done.push(cells);
    masked.push(m);
    failing.push(f);
  });
  return { tasks, done, masked, failing };
}

function prechecks(s: Scenario, layouts: RunRig["graph"]["layouts"]): Precheck[] {
  return layouts.map((layout, t) => (p: number) => {
    const cell = layout.trackingCellOf(p);
    if (cell >= 0 && s.done[t]![cell] === 1) return "done";
    return s.masked[t]!.has(p) ? "masked" : null;
  });
}

async function plan(s: Scenario, limit: number, windowCells: number): Promise<ResumePlan> {
  const graph = buildPipelineGraph(validatePipeline({ tasks: s.tasks }, "/random/pipeline.ts"));
  const tasks: ResumeTask[] = [];
  for (let t = 0; t < graph.layouts.length; t++) {
    const layout = graph.layouts[t]!;
    const scan = await scanDoneMarkers({ array: s.done[t]! }, layout, {
      keep: (p) => !s.masked[t]!.has(p),
      limit,
      windowCells,
    });
    tasks.push({
      scan,
      markersDecide: true,
      alreadyDone: false,
      isDone: (p) => s.done[t]![layout.trackingCellOf(p)] === 1,
    });
  }
  return await planResume(graph, tasks, { limit });
}

/** Run to the end: executors start, then finish their oldest block (failing ones fail). */
async function drive(
  s: Scenario,
  resume: ResumePlan | null,
): Promise<{ runs: string[]; counters: CounterSnapshot[] }> {
  const probe = new RunRig(s.tasks);
  const checks = prechecks(s, probe.graph.layouts);
  const rig = RunRig.start(s.tasks, {
    precheck: (t) => checks[t],
    ...(resume === null ? {} : { resume }),
  });
  for (let step = 0; rig.result === null; step++) {
    assert.ok(
      step < 100_000,
      `the run does not end: ${
        JSON.stringify(s.tasks.map((_, t) => rig.run.scheduler.snapshot(t)))
      } ${JSON.stringify(rig.fakes.made.map((e) => [e.task, e.state, e.held.length]))}`,
    );
    let moved = false;
    for (const e of rig.fakes.made) {
      if (e.state === "starting") {
        e.becomeReady();
        moved = true;
      } else if (e.state === "ready" && e.held.length > 0) {
        const failing = s.failing[e.task]!.has(e.held[0]!.position);
        if (failing) e.fail("scripted failure");
        else e.succeed(1);
        moved = true;
      }
      if (rig.result !== null) break;
    }
    if (!moved) await rig.settle();
  }
  await rig.finished();
  const runs = rig.fakes.made.flatMap((e) =>
    e.batches.flat().map((b) => `${e.task}:${b.position}`)
  );
  return {
    runs: runs.sort(),
    counters: s.tasks.map((_, t) => rig.run.scheduler.snapshot(t)),
  };
}

/** Blocks that must stay out of the bulk skip: not skippable, or with such a block upstream. */
function bruteForceRemaining(s: Scenario): Set<number>[] {
  const graph = buildPipelineGraph(validatePipeline({ tasks: s.tasks }, "/random/pipeline.ts"));
  const checks = prechecks(s, graph.layouts);
  const memo = new Map<string, boolean>();
  const skippable = (t: number, p: number): boolean => {
    const key = `${t}:${p}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    const own = checks[t]!(p);
    const ok = (own === "done" || own === "masked") &&
      graph.upstreamOf(t, p).every((u) => skippable(u.task, u.position));
    memo.set(key, ok);
    return ok;
  };
  return graph.layouts.map((layout, t) => {
    const remaining = new Set<number>();
    for (let p = 0; p < layout.blockCount; p++) if (!skippable(t, p)) remaining.add(p);
    return remaining;
  });
}

const SEEDS = 60;

describe("resume in bulk", () => {
  it("the random scenarios skip blocks in bulk, with and without blocks left to run", async () => {
    let skipping = 0;
    let withRemaining = 0;
    for (let seed = 1; seed <= SEEDS; seed++) {
      const s = scenario(seed);
      const bulk = await plan(s, Infinity, 3);
      s.tasks.forEach((_, t) => {
        const { done, masked } = bulk.skipped(t);
        if (done + masked > 0) skipping++;
        if (done + masked > 0 && (bulk.except(t)?.size ?? 0) > 0) withRemaining++;
      });
    }
    assert.ok(skipping >= 20 && withRemaining >= 10, `${skipping} ${withRemaining}`);
  });

  for (let seed = 1; seed <= SEEDS; seed++) {
    it(`seed ${seed}: skips in bulk exactly the blocks whose whole upstream is skippable, and runs like block by block`, async () => {
      const s = scenario(seed);
      const windowCells = 1 + (seed % 7);
      const bulk = await plan(s, Infinity, windowCells);
      const expected = bruteForceRemaining(s);
      let anyBulk = false;
      s.tasks.forEach((_, t) => {
        const except = bulk.except(t);
        if (except === null) return;
        anyBulk = true;
        const got = new Set<number>();
        except.forEach((p) => got.add(p));
        assert.deepEqual([...got].sort((a, b) => a - b), [...expected[t]!].sort((a, b) => a - b));
        const { done, masked } = bulk.skipped(t);
        assert.equal(done + masked + except.size, expected[t]!.size + done + masked);
      });
      const byBlock = await drive(s, null);
      const inBulk = await drive(s, bulk);
      assert.deepEqual(inBulk.runs, byBlock.runs, "the same blocks run");
      const figures = (c: CounterSnapshot) => [c.completed, c.skipped, c.failed, c.orphaned];
      assert.deepEqual(inBulk.counters.map(figures), byBlock.counters.map(figures));
      // A tiny limit resumes some tasks block by block: still the same run.
      if (anyBulk) {
        const limited = await drive(s, await plan(s, 2, windowCells));
        assert.deepEqual(limited.runs, byBlock.runs);
        assert.deepEqual(limited.counters.map(figures), byBlock.counters.map(figures));
      }
    });
  }
});
