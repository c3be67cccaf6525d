/**
 * Scheduling with temporaries keeps disk bounded: with `preferDownstream` (the run sets it when
 * a task is temporary), ready downstream blocks are preferred over new upstream blocks, so the
 * blocks of a temporary task that are written and not yet read stay near the frontier instead
 * of piling up across the volume. Driven through the fake-executor rig: every executor finishes
 * what it holds, in turn, until the run ends; no timer, no worker.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BlockReport, CompletionSink } from "../lib/run/block_report.ts";
import { linearTask, RunRig } from "./fixtures/run_rig.ts";

const BLOCKS = 300;

interface Chain {
  /** Whether b is a temporary task (its executors then get only what c lacks). */
  readonly temporary: boolean;
  /** Workers per task and cpus for all (each worker takes one). */
  readonly workers: number;
  readonly cpus: number;
}

/** a -> b -> c, each block reading the same block upstream. */
function chain(o: Chain): Parameters<typeof RunRig.start>[0] {
  const fields = { maxWorkers: o.workers, requires: { cpu: 1 } };
  return [
    linearTask("a", BLOCKS, fields),
    linearTask("b", BLOCKS, { ...fields, upstream: ["a"] }),
    linearTask("c", BLOCKS, { ...fields, upstream: ["b"] }),
  ];
}

/** Every fake executor does its next thing (start, answer a recall, finish what it holds). */
async function stepAll(rig: RunRig): Promise<boolean> {
  let acted = false;
  for (const e of rig.fakes.made) {
    acted = true;
    if (e.state === "starting") e.becomeReady();
    else if (e.state === "ready" && e.recallPending) e.answerRecall();
    else if (e.state === "ready" && e.held.length > 0) e.succeed(e.held.length);
    else acted = false;
  }
  await rig.settle();
  return acted;
}

/** The chain with b temporary and paced, one worker a task, b's window 4 blocks, `sink` watching. */
function pacedRig(sink: CompletionSink): RunRig {
  return RunRig.start(chain({ temporary: true, workers: 1, cpus: 3 }), {
    preferDownstream: true,
    resources: { cpu: 3 },
    temporary: ["b"],
    maxInFlight: 4,
    sink,
  });
}

/** Run the chain to its end; the most b blocks that were done and not yet read by c at once. */
async function peakUnread(
  preferDownstream: boolean,
  o: Chain = { temporary: false, workers: 1, cpus: 1 },
): Promise<{ peak: number; order: string }> {
  let unread = 0;
  let peak = 0;
  let order = "";
  const rig = RunRig.start(chain(o), {
    preferDownstream,
    resources: { cpu: o.cpus },
    temporary: o.temporary ? ["b"] : [],
    sink: {
      done(report: BlockReport): void {
        const task = ["a", "b", "c"][report.task]!;
        if (order.at(-1) !== task) order += task;
        if (task === "b") peak = Math.max(peak, ++unread);
        if (task === "c") unread--;
      },
      failed(): void {},
    },
  });
  for (let round = 0; rig.result === null; round++) {
    assert.ok(round < 100_000, "the run does not end");
    let acted = false;
    for (const e of rig.fakes.made) {
      if (e.state === "starting") {
        e.becomeReady();
        acted = true;
      } else if (e.state === "ready" && e.recallPending) {
        e.answerRecall();
        acted = true;
      } else if (e.state === "ready" && e.held.length > 0) {
        e.succeed(e.held.length);
        acted = true;
      }
    }
    if (!acted) rig.advance(100);
    await rig.settle();
  }
  const result = await rig.finished();
  assert.equal(result.outcome, "complete");
  assert.equal(unread, 0);
  return { peak, order };
}

describe("scheduling with temporaries", () => {
  it("an upstream task keeps the budget while its output stays on disk anyway: a runs to its end, then b and c take turns", async () => {
    // Draining a for b's backlog would free no disk (a's outputs stay) and only add turns; b is
    // paced, so at most what c lacks of it is written and unread.
    const temporary = await peakUnread(true, { temporary: true, workers: 1, cpus: 1 });
    assert.match(temporary.order, /^ab[bc]*c$/, `a was drained: ${temporary.order}`);
    assert.ok(temporary.order.length > 6, `b and c take turns: ${temporary.order}`);
    assert.ok(temporary.peak <= 64, `peak ${temporary.peak} of ${BLOCKS}: ${temporary.order}`);
    // With nothing temporary nothing drains: the one worker runs a, b, then c.
    const plain = await peakUnread(true);
    assert.equal(plain.order, "abc");
    assert.equal(plain.peak, BLOCKS);
  });

  it("a reader of a temporary task with a backlog drains its other upstream task for the budget", async () => {
    // c reads b (temporary, after a) and the first blocks of x. With two cpus, a and x take
    // them; once a is done b gets one, and b's blocks wait for c. A backlog of them drains x
    // (it is parked), so c can have both cpus while x still has blocks; without the drain x
    // would keep its cpu to its end, and c would have one at most.
    const one = { maxWorkers: 1, requires: { cpu: 1 } };
    const rig = RunRig.start([
      linearTask("a", BLOCKS, one),
      linearTask("b", BLOCKS, { ...one, upstream: ["a"] }),
      linearTask("x", 3 * BLOCKS, one),
      linearTask("c", BLOCKS, { maxWorkers: 16, requires: { cpu: 1 }, upstream: ["b", "x"] }),
    ], { preferDownstream: true, resources: { cpu: 2 }, temporary: ["b"], parkable: true });
    let cAlone = false;
    for (let round = 0; rig.result === null; round++) {
      assert.ok(round < 100_000, "the run does not end");
      const x = rig.counters("x");
      if (rig.executors("c").length === 2 && x.completed < x.total) cAlone = true;
      if (!(await stepAll(rig))) rig.advance(100);
    }
    assert.equal((await rig.finished()).outcome, "complete");
    assert.ok(cAlone, "c never had both cpus while x had blocks left: x was not drained");
  });

  for (const [workers, cpus] of [[1, 1], [2, 2], [2, 3]] as const) {
    it(`a temporary b gets only what c lacks, and never holds the budget c needs (${workers} workers per task, ${cpus} cpus)`, async () => {
      // The budget is full of b's executors, held back because c has blocks waiting, while c
      // has no worker to run them: idle executors that may take nothing must make room.
      const { peak, order } = await peakUnread(true, { temporary: true, workers, cpus });
      assert.ok(peak <= 64, `peak ${peak} of ${BLOCKS}: ${order}`);
    });
  }

  it("a temporary b gets nothing while its removals lag, and goes on as soon as they catch up", async () => {
    // Every c block done makes the b block it read due for deletion; the test decides when the
    // files are gone. b's window is 4 blocks: past 4 blocks awaiting removal it must wait.
    let backlog = 0;
    const listeners: (() => void)[] = [];
    const rig = pacedRig({
      done(report: BlockReport): void {
        if (report.task === 2) backlog++;
      },
      failed(): void {},
      removalBacklog: (t: number) => (t === 1 ? backlog : 0),
      onRemoved: (listener: () => void) => void listeners.push(listener),
    });
    const bTaken = () => rig.counters("b").processing + rig.counters("b").completed;
    const step = () => stepAll(rig);
    for (let round = 0; backlog <= 4; round++) {
      assert.ok(round < 1000, "c never got 5 blocks done");
      await step();
    }
    // Everything held runs out; b takes nothing more, however long c waits.
    for (let round = 0; round < 20; round++) await step();
    const taken = bTaken();
    assert.ok(taken < BLOCKS, `b took all ${taken} blocks`);
    assert.equal(rig.counters("b").processing, 0);
    for (let round = 0; round < 20; round++) await step();
    assert.equal(bTaken(), taken, "b took blocks while its removals lagged");
    assert.equal(listeners.length, 1, "the run listens for removals");
    const removed = listeners[0]!;
    // The removals finish: b goes on at once, without a clock tick.
    backlog = 0;
    removed();
    await rig.settle();
    assert.ok(bTaken() > taken, "b got no blocks once its removals caught up");
    for (let round = 0; rig.result === null; round++) {
      assert.ok(round < 10_000, "the run does not end");
      backlog = 0;
      removed();
      if (!(await step())) rig.advance(100);
    }
    assert.equal((await rig.finished()).outcome, "complete");
  });
});

describe("readers of a temporary block start once its files are in place", () => {
  /**
   * b's commits are held by the test: `renamed` stands for the renames into place, `settle` for
   * the barrier after them. c must get a b block's reader at the rename, run it once, and
   * neither lose nor repeat it when the commit ends (or fails and b's block runs again).
   */
  async function heldCommits(failFirst: boolean) {
    const commits = new Map<number, { resolve(): void; reject(e: Error): void }>();
    const cRuns = new Map<number, number>();
    const listeners: ((task: number, position: number) => void)[] = [];
    const renamed = (task: number, position: number) => listeners[0]!(task, position);
    const rig = pacedRig({
      done(report: BlockReport): void | Promise<void> {
        if (report.task === 2) cRuns.set(report.position, (cRuns.get(report.position) ?? 0) + 1);
        if (report.task !== 1) return undefined;
        return new Promise((resolve, reject) => commits.set(report.position, { resolve, reject }));
      },
      failed(): void {},
      onRenamed: (listener) => void listeners.push(listener),
    });
    const step = () => stepAll(rig);
    for (let round = 0; commits.size === 0; round++) {
      assert.ok(round < 1000, "b never reported a block done");
      await step();
    }
    assert.equal(listeners.length, 1, "the run listens for renames");
    const c = () => rig.counters("c");
    assert.equal(
      c().ready + c().processing + c().completed,
      0,
      "c ran before b's files were there",
    );
    const [first] = [...commits.keys()];
    renamed(1, first!);
    await rig.settle();
    assert.equal(c().ready + c().processing, 1, "c's reader of the renamed block did not start");
    assert.equal(rig.counters("b").completed, 0, "b's block is done before its commit ended");
    renamed(1, first!);
    await rig.settle();
    assert.equal(c().ready + c().processing, 1, "a second rename released the reader again");
    let failedOnce = !failFirst;
    for (let round = 0; rig.result === null; round++) {
      assert.ok(round < 20_000, "the run does not end");
      for (const [position, commit] of [...commits]) {
        commits.delete(position);
        renamed(1, position);
        if (!failedOnce) {
          failedOnce = true;
          commit.reject(new Error("the barrier failed"));
        } else commit.resolve();
      }
      if (!(await step())) rig.advance(100);
    }
    const result = await rig.finished();
    return { result, rig, cRuns };
  }

  it("c runs each reader once, whether b's commit ends or is released first", async () => {
    const { result, rig, cRuns } = await heldCommits(false);
    assert.equal(result.outcome, "complete");
    assert.equal(rig.counters("b").completed, BLOCKS);
    assert.equal(rig.counters("c").completed, BLOCKS);
    assert.equal(cRuns.size, BLOCKS);
    assert.ok([...cRuns.values()].every((n) => n === 1), "a c block ran twice");
  });

  it("a commit that fails after the release retries b's block without releasing its reader twice", async () => {
    const { result, rig, cRuns } = await heldCommits(true);
    assert.equal(result.outcome, "complete");
    assert.equal(rig.counters("b").completed, BLOCKS);
    assert.equal(rig.counters("b").failedAttempts, 1);
    assert.equal(rig.counters("c").completed, BLOCKS);
    assert.ok([...cRuns.values()].every((n) => n === 1), "a c block ran twice");
  });
});
