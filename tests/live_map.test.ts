/**
 * The live map of `run --serve` (lib/view/live_map.ts): a store is written as a run writes it
 * (done marks, failed attempts and retries, resource figures, errors.jsonl, a deleted temporary
 * output), each block's change told to the map as the run's observer tells it, and after every
 * few changes the frame made from the map must be exactly the frame a full pass over the same
 * ledger makes (`buildReport` without the map). Grids of 1, 2 and 3 axes, downsampled so that a
 * cell holds several blocks, one with blocks that have no tracking cell; stores mapped and on
 * the fs fallback. Also: a change the map is not told of stays unseen (the frame is really
 * incremental), the first failed blocks are found in grid order, and a closed store is read as
 * any other. The blocks carry GPU figures (issue 49), as the scheduler writes them: the frame's
 * `status` sums them (`resources.gpu`) from the live map's cells as a pass does, and the full
 * document (a pass under `run --serve` too) offers the GPU layers.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { errorsLogObserver, failedBlocks } from "../lib/outputs/errors_log.ts";
import { forEachBlockRun } from "../lib/tracking/block_runs.ts";
import { OUTPUTS_DELETED, OUTPUTS_PRESENT, TrackingStore } from "../lib/tracking/store.ts";
import { GpuFigureWriter } from "../lib/tracking/gpu_figures.ts";
import { positionOfIndex } from "../lib/tracking/grid_index.ts";
import { LiveErrors } from "../lib/view/live_errors.ts";
import { LiveStoreMap } from "../lib/view/live_map.ts";
import { buildReport } from "../lib/view/report_build.ts";
import type { ReportData } from "../lib/view/report_data.ts";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-live-map-"));
after(() => fs.rmSync(root, { recursive: true, force: true }));

interface Case {
  readonly name: string;
  readonly total: readonly number[];
  readonly read: { readonly offset: readonly number[]; readonly shape: readonly number[] };
  readonly write: { readonly offset: readonly number[]; readonly shape: readonly number[] };
  readonly maxCells: number;
}

const CASES: readonly Case[] = [
  {
    name: "2-D, 3 x 2 blocks a cell",
    total: [90, 70],
    read: { offset: [0, 0], shape: [10, 10] },
    write: { offset: [0, 0], shape: [10, 10] },
    maxCells: 16,
  },
  {
    name: "3-D",
    total: [40, 50, 60],
    read: { offset: [0, 0, 0], shape: [10, 10, 10] },
    write: { offset: [0, 0, 0], shape: [10, 10, 10] },
    maxCells: 20,
  },
  {
    name: "1-D",
    total: [500],
    read: { offset: [0], shape: [10] },
    write: { offset: [0], shape: [10] },
    maxCells: 8,
  },
  {
    // A negative context: the write ROI reaches past the read ROI, so the blocks of the edge
    // have no tracking cell.
    name: "2-D with untracked blocks",
    total: [100, 80],
    read: { offset: [5, 5], shape: [10, 10] },
    write: { offset: [0, 0], shape: [20, 20] },
    maxCells: 6,
  },
];

function layoutOf(c: Case): TaskLayout {
  return new TaskLayout({
    totalRoi: { offset: c.total.map(() => 0), shape: [...c.total] },
    readRoi: c.read,
    writeRoi: c.write,
    fit: "overhang",
    readWriteConflict: false,
  });
}

/** A seeded generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 4294967296;
  };
}

const NOW = () => new Date("2026-01-02T03:04:05.000Z");

/** The document with float sums rounded (a pass and the cells add them in another order). */
function comparable(doc: ReportData): unknown {
  return {
    ...doc,
    status: {
      ...doc.status,
      stores: doc.status.stores.map((s) => ({
        ...s,
        resources: s.resources === null ? null : {
          ...s.resources,
          wall_seconds_total: Number(s.resources.wall_seconds_total.toPrecision(10)),
          wall_seconds_mean: s.resources.wall_seconds_mean === null
            ? null
            : Number(s.resources.wall_seconds_mean.toPrecision(10)),
          cpu_seconds_total: Number(s.resources.cpu_seconds_total.toPrecision(10)),
        },
      })),
    },
  };
}

/** A store written as a run writes it, with a live map told of each block. */
class Ledger {
  readonly layout: TaskLayout;
  readonly cells: number[] = [];
  readonly positions: number[] = [];
  readonly #errors;
  readonly #gpu: GpuFigureWriter;
  #clock = 1_767_000_000_000;
  #attempts = new Map<number, number>();

  constructor(
    readonly dir: string,
    readonly store: TrackingStore,
    readonly c: Case,
    readonly map: LiveStoreMap,
  ) {
    this.layout = store.layout;
    forEachBlockRun(this.layout, (position, cell, length) => {
      for (let i = 0; i < length; i++) {
        this.positions.push(position + i);
        this.cells.push(cell + i);
      }
    });
    this.#gpu = GpuFigureWriter.of(store)!;
    this.#errors = errorsLogObserver({ storeOf: () => dir, runId: "run-1", now: NOW });
  }

  #record(p: number, cell: number, wall: number): void {
    const sent = (this.#clock += 7);
    const usage = new Float64Array([wall, wall * 0.8, 1e6 + wall * 1e3, 4096, 8192, 0, 0]);
    usage[5] = (sent + 5) / 1000;
    this.store.recordBlock(cell, sent, sent + 5, p % 3, usage);
    // GPU figures as the scheduler's sampler writes them; every fourth block has none.
    const recorded = p % 4 !== 0;
    this.#gpu.write(cell, recorded ? 10 + (p % 9) * 10 : Number.NaN, recorded ? 2 ** 30 * p : 0);
  }

  /** A block succeeds (`TrackingSession.done`), then the observer hears of it. */
  done(k: number, tell = true): void {
    const p = this.positions[k]!;
    const cell = this.cells[k]!;
    this.#record(p, cell, 0.5 + (p % 7) / 10);
    this.store.markDone(cell);
    if (this.store.provenance !== null) this.store.provenance.outputs[cell] = OUTPUTS_PRESENT;
    if (tell) this.map.touch(this.layout.gridIndexOf(p));
  }

  /** An attempt fails (`TrackingSession.failed`, errors.jsonl), then the observer hears. */
  fail(k: number): void {
    const p = this.positions[k]!;
    const cell = this.cells[k]!;
    this.store.addFailure(cell);
    this.#record(p, cell, 0.1);
    const attempt = (this.#attempts.get(p) ?? 0) + 1;
    this.#attempts.set(p, attempt);
    const failure = {
      taskId: "t",
      blockId: this.layout.blockIdOf(p),
      index: this.layout.gridIndexOf(p),
      attempt,
      message: `boom ${p % 4} attempt ${attempt}`,
      stack: `Error: boom\n    at block ${p}`,
      permanent: attempt > 1,
    };
    this.#errors.blockFailed!(failure);
    this.map.touch(failure.index);
  }

  /** The temporary output of a done block is deleted (told, as if the task's map were live). */
  deleteOutput(k: number): void {
    const cell = this.cells[k]!;
    if (this.store.provenance === null || this.store.done[cell] !== 1) return;
    this.store.provenance.outputs[cell] = OUTPUTS_DELETED;
    this.map.touch(this.layout.gridIndexOf(this.positions[k]!));
  }

  /** The frame from the live map, and the one a pass over the ledger makes. */
  frames(): { live: ReportData; pass: ReportData } {
    const held = (dir: string) => (dir === this.map.path ? this.map : null);
    const options = { parts: "frame" as const, maxCells: this.c.maxCells, now: NOW };
    const live = buildReport(this.dir, { ...options, held });
    this.store.flush(); // the fs fallback's files lag its arrays until a flush
    const pass = buildReport(this.dir, options);
    return { live, pass };
  }

  assertSame(what: string): void {
    const { live, pass } = this.frames();
    assert.deepEqual(comparable(live), comparable(pass), what);
  }
}

async function openLedger(c: Case, kind: "fs" | "auto", provenance: boolean): Promise<Ledger> {
  const dir = fs.mkdtempSync(path.join(root, "store-"));
  const layout = layoutOf(c);
  const store = await TrackingStore.open(dir, {
    taskId: "t",
    layout,
    resourceTracking: true,
    provenance,
    mmap: kind,
  });
  return new Ledger(dir, store, c, new LiveStoreMap(store, c.maxCells));
}

describe("the live map of run --serve", () => {
  for (const c of CASES) {
    for (const kind of ["fs", "auto"] as const) {
      it(`${c.name}, ${kind}: after commits, failures and retries it equals a pass`, async () => {
        const provenance = c.name === "2-D, 3 x 2 blocks a cell";
        const ledger = await openLedger(c, kind, provenance);
        const n = ledger.positions.length;
        const rand = random(n * 31 + (kind === "fs" ? 1 : 2));
        try {
          // An earlier run: some blocks done, some failed (with their errors on file).
          for (let k = 0; k < n; k++) {
            const r = rand();
            if (r < 0.3) ledger.done(k, false);
            else if (r < 0.4) ledger.fail(k);
          }
          ledger.assertSame("the first frame (one pass)");
          // This run: commits, failures, retries that succeed, and again.
          for (let step = 0; step < 12; step++) {
            for (let i = 0; i < 1 + Math.floor(rand() * 8); i++) {
              const k = Math.floor(rand() * n);
              const r = rand();
              if (r < 0.45) ledger.done(k);
              else if (r < 0.8) ledger.fail(k);
              else if (r < 0.9) {
                ledger.fail(k);
                ledger.done(k);
              } else ledger.deleteOutput(k);
            }
            ledger.assertSame(`frame ${step + 1}`);
          }
          const { live } = ledger.frames();
          assert.ok(live.status.stores[0]!.failed > 0 && live.status.stores[0]!.done > 0);
          assert.deepEqual(live.tasks[0]!.map.metrics, []);
          assert.ok(live.status.stores[0]!.resources!.gpu!.blocks_measured > 0);
          // The full document is a pass, live map or not: it has the GPU layers and track.
          const held = (dir: string) => (dir === ledger.map.path ? ledger.map : null);
          const full = buildReport(ledger.dir, { maxCells: c.maxCells, now: NOW, held });
          const names = full.tasks[0]!.map.metrics.map((m) => m.name);
          assert.ok(names.includes("gpu_util_pct") && names.includes("gpu_mem_bytes"), `${names}`);
          assert.ok(full.tasks[0]!.timeline!.gpu !== null);
          assert.deepEqual(full, buildReport(ledger.dir, { maxCells: c.maxCells, now: NOW }));
        } finally {
          ledger.store.close();
        }
      });
    }
  }

  it("is incremental: a change it is not told of is not seen; a closed store is read", async () => {
    const c = CASES[0]!;
    const ledger = await openLedger(c, "auto", false);
    try {
      ledger.assertSame("empty");
      ledger.done(5, false); // written, never told
      const { live, pass } = ledger.frames();
      assert.equal(pass.status.stores[0]!.done, 1);
      assert.equal(live.status.stores[0]!.done, 0, "the live frame read the whole ledger");
      ledger.done(5); // told now
      ledger.assertSame("told");
    } finally {
      ledger.store.close();
    }
    // Closed: the map answers no more, the frame is a pass.
    assert.equal(ledger.map.refresh(), false);
    const held = () => ledger.map;
    const frame = buildReport(ledger.dir, { parts: "frame", maxCells: c.maxCells, held });
    assert.equal(frame.status.stores[0]!.done, 1);
  });

  it("keeps the last errors of the listed blocks as errors.jsonl grows", async () => {
    const c = CASES[0]!;
    const ledger = await openLedger(c, "auto", false);
    const n = ledger.positions.length;
    try {
      // An earlier run failed every third block, twice for some, and was killed mid-line.
      for (let k = 0; k < n; k += 3) ledger.fail(k);
      for (let k = 0; k < n; k += 9) ledger.fail(k);
      fs.appendFileSync(
        path.join(ledger.dir, "errors.jsonl"),
        '{"task":"t","block":"4","index":[2,4],"attempt":',
      );
      const same = (what: string) => {
        ledger.map.refresh();
        for (const limit of [3, 1000]) {
          assert.deepEqual(ledger.map.failedList(limit), failedBlocks(ledger.dir, limit), what);
        }
      };
      same("first frame");
      // Listed blocks succeed one by one: blocks of the earlier run come into the list.
      for (let k = 0; k < 12; k += 3) {
        ledger.done(k);
        same(`block ${k} done`);
      }
      // A listed block fails again, a new one fails before the listed ones.
      ledger.fail(15);
      same("a listed block failed again");
      ledger.fail(1);
      same("a new failed block first in grid order");
      ledger.fail(1);
      ledger.fail(16);
      same("more attempts");
      assert.equal(ledger.map.failedList(3).blocks[0]!.last_error!.message, "boom 1 attempt 2");
    } finally {
      ledger.store.close();
    }
  });

  it("indexes errors.jsonl once, then only what is appended (merged into the index)", async () => {
    const c = CASES[1]!;
    const ledger = await openLedger(c, "fs", false);
    const n = ledger.positions.length;
    // Lines read after the first read join the sorted index as soon as they outnumber it.
    const errors = new LiveErrors(ledger.dir, 0);
    const same = (what: string) => {
      ledger.store.flush();
      const expected = failedBlocks(ledger.dir);
      const failed = {
        positions: expected.blocks.map((b) => positionOfIndex(ledger.layout, b.index)),
        attempts: expected.blocks.map((b) => b.attempts),
      };
      assert.deepEqual(errors.reports(ledger.layout, failed), expected.blocks, what);
    };
    try {
      for (const k of [4, 9, 30]) ledger.fail(k);
      same("the first read");
      // Failures again and again, of a few blocks and of any: lines for blocks already in the
      // index, and for new ones.
      const rand = random(5);
      for (let step = 0; step < 60; step++) {
        ledger.fail(Math.floor(rand() * (step % 2 === 0 ? 12 : n)));
        if (step % 2 === 0) same(`step ${step}`);
      }
      same("the end");
    } finally {
      ledger.store.close();
    }
  });

  it("lists the first failed blocks in grid order, as failedBlocks does", async () => {
    for (const c of CASES) {
      const ledger = await openLedger(c, "fs", false);
      try {
        const n = ledger.positions.length;
        ledger.assertSame("empty");
        const rand = random(n);
        for (let k = 0; k < n; k++) {
          if (rand() < 0.15) ledger.fail(k);
          if (rand() < 0.3) ledger.done(k);
        }
        ledger.map.refresh();
        ledger.store.flush();
        for (const limit of [1, 3, 10, 1000]) {
          assert.deepEqual(ledger.map.failedList(limit), failedBlocks(ledger.dir, limit), c.name);
        }
      } finally {
        ledger.store.close();
      }
    }
  });
});
