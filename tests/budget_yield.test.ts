/**
 * Which idle executors make room for a task waiting for `--resources` budget
 * (lib/execute/budget_yield.ts), on the chain a -> b -> c with b temporary: the rules that keep
 * two tasks taking turns from retiring each other's workers on every turn, without ever leaving
 * a task that must run first without a worker.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type BudgetView,
  descendantsOf,
  type PacingContext,
  readersLack,
  temporaryAllowance,
  yieldable,
} from "../lib/execute/budget_yield.ts";

const A = 0;
const B = 1;
const C = 2;
const DOWNSTREAM = [[B], [C], []];
const DESCENDANTS = descendantsOf(DOWNSTREAM);

function view(o: {
  available?: number[];
  processing?: number[];
  heldBack?: number[];
  preferDownstream?: boolean;
}): BudgetView {
  return {
    downstream: DOWNSTREAM,
    preferDownstream: o.preferDownstream ?? true,
    available: (t) => o.available?.[t] ?? 0,
    processing: (t) => o.processing?.[t] ?? 0,
    heldBack: (t) => o.heldBack?.includes(t) ?? false,
  };
}

describe("budget yield", () => {
  it("descendantsOf follows the chain", () => {
    assert.deepEqual(DESCENDANTS.map((s) => [...s].sort()), [[B, C], [C], []]);
  });

  it("a held-back temporary task gives one executor to a reader that has none, and only then", () => {
    const v = view({ available: [0, 40, 5], heldBack: [B] });
    assert.equal(yieldable(v, DESCENDANTS, C, B, 2, true), 1);
    assert.equal(yieldable(v, DESCENDANTS, C, B, 2, false), 0, "the reader has a worker already");
    assert.equal(yieldable(v, DESCENDANTS, A, B, 2, true), 0, "a is no reader of b");
    const paced = view({ available: [0, 40, 0] });
    assert.equal(
      yieldable(paced, DESCENDANTS, C, B, 2, true),
      0,
      "b may take blocks: it keeps them",
    );
  });

  it("a reader waiting for its temporary input keeps one executor for a task that has one", () => {
    // c is idle because b has not made its blocks yet: b wants a second worker.
    const v = view({ available: [0, 30, 0], processing: [0, 8, 0] });
    assert.equal(yieldable(v, DESCENDANTS, B, C, 2, false), 1);
    assert.equal(yieldable(v, DESCENDANTS, B, C, 1, false), 0);
    assert.equal(yieldable(v, DESCENDANTS, B, C, 2, true), 2, "b has none: c's idle ones go");
  });

  it("a task downstream yields to an upstream task only when nothing between can feed it", () => {
    // a has blocks and no worker; c idles while b, between them, has blocks or runs some.
    assert.equal(yieldable(view({ available: [9, 4, 0] }), DESCENDANTS, A, C, 2, true), 0);
    assert.equal(yieldable(view({ processing: [0, 3, 0] }), DESCENDANTS, A, C, 2, true), 0);
    // b and c both idle, waiting on a: both make room (else nothing could ever run).
    const stalled = view({ available: [9, 0, 0] });
    assert.equal(yieldable(stalled, DESCENDANTS, A, B, 2, true), 2);
    assert.equal(yieldable(stalled, DESCENDANTS, A, C, 2, true), 2);
  });

  it("without the preference, or for a task not downstream, every idle executor with nothing ready goes", () => {
    const v = view({ available: [0, 0, 0], preferDownstream: false });
    assert.equal(yieldable(v, DESCENDANTS, B, C, 2, false), 2);
    assert.equal(yieldable(view({}), DESCENDANTS, C, A, 2, false), 2, "a is upstream of c");
  });

  describe("what a temporary task's readers lack", () => {
    /**
     * b temporary, read by c with two workers, each holding `inFlight` of a `window`; b's own
     * two workers (`bWorkers` of them running, under a budget) have windows of `bWindow`, with
     * `processing` blocks dispatched, `committing` of them committing.
     */
    function pacing(o: {
      available: number;
      inFlight: number[];
      window: number;
      running?: boolean;
      temporary?: boolean;
      bWindow?: number;
      bWorkers?: number;
      /** Median duration of the recent commit barriers, ms. */
      barrierMs?: number;
      processing?: number;
      committing?: number;
      released?: number;
      removing?: number;
    }): PacingContext {
      const task = (
        temporary: boolean,
        executors: { inFlight: { size: number }; window: number }[],
      ) => ({
        config: { temporary, maxWorkers: 2 },
        executors: new Set(executors),
      });
      const worker = (size: number, window: number) => ({
        task: -1,
        state: "ready",
        inFlight: { size },
        window,
      });
      const readers = o.inFlight.map((size) => ({ ...worker(size, o.window), task: C }));
      const own = Array.from(
        { length: o.bWorkers ?? 2 },
        () => ({ ...worker(0, o.bWindow ?? 20), task: B }),
      );
      return {
        preferDownstream: true,
        tasks: [task(false, []), task(o.temporary ?? true, own), task(false, readers)],
        graph: { dag: { downstream: DOWNSTREAM } },
        scheduler: {
          isRunning: (t: number) => t !== C || (o.running ?? true),
          snapshot: (t: number) => ({ processing: t === B ? o.processing ?? 0 : 0 }),
          releasedEarly: (t: number) => (t === B ? o.released ?? 0 : 0),
        },
        source: { available: (t: number) => (t === C ? o.available : 0) },
        completion: {
          committing: (t: number) => (t === B ? o.committing ?? 0 : 0),
          removalBacklog: (t: number) => (t === B ? o.removing ?? 0 : 0),
          holdForRemoval: () => {},
          barrierMs: () => o.barrierMs ?? 0,
        },
      } as unknown as PacingContext;
    }
    const bWorker = (o: PacingContext) => [...o.tasks[B]!.executors][0]!;
    /** What a worker of b may be handed in the situation `o`. */
    const allowance = (o: Parameters<typeof pacing>[0]) => {
      const context = pacing(o);
      return temporaryAllowance(context, bWorker(context));
    };

    it("asks for half a window per worker beyond what the workers hold, plus two blocks each", () => {
      // wanted: 2 per worker (4) + half of each 40-block window (40) = 44
      // queued: 10 ready + all but one block each worker holds (19 + 19) = 48
      assert.equal(readersLack(pacing({ available: 10, inFlight: [20, 20], window: 40 }), B), -4);
      // Workers half empty with nothing ready: 44 - 18 = 26 blocks lacking.
      assert.equal(readersLack(pacing({ available: 0, inFlight: [10, 10], window: 40 }), B), 26);
      assert.equal(readersLack(pacing({ available: 0, inFlight: [0, 0], window: 40 }), B), 44);
    });

    it("does not pace a task that is not temporary, or whose readers are not running", () => {
      assert.equal(
        readersLack(pacing({ available: 0, inFlight: [0, 0], window: 40, temporary: false }), B),
        null,
      );
      assert.equal(
        readersLack(pacing({ available: 0, inFlight: [0, 0], window: 40, running: false }), B),
        null,
      );
    });

    it("lets the temporary task fill its windows, counting what it has dispatched or commits", () => {
      // c lacks blocks and both its workers are busy: b's two 20-block windows less the 30 it
      // has in the pipe (20 of them committing) leaves 10, half a window: sent.
      const busy = { available: 0, inFlight: [5, 5], window: 40, processing: 30, committing: 20 };
      assert.equal(allowance(busy), 10);
      // Less than half a window free: nothing yet, the blocks go out in batches.
      const full = { ...busy, processing: 31 };
      assert.equal(allowance(full), 0);
      // c has enough queued: nothing at all.
      const enough = { ...busy, available: 60 };
      assert.equal(allowance(enough), 0);
      // Not paced: no limit.
      const free = { ...busy, temporary: false };
      assert.equal(allowance(free), Infinity);
    });

    it("counts half of its committing blocks while a reader starves, where barriers are quick", () => {
      // A worker of c idle with nothing queued: 40 - (30 - 20 / 2) = 20.
      const starving = {
        available: 0,
        inFlight: [0, 5],
        window: 40,
        processing: 30,
        committing: 20,
      };
      assert.equal(allowance(starving), 20);
      // The same idle worker with blocks queued for it is not starving.
      const queued = { ...starving, available: 3 };
      assert.equal(allowance(queued), 10);
      // Where barriers take milliseconds (a disk) all of them count: 40 - 30.
      assert.equal(allowance({ ...starving, barrierMs: 4 }), 10);
      assert.equal(allowance({ ...starving, barrierMs: 1 }), 20);
    });

    it("counts blocks whose readers were released at the rename as delivered", () => {
      // 30 in the pipe, 20 committing, 12 of those already renamed into place and their readers
      // released: 40 - (30 - 12) = 22; with a reader starving, half of the other 8: 26.
      const busy = {
        available: 0,
        inFlight: [5, 5],
        window: 40,
        processing: 30,
        committing: 20,
        released: 12,
      };
      assert.equal(allowance(busy), 22);
      const starving = { ...busy, inFlight: [0, 5] };
      assert.equal(allowance(starving), 26);
    });

    it("takes nothing while more blocks wait for removal than its windows hold", () => {
      // Its readers starve, but 41 blocks whose readers are done still have files on disk,
      // more than b's two 20-block windows: more blocks would only add to the live data.
      const lagging = { available: 0, inFlight: [0, 0], window: 40, processing: 0, removing: 41 };
      assert.equal(allowance(lagging), 0);
      // Within the windows, removal is keeping up: b fills its windows.
      const keeping = { ...lagging, removing: 40 };
      assert.equal(allowance(keeping), 40);
    });

    it("under a budget that runs one of its two workers, fills the pipe two windows hold", () => {
      // The commit latency the pipe hides does not shrink with the workers: 2 x 20 - 30 = 10
      // with one worker running as with both, where one worker's window alone (20) would allow
      // nothing.
      const both = { available: 0, inFlight: [5, 5], window: 40, processing: 30, committing: 20 };
      assert.equal(allowance(both), 10);
      assert.equal(allowance({ ...both, bWorkers: 1 }), 10);
      // The removal backlog is still weighed against the windows that run: 21 of 20 holds it.
      const lagging = { ...both, bWorkers: 1, processing: 0, removing: 21 };
      assert.equal(allowance(lagging), 0);
      assert.equal(allowance({ ...lagging, removing: 20 }), 40);
    });
  });
});
