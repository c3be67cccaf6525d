/**
 * The dispatcher hands an executor whole blocks within its window and its allowance. A pacing
 * allowance can be fractional (a temporary task's pipe sized for `maxWorkers` workers when a
 * budget runs fewer of them); the batch must still hold exactly the blocks it announces.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BlockSource } from "../lib/execute/block_source.ts";
import {
  Dispatcher,
  MIN_WINDOW,
  REMOTE_TARGET_BATCH_MS,
  TARGET_BATCH_MS,
} from "../lib/execute/dispatch.ts";
import type { Executor } from "../lib/execute/executor.ts";
import { InFlightQueue } from "../lib/execute/in_flight.ts";
import type { RunClock } from "../lib/execute/run_clock.ts";
import type { TaskRuntime } from "../lib/execute/task_runtime.ts";
import type { Scheduler } from "../lib/schedule/mod.ts";

/** One idle executor with a window of `window`, 100 blocks ready, and the given allowance. */
function rig(window: number, allowance: number) {
  const sent: { capacity: number; count: number }[] = [];
  const executor = {
    task: 0,
    state: "ready",
    window,
    inFlight: new InFlightQueue(),
    batchBuffer: (pairs: number) => new Float64Array(2 * pairs),
    send: (batch: Float64Array, count: number) => {
      sent.push({ capacity: batch.length / 2, count });
    },
  } as unknown as Executor;
  let next = 0;
  const source = {
    available: () => 100 - next,
    next: () => (next < 100 ? next++ : -1),
  } as unknown as BlockSource;
  const dispatcher = new Dispatcher(
    { attemptOf: () => 1 } as unknown as Scheduler,
    source,
    [{ executors: new Set([executor]) }] as unknown as TaskRuntime[],
    { now: () => 0 } as unknown as RunClock,
    1024,
    () => allowance,
  );
  dispatcher.fill(executor);
  return { executor, sent };
}

describe("dispatch", () => {
  it("sends whole blocks up to a fractional allowance, no more than the batch holds", () => {
    const { executor, sent } = rig(10, 2.5);
    assert.deepEqual(sent, [{ capacity: 2, count: 2 }]);
    assert.equal(executor.inFlight.size, 2);
  });

  it("sends nothing for an allowance under one block", () => {
    const { executor, sent } = rig(10, 0.75);
    assert.deepEqual(sent, []);
    assert.equal(executor.inFlight.size, 0);
  });

  it("fills the window when the allowance is larger", () => {
    const { sent } = rig(10, 1e9);
    assert.deepEqual(sent, [{ capacity: 10, count: 10 }]);
  });

  it("sizes a window to the executor's batch time: a remote worker's holds more blocks", () => {
    const { executor: local } = rig(2, 0);
    const remote = { ...local, batchMs: REMOTE_TARGET_BATCH_MS } as Executor;
    const { executor } = rig(2, 0);
    const dispatcher = new Dispatcher(
      {} as Scheduler,
      {} as BlockSource,
      [],
      { now: () => 0 } as unknown as RunClock,
    );
    // Blocks of 10 ms: a local window holds TARGET_BATCH_MS of them (never under MIN_WINDOW).
    dispatcher.resize(executor, 0.01);
    assert.equal(executor.window, Math.max(MIN_WINDOW, TARGET_BATCH_MS / 10));
    dispatcher.resize(remote, 0.01);
    assert.equal(remote.window, REMOTE_TARGET_BATCH_MS / 10);
    // Slow blocks: two in flight either way, so a slow block is not hoarded.
    dispatcher.resize(remote, 5);
    assert.equal(remote.window, MIN_WINDOW);
    // No-op blocks: both up to the largest window.
    dispatcher.resize(executor, 1e-7);
    dispatcher.resize(remote, 1e-7);
    assert.deepEqual([executor.window, remote.window], [1024, 1024]);
  });
});
