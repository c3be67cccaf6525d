/**
 * Admission by need (`lib/execute/worker_demand.ts`): a task wants another worker unless its
 * running workers, over a window with enough blocks reported, spent under half their time in
 * blocks. Driven by a scripted task on a manual clock: no verdict before the first results; idle
 * workers of short blocks close the gate after the short window; busy workers keep it open;
 * blocks too long for the window give no verdict; workers that joined mid-window count for their
 * part only; and the gate opens again once the workers are busy.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DEMAND_BUSY_SHARE,
  DEMAND_EARLY_MS,
  DEMAND_WINDOW_MS,
  WorkerDemand,
} from "../lib/execute/worker_demand.ts";

/** A task whose workers report what the test says, at the test's time. */
class ScriptedTask {
  now = 0;
  busy = 0;
  blocks = 0;
  running = 0;
  readonly demand = new WorkerDemand({
    busySeconds: () => this.busy,
    blocks: () => this.blocks,
    running: () => this.running,
    now: () => this.now,
  });

  /** `ms` pass in steps of 1 ms; each running worker reports `perMs` blocks of `seconds` each. */
  work(ms: number, perMs: number, seconds: number): void {
    for (let i = 0; i < ms; i++) {
      this.now++;
      this.blocks += this.running * perMs;
      this.busy += this.running * perMs * seconds;
      this.demand.wanted(); // the server asks at every accept and every handshake's end
    }
  }
}

describe("admission by need", () => {
  it("wants workers before the task's first results, whatever the time", () => {
    const task = new ScriptedTask();
    task.running = 100;
    task.now = 10 * DEMAND_WINDOW_MS;
    assert.equal(task.demand.wanted(), true);
    assert.ok(Number.isNaN(task.demand.busyShare));
    assert.equal(task.demand.decided, false);
  });

  it("holds workers back once running ones spend nearly no time in blocks (no-op blocks)", () => {
    const task = new ScriptedTask();
    task.running = 50;
    task.work(1, 20, 0);
    assert.equal(task.demand.wanted(), true, "the window has just begun");
    assert.equal(task.demand.decided, false);
    task.work(DEMAND_EARLY_MS, 20, 1e-6);
    assert.equal(task.demand.decided, true);
    assert.equal(task.demand.wanted(), false, "many short blocks decide after the short window");
    // 20 blocks of 1 µs a millisecond: 2 % of each worker's time.
    assert.ok(Math.abs(task.demand.busyShare - 0.02) < 0.002, String(task.demand.busyShare));
  });

  it("keeps admitting while running workers are busy (blocks of 10 ms, one a worker every 10 ms)", () => {
    const task = new ScriptedTask();
    task.running = 200;
    task.work(1, 0.1, 0.01);
    task.work(DEMAND_WINDOW_MS, 0.1, 0.01);
    assert.equal(task.demand.wanted(), true);
    assert.ok(Math.abs(task.demand.busyShare - 1) < 0.05, String(task.demand.busyShare));
  });

  it("gives no verdict on blocks too long for the window, and wants workers then", () => {
    const task = new ScriptedTask();
    task.running = 10;
    task.work(1, 0.01, 0);
    // One block a worker in the window, reported as taking nothing: still too few to judge.
    task.work(DEMAND_WINDOW_MS, 0.01, 0);
    assert.equal(task.demand.wanted(), true);
    assert.ok(Number.isNaN(task.demand.busyShare));
    assert.equal(task.demand.decided, true, "the window ended without a verdict: decided");
  });

  it("counts a worker that joined mid-window for its part of the window only", () => {
    const task = new ScriptedTask();
    task.running = 100;
    task.work(1, 0.1, 0.01); // first results: the window starts
    task.work(DEMAND_WINDOW_MS / 2, 0.1, 0.01);
    // 100 more workers join, not yet reporting: the window's busy share is (100 * 100) / (100 *
    // 100 + 100 * 50) = 2/3, above a half; counted as if there all along it would be a half.
    task.running = 200;
    for (let i = 0; i < DEMAND_WINDOW_MS / 2; i++) {
      task.now++;
      task.blocks += 100 * 0.1;
      task.busy += 100 * 0.1 * 0.01;
      task.demand.wanted();
    }
    assert.equal(task.demand.wanted(), true);
    assert.ok(Math.abs(task.demand.busyShare - 2 / 3) < 0.03, String(task.demand.busyShare));
  });

  it("admits again once the workers get busy (the ready blocks came back)", () => {
    const task = new ScriptedTask();
    task.running = 20;
    task.work(1, 10, 0);
    task.work(DEMAND_WINDOW_MS, 10, 1e-5); // a tenth of their time in blocks
    assert.equal(task.demand.wanted(), false);
    task.work(DEMAND_WINDOW_MS + 1, 0.5, 0.002);
    assert.equal(task.demand.wanted(), true);
    assert.ok(task.demand.busyShare >= DEMAND_BUSY_SHARE, String(task.demand.busyShare));
  });
});
