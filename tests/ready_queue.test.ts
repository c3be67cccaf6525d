/**
 * A task's ready queue (lib/schedule/ready_queue.ts) in position order, as pipelines with
 * temporaries use it: whatever order blocks become ready in, the lowest position queued is
 * served next, initial blocks included, each exactly once. The default stays first in, first
 * out (daisy's order).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ReadyQueue } from "../lib/schedule/ready_queue.ts";
import { prng } from "./fixtures/rng.ts";

describe("the ready queue in position order", () => {
  it("always serves the lowest position queued, merging the initial blocks with released ones", () => {
    const random = prng(11);
    const initial = Array.from({ length: 500 }, (_, i) => 3 * i);
    const queue = new ReadyQueue(initial, initial.length, true);
    const queued = new Set(initial);
    let next = 1;
    const served: number[] = [];
    while (queued.size > 0 || next < 1500) {
      // Release a few blocks in scrambled order (never a position already queued), then serve.
      for (let k = Math.floor(random() * 4); k > 0 && next < 1500; k--) {
        const p = next + Math.floor(random() * 3) * 3;
        next++;
        if (p % 3 === 0 || queued.has(p)) continue;
        queue.push(p);
        queued.add(p);
      }
      assert.equal(queue.length, queued.size);
      const p = queue.shift();
      if (queued.size === 0) {
        assert.equal(p, -1);
        continue;
      }
      assert.equal(p, Math.min(...queued), `after ${served.length} served`);
      queued.delete(p);
      served.push(p);
    }
    assert.equal(new Set(served).size, served.length, "each position served once");
    assert.equal(queue.shift(), -1);
    assert.equal(queue.length, 0);
  });

  it("serves a retried block before later ones, and holds nothing after clear", () => {
    const queue = new ReadyQueue([0, 1, 2, 3], 4, true);
    assert.equal(queue.shift(), 0);
    assert.equal(queue.shift(), 1);
    queue.push(0); // block 0 failed and is retried
    assert.equal(queue.shift(), 0);
    assert.equal(queue.shift(), 2);
    queue.push(9);
    queue.clear();
    assert.equal(queue.length, 0);
    assert.equal(queue.shift(), -1);
  });

  it("stays first in, first out by default", () => {
    const queue = new ReadyQueue(null);
    for (const p of [5, 1, 3]) queue.push(p);
    assert.deepEqual([queue.shift(), queue.shift(), queue.shift(), queue.shift()], [5, 1, 3, -1]);
  });
});
