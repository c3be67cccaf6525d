/**
 * The blocks an executor holds (lib/execute/in_flight.ts): a ring that grows by doubling, or at
 * once to a batch's size (`reserve`), and allocates nothing until its first block. Random runs
 * against a plain array: every position, attempt and sentAt, every index `remove` reports, and
 * the task's tally of empty and heavy queues must match after each step, across wrap-arounds.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InFlightQueue, QueueTally } from "../lib/execute/in_flight.ts";
import { Rng } from "./fixtures/rng.ts";

interface Held {
  position: number;
  attempt: number;
  sentAt: number;
}

function assertSame(queue: InFlightQueue, model: Held[], step: string): void {
  assert.equal(queue.size, model.length, `${step}: size`);
  model.forEach((h, i) => {
    assert.equal(queue.positionAt(i), h.position, `${step}: position ${i}`);
    assert.equal(queue.attemptAt(i), h.attempt, `${step}: attempt ${i}`);
    assert.equal(queue.sentAtAt(i), h.sentAt, `${step}: sentAt ${i}`);
  });
  assert.equal(queue.positionAt(model.length), -1, `${step}: past the end`);
}

describe("blocks in flight", () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`keep their order through pushes, batches reserved at once, removals and clears (seed ${seed})`, () => {
      const rng = new Rng(seed);
      const queue = new InFlightQueue();
      const tally = new QueueTally();
      // Another queue of the task, empty: the tally counts both.
      const sibling = new InFlightQueue();
      sibling.track(tally);
      queue.track(tally);
      const model: Held[] = [];
      let next = 0;
      for (let step = 0; step < 3000; step++) {
        const roll = rng.next();
        let what: string;
        if (roll < 0.3) {
          what = "push";
          const h = { position: next++, attempt: 1 + rng.int(3), sentAt: step };
          queue.push(h.position, h.attempt, h.sentAt);
          model.push(h);
        } else if (roll < 0.45) {
          // A batch: room for all of it at once, then its blocks.
          const n = 1 + rng.int(rng.chance(0.2) ? 400 : 20);
          what = `batch of ${n}`;
          queue.reserve(n);
          for (let k = 0; k < n; k++) {
            const h = { position: next++, attempt: 1, sentAt: step };
            queue.push(h.position, h.attempt, h.sentAt);
            model.push(h);
          }
        } else if (roll < 0.9 && model.length > 0) {
          // Mostly the head (a result) or the tail (handed back), sometimes the middle.
          const r = rng.next();
          const i = r < 0.6 ? 0 : r < 0.8 ? model.length - 1 : rng.int(model.length);
          what = `remove index ${i}`;
          const h = model[i]!;
          assert.equal(queue.remove(h.position), i, `step ${step}: ${what}`);
          assert.equal(queue.lastAttempt, h.attempt);
          assert.equal(queue.lastSentAt, h.sentAt);
          model.splice(i, 1);
        } else if (roll < 0.92) {
          what = "remove a block not held";
          assert.equal(queue.remove(next + 5), -1);
        } else if (roll < 0.93) {
          what = "clear";
          queue.clear();
          model.length = 0;
        } else {
          what = "reserve without pushing";
          queue.reserve(rng.int(50));
        }
        assertSame(queue, model, `step ${step} (${what})`);
        assert.equal(tally.empty, 1 + (model.length === 0 ? 1 : 0), `step ${step}: empty tally`);
        assert.equal(tally.heavy, model.length > 2 ? 1 : 0, `step ${step}: heavy tally`);
      }
    });
  }

  it("holds nothing until its first block, and a reserved batch fits without growing again", () => {
    const queue = new InFlightQueue();
    assert.equal(queue.size, 0);
    assert.equal(queue.positionAt(0), -1);
    assert.equal(queue.remove(3), -1);
    queue.clear();
    queue.reserve(1000);
    for (let p = 0; p < 1000; p++) queue.push(p, 1, 0);
    assert.equal(queue.size, 1000);
    assert.equal(queue.positionAt(999), 999);
    assert.equal(queue.remove(0), 0);
    assert.equal(queue.remove(999), 998);
  });
});
