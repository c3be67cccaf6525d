/**
 * The dispatcher hands an executor whole blocks within its window and its allowance. A pacing
 * allowance can be fractional (a temporary task's pipe sized for `maxWorkers` workers when a
 * budget runs fewer of them); the batch must still hold exactly the blocks it announces.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BlockSource } from "../lib/execute/block_source.ts";
import { Dispatcher } from "../lib/execute/dispatch.ts";
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
});
