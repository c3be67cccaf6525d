/**
 * Scheduling with temporaries keeps disk bounded: with `preferDownstream` (the run sets it when
 * a task is temporary), ready downstream blocks are preferred over new upstream blocks, so the
 * blocks of a temporary task that are written and not yet read stay near the frontier instead
 * of piling up across the volume. Driven through the fake-executor rig: every executor finishes
 * what it holds, in turn, until the run ends; no timer, no worker.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { BlockReport } from "../lib/execute/mod.ts";
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
  it("preferring downstream blocks keeps the unread blocks of b near the frontier", async () => {
    const preferred = await peakUnread(true);
    const plain = await peakUnread(false);
    // Without the preference the one worker runs a to the end, then b, then c: every b block
    // is on disk at once. With it, c takes over once 32 blocks of b wait for it.
    assert.equal(plain.peak, BLOCKS, `without preference: ${plain.order}`);
    assert.ok(preferred.peak <= 64, `peak ${preferred.peak} of ${BLOCKS}: ${preferred.order}`);
    assert.ok(preferred.order.length > 6, `the tasks take turns: ${preferred.order}`);
  });

  for (const [workers, cpus] of [[1, 1], [2, 2], [2, 3]] as const) {
    it(`a temporary b gets only what c lacks, and never holds the budget c needs (${workers} workers per task, ${cpus} cpus)`, async () => {
      // The budget is full of b's executors, held back because c has blocks waiting, while c
      // has no worker to run them: idle executors that may take nothing must make room.
      const { peak, order } = await peakUnread(true, { temporary: true, workers, cpus });
      assert.ok(peak <= 64, `peak ${peak} of ${BLOCKS}: ${order}`);
    });
  }
});
