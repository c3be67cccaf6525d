/**
 * Which executors a pump fills (lib/execute/fill_queue.ts): the executors marked by their own
 * events, and a task's hungry ones whenever it has blocks. The counts a task keeps of its idle
 * and heavy executors follow every queue change; a pump after one executor's results touches
 * that executor, not its thousands of siblings; and random scripts of events (results, failures,
 * crashes, failed setups, recalls, workers leaving, health ticks) over pipelines with upstream
 * tasks, with local or remote workers, never leave a ready executor idle while its task has
 * blocks (`ParallelRun.checkDispatch`, checked after every event, also recounts the starting
 * remote executors), and always end.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InFlightQueue, QueueTally } from "../lib/execute/in_flight.ts";
import { linearTask, RunRig } from "./fixtures/run_rig.ts";
import { Rng } from "./fixtures/rng.ts";

describe("queue tallies", () => {
  it("count empty and heavy queues through pushes, removals, clears and moves", () => {
    const tally = new QueueTally();
    const a = new InFlightQueue();
    const b = new InFlightQueue();
    a.track(tally);
    b.track(tally);
    assert.deepEqual({ ...tally }, { empty: 2, heavy: 0 });
    for (let p = 0; p < 4; p++) a.push(p, 1, 0);
    assert.deepEqual({ ...tally }, { empty: 1, heavy: 1 }, "4 blocks: heavy");
    a.remove(0);
    assert.deepEqual({ ...tally }, { empty: 1, heavy: 1 }, "3 left: still more than two");
    a.remove(2); // from the middle
    assert.deepEqual({ ...tally }, { empty: 1, heavy: 0 }, "2 left: no longer heavy");
    a.remove(3); // from the tail
    a.remove(1);
    assert.deepEqual({ ...tally }, { empty: 2, heavy: 0 });
    assert.equal(a.remove(7), -1);
    assert.deepEqual({ ...tally }, { empty: 2, heavy: 0 }, "a miss changes nothing");
    for (let p = 0; p < 40; p++) b.push(p, 1, 0); // grows its ring on the way
    assert.deepEqual({ ...tally }, { empty: 1, heavy: 1 });
    const other = new QueueTally();
    b.track(other);
    assert.deepEqual({ ...tally }, { empty: 1, heavy: 0 });
    assert.deepEqual({ ...other }, { empty: 0, heavy: 1 });
    b.clear();
    assert.deepEqual({ ...other }, { empty: 1, heavy: 0 });
    b.track(null);
    a.track(null);
    assert.deepEqual({ ...tally }, { empty: 0, heavy: 0 });
    assert.deepEqual({ ...other }, { empty: 0, heavy: 0 });
  });
});

describe("filling hungry executors", () => {
  it("gives idle executors of a downstream task blocks as soon as its upstream releases some", () => {
    const rig = RunRig.start([
      linearTask("up", 4, { maxWorkers: 1 }),
      linearTask("down", 4, { upstream: ["up"], maxWorkers: 3 }),
    ]);
    const up = rig.only("up");
    up.becomeReady();
    up.succeed(1);
    // Its first block done released one of down's: down starts an executor for it.
    const [d0] = rig.executors("down");
    d0!.becomeReady();
    assert.equal(d0!.held.length, 1);
    d0!.succeed(1);
    assert.equal(d0!.held.length, 0, "nothing else ready for down: d0 waits, hungry");
    assert.equal(rig.run.checkDispatch(), null);
    up.succeed(1);
    assert.equal(d0!.held.length, 1, "up's result released a block: idle d0 got it at once");
    assert.equal(rig.run.checkDispatch(), null);
  });

  it("lets a busy executor's results alone touch it, not its siblings", () => {
    const n = 400;
    const rig = RunRig.start([linearTask("a", 100_000, { maxWorkers: n })], { initialWindow: 4 });
    const all = rig.executors("a");
    assert.equal(all.length, n);
    for (const e of all) e.becomeReady();
    for (const e of all) assert.equal(e.held.length, 4);
    // Count the run loop's looks at executors' windows (the rig's own checks read none) during
    // one result: filling every executor looked at each of them.
    let looks = 0;
    for (const e of all) {
      let window = e.window;
      Object.defineProperty(e, "window", {
        get: () => (looks++, window),
        set: (w: number) => (window = w),
      });
    }
    const last = all[n - 1]!;
    last.succeed(2);
    assert.equal(last.held.length, last.window, "it was filled");
    assert.ok(looks < 20, `one result looked at executors' windows ${looks} times`);
  });
});

/** Drive a random pipeline with random events; check the invariant after each one. */
async function randomRun(seed: number): Promise<void> {
  const rng = new Rng(seed);
  const size = () => 5 + rng.int(60);
  const workers = () => 1 + rng.int(7);
  const restarts = { maxWorkerRestarts: 1000 };
  const rig = RunRig.start([
    linearTask("a", size(), { maxWorkers: workers(), ...restarts }),
    linearTask("b", size(), { upstream: ["a"], maxWorkers: workers(), ...restarts }),
    linearTask("c", size(), { maxWorkers: workers(), ...restarts }),
    linearTask("d", size(), { upstream: ["b", "c"], maxWorkers: workers(), ...restarts }),
  ], {
    initialWindow: 1 + rng.int(3),
    answerRecallAtOnce: rng.chance(0.3),
    ...(rng.chance(0.3) ? { maxInFlight: 2 + rng.int(6) } : {}),
    // Remote workers: the fair share keeps nothing for those still starting.
    ...(rng.chance(0.4) ? { batchMs: 100 } : {}),
  });
  const durations = [1e-5, 1e-3, 0.004, 0.05];
  let idleSteps = 0;
  for (let step = 0; rig.result === null; step++) {
    assert.ok(step < 20_000, `seed ${seed}: the run did not end within 20,000 events`);
    const live = rig.fakes.made.filter((e) => e.state !== "dead");
    const acting = live.filter((e) => e.state === "starting" || e.held.length > 0);
    if (acting.length === 0 || rng.chance(0.02)) {
      // Nothing to do but wait: the health tick pumps (a stalled run throws from it).
      assert.ok(++idleSteps < 50, `seed ${seed}: nothing moves (${step} events)`);
      rig.advance(200);
    } else {
      idleSteps = 0;
      const e = rng.pick(acting);
      const roll = rng.next();
      if (e.state === "starting") {
        if (roll < 0.03) e.failSetup();
        else e.becomeReady();
      } else if (e.recallPending && roll < 0.5) e.answerRecall();
      else if (roll < 0.02) e.crash();
      else if (roll < 0.03 && !e.left) e.leave();
      else if (roll < 0.08) e.fail("no luck", rng.pick(durations));
      else e.succeed(1 + rng.int(e.held.length), rng.pick(durations));
    }
    const broken = rig.run.checkDispatch();
    assert.equal(broken, null, `seed ${seed}, event ${step}: ${broken}`);
  }
  const result = await rig.finished();
  for (const task of result.tasks) {
    const c = task.counters;
    assert.equal(c.completed + c.failed + c.orphaned + c.skipped, c.total, `seed ${seed}`);
  }
}

describe("filling under random events", () => {
  it("never leaves a ready executor idle while its task has blocks, and every run ends", async () => {
    for (let seed = 1; seed <= 60; seed++) await randomRun(seed);
  });
});
