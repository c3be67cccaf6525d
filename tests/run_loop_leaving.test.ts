/**
 * Remote workers that leave on their own (a batch job near its walltime) through the run loop's
 * fake-executor rig: a leaving executor gets no more blocks, hands back those it has not
 * started, finishes the one it runs and is retired cleanly; a replacement starts at once without
 * spending a restart; one that leaves before finishing any block counts as a failed worker, so
 * jobs too short to do anything end in abandonment instead of churning forever.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { linearTask, RunRig } from "./fixtures/run_rig.ts";

describe("run loop: a worker leaving before its job ends", () => {
  it("drains it, starts a replacement at once without spending a restart, and completes", async () => {
    const rig = RunRig.start([linearTask("a", 12, { maxWorkerRestarts: 0 })], {
      initialWindow: 4,
    });
    const e0 = rig.only("a");
    e0.becomeReady();
    e0.succeed(2);
    const held = e0.heldPositions;
    assert.ok(held.length >= 2, `it holds several blocks: ${held}`);
    e0.leave("its job ends in 40 s, less than the margin of 60 s");
    assert.ok(
      rig.notices.some((n) => /worker 0 takes no more blocks \(its job ends in 40 s/.test(n)),
      rig.notices.join("\n"),
    );
    assert.deepEqual(e0.recalls, [false], "its unstarted blocks are recalled");
    const sent = e0.sentCount;
    e0.answerRecall();
    const e1 = rig.made("a")[1];
    assert.ok(e1 !== undefined, "a replacement starts while it finishes its block");
    e0.succeed(1);
    assert.equal(e0.sentCount, sent, "a leaving worker gets no more blocks");
    assert.equal(e0.stopped, true, "it is retired cleanly once it holds nothing");
    assert.equal(e0.killed, false);
    e1.becomeReady();
    while (e1.held.length > 0) e1.succeed(e1.held.length);
    const result = await rig.finished();
    assert.equal(result.outcome, "complete");
    assert.equal(rig.counters("a").completed, 12);
    assert.equal(rig.counters("a").failedAttempts, 0, "no block failed");
    assert.equal(rig.run.tasks[0]!.stats.restarts, 0, "leaving spends no restart");
  });

  it("counts a worker that leaves before finishing any block as failed, and abandons the task when every job is too short", async () => {
    const rig = RunRig.start([linearTask("a", 4, { maxWorkerRestarts: 2 })]);
    for (let k = 0; k < 3; k++) {
      const e = rig.made("a")[k]!;
      assert.equal(e.state, "starting");
      // Its job is too short: it leaves while its setup still runs.
      e.leave("its job ends in 5 s, less than the margin of 60 s");
      e.becomeReady();
      assert.equal(e.stopped, true, `worker ${k} is retired once ready, holding nothing`);
    }
    assert.equal(rig.made("a").length, 3, "no fourth worker");
    const a = rig.counters("a");
    assert.equal(a.phase, "abandoned");
    assert.deepEqual(a.abandonReason, {
      kind: "workers-failed",
      failures: 3,
      maxWorkerRestarts: 2,
    });
    assert.equal(a.failedAttempts, 0, "no block is blamed");
    const result = await rig.finished();
    assert.equal(result.outcome, "incomplete");
  });
});
