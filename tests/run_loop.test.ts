/**
 * The parallel run loop's scheduling decisions, driven through fake executors and a manual
 * clock (tests/fixtures/run_rig.ts): window sizing from block durations, batching, fair shares,
 * recalls from hoarding executors and on stop, grace periods, restarts and abandonment,
 * timeouts, the resource budget, protocol violations, asynchronous checks and commits. No test
 * here starts a worker or waits for a timer, and the rig checks every counter against what it
 * knows independently after every event.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MAX_WINDOW, MIN_WINDOW, TARGET_BATCH_MS } from "../lib/execute/dispatch.ts";
import type { BlockReport, CompletionSink } from "../lib/run/block_report.ts";
import type { FakeExecutor } from "./fixtures/fake_executor.ts";
import { type Deferred, deferred, linearTask, RunRig } from "./fixtures/run_rig.ts";

/** A completion sink whose commits settle when the test says: one deferred per block, in order. */
function deferredCommits(): { sink: CompletionSink; commits: Deferred<void>[] } {
  const commits: Deferred<void>[] = [];
  const sink: CompletionSink = {
    done(_report: BlockReport): Promise<void> {
      const d = deferred<void>();
      commits.push(d);
      return d.promise;
    },
    failed() {},
  };
  return { sink, commits };
}

/** A window's worth of work in seconds, and blocks a hundredth of it (a window of 100). */
const BATCH_S = TARGET_BATCH_MS / 1000;
const FAST = BATCH_S / 100;

const positions = (e: FakeExecutor, batch: number): number[] =>
  e.batches[batch]!.map((b) => b.position);

describe("run loop: windows and batches", () => {
  for (
    const [seconds, window] of [
      [1e-4, Math.round(TARGET_BATCH_MS / 1000 / 1e-4)],
      [1e-3, Math.round(TARGET_BATCH_MS / 1000 / 1e-3)],
      [0.02, MIN_WINDOW],
      [1e-9, MAX_WINDOW],
    ] as const
  ) {
    it(`sizes the window to hold TARGET_BATCH_MS of ${seconds * 1000} ms blocks: ${window}`, () => {
      const rig = RunRig.start([linearTask("a", 3000)]);
      const e = rig.only("a");
      assert.equal(e.window, 1, "an executor starts with one block until durations are known");
      e.becomeReady();
      assert.deepEqual(positions(e, 0), [0]);
      e.succeed(1, seconds);
      assert.equal(e.window, window);
      assert.equal(e.batches[1]!.length, window, "the next batch fills the new window");
    });
  }

  it("caps the window at maxInFlight", () => {
    const rig = RunRig.start([linearTask("a", 100)], { maxInFlight: 16 });
    const e = rig.only("a");
    e.becomeReady();
    e.succeed(1, 1e-9);
    assert.equal(e.window, 16);
    assert.equal(e.held.length, 16);
  });

  it("sends the next batch only once half the window is free", () => {
    const rig = RunRig.start([linearTask("a", 1000)]);
    const e = rig.only("a");
    e.becomeReady();
    e.succeed(1, FAST);
    assert.equal(e.window, 100);
    assert.equal(e.held.length, 100);
    e.succeed(49, FAST);
    assert.equal(e.batches.length, 2, "49 free of 100: no batch yet");
    assert.equal(e.held.length, 51);
    e.succeed(1, FAST);
    assert.equal(e.batches.length, 3, "50 free of 100: a batch");
    assert.equal(e.batches[2]!.length, 50);
    assert.deepEqual(positions(e, 2), Array.from({ length: 50 }, (_, i) => 101 + i));
    assert.equal(e.held.length, 100);
  });

  it("shrinks the window when blocks turn slow and grows it back when they turn fast", () => {
    const rig = RunRig.start([linearTask("a", 3000)]);
    const e = rig.only("a");
    e.becomeReady();
    e.succeed(1, FAST);
    assert.equal(e.window, 100);
    // Slow blocks (two per window): the window shrinks monotonically to the minimum.
    const shrinking: number[] = [];
    for (let i = 0; i < 60; i++) {
      e.succeed(1, BATCH_S / 2);
      shrinking.push(e.window);
    }
    assert.ok(shrinking.every((w, i) => i === 0 || w <= shrinking[i - 1]!), `${shrinking}`);
    assert.equal(shrinking.at(-1), 2);
    // Work off what was sent while blocks were fast: then batches are two blocks at most.
    while (e.held.length > 2) e.succeed(1, BATCH_S / 2);
    const batchesBefore = e.batches.length;
    e.succeed(2, BATCH_S / 2);
    assert.equal(e.batches.length, batchesBefore + 1);
    assert.equal(e.batches.at(-1)!.length, 2);
    // Fast again: the window grows back to what the new duration asks for.
    const growing: number[] = [];
    for (let i = 0; i < 40; i++) {
      e.succeed(1, FAST);
      growing.push(e.window);
    }
    assert.ok(growing.every((w, i) => i === 0 || w >= growing[i - 1]!), `${growing}`);
    assert.equal(growing.at(-1), 100);
  });
});

describe("run loop: fair shares", () => {
  it("while siblings start, an executor takes only its share of the ready blocks", () => {
    const rig = RunRig.start([linearTask("a", 30, { maxWorkers: 3 })], { initialWindow: 100 });
    const [e0, e1, e2] = rig.executors("a");
    assert.equal(rig.executors("a").length, 3, "three executors start for 30 ready blocks");
    e0!.becomeReady();
    assert.equal(e0!.held.length, 10, "a third while two siblings start");
    e1!.becomeReady();
    assert.equal(e1!.held.length, 10, "half of the rest while one sibling starts");
    e2!.becomeReady();
    assert.equal(e2!.held.length, 10);
    assert.equal(rig.counters("a").ready, 0);
  });

  it("keeps no share for remote workers still starting (their jobs may queue for minutes); a recall spreads the blocks once one connects", () => {
    const rig = RunRig.start([linearTask("a", 30, { maxWorkers: 3 })], {
      initialWindow: 100,
      batchMs: 100,
    });
    const [e0, e1, e2] = rig.executors("a");
    e0!.becomeReady();
    assert.equal(e0!.held.length, 30, "the only connected worker takes what its window holds");
    assert.deepEqual(e0!.recalls, [], "nobody idles yet");
    e1!.becomeReady();
    assert.deepEqual(e0!.recalls, [false], "a sibling idles: the unstarted blocks are asked back");
    e0!.answerRecall();
    assert.ok(e1!.held.length >= 10, `the sibling got ${e1!.held.length} blocks`);
    assert.equal(e2!.state, "starting");
  });

  it("gives a worker joining a task whose blocks were measured a full window at once", () => {
    const rig = RunRig.start([linearTask("a", 1000, { maxWorkers: 2 })]);
    const [e0, e1] = rig.executors("a");
    e0!.becomeReady();
    assert.equal(e0!.held.length, 1, "nothing measured yet: one block first");
    e0!.succeed(1, BATCH_S / 5);
    assert.equal(e0!.window, 5, "a window holds five blocks of a fifth of its time");
    e1!.becomeReady();
    assert.equal(e1!.window, 5, "the task's mean sizes the newcomer's window");
    assert.equal(e1!.held.length, 5);
  });

  it("leaves a share for an idle sibling when blocks become ready", () => {
    // up/0 feeds down/0-9, up/1 feeds down/10-19.
    const rig = RunRig.start([
      {
        ...linearTask("up", 2),
        writeRoi: { offset: [0], shape: [100] },
        readRoi: { offset: [0], shape: [100] },
        totalRoi: { offset: [0], shape: [200] },
      },
      linearTask("down", 20, { upstream: ["up"], maxWorkers: 2 }),
    ], { initialWindow: 100 });
    const up = rig.only("up");
    up.becomeReady();
    assert.equal(up.held.length, 2);
    up.succeed(1);
    const [d0, d1] = rig.executors("down");
    assert.equal(rig.executors("down").length, 2);
    d0!.becomeReady();
    d1!.becomeReady();
    assert.deepEqual([d0!.held.length, d1!.held.length], [5, 5]);
    d0!.succeed(5, BATCH_S / 10);
    d1!.succeed(5, BATCH_S / 10);
    assert.deepEqual([d0!.held.length, d1!.held.length], [0, 0]);
    assert.equal(rig.executors("down").length, 2, "idle executors stay while blocks are pending");
    assert.equal(d0!.window, 10);
    // Ten blocks become ready at once: the first executor filled leaves half to its idle sibling.
    up.succeed(1);
    assert.deepEqual([d0!.held.length, d1!.held.length], [5, 5]);
  });
});

describe("run loop: no hoarding", () => {
  /**
   * The property the old real-worker test timed: no executor sits idle while blocks it could run
   * wait unstarted in a sibling's queue (a sibling holding more than its running block and one
   * more is asked to hand them back).
   */
  function assertNoHoarding(rig: RunRig, id: string): void {
    const live = rig.executors(id);
    if (rig.run.source.available(rig.task(id)) > 0) return;
    const idle = live.filter((e) => e.state === "ready" && e.held.length === 0);
    if (idle.length === 0) return;
    for (const e of live) {
      if (e.held.length > 2) {
        assert.ok(
          e.recallPending,
          `executor ${
            idle[0]!.id
          } is idle while executor ${e.id} holds ${e.held.length} blocks without a recall`,
        );
      }
    }
  }

  it("recalls unstarted blocks from an executor that took many fast blocks which turned slow, once a sibling idles", () => {
    // 200 fast blocks grow the windows; the 200 after them are slow.
    const rig = RunRig.start([linearTask("mixed", 400, { maxWorkers: 2 })]);
    const [e0, e1] = rig.executors("mixed");
    e0!.becomeReady();
    e0!.succeed(1, BATCH_S / 1000);
    assert.equal(e0!.window, MAX_WINDOW > 1000 ? 1000 : MAX_WINDOW);
    assert.equal(e0!.held.length, 200, "half of the rest while its sibling starts");
    e1!.becomeReady();
    e1!.succeed(1, BATCH_S / 1000);
    assert.equal(e1!.held.length, 198, "the rest: no sibling waits");
    // e1 races through its fast blocks; e0's first block is slow and holds 199 behind it.
    e1!.succeed(198, BATCH_S / 1000);
    assert.equal(e1!.held.length, 0);
    assert.equal(rig.counters("mixed").ready, 0);
    assert.deepEqual(e0!.recalls, [false], "the hoarding executor is asked to hand blocks back");
    assert.equal(rig.executors("mixed").length, 2, "the idle executor is kept for them");
    e0!.answerRecall();
    assert.equal(e0!.held.length + e1!.held.length, 200);
    assert.ok(e1!.held.length >= 99, `the idle executor got ${e1!.held.length} blocks`);
    assert.equal(rig.counters("mixed").ready, 0);
    // Run the slow part to the end, one block per executor per step.
    const slowBy = new Map<number, number>();
    for (let step = 0; rig.result === null; step++) {
      assert.ok(step < 1000, "the run did not end");
      for (const e of rig.executors("mixed")) if (e.recallPending) e.answerRecall();
      for (const e of rig.executors("mixed")) {
        if (e.state !== "ready" || e.held.length === 0) continue;
        slowBy.set(e.id, (slowBy.get(e.id) ?? 0) + 1);
        e.succeed(1, 0.02);
        assertNoHoarding(rig, "mixed");
      }
    }
    const counts = [...slowBy.values()];
    assert.equal(counts.reduce((a, b) => a + b, 0), 200);
    assert.ok(
      counts.length === 2 && counts.every((n) => n >= 80),
      `slow blocks per executor ${counts}`,
    );
    assert.equal(rig.result.outcome, "complete");
  });

  /**
   * Two executors of 400 fast blocks: e0 takes 200 while e1 starts, e1 races through the other
   * 198 and idles while e0 still holds 199 unstarted ones.
   */
  function siblingIdlesBesideHoarder(options: { answerRecallAtOnce?: boolean } = {}) {
    const rig = RunRig.start([linearTask("mixed", 400, { maxWorkers: 2 })], options);
    const [e0, e1] = rig.executors("mixed");
    e0!.becomeReady();
    e0!.succeed(1, 1e-5);
    e1!.becomeReady();
    e1!.succeed(1, 1e-5);
    e1!.succeed(198, BATCH_S / 1000);
    return { rig, e0: e0!, e1: e1! };
  }

  it("keeps the idle executor while a recall is unanswered, even if the sibling's queue runs down meanwhile", () => {
    const { rig, e0, e1 } = siblingIdlesBesideHoarder();
    assert.deepEqual(e0!.recalls, [false], "e0 is asked to hand back its unstarted blocks");
    // The recall is on its way; e0 runs all but two of its blocks before it answers.
    e0!.succeed(198, 1e-5);
    assert.equal(e0!.held.length, 2);
    assert.notEqual(e1!.state, "dead", "the idle executor waits for what the recall brings");
    e0!.answerRecall();
    assert.equal(e1!.held.length, 1, "the handed-back block goes to the idle executor");
    assert.equal(rig.made("mixed").length, 2, "no executor is started to replace a retired one");
  });

  it("handles a recall answered inside recall() (command slots answer at once)", () => {
    const { e0, e1 } = siblingIdlesBesideHoarder({ answerRecallAtOnce: true });
    assert.deepEqual(e0!.recalls, [false]);
    assert.ok(e1!.held.length >= 99, `the idle executor got ${e1!.held.length} blocks`);
    assert.equal(e0!.held.length + e1!.held.length, 200);
  });
});

describe("run loop: stopping", () => {
  it("on a stop request recalls every executor for good, requeues what they hand back and ends when the running blocks finish", async () => {
    const rig = RunRig.start([linearTask("a", 20, { maxWorkers: 2 })], { initialWindow: 4 });
    const [e0, e1] = rig.executors("a");
    e0!.becomeReady();
    e1!.becomeReady();
    assert.deepEqual([e0!.held.length, e1!.held.length], [4, 4]);
    rig.stop("SIGINT");
    assert.deepEqual([e0!.recalls, e1!.recalls], [[true], [true]]);
    e0!.answerRecall();
    e1!.answerRecall();
    assert.deepEqual([e0!.held.length, e1!.held.length], [1, 1], "the running blocks stay");
    assert.equal(rig.counters("a").ready, 18);
    e0!.succeed(1);
    assert.equal(rig.result, null, "a block still runs");
    assert.equal(e0!.batches.length, 1, "nothing is dispatched after the stop");
    e1!.succeed(1);
    const result = await rig.finished();
    assert.equal(result.outcome, "interrupted-sigint");
    assert.equal(result.stoppedBy, "SIGINT");
    const c = result.tasks[0]!.counters;
    assert.deepEqual([c.phase, c.completed, c.ready, c.processing, c.failedAttempts], [
      "running",
      2,
      18,
      0,
      0,
    ]);
  });

  it("puts blocks still held when the grace period ends back in the queue", async () => {
    const rig = RunRig.start([
      linearTask("a", 10, { maxWorkers: 2 }),
    ], { initialWindow: 3, graceSeconds: 5 });
    const [e0, e1] = rig.executors("a");
    e0!.becomeReady();
    e1!.becomeReady();
    rig.stop("SIGTERM");
    e0!.succeed(3);
    assert.equal(rig.result, null);
    // e1 never answers its recall and never finishes its running block.
    rig.advance(4_999);
    assert.equal(rig.result, null, "the grace period has not ended");
    assert.equal(e1!.held.length, 3);
    rig.advance(1);
    const result = await rig.finished();
    assert.equal(result.outcome, "interrupted-sigterm");
    assert.equal(e1!.killed, true);
    const c = result.tasks[0]!.counters;
    assert.deepEqual([c.completed, c.ready, c.processing, c.pending, c.failedAttempts], [
      3,
      7,
      0,
      0,
      0,
    ]);
  });
});

describe("run loop: the executors at the end", () => {
  it("stops the executors still starting when the run completes, so a worker that connected but still sets up exits cleanly", async () => {
    const rig = RunRig.start([linearTask("a", 6, { maxWorkers: 3 })], { initialWindow: 2 });
    const [e0, e1, e2] = rig.executors("a");
    e0!.becomeReady();
    for (let step = 0; rig.result === null; step++) {
      assert.ok(step < 100, "the run did not end");
      assert.deepEqual([e1!.state, e2!.state], ["starting", "starting"]);
      e0!.succeed(1);
    }
    const result = await rig.finished();
    assert.equal(result.outcome, "complete");
    assert.deepEqual(
      [e0, e1, e2].map((e) => [e!.stopped, e!.killed]),
      [[true, false], [true, false], [true, false]],
      "every executor holding nothing is told to stop; none is killed",
    );
  });

  it("on a stop request kills only the executors still holding blocks when the grace period ends", async () => {
    const rig = RunRig.start([linearTask("a", 10, { maxWorkers: 3 })], {
      initialWindow: 3,
      graceSeconds: 5,
    });
    const [e0, e1, e2] = rig.executors("a");
    e0!.becomeReady();
    e1!.becomeReady();
    rig.stop("SIGTERM");
    e0!.succeed(e0!.held.length);
    // e1 never answers its recall; e2 never gets past its start.
    rig.advance(5_000);
    const result = await rig.finished();
    assert.equal(result.outcome, "interrupted-sigterm");
    assert.deepEqual(
      [e0, e1, e2].map((e) => [e!.stopped, e!.killed]),
      [[true, false], [false, true], [true, false]],
    );
  });
});

describe("run loop: stopping with work outside executors", () => {
  it("waits for a check that answers after the stop, and puts its block back in the queue", async () => {
    const answers: Deferred<boolean>[] = [];
    const rig = RunRig.start([
      linearTask("a", 2, {
        check() {
          const d = deferred<boolean>();
          answers.push(d);
          return d.promise;
        },
      }),
    ]);
    rig.only("a").becomeReady();
    assert.equal(answers.length, 2);
    answers[0]!.resolve(true);
    await rig.settle();
    rig.stop();
    await rig.settle();
    assert.equal(rig.result, null, "a check is still out");
    answers[1]!.resolve(false);
    const result = await rig.finished();
    assert.equal(result.outcome, "interrupted-sigint");
    const c = result.tasks[0]!.counters;
    assert.deepEqual([c.completed, c.skipped, c.ready, c.processing], [1, 1, 1, 0]);
  });

  it("waits for a commit that settles after the stop and counts its block", async () => {
    const { sink, commits } = deferredCommits();
    const rig = RunRig.start([linearTask("a", 3)], { sink });
    const e = rig.only("a");
    e.becomeReady();
    e.succeed(1);
    rig.stop();
    e.answerRecall();
    e.succeed(1);
    await rig.settle();
    assert.equal(rig.result, null, "two commits are still out");
    commits[0]!.resolve();
    commits[1]!.resolve();
    const result = await rig.finished();
    const c = result.tasks[0]!.counters;
    assert.deepEqual([c.completed, c.ready, c.processing], [2, 1, 0]);
  });

  it("fails the running block of an executor that crashes during the grace period and starts no replacement", async () => {
    const rig = RunRig.start([linearTask("a", 4, { maxRetries: 1 })], { initialWindow: 2 });
    const e = rig.only("a");
    e.becomeReady();
    rig.stop("SIGTERM");
    e.crash("the worker exited");
    assert.equal(rig.made("a").length, 1, "no replacement while stopping");
    const result = await rig.finished();
    assert.equal(result.outcome, "interrupted-sigterm");
    const c = result.tasks[0]!.counters;
    assert.deepEqual([c.ready, c.processing, c.failedAttempts], [4, 0, 1]);
  });
});

describe("run loop: lost executors", () => {
  it("fails only the running block of a crashed executor; its unstarted blocks return without spending an attempt", () => {
    const rig = RunRig.start([linearTask("a", 8, { maxRetries: 1 })], { initialWindow: 4 });
    const e0 = rig.only("a");
    e0.becomeReady();
    assert.deepEqual(positions(e0, 0), [0, 1, 2, 3]);
    e0.crash("process.exit(1)");
    assert.equal(e0.killed, true);
    assert.equal(rig.failures.length, 1);
    assert.deepEqual([rig.failures[0]!.index, rig.failures[0]!.attempt], [[0], 1]);
    assert.match(
      rig.failures[0]!.message,
      /^Worker 0 stopped while running this block: process\.exit\(1\)/,
    );
    assert.equal(rig.counters("a").failedAttempts, 1);
    const e1 = rig.only("a");
    assert.notEqual(e1, e0, "a replacement starts");
    assert.equal(rig.run.tasks[0]!.stats.restarts, 1);
    assert.ok(
      rig.notices.some((n) =>
        /worker 0 was terminated \(process\.exit\(1\)\); restarting it/.test(n)
      ),
      rig.notices.join("\n"),
    );
    e1.becomeReady();
    e1.succeed(4);
    // The retried block runs as attempt 2, the handed-back ones as attempt 1.
    assert.deepEqual(e1.batches[1], [
      { position: 0, attempt: 2 },
      { position: 1, attempt: 1 },
      { position: 2, attempt: 1 },
      { position: 3, attempt: 1 },
    ]);
  });

  it("when an executor cannot say which block runs, blames a lone block and no block among several", () => {
    const several = RunRig.start([linearTask("a", 8)], { initialWindow: 4 });
    const e = several.only("a");
    e.tellsRunning = false;
    e.becomeReady();
    e.crash();
    assert.equal(several.counters("a").failedAttempts, 0);
    assert.equal(several.counters("a").ready, 8);

    const lone = RunRig.start([linearTask("a", 8)]);
    const f = lone.only("a");
    f.tellsRunning = false;
    f.becomeReady();
    f.crash();
    assert.equal(lone.counters("a").failedAttempts, 1);
  });

  it("replaces crashed executors up to maxWorkerRestarts, then abandons the task and its downstream; other tasks go on", async () => {
    const rig = RunRig.start([
      linearTask("a", 4, { maxWorkerRestarts: 2, maxRetries: 10 }),
      linearTask("b", 4, { upstream: ["a"] }),
      linearTask("c", 2),
    ]);
    const c = rig.only("c");
    for (let k = 0; k < 3; k++) {
      const e = rig.only("a");
      e.becomeReady();
      e.crash("the worker exited");
      assert.equal(rig.made("a").length, Math.min(k + 2, 3));
    }
    assert.equal(rig.executors("a").length, 0, "no fourth executor");
    const a = rig.counters("a");
    assert.equal(a.phase, "abandoned");
    assert.deepEqual(a.abandonReason, {
      kind: "workers-failed",
      failures: 3,
      maxWorkerRestarts: 2,
    });
    assert.deepEqual([a.completed, a.orphaned, a.failedAttempts], [0, 4, 3]);
    const b = rig.counters("b");
    assert.equal(b.phase, "abandoned");
    assert.deepEqual(b.abandonReason, { kind: "upstream-abandoned", upstream: "a" });
    assert.ok(
      rig.notices.some((n) => n.includes('Task "a" abandoned: its workers failed 3 times')),
    );
    assert.ok(rig.notices.some((n) => n.includes('Task "b" abandoned: upstream task "a"')));
    assert.ok(rig.notices.some((n) => n.includes("no restarts left")));
    assert.equal(rig.result, null, "task c still runs");
    c.becomeReady();
    c.succeed(1);
    c.succeed(1);
    const result = await rig.finished();
    assert.equal(result.outcome, "incomplete");
    assert.equal(rig.counters("c").completed, 2);
  });

  it("replaces an executor whose setup failed without failing a block, and abandons the task when every setup fails", () => {
    const rig = RunRig.start([linearTask("a", 3, { maxWorkerRestarts: 1 })]);
    rig.only("a").failSetup("no GPU here");
    assert.ok(rig.notices.some((n) => n.includes("setup failed in worker 0: no GPU here")));
    assert.equal(rig.made("a").length, 2);
    rig.only("a").failSetup("no GPU here");
    const a = rig.counters("a");
    assert.equal(a.phase, "abandoned");
    assert.deepEqual([a.failedAttempts, a.orphaned], [0, 3]);
    // Every worker failed its setup: the reason says so, with the setup's message.
    assert.deepEqual(a.abandonReason, { kind: "setup-failed", message: "no GPU here" });
  });

  it("names the restart cap when workers also crashed, not only failed setup", () => {
    const rig = RunRig.start([linearTask("a", 3, { maxWorkerRestarts: 1 })]);
    rig.only("a").failSetup("no GPU here");
    const e = rig.only("a");
    e.becomeReady();
    e.crash("segfault");
    assert.deepEqual(rig.counters("a").abandonReason, {
      kind: "workers-failed",
      failures: 2,
      maxWorkerRestarts: 1,
    });
  });

  it("handles an executor that closed itself like a crash: the block is retried elsewhere", async () => {
    const rig = RunRig.start([linearTask("a", 1)]);
    const e0 = rig.only("a");
    e0.becomeReady();
    e0.selfClose();
    assert.match(rig.failures[0]!.message, /self\.close\(\)/);
    const e1 = rig.only("a");
    e1.becomeReady();
    assert.deepEqual(e1.batches[0], [{ position: 0, attempt: 2 }]);
    e1.succeed();
    assert.equal((await rig.finished()).outcome, "complete");
  });

  it("treats a result for a block the executor does not hold as a crash", () => {
    const rig = RunRig.start([linearTask("a", 4)], { initialWindow: 2 });
    const e0 = rig.only("a");
    e0.becomeReady();
    e0.reportUnheld(3);
    assert.equal(e0.killed, true);
    assert.ok(
      rig.notices.some((n) =>
        n.includes("the worker reported block position 3, which it was not running")
      ),
      rig.notices.join("\n"),
    );
    assert.equal(rig.counters("a").failedAttempts, 1, "its running block failed that attempt");
    assert.equal(rig.run.tasks[0]!.stats.restarts, 1);
  });

  it("treats handing back a block the executor does not hold as a crash", () => {
    const rig = RunRig.start([linearTask("a", 4)], { initialWindow: 2 });
    const e0 = rig.only("a");
    e0.becomeReady();
    e0.returnUnheld(3);
    assert.equal(e0.killed, true);
    assert.ok(
      rig.notices.some((n) => n.includes("handed back block position 3, which it did not hold")),
    );
    assert.equal(rig.counters("a").failedAttempts, 1, "its running block failed that attempt");
    assert.equal(rig.counters("a").ready, 4);
  });

  it("retries a failing block on the same executor, then fails it and orphans its downstream", async () => {
    const rig = RunRig.start([
      linearTask("a", 2, { maxRetries: 2 }),
      linearTask("b", 2, { upstream: ["a"] }),
    ]);
    const e = rig.only("a");
    e.becomeReady();
    const attemptsOf0: number[] = [];
    while (e.held.length > 0) {
      e.finish(e.held.map((b) => {
        if (b.position !== 0) return {};
        attemptsOf0.push(b.attempt);
        return { error: `bad ${b.attempt}` };
      }));
    }
    assert.deepEqual(attemptsOf0, [1, 2, 3]);
    assert.deepEqual(rig.made("a"), [e], "exceptions never cost the executor");
    const b = rig.only("b");
    b.becomeReady();
    assert.deepEqual(b.heldPositions, [1], "only the block over the good one runs");
    b.succeed();
    const result = await rig.finished();
    assert.deepEqual(result.failures.map((f) => [f.index, f.attempt, f.message]), [[
      [0],
      3,
      "bad 3",
    ]]);
    assert.deepEqual(rig.failures.map((f) => f.permanent), [false, false, true]);
    const cb = rig.counters("b");
    assert.deepEqual([cb.phase, cb.completed, cb.orphaned], ["done", 1, 1]);
  });
});

describe("run loop: timeouts on the run clock", () => {
  it("ends an executor whose block runs past the timeout on the next health tick, and retries the block", async () => {
    const rig = RunRig.start([linearTask("a", 1, { timeout: 1, maxRetries: 1 })]);
    const start = rig.clock.now();
    const e0 = rig.only("a");
    e0.becomeReady();
    rig.advance(1_000);
    assert.notEqual(e0.state, "dead", "exactly at the timeout the block may still finish");
    rig.advance(200);
    assert.equal(e0.state, "dead");
    assert.deepEqual(e0.healthChecks, [200, 400, 600, 800, 1_000, 1_200].map((ms) => start + ms));
    assert.match(
      rig.failures[0]!.message,
      /^Worker 0 stopped while running this block: block ran longer than the task's timeout of 1 s/,
    );
    const e1 = rig.only("a");
    e1.becomeReady();
    e1.succeed();
    const result = await rig.finished();
    assert.equal(result.outcome, "complete");
    assert.equal(result.tasks[0]!.counters.failedAttempts, 1);
  });

  it("never times out a task without a timeout, however long its block runs", () => {
    const rig = RunRig.start([linearTask("a", 1)]);
    const e = rig.only("a");
    e.becomeReady();
    rig.advance(3_600_000);
    // Every executor is health-checked on every tick (a stream worker's lease needs it), and an
    // executor with no timeout never ends its block.
    assert.equal(e.healthChecks.length, 3_600_000 / 200);
    assert.notEqual(e.state, "dead");
    assert.equal(rig.progress.length, 3_600_000 / 200, "progress is reported on every tick");
  });
});

describe("run loop: resource budget", () => {
  it("moves the budget from an upstream task to its downstream as the upstream drains", async () => {
    const rig = RunRig.start([
      linearTask("filter", 4, { maxWorkers: 2, requires: { cpu: 1 } }),
      linearTask("agglom", 4, { upstream: ["filter"], maxWorkers: 2, requires: { cpu: 1 } }),
    ], { resources: { cpu: 2 } });
    const [f0, f1] = rig.executors("filter");
    assert.equal(rig.executors("filter").length, 2);
    f0!.becomeReady();
    f1!.becomeReady();
    f0!.succeed(1);
    assert.equal(rig.counters("agglom").ready, 1);
    assert.equal(rig.executors("agglom").length, 0, "the budget is in use by filter");
    assert.deepEqual(f0!.heldPositions, [2, 3]);
    f1!.succeed(1);
    // filter has nothing left for f1: it is retired and agglom gets its cpu in the same step.
    assert.equal(f1!.stopped, true, "retired cleanly");
    assert.equal(rig.executors("agglom").length, 1);
    const a0 = rig.only("agglom");
    a0.becomeReady();
    assert.deepEqual(a0.heldPositions, [0]);
    f0!.succeed(2);
    assert.equal(rig.counters("filter").phase, "done");
    assert.equal(rig.executors("agglom").length, 2, "filter's last cpu goes to agglom too");
    const a1 = rig.executors("agglom")[1]!;
    a1.becomeReady();
    while (rig.result === null) {
      for (const e of rig.executors("agglom")) if (e.held.length > 0) e.succeed(1);
    }
    const result = await rig.finished();
    assert.equal(result.outcome, "complete");
    const u = result.utilization!;
    assert.deepEqual(u.tasks.map((t) => [t.id, t.maxConcurrent]), [["filter", 2], ["agglom", 2]]);
  });
});

describe("run loop: asynchronous check", () => {
  it("keeps a block processing until its check answers, releases its downstream only if it says done, and runs it if the check throws", async () => {
    const answers = new Map<number, Deferred<boolean>>();
    const rig = RunRig.start([
      linearTask("a", 3, {
        check(block) {
          const d = deferred<boolean>();
          answers.set(block.index[0]!, d);
          return d.promise;
        },
      }),
      linearTask("b", 3, { upstream: ["a"] }),
    ]);
    const ea = rig.only("a");
    ea.becomeReady();
    assert.deepEqual([...answers.keys()], [0, 1, 2], "every ready block is being checked");
    assert.deepEqual(rig.executors("a"), [ea], "the idle executor waits for the answers");
    assert.equal(rig.run.source.checking(0), 3);
    assert.equal(rig.counters("a").processing, 3);
    assert.equal(rig.counters("b").pending, 3);
    assert.equal(rig.executors("b").length, 0);

    answers.get(0)!.resolve(true);
    await rig.settle();
    const a = rig.counters("a");
    assert.deepEqual([a.completed, a.skipped, a.processing], [1, 1, 2]);
    assert.equal(rig.counters("b").ready + rig.counters("b").processing, 1, "b/0 is released");

    answers.get(1)!.resolve(false);
    await rig.settle();
    assert.deepEqual(ea.heldPositions, [1], "a block whose check said no is run");
    assert.equal(rig.made("a").length, 1, "by the executor that waited, not a new one");

    answers.get(2)!.reject(new Error("check broke"));
    await rig.settle();
    assert.ok(
      rig.notices.some((n) =>
        n.includes("check threw for block 2, running the block: check broke")
      ),
      rig.notices.join("\n"),
    );
    while (rig.result === null) {
      for (const id of ["a", "b"]) {
        for (const e of rig.executors(id)) {
          if (e.state === "starting") e.becomeReady();
          else if (e.held.length > 0) e.succeed(1);
        }
      }
    }
    const result = await rig.finished();
    assert.equal(result.outcome, "complete");
    assert.deepEqual([rig.counters("a").skipped, rig.counters("b").completed], [1, 3]);
  });
});

describe("run loop: asynchronous completion", () => {
  it("hands an idle reader the blocks a group of commits released in one batch, not one by one", async () => {
    const { sink, commits } = deferredCommits();
    const rig = RunRig.start([
      linearTask("a", 8),
      linearTask("b", 8, { upstream: ["a"], maxWorkers: 1 }),
    ], { sink, initialWindow: 8 });
    const a = rig.only("a");
    a.becomeReady();
    a.succeed(8);
    assert.equal(commits.length, 8);
    // b's executor is started by a first commit, then waits idle for the rest of the group.
    commits[0]!.resolve();
    await rig.settle();
    const b = rig.only("b");
    b.becomeReady();
    assert.deepEqual(b.batches.map((batch) => batch.length), [1]);
    b.succeed(1);
    // The group commit settles the other seven at once: one batch of seven.
    for (const d of commits.slice(1)) d.resolve();
    await rig.settle();
    assert.deepEqual(b.batches.map((batch) => batch.length), [1, 7]);
    b.succeed(7);
    for (const d of commits.slice(8)) d.resolve();
    const result = await rig.finished();
    assert.equal(result.outcome, "complete");
  });

  it("keeps a block processing until its commit settles, releases its downstream only then, and fails the attempt when the commit is rejected", async () => {
    const { sink, commits } = deferredCommits();
    const rig = RunRig.start([
      linearTask("a", 2, { maxRetries: 1 }),
      linearTask("b", 2, { upstream: ["a"] }),
    ], { sink });
    const e = rig.only("a");
    e.becomeReady();
    e.succeed(1);
    assert.equal(rig.run.completion.committing(0), 1);
    assert.deepEqual([rig.counters("a").completed, rig.counters("a").processing], [0, 2]);
    assert.deepEqual([rig.counters("b").ready, rig.counters("b").pending], [0, 2]);
    assert.equal(rig.executors("b").length, 0);
    await rig.settle();
    assert.equal(rig.counters("b").pending, 2, "still not released without the commit");

    commits[0]!.resolve();
    await rig.settle();
    assert.equal(rig.counters("a").completed, 1);
    assert.equal(rig.counters("b").ready, 1, "b/0 is released once a/0 is durable");

    e.succeed(1);
    assert.equal(commits.length, 2);
    commits[1]!.reject(new Error("disk full"));
    await rig.settle();
    assert.equal(rig.failures.length, 1);
    assert.equal(rig.failures[0]!.message, "Committing the block's outputs failed: disk full");
    assert.deepEqual([rig.failures[0]!.attempt, rig.failures[0]!.permanent], [1, false]);
    assert.equal(rig.counters("a").failedAttempts, 1);

    for (let step = 0; rig.result === null; step++) {
      assert.ok(step < 100, "the run did not end");
      for (const id of ["a", "b"]) {
        for (const x of rig.executors(id)) {
          if (x.state === "starting") x.becomeReady();
          else if (x.held.length > 0) x.succeed(1);
        }
      }
      for (const d of commits) d.resolve();
      await rig.settle();
    }
    const result = await rig.finished();
    assert.equal(result.outcome, "complete");
  });
});

describe("run loop: resumed tasks", () => {
  it("starts no executor for a task that is already done and runs its downstream at once", async () => {
    const rig = RunRig.start([
      linearTask("a", 3),
      linearTask("b", 3, { upstream: ["a"] }),
    ], { alreadyDone: (t) => t === 0 });
    assert.equal(rig.made("a").length, 0);
    const b = rig.only("b");
    b.becomeReady();
    while (b.held.length > 0) b.succeed(b.held.length);
    const result = await rig.finished();
    assert.equal(result.outcome, "complete");
    assert.deepEqual([rig.counters("a").skipped, rig.counters("b").completed], [3, 3]);
  });
});

describe("run loop: progress", () => {
  it("counts as running the blocks executors run now, not every block they hold", () => {
    const rig = RunRig.start([linearTask("a", 200, { maxWorkers: 3 })], { initialWindow: 4 });
    const executors = rig.executors("a");
    assert.equal(executors.length, 3);
    executors[0]!.becomeReady();
    executors[1]!.becomeReady();
    rig.advance(200); // a health tick: one progress report
    let report = rig.progressReports.at(-1)![0]!;
    assert.equal(report.counters.processing, 8, "two executors hold a window of 4 each");
    assert.equal(report.running, 2, "but each runs one block at a time");
    executors[2]!.becomeReady();
    executors[0]!.succeed(4);
    rig.advance(200);
    report = rig.progressReports.at(-1)![0]!;
    const holding = executors.filter((e) => e.held.length > 0).length;
    assert.ok(report.counters.processing > holding);
    assert.equal(report.running, holding);
  });
});
