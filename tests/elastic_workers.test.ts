/**
 * Elastic worker counts (`launch.workers: { min, max }`): the sizing rule, and the pool driven
 * through the fake-executor rig with a manual clock: a task starts `min` workers, a backlog
 * scales it up to `max` and never above, a tail releases idle workers down to `min`, and a
 * released worker is neither a crash nor a restart.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_STARTUP_SECONDS, wantedWorkers } from "../lib/execute/elastic_workers.ts";
import type { TaskDefinition } from "../lib/pipeline/spec.ts";
import { formatCountersLine } from "../lib/report/summary.ts";
import { EtaEstimator, formatBarLine } from "../lib/report/progress_format.ts";
import { linearTask, RunRig } from "./fixtures/run_rig.ts";

const elastic = (min: number, max: number): Partial<TaskDefinition> => ({
  launch: { kind: "slurm", workers: { min, max } },
  maxWorkerRestarts: 0,
});

describe("elastic workers: the sizing rule", () => {
  it("wants ceil(backlog * mean block seconds / start-up seconds), clamped to [min, max]", () => {
    const range = { min: 1, max: 10 };
    assert.equal(wantedWorkers(20, 1, 10, range), 2);
    assert.equal(wantedWorkers(21, 1, 10, range), 3);
    assert.equal(wantedWorkers(1000, 1, 10, range), 10, "never above max");
    assert.equal(wantedWorkers(3, 0.1, 30, range), 1, "a short backlog keeps min");
    assert.equal(wantedWorkers(3, 0.1, 30, { min: 4, max: 10 }), 4, "never below min");
    assert.equal(wantedWorkers(0, 5, 10, range), 1, "no backlog: min");
    assert.equal(wantedWorkers(0, 5, 10, { min: 0, max: 3 }), 0);
    assert.equal(wantedWorkers(5, 0.001, 30, { min: 0, max: 3 }), 1, "one while blocks wait");
  });

  it("wants min (at least one) until a block's time is known", () => {
    assert.equal(wantedWorkers(500, Number.NaN, DEFAULT_STARTUP_SECONDS, { min: 2, max: 9 }), 2);
    assert.equal(wantedWorkers(500, Number.NaN, DEFAULT_STARTUP_SECONDS, { min: 0, max: 9 }), 1);
    assert.equal(DEFAULT_STARTUP_SECONDS, 30);
  });
});

/**
 * Run one elastic task: a worker connects `startupMs` after it is made; each round a worker
 * finishes one block of `seconds` (the slow worker, made first, only every `slowEvery` rounds)
 * and the clock moves one block on. Returns the rig and the live-worker count seen each round.
 */
async function drive(
  blocks: number,
  min: number,
  max: number,
  o: { startupMs: number; seconds: number; slowEvery?: number },
): Promise<{ rig: RunRig; alive: number[]; aliveRunning: number[] }> {
  const rig = RunRig.start([linearTask("a", blocks, elastic(min, max))]);
  const born = new Map<number, number>();
  const alive: number[] = [];
  const aliveRunning: number[] = [];
  for (let round = 0; rig.result === null; round++) {
    assert.ok(round < 100_000, "the run does not end");
    const live = rig.made("a").filter((e) => e.state !== "dead");
    alive.push(live.length);
    if (rig.counters("a").phase === "running") aliveRunning.push(live.length);
    for (const e of live) {
      if (!born.has(e.id)) born.set(e.id, rig.clock.now());
      if (e.state === "starting") {
        if (rig.clock.now() - born.get(e.id)! >= o.startupMs) e.becomeReady();
      } else if (e.recallPending) e.answerRecall();
      else if (e.held.length > 0) {
        const slow = e === rig.made("a")[0] && o.slowEvery !== undefined;
        if (!slow || round % o.slowEvery! === 0) e.succeed(1, o.seconds);
      }
    }
    rig.advance(o.seconds * 1000);
    await rig.settle();
  }
  return { rig, alive, aliveRunning };
}

describe("elastic workers: the pool", () => {
  it("starts min workers, scales a backlog up to max and never above", async () => {
    const first = RunRig.start([linearTask("a", 200, elastic(1, 4))]);
    assert.equal(first.made("a").length, 1, "a task starts with min workers");
    first.stop();
    const { rig: done, alive } = await drive(200, 1, 4, { startupMs: 2000, seconds: 1 });
    assert.equal(Math.max(...alive), 4, `live workers per round: ${alive.join(" ")}`);
    assert.equal((await done.finished()).outcome, "complete");
    const stats = done.run.tasks[0]!.stats;
    assert.ok(stats.maxConcurrent <= 4, `peak ${stats.maxConcurrent}`);
  });

  it("with two workers' start-up per backlog, wants only the workers that backlog keeps busy", async () => {
    // 12 blocks of 1 s, start-up 10 s: ceil(backlog * 1 / 10) stays at 1 or 2, far below max.
    const { rig, alive } = await drive(12, 1, 8, { startupMs: 10_000, seconds: 1 });
    assert.ok(Math.max(...alive) <= 2, `live workers per round: ${alive.join(" ")}`);
    assert.equal((await rig.finished()).outcome, "complete");
  });

  it("a tail releases idle workers down to min; released workers are not crashes", async () => {
    const { rig, aliveRunning } = await drive(120, 1, 4, {
      startupMs: 2000,
      seconds: 1,
      slowEvery: 4,
    });
    assert.equal((await rig.finished()).outcome, "complete");
    assert.equal(Math.max(...aliveRunning), 4);
    // While the slow worker runs its last blocks the others are released: one is left.
    assert.equal(aliveRunning.at(-1), 1, `live workers per round: ${aliveRunning.join(" ")}`);
    const task = rig.run.tasks[0]!;
    assert.equal(task.stats.released, 3);
    assert.equal(task.stats.workerFailures, 0);
    assert.equal(task.stats.restarts, 0);
    const released = rig.notices.filter((n) => n.includes("released"));
    assert.equal(released.length, 3, rig.notices.join("\n"));
    assert.match(
      released[0]!,
      /^Task "a": worker \d+ released \(no block waits; launch\.workers\.min is 1\)$/,
    );
    for (const w of (await rig.finished()).utilization?.workers ?? []) {
      assert.equal(w.exit, "clean", `worker ${w.workerId} ended ${w.exit}`);
    }
    // The progress reports carry the elastic counts (queued, running, released).
    const last = rig.progressReports.at(-1)!.find((t) => t.id === "a")!;
    assert.equal(last.workers?.released, 3);
    for (const r of rig.progressReports) {
      const w = r.find((t) => t.id === "a")!.workers!;
      assert.ok(w.queued + w.running <= 4, JSON.stringify(w));
    }
  });

  it("a task with a fixed count reports no elastic workers", async () => {
    const rig = RunRig.start([linearTask("a", 4, { launch: "slurm", maxWorkers: 2 })]);
    for (const e of rig.made("a")) e.becomeReady();
    await rig.settle();
    assert.equal(rig.run.snapshots()[0]!.workers, undefined);
  });
});

describe("elastic workers: the progress line", () => {
  it("shows queued, running and released workers", () => {
    const rig = RunRig.start([linearTask("a", 4, elastic(1, 3))]);
    const counters = rig.counters("a");
    const workers = { queued: 1, running: 2, released: 3 };
    assert.equal(
      formatCountersLine("a", counters, 0, undefined, 1, workers),
      "a: 0/4 done, 0 running, workers 2 running, 1 queued, 3 released, 0 failed, 0 orphaned, 0 skipped",
    );
    const barOf = (width: number) =>
      formatBarLine(
        { id: "a", counters, eta: new EtaEstimator(), running: 0, queued: 1, workers },
        { idWidth: 1, digits: 1 },
        width,
        0,
        false,
      );
    const bar = barOf(140);
    assert.ok(bar.includes("workers 2 running, 1 queued, 3 released"), bar);
    const narrow = barOf(50);
    assert.ok(narrow.includes("⚙2◷1↓3"), narrow);
  });
});
