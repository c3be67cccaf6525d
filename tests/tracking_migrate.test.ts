/**
 * Resuming a grown volume (seed 000, "Known limitation / planned enhancement"): a tracking
 * store whose task only grew its `totalRoi` is migrated in place, keeping the marks of every
 * block that is still the same block, and every other kind of layout change is refused.
 *
 * - Library level (TrackingStore.open with TaskLayouts): growth along each axis of a 3-D task
 *   and along several at once, in every fit mode, with and without the resource tracking
 *   arrays, with no context and with a context at least one block wide (tracking grid shifted
 *   from the block grid). Every element of every array is checked against an expectation
 *   computed here from first principles (block ROIs in both layouts and containment in the old
 *   total write ROI), never with migrate.ts's own helpers.
 * - Refusals: shrinking, write stride, totalRoi offset, context, fit, a hash-only store;
 *   StoreError naming what changed from what to what, and not one byte of the store changed.
 * - Crash injection at each step of the swap (`onStep` throwing SimulatedCrash), then
 *   recovery: the complete old store or the complete new store, never a mix, no leftovers.
 * - CLI level (`bun main.ts run|migrate` with `tests/fixtures/migrate/grow.mjs`, whose
 *   `totalRoi` size comes from an env var).
 */

import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { type Fit, TaskLayout } from "../lib/blocks/layout.ts";
import { makeRoi, type Roi } from "../lib/geometry/mod.ts";
import { StoreError } from "../lib/errors.ts";
import { groupMetadata, type StoreAttributes, TrackingStore } from "../lib/tracking/store.ts";
import { storedLayoutOf } from "../lib/tracking/store_layout.ts";
import { taskHash } from "../lib/tracking/task_hash.ts";
import {
  migrateStore,
  type MigrationStep,
  planMigration,
  recoverInterruptedMigration,
  SimulatedCrash,
} from "../lib/tracking/migrate.ts";
import {
  bytesPer,
  type CliResult,
  describeRun,
  GROW_PIPELINE,
  growEnv,
  type GrowGeometry,
  growRois,
  leftovers,
  readArray,
  readJson,
  readLog,
  runCli,
  runsLines,
  sameValue,
  SEED_ARRAYS,
  snapshotTree,
} from "./fixtures/migrate/harness.ts";

const newDir = scratchDirs("migrate-");

// ---------------------------------------------------------------------------------------------
// First principles: tracking cells and the blocks that keep their marks
// ---------------------------------------------------------------------------------------------

/** A 3-D task geometry: totalRoi, write ROI, and the read context around it. */
interface Geometry {
  readonly label: string;
  readonly offset: readonly number[];
  readonly shape: readonly number[];
  readonly writeOffset: readonly number[];
  readonly write: readonly number[];
  /** Read context before / after the write ROI, per axis. */
  readonly before: readonly number[];
  readonly after: readonly number[];
}

/** No context: read = write. Partial trailing blocks on every axis (7/2, 8/3, 5/2). */
const PLAIN: Geometry = {
  label: "no context",
  offset: [1, -2, 3],
  shape: [7, 8, 5],
  writeOffset: [0, 0, 0],
  write: [2, 3, 2],
  before: [0, 0, 0],
  after: [0, 0, 0],
};

/**
 * Context at least one block wide on every axis (before = (2, 3, 3) >= write (2, 3, 2)), so
 * the tracking grid (anchored at totalRoi) is shifted by one cell from the block grid; axis 2's
 * context is not a multiple of the write shape. Total write ROI: (8, 9, 5).
 */
const WIDE: Geometry = {
  label: "context >= one block",
  offset: [-3, 0, 2],
  shape: [11, 16, 10],
  writeOffset: [10, -4, 7],
  write: [2, 3, 2],
  before: [2, 3, 3],
  after: [1, 4, 2],
};

function layoutOf(
  g: Geometry,
  fit: Fit,
  changes: {
    shape?: readonly number[];
    offset?: readonly number[];
    write?: readonly number[];
    before?: readonly number[];
  } = {},
): TaskLayout {
  const write = changes.write ?? g.write;
  const beforeCtx = changes.before ?? g.before;
  return new TaskLayout({
    totalRoi: makeRoi(changes.offset ?? g.offset, changes.shape ?? g.shape),
    readRoi: makeRoi(
      g.writeOffset.map((o, d) => o - beforeCtx[d]!),
      write.map((w, d) => w + beforeCtx[d]! + g.after[d]!),
    ),
    writeRoi: makeRoi(g.writeOffset, write),
    fit,
    readWriteConflict: true,
  });
}

const product = (xs: readonly number[]) => xs.reduce((a, b) => a * b, 1);

/** Seed: the tracking grid is `ceil(total_roi.shape / write_roi.shape)`. */
function trackingShapeOf(totalShape: readonly number[], write: readonly number[]): number[] {
  return totalShape.map((s, d) => Math.ceil(s / write[d]!));
}

/**
 * Seed: a block's cell is `(block.write_roi.offset - total_roi.offset) / write_roi.shape`,
 * flattened row-major over the tracking grid.
 */
function cellOfWrite(
  writeOffset: readonly number[],
  total: Roi,
  write: readonly number[],
): number {
  const shape = trackingShapeOf(total.shape, write);
  let cell = 0;
  for (let d = 0; d < shape.length; d++) {
    const t = Math.floor((writeOffset[d]! - total.offset[d]!) / write[d]!);
    assert.ok(t >= 0 && t < shape[d]!, `block at ${writeOffset} is inside the tracking grid`);
    cell = cell * shape[d]! + t;
  }
  return cell;
}

const sameRoi = (a: Roi, b: Roi) =>
  a.offset.every((v, d) => v === b.offset[d]) && a.shape.every((v, d) => v === b.shape[d]);

/** The tracking cells holding a block of `layout`. */
function blockCells(layout: TaskLayout): Set<number> {
  const cells = new Set<number>();
  for (let p = 0; p < layout.blockCount; p++) {
    cells.add(cellOfWrite(layout.writeRoiOf(p).offset, layout.totalRoi, layout.writeRoi.shape));
  }
  return cells;
}

/**
 * For every cell of the grown store: the old cell whose values it must hold, or -1 for the
 * fill value. A block keeps its marks when the old layout had a block at the same write offset
 * with the same read and write ROIs, and its unclipped write ROI ended inside the old total
 * write ROI (totalRoi shrunk by the context) on every axis that grew.
 */
function expectedSources(oldL: TaskLayout, newL: TaskLayout): Int32Array {
  const w = newL.writeRoi.shape;
  const dims = w.length;
  const newCells = product(trackingShapeOf(newL.totalRoi.shape, w));
  const src = new Int32Array(newCells).fill(-1);
  const contextAfter = newL.writeRoi.offset.map((o, d) =>
    newL.readRoi.offset[d]! + newL.readRoi.shape[d]! - o - w[d]!
  );
  const oldWriteEnd = oldL.totalRoi.offset.map((o, d) =>
    o + oldL.totalRoi.shape[d]! - contextAfter[d]!
  );
  const grown = oldL.totalRoi.shape.map((s, d) => s !== newL.totalRoi.shape[d]);
  const oldByOffset = new Map<string, number>();
  for (let q = 0; q < oldL.blockCount; q++) {
    oldByOffset.set(oldL.writeRoiOf(q).offset.join(","), q);
  }
  for (let p = 0; p < newL.blockCount; p++) {
    const write = newL.writeRoiOf(p);
    const read = newL.readRoiOf(p);
    const q = oldByOffset.get(write.offset.join(","));
    if (q === undefined) continue;
    if (!sameRoi(write, oldL.writeRoiOf(q)) || !sameRoi(read, oldL.readRoiOf(q))) continue;
    let inside = true;
    for (let d = 0; d < dims; d++) {
      if (grown[d] && write.offset[d]! + w[d]! > oldWriteEnd[d]!) inside = false;
    }
    if (!inside) continue;
    src[cellOfWrite(write.offset, newL.totalRoi, w)] = cellOfWrite(
      write.offset,
      oldL.totalRoi,
      w,
    );
  }
  return src;
}

const coord = (xs: readonly number[]) => `(${xs.join(", ")})`;
const roiText = (offset: readonly number[], shape: readonly number[]) =>
  `Roi(${coord(offset)}, ${coord(shape)})`;

// ---------------------------------------------------------------------------------------------
// Library level
// ---------------------------------------------------------------------------------------------

const TASK = "vol";
const RUN_LINES = [
  `{"kind":"run","run_id":"r-1","task":"vol","outcome":"incomplete","note":"first"}`,
  `{"kind":"run","run_id":"r-2","task":"vol","outcome":"complete","note":"second"}`,
];

/**
 * Set distinct values on every cell of a fresh store through the store's own API: done on
 * most block cells; failures, timings, worker and usage figures on every cell (also cells no
 * block maps to, whose values must not be carried over); some cells keep the fill value.
 */
function writeValues(store: TrackingStore, cells: number, blocks: Set<number>): void {
  for (let c = 0; c < cells; c++) {
    if (blocks.has(c) && c % 5 !== 4) store.markDone(c);
    for (let f = 0; f < c % 3; f++) store.addFailure(c);
    if (c % 4 === 3) continue;
    const sent = 1_700_000_000_000 + c * 1000.5;
    store.recordBlock(
      c,
      sent,
      sent + 250 + c,
      (c % 6) - 1,
      c % 4 === 2 ? null : {
        wallSeconds: 0.5 + c / 8,
        cpuSeconds: c / 16,
        peakRssBytes: 1_000_000 + c * 4096,
        ioReadBytes: c * 512,
        ioWriteBytes: 2 ** 40 + c,
      },
    );
  }
}

interface Prepared {
  readonly parent: string;
  readonly dir: string;
  readonly oldL: TaskLayout;
  readonly arrays: typeof SEED_ARRAYS;
  /** Every array's elements before the migration. */
  readonly before: Map<string, (number | bigint)[]>;
  readonly doneBefore: number;
}

async function prepareStore(
  label: string,
  g: Geometry,
  fit: Fit,
  resourceTracking: boolean,
  runs = true,
): Promise<Prepared> {
  const parent = newDir(label);
  const dir = path.join(parent, TASK);
  const oldL = layoutOf(g, fit);
  const cells = product(trackingShapeOf(g.shape, g.write));
  const store = await TrackingStore.open(dir, { taskId: TASK, layout: oldL, resourceTracking });
  assert.equal(store.done.length, cells, "tracking grid = ceil(totalRoi.shape / write.shape)");
  writeValues(store, cells, blockCells(oldL));
  store.close();
  if (runs) fs.writeFileSync(path.join(dir, "runs.jsonl"), RUN_LINES.join("\n") + "\n");
  const arrays = SEED_ARRAYS.filter((a) => resourceTracking || !a.resource);
  const before = new Map(arrays.map((a) => [a.name, readArray(dir, a.name, a.dtype, 3)]));
  const doneBefore = before.get("done")!.filter((v) => v === 1).length;
  return { parent, dir, oldL, arrays, before, doneBefore };
}

/** Element-by-element check of every array of the grown store against the expectation. */
function checkValues(p: Prepared, newL: TaskLayout, src: Int32Array): void {
  const cells = product(trackingShapeOf(newL.totalRoi.shape, newL.writeRoi.shape));
  for (const a of p.arrays) {
    const got = readArray(p.dir, a.name, a.dtype, 3);
    assert.equal(got.length, cells, `${a.name}: one element per cell of the grown grid`);
    const old = p.before.get(a.name)!;
    const wrong: string[] = [];
    for (let c = 0; c < cells; c++) {
      const want = src[c]! >= 0 ? old[src[c]!] : a.fill;
      if (!sameValue(got[c], want)) {
        wrong.push(`cell ${c}: got ${got[c]}, want ${want} (from old cell ${src[c]})`);
      }
    }
    assert.deepEqual(wrong.slice(0, 8), [], `${a.name}: ${wrong.length} wrong cells`);
  }
}

async function checkWithZarrita(dir: string, arrays: typeof SEED_ARRAYS, shape: number[]) {
  const group = await zarr.open.v3(new FileSystemStore(dir), { kind: "group" });
  const attrs = group.attrs as { blockwise?: { layout?: { grid_shape?: number[] } } };
  assert.deepEqual(attrs.blockwise?.layout?.grid_shape, shape);
  for (const a of arrays) {
    const arr = await zarr.open.v3(group.resolve(a.name), { kind: "array" });
    assert.deepEqual(arr.shape, shape, a.name);
    assert.equal(arr.dtype, a.dtype, a.name);
    const chunk = await zarr.get(arr);
    const values = Array.from(chunk.data as ArrayLike<number | bigint>);
    const raw = readArray(dir, a.name, a.dtype, 3);
    assert.equal(values.length, raw.length, a.name);
    assert.ok(values.every((v, i) => sameValue(v, raw[i])), `${a.name}: zarrita reads the bytes`);
  }
}

interface Growth {
  readonly label: string;
  readonly by: readonly number[];
}

const GROWTHS: readonly Growth[] = [
  { label: "axis 0", by: [3, 0, 0] },
  { label: "axis 1", by: [0, 4, 0] },
  { label: "axis 2", by: [0, 0, 3] },
  { label: "axes 0 and 2", by: [1, 0, 4] },
  { label: "every axis", by: [3, 5, 1] },
  { label: "every axis by whole blocks", by: [4, 6, 4] },
];

async function growthCase(g: Geometry, fit: Fit, rt: boolean, growth: Growth): Promise<void> {
  const p = await prepareStore("grow", g, fit, rt);
  const newShape = g.shape.map((s, d) => s + growth.by[d]!);
  const newL = layoutOf(g, fit, { shape: newShape });
  const src = expectedSources(p.oldL, newL);
  const doneKept = Array.from(src).filter((s) => s >= 0 && p.before.get("done")![s] === 1)
    .length;
  assert.ok(doneKept > 0, "the case keeps some done blocks");

  const notices: string[] = [];
  const store = await TrackingStore.open(p.dir, {
    taskId: TASK,
    layout: newL,
    resourceTracking: rt,
    onNotice: (m) => notices.push(m),
  });
  const doneBlocks = store.doneBlocks();
  store.close();
  assert.equal(doneBlocks, doneKept, "the reopened store counts the kept done blocks");

  checkValues(p, newL, src);

  // The notice: what grew, from what to what, and how many done blocks were kept.
  assert.equal(notices.length, 1, notices.join("\n"));
  const notice = notices[0]!;
  const axes = growth.by.map((b, d) => (b > 0 ? d : -1)).filter((d) => d >= 0);
  const oldGrid = trackingShapeOf(g.shape, g.write);
  const newGrid = trackingShapeOf(newShape, g.write);
  assert.ok(notice.includes(p.dir), notice);
  assert.ok(notice.includes("migrated in place"), notice);
  assert.ok(notice.includes(`totalRoi grew on axis ${axes.join(", ")} `), notice);
  assert.ok(
    notice.includes(`from ${roiText(g.offset, g.shape)} to ${roiText(g.offset, newShape)}`),
    notice,
  );
  assert.ok(notice.includes(`${coord(oldGrid)} → ${coord(newGrid)}`), notice);
  assert.ok(notice.includes(`kept ${doneKept} of ${p.doneBefore} done blocks`), notice);
  const dropped = p.doneBefore - doneKept;
  if (dropped > 0) assert.ok(notice.includes(`${dropped} clipped`), notice);
  else assert.ok(!notice.includes("clipped"), notice);

  // runs.jsonl keeps its lines and gains one migration record.
  const lines = runsLines(p.dir);
  assert.deepEqual(lines.slice(0, 2), RUN_LINES);
  assert.equal(lines.length, 3);
  const record = JSON.parse(lines[2]!) as Record<string, unknown>;
  assert.equal(record["kind"], "migration");
  assert.deepEqual(record["from"], {
    total_roi: { offset: [...g.offset], shape: [...g.shape] },
    grid_shape: oldGrid,
  });
  assert.deepEqual(record["to"], {
    total_roi: { offset: [...g.offset], shape: newShape },
    grid_shape: newGrid,
  });
  assert.equal(record["done_before"], p.doneBefore);
  assert.equal(record["done_kept"], doneKept);
  assert.equal(record["done_dropped"], dropped);
  assert.deepEqual(record["arrays"], p.arrays.map((a) => a.name));
  assert.ok(!Number.isNaN(Date.parse(String(record["at"]))), "at is a date");

  // Group and array metadata describe the grown grid.
  const group = readJson(path.join(p.dir, "zarr.json"));
  assert.equal(group["node_type"], "group");
  const attrs = (group["attributes"] as { blockwise: Record<string, unknown> }).blockwise;
  assert.equal(attrs["task_hash"], taskHash(newL));
  assert.equal(attrs["task_id"], TASK);
  assert.equal(attrs["resource_tracking"], rt);
  const layout = attrs["layout"] as Record<string, unknown>;
  assert.deepEqual(layout["grid_shape"], newGrid);
  assert.deepEqual(layout["total_roi"], { offset: [...g.offset], shape: newShape });
  for (const a of p.arrays) {
    const meta = readJson(path.join(p.dir, a.name, "zarr.json"));
    assert.deepEqual(meta["shape"], newGrid, a.name);
    assert.deepEqual(
      (meta["chunk_grid"] as { configuration: { chunk_shape: number[] } }).configuration
        .chunk_shape,
      newGrid,
      a.name,
    );
    assert.equal(
      fs.statSync(path.join(p.dir, a.name, "c", "0", "0", "0")).size,
      product(newGrid) * bytesPer(a.dtype),
    );
  }
  assert.deepEqual(
    fs.readdirSync(p.dir).sort(),
    [...p.arrays.map((a) => a.name), "runs.jsonl", "zarr.json"].sort(),
  );
  assert.deepEqual(fs.readdirSync(p.parent), [TASK], "no hidden leftovers beside the store");

  await checkWithZarrita(p.dir, p.arrays, newGrid);

  // Reopening with the grown layout is a plain reuse now.
  const again = await TrackingStore.open(p.dir, {
    taskId: TASK,
    layout: newL,
    resourceTracking: rt,
    onNotice: (m) => notices.push(m),
  });
  again.close();
  assert.equal(notices.length, 1, "no second migration");
}

describe("migrating a grown volume (library)", () => {
  for (const g of [PLAIN, WIDE]) {
    for (const fit of ["valid", "overhang", "shrink"] as const) {
      for (const rt of [true, false]) {
        for (const growth of GROWTHS) {
          it(`${g.label}, fit ${fit}, ${rt ? "resource tracking" : "done/failures only"}: grown along ${growth.label}`, async () => {
            await growthCase(g, fit, rt, growth);
          });
        }
      }
    }
  }

  it("hand-checked: overhang, axis 0 grown 7 → 10: the block sticking out of the old volume is dropped", async () => {
    // Axis 0: offset 1, shape 7, write 2 → blocks at [1,3) [3,5) [5,7) [7,9); the old total
    // ends at 8, so the last one ran on a partial volume. Axes 1, 2: 3 tracking cells each.
    const p = await prepareStore("hand", PLAIN, "overhang", false);
    const newL = layoutOf(PLAIN, "overhang", { shape: [10, 8, 5] });
    const store = await TrackingStore.open(p.dir, {
      taskId: TASK,
      layout: newL,
      resourceTracking: false,
    });
    store.close();
    const done = readArray(p.dir, "done", "uint8", 3);
    assert.equal(done.length, 5 * 3 * 3);
    const oldDone = p.before.get("done")!;
    for (let i = 0; i < 5; i++) {
      for (let jk = 0; jk < 9; jk++) {
        const want = i <= 2 ? oldDone[i * 9 + jk] : 0;
        assert.equal(done[i * 9 + jk], want, `cell (${i}, ${Math.floor(jk / 3)}, ${jk % 3})`);
      }
    }
    const failures = readArray(p.dir, "failures", "uint32", 3);
    assert.deepEqual(failures.slice(27), new Array(18).fill(0));
  });

  it("without runs.jsonl the migration starts one with its record", async () => {
    const p = await prepareStore("noruns", WIDE, "valid", true, false);
    const store = await TrackingStore.open(p.dir, {
      taskId: TASK,
      layout: layoutOf(WIDE, "valid", { shape: [15, 16, 10] }),
      resourceTracking: true,
    });
    store.close();
    const lines = runsLines(p.dir);
    assert.equal(lines.length, 1);
    assert.equal((JSON.parse(lines[0]!) as { kind: string }).kind, "migration");
  });

  it("a done/failures-only store opened with resource tracking is migrated, then gets the figure arrays filled", async () => {
    const p = await prepareStore("addrt", WIDE, "overhang", false);
    const newL = layoutOf(WIDE, "overhang", { shape: [11, 19, 10] });
    const store = await TrackingStore.open(p.dir, {
      taskId: TASK,
      layout: newL,
      resourceTracking: true,
    });
    store.close();
    checkValues(p, newL, expectedSources(p.oldL, newL));
    const cells = product(trackingShapeOf([11, 19, 10], WIDE.write));
    for (const a of SEED_ARRAYS.filter((x) => x.resource)) {
      const values = readArray(p.dir, a.name, a.dtype, 3);
      assert.equal(values.length, cells, a.name);
      assert.ok(values.every((v) => sameValue(v, a.fill)), `${a.name} holds its fill value`);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------------------------

async function storeRefusal(promise: Promise<TrackingStore>): Promise<StoreError> {
  let store: TrackingStore;
  try {
    store = await promise;
  } catch (error) {
    if (error instanceof StoreError) return error;
    throw error;
  }
  store.close();
  assert.fail("the store opened; a StoreError was expected");
}

interface RefusalCase {
  readonly label: string;
  readonly layout: () => TaskLayout;
  readonly message: RegExp;
}

const REFUSALS: readonly RefusalCase[] = [
  {
    label: "shrinking totalRoi",
    layout: () => layoutOf(WIDE, "overhang", { shape: [11, 13, 10] }),
    message: /totalRoi shrank on axis 1 \(16 → 13\)/,
  },
  {
    label: "shrinking one axis while growing another",
    layout: () => layoutOf(WIDE, "overhang", { shape: [15, 16, 8] }),
    message: /totalRoi shrank on axis 2 \(10 → 8\)/,
  },
  {
    label: "a changed write stride",
    layout: () => layoutOf(WIDE, "overhang", { shape: [15, 16, 10], write: [2, 2, 2] }),
    message: /write stride changed from \(2, 3, 2\) to \(2, 2, 2\)/,
  },
  {
    label: "a changed totalRoi offset",
    layout: () => layoutOf(WIDE, "overhang", { offset: [-5, 0, 2], shape: [13, 16, 10] }),
    message: /grid offset \(totalRoi offset\) changed from \(-3, 0, 2\) to \(-5, 0, 2\)/,
  },
  {
    label: "a changed context",
    layout: () => layoutOf(WIDE, "overhang", { shape: [15, 16, 10], before: [4, 3, 3] }),
    message:
      /read context changed from \(2, 3, 3\)\/\(1, 4, 2\) to \(4, 3, 3\)\/\(1, 4, 2\) \(before\/after the write ROI\)/,
  },
  {
    label: "a changed fit",
    layout: () => layoutOf(WIDE, "shrink", { shape: [15, 16, 10] }),
    message: /fit changed from "overhang" to "shrink"/,
  },
];

describe("refusals (library)", () => {
  for (const r of REFUSALS) {
    it(`refuses ${r.label}, naming what changed, and leaves every byte as it was`, async () => {
      const p = await prepareStore("refuse", WIDE, "overhang", true);
      const snapshot = snapshotTree(p.parent);
      const error = await storeRefusal(
        TrackingStore.open(p.dir, { taskId: TASK, layout: r.layout(), resourceTracking: true }),
      );
      assert.match(error.message, r.message);
      assert.match(error.message, /cannot be migrated in place/);
      assert.ok(error.message.includes(`rm -rf ${p.dir}`), error.message);
      assert.equal(error.path, p.dir);
      assert.deepEqual(snapshotTree(p.parent), snapshot);
      // The old layout still opens it, with its values.
      const store = await TrackingStore.open(p.dir, {
        taskId: TASK,
        layout: p.oldL,
        resourceTracking: true,
      });
      store.close();
      assert.deepEqual(snapshotTree(p.parent), snapshot);
    });
  }

  it("refuses a store that records only a hash (no layout), explaining why", async () => {
    const p = await prepareStore("hashonly", WIDE, "overhang", true);
    const metaFile = path.join(p.dir, "zarr.json");
    const meta = readJson(metaFile) as { attributes: { blockwise: Record<string, unknown> } };
    delete meta.attributes.blockwise["layout"];
    fs.writeFileSync(metaFile, JSON.stringify(meta, null, 2) + "\n");
    const snapshot = snapshotTree(p.parent);
    const error = await storeRefusal(
      TrackingStore.open(p.dir, {
        taskId: TASK,
        layout: layoutOf(WIDE, "overhang", { shape: [15, 16, 10] }),
        resourceTracking: true,
      }),
    );
    assert.match(error.message, /records only a layout hash, not the layout parameters/);
    assert.match(error.message, /cannot tell whether its blocks still line up/);
    assert.ok(error.message.includes(`rm -rf ${p.dir}`), error.message);
    assert.deepEqual(snapshotTree(p.parent), snapshot);
  });

  it("migrate: false refuses a pure growth, naming the totalRoi change", async () => {
    const p = await prepareStore("nomigrate", WIDE, "valid", false);
    const snapshot = snapshotTree(p.parent);
    const error = await storeRefusal(
      TrackingStore.open(p.dir, {
        taskId: TASK,
        layout: layoutOf(WIDE, "valid", { shape: [15, 16, 10] }),
        resourceTracking: false,
        migrate: false,
      }),
    );
    assert.match(
      error.message,
      /totalRoi changed from Roi\(\(-3, 0, 2\), \(11, 16, 10\)\) to Roi\(\(-3, 0, 2\), \(15, 16, 10\)\)/,
    );
    assert.deepEqual(snapshotTree(p.parent), snapshot);
  });
});

// ---------------------------------------------------------------------------------------------
// Crash injection
// ---------------------------------------------------------------------------------------------

const CRASH_STEPS: readonly MigrationStep[] = ["built", "old-moved", "new-moved"];

/** The group document TrackingStore.open writes for a migrated store (same key order). */
function migratedGroup(dir: string, newL: TaskLayout): {
  stored: StoreAttributes;
  document: Record<string, unknown>;
} {
  const meta = readJson(path.join(dir, "zarr.json")) as {
    attributes: { blockwise: StoreAttributes };
  };
  const stored = meta.attributes.blockwise;
  return {
    stored,
    document: groupMetadata({
      ...stored,
      task_hash: taskHash(newL),
      layout: storedLayoutOf(newL),
    }),
  };
}

/** Crash a migration of `dir` to `newL` at `step`, leaving the files as that crash would. */
function crashMigration(dir: string, newL: TaskLayout, step: MigrationStep): void {
  const { stored, document } = migratedGroup(dir, newL);
  const plan = planMigration(dir, stored.layout, storedLayoutOf(newL));
  assert.throws(
    () =>
      migrateStore(dir, plan, document, (s) => {
        if (s === step) throw new SimulatedCrash();
      }),
    SimulatedCrash,
  );
}

function copyTree(from: string, to: string): void {
  fs.mkdirSync(to, { recursive: true });
  for (const e of fs.readdirSync(from, { withFileTypes: true })) {
    const a = path.join(from, e.name);
    const b = path.join(to, e.name);
    if (e.isDirectory()) copyTree(a, b);
    else fs.copyFileSync(a, b);
  }
}

/** runs.jsonl records without the timestamp a migration stamps on its own. */
function runsWithoutTime(dir: string): unknown[] {
  return runsLines(dir).map((l) => {
    const r = JSON.parse(l) as Record<string, unknown>;
    delete r["at"];
    return r;
  });
}

/** The store equals `reference` file for file (runs.jsonl up to the migration's timestamp). */
function assertSameStore(dir: string, reference: string): void {
  const got = snapshotTree(dir);
  const want = snapshotTree(reference);
  assert.deepEqual([...got.keys()], [...want.keys()]);
  for (const [name, bytes] of want) {
    if (name === "runs.jsonl" || name === "zarr.json") continue;
    assert.deepEqual(got.get(name), bytes, name);
  }
  assert.deepEqual(
    readJson(path.join(dir, "zarr.json")),
    readJson(path.join(reference, "zarr.json")),
  );
  assert.deepEqual(runsWithoutTime(dir), runsWithoutTime(reference));
}

describe("crash injection (library)", () => {
  for (const step of CRASH_STEPS) {
    it(`a crash at "${step}" recovers to the complete ${step === "new-moved" ? "new" : "old"} store, no leftovers`, async () => {
      const p = await prepareStore(`crash-${step}`, WIDE, "overhang", true);
      const newL = layoutOf(WIDE, "overhang", { shape: [13, 19, 12] });
      const oldSnapshot = snapshotTree(p.dir);
      // The reference: the same store migrated without a crash.
      const refParent = newDir(`crash-ref-${step}`);
      const reference = path.join(refParent, TASK);
      copyTree(p.dir, reference);
      const ref = await TrackingStore.open(reference, {
        taskId: TASK,
        layout: newL,
        resourceTracking: true,
      });
      ref.close();

      crashMigration(p.dir, newL, step);
      const left = leftovers(p.parent);
      assert.ok(left.length > 0, "the crash left a hidden sibling");
      assert.equal(fs.existsSync(p.dir), step !== "old-moved", "the store is in place or not");

      const notice = recoverInterruptedMigration(p.dir);
      assert.ok(notice !== null && notice.includes("interrupted migration"), String(notice));
      if (step === "old-moved") assert.match(notice, /restored the store from \.vol\.old-/);
      assert.deepEqual(leftovers(p.parent), []);
      assert.deepEqual(fs.readdirSync(p.parent), [TASK]);
      assert.equal(recoverInterruptedMigration(p.dir), null, "nothing left to recover");

      if (step === "new-moved") {
        assertSameStore(p.dir, reference);
        const notices: string[] = [];
        const s = await TrackingStore.open(p.dir, {
          taskId: TASK,
          layout: newL,
          resourceTracking: true,
          onNotice: (m) => notices.push(m),
        });
        s.close();
        assert.deepEqual(notices, [], "the new store opens as it is");
      } else {
        assert.deepEqual(snapshotTree(p.dir), oldSnapshot, "the old store, byte for byte");
        const old = await TrackingStore.open(p.dir, {
          taskId: TASK,
          layout: p.oldL,
          resourceTracking: true,
        });
        old.close();
        assert.deepEqual(snapshotTree(p.dir), oldSnapshot);
        // And the migration can now be done again, to the same result.
        const s = await TrackingStore.open(p.dir, {
          taskId: TASK,
          layout: newL,
          resourceTracking: true,
        });
        s.close();
        assertSameStore(p.dir, reference);
      }
      assert.deepEqual(fs.readdirSync(p.parent), [TASK]);
    });
  }

  // Regression: TrackingStore.open must recover an interrupted migration itself. After a crash
  // between the two renames the store folder is missing; an open that created a fresh empty
  // store there would make recoverInterruptedMigration take the backup for a finished swap and
  // delete it, losing every mark.
  it('TrackingStore.open alone after a crash at "old-moved" keeps the old marks', async () => {
    const p = await prepareStore("crash-open", WIDE, "valid", false);
    const newL = layoutOf(WIDE, "valid", { shape: [15, 16, 10] });
    const kept =
      Array.from(expectedSources(p.oldL, newL)).filter((s) =>
        s >= 0 && p.before.get("done")![s] === 1
      ).length;
    crashMigration(p.dir, newL, "old-moved");
    const store = await TrackingStore.open(p.dir, {
      taskId: TASK,
      layout: newL,
      resourceTracking: false,
    });
    const created = store.created;
    const done = store.doneBlocks();
    store.close();
    recoverInterruptedMigration(p.dir);
    assert.equal(created, false, "open created a fresh store over an interrupted migration");
    assert.equal(done, kept, "done blocks after reopening");
  });
});

// Regression: moving readRoi and writeRoi by the same amount (same contexts, same totalRoi)
// changes the hash but not the tiling; the store must keep its marks without a notice claiming
// growth on no axis (`totalRoi grew on axis  from Roi(...) to Roi(...)`, the same ROI twice).
describe("a changed hash with an unchanged tiling", () => {
  it("is not reported as a grown totalRoi", async () => {
    const p = await prepareStore("moved", PLAIN, "valid", false);
    const moved: Geometry = { ...PLAIN, writeOffset: [4, 4, 4] };
    const notices: string[] = [];
    const store = await TrackingStore.open(p.dir, {
      taskId: TASK,
      layout: layoutOf(moved, "valid"),
      resourceTracking: false,
      onNotice: (m) => notices.push(m),
    });
    const done = store.doneBlocks();
    store.close();
    assert.equal(done, p.doneBefore, "every mark is kept (the blocks are the same)");
    for (const n of notices) assert.doesNotMatch(n, /grew on axis\s+from/, n);
  });
});

// ---------------------------------------------------------------------------------------------
// CLI level
// ---------------------------------------------------------------------------------------------

/** The grow.mjs task's layout for a geometry, as the CLI builds it. */
function growLayout(g: GrowGeometry): TaskLayout {
  const r = growRois(g);
  return new TaskLayout({
    totalRoi: makeRoi(r.totalRoi.offset, r.totalRoi.shape),
    readRoi: makeRoi(r.readRoi.offset, r.readRoi.shape),
    writeRoi: makeRoi(r.writeRoi.offset, r.writeRoi.shape),
    fit: r.fit,
    readWriteConflict: true,
  });
}

/** Tracking-grid index `i,j,k` of every block of a layout (what grow.mjs logs). */
function indexKeys(layout: TaskLayout, positions?: Iterable<number>): string[] {
  const w = layout.writeRoi.shape;
  const keys: string[] = [];
  const all = positions ?? Array.from({ length: layout.blockCount }, (_, p) => p);
  for (const p of all) {
    const o = layout.writeRoiOf(p).offset;
    keys.push(o.map((v, d) => Math.floor((v - layout.totalRoi.offset[d]!) / w[d]!)).join(","));
  }
  return keys.sort();
}

/** The blocks a run after growing `from` → `to` must execute: every block not kept. */
function expectedRerun(from: GrowGeometry, to: GrowGeometry): {
  keys: string[];
  kept: number;
  doneBefore: number;
} {
  const oldL = growLayout(from);
  const newL = growLayout(to);
  const src = expectedSources(oldL, newL);
  const keptCells = new Set<number>();
  src.forEach((s, c) => {
    if (s >= 0) keptCells.add(c);
  });
  const rerun: number[] = [];
  for (let p = 0; p < newL.blockCount; p++) {
    const cell = cellOfWrite(newL.writeRoiOf(p).offset, newL.totalRoi, newL.writeRoi.shape);
    if (!keptCells.has(cell)) rerun.push(p);
  }
  return { keys: indexKeys(newL, rerun), kept: keptCells.size, doneBefore: oldL.blockCount };
}

function expectExit(r: CliResult, code: number): void {
  assert.equal(r.code, code, describeRun(r));
}

interface CliStore {
  readonly parent: string;
  readonly tracking: string;
  readonly store: string;
  readonly log: string;
}

function runArgs(s: CliStore, extra: readonly string[] = []): string[] {
  return ["run", GROW_PIPELINE, "--tracking-dir", s.tracking, "--no-progress", ...extra];
}

function migrateArgs(s: CliStore, extra: readonly string[] = []): string[] {
  return ["migrate", s.store, "--pipeline", GROW_PIPELINE, "--task", "grow", ...extra];
}

function clearLog(s: CliStore): void {
  fs.rmSync(s.log, { force: true });
}

const OLD: GrowGeometry = { z: 9, fit: "overhang" };
const NEW: GrowGeometry = { z: 12, fit: "overhang" };

describe("blockwise run / migrate (CLI)", () => {
  let template = "";

  before(async () => {
    // One completed run (Z = 9, overhang, resource tracking) copied into each test.
    template = newDir("cli-template");
    const s = cliStoreIn(template);
    const r = await runCli(runArgs(s, ["--resource-tracking"]), growEnv(OLD, s.log));
    expectExit(r, 0);
    assert.deepEqual(readLog(s.log).sort(), indexKeys(growLayout(OLD)));
  });

  function cliStoreIn(parent: string): CliStore {
    const tracking = path.join(parent, "tracking");
    return { parent, tracking, store: path.join(tracking, "grow"), log: path.join(parent, "log") };
  }

  /** A copy of the template's completed store, with an empty block log. */
  function completedStore(label: string): CliStore {
    const s = cliStoreIn(newDir(label));
    copyTree(path.join(template, "tracking"), s.tracking);
    return s;
  }

  for (const fit of ["valid", "overhang", "shrink"] as const) {
    it(`fit ${fit}: a run after extending totalRoi runs only the blocks not kept, and says so`, async () => {
      const from: GrowGeometry = { z: 9, fit };
      const to: GrowGeometry = { z: 12, fit };
      const s = cliStoreIn(newDir(`cli-${fit}`));
      const first = await runCli(runArgs(s), growEnv(from, s.log));
      expectExit(first, 0);
      assert.deepEqual(readLog(s.log).sort(), indexKeys(growLayout(from)));
      const firstRuns = runsLines(s.store);
      assert.equal(firstRuns.length, 1);

      clearLog(s);
      const second = await runCli(runArgs(s), growEnv(to, s.log));
      expectExit(second, 0);
      const want = expectedRerun(from, to);
      assert.deepEqual(readLog(s.log).sort(), want.keys, "only the new (and dropped) blocks ran");
      if (fit === "valid") {
        assert.equal(want.kept, want.doneBefore, "valid keeps every old block");
        const oldKeys = new Set(indexKeys(growLayout(from)));
        assert.ok(want.keys.every((k) => !oldKeys.has(k)), "no old block runs again");
      } else {
        assert.ok(want.kept < want.doneBefore, "the block past the old extent runs again");
      }
      const notice =
        `Task "grow": tracking store ${s.store} migrated in place: totalRoi grew on axis 0 from ${
          roiText([0, 0, 0], [9, 6, 4])
        } to ${roiText([0, 0, 0], [12, 6, 4])}`;
      assert.ok(second.stderr.includes(notice), describeRun(second));
      assert.ok(
        second.stderr.includes(`kept ${want.kept} of ${want.doneBefore} done blocks`),
        describeRun(second),
      );
      const newL = growLayout(to);
      assert.ok(
        second.stderr.includes(`resumed, ${want.kept}/${newL.blockCount} blocks already done`),
        describeRun(second),
      );

      const lines = runsLines(s.store);
      assert.equal(lines[0], firstRuns[0], "the first run's record is kept verbatim");
      assert.deepEqual(
        lines.map((l) => (JSON.parse(l) as { kind: string }).kind),
        ["run", "migration", "run"],
      );
      const done = readArray(s.store, "done", "uint8", 3);
      assert.equal(done.length, product(newL.trackingShape));
      assert.equal(done.filter((v) => v === 1).length, newL.blockCount, "every block done");

      clearLog(s);
      const third = await runCli(runArgs(s), growEnv(to, s.log));
      expectExit(third, 0);
      assert.deepEqual(readLog(s.log), [], "a third run has nothing left to do");
      assert.ok(!third.stderr.includes("migrated in place"), third.stderr);
    });
  }

  it("migrate --dry-run reports what it would do and changes nothing", async () => {
    const s = completedStore("cli-dry");
    const snapshot = snapshotTree(s.parent);
    const r = await runCli(migrateArgs(s, ["--dry-run"]), growEnv(NEW, s.log));
    expectExit(r, 0);
    const want = expectedRerun(OLD, NEW);
    assert.ok(r.stdout.includes(`${s.store} would be migrated: totalRoi grew on axis 0`), r.stdout);
    assert.ok(
      r.stdout.includes(
        `${want.kept} of ${want.doneBefore} done blocks kept, ${
          want.doneBefore - want.kept
        } clipped by the old extent will run again`,
      ),
      r.stdout,
    );
    assert.ok(r.stdout.includes(`arrays: ${SEED_ARRAYS.map((a) => a.name).join(", ")}`));
    assert.ok(r.stdout.includes("(dry run: nothing was changed)"), r.stdout);
    assert.deepEqual(snapshotTree(s.parent), snapshot, "not one byte changed");

    const j = await runCli(migrateArgs(s, ["--dry-run", "--json"]), growEnv(NEW, s.log));
    expectExit(j, 0);
    const report = JSON.parse(j.stdout) as Record<string, unknown>;
    assert.equal(report["action"], "would-migrate");
    assert.equal(report["done_kept"], want.kept);
    assert.deepEqual(snapshotTree(s.parent), snapshot, "not one byte changed");
  });

  it("migrate, then run: the kept blocks are skipped", async () => {
    const s = completedStore("cli-migrate-run");
    const m = await runCli(migrateArgs(s), growEnv(NEW, s.log));
    expectExit(m, 0);
    assert.ok(m.stdout.includes(`${s.store} migrated: totalRoi grew on axis 0`), m.stdout);
    assert.deepEqual(readLog(s.log), [], "migrate runs no block");
    const newL = growLayout(NEW);
    const attrs = (readJson(path.join(s.store, "zarr.json"))["attributes"] as {
      blockwise: { task_hash: string; layout: { grid_shape: number[] } };
    }).blockwise;
    assert.equal(attrs.task_hash, taskHash(newL));
    assert.deepEqual(attrs.layout.grid_shape, [6, 2, 2]);
    assert.deepEqual(leftovers(s.tracking), []);
    assert.ok(!fs.existsSync(path.join(s.store, "blockwise.lock")), "the lock is released");

    const r = await runCli(runArgs(s), growEnv(NEW, s.log));
    expectExit(r, 0);
    const want = expectedRerun(OLD, NEW);
    assert.deepEqual(readLog(s.log).sort(), want.keys);
    assert.ok(!r.stderr.includes("migrated in place"), r.stderr);
    assert.ok(r.stderr.includes(`resumed, ${want.kept}/${newL.blockCount} blocks`), r.stderr);
  });

  it("migrate --json prints one report object, and 'none' once migrated", async () => {
    const s = completedStore("cli-json");
    const r = await runCli(migrateArgs(s, ["--json"]), growEnv(NEW, s.log));
    expectExit(r, 0);
    const lines = r.stdout.split("\n").filter((l) => l !== "");
    assert.equal(lines.length, 1, r.stdout);
    const report = JSON.parse(lines[0]!) as Record<string, unknown>;
    const want = expectedRerun(OLD, NEW);
    assert.deepEqual(Object.keys(report).sort(), [
      "action",
      "arrays",
      "done_before",
      "done_dropped",
      "done_kept",
      "from_grid_shape",
      "grew",
      "path",
      "to_grid_shape",
    ]);
    assert.equal(report["path"], s.store);
    assert.equal(report["action"], "migrated");
    assert.equal(typeof report["grew"], "string");
    assert.match(String(report["grew"]), /^totalRoi grew on axis 0 from /);
    assert.deepEqual(report["from_grid_shape"], [5, 2, 2]);
    assert.deepEqual(report["to_grid_shape"], [6, 2, 2]);
    assert.deepEqual(report["arrays"], SEED_ARRAYS.map((a) => a.name));
    assert.equal(report["done_before"], want.doneBefore);
    assert.equal(report["done_kept"], want.kept);
    assert.equal(report["done_dropped"], want.doneBefore - want.kept);

    const again = await runCli(migrateArgs(s, ["--json"]), growEnv(NEW, s.log));
    expectExit(again, 0);
    assert.deepEqual(JSON.parse(again.stdout), {
      path: s.store,
      action: "none",
      reason: "layout unchanged",
    });
  });

  const CLI_REFUSALS: readonly { label: string; geometry: GrowGeometry; message: RegExp }[] = [
    { label: "shrinking", geometry: { z: 7 }, message: /totalRoi shrank on axis 0 \(9 → 7\)/ },
    {
      label: "a changed write stride",
      geometry: { z: 12, write0: 3 },
      message: /write stride changed from \(2, 3, 2\) to \(3, 3, 2\)/,
    },
    {
      label: "a changed totalRoi offset",
      geometry: { z: 12, offset0: -2 },
      message: /grid offset \(totalRoi offset\) changed from \(0, 0, 0\) to \(-2, 0, 0\)/,
    },
    {
      label: "a changed context",
      geometry: { z: 12, context0: 4 },
      message: /read context changed from \(2, 0, 0\)\/\(0, 0, 0\) to \(4, 0, 0\)\/\(0, 0, 0\)/,
    },
    {
      label: "a changed fit",
      geometry: { z: 12, fit: "shrink" },
      message: /fit changed from "overhang" to "shrink"/,
    },
  ];

  for (const c of CLI_REFUSALS) {
    it(`run and migrate refuse ${c.label} with exit 3, changing nothing`, async () => {
      const s = completedStore("cli-refuse");
      const snapshot = snapshotTree(s.parent);
      const r = await runCli(runArgs(s), growEnv(c.geometry, s.log));
      expectExit(r, 3);
      assert.match(r.stderr, c.message);
      assert.match(r.stderr, /cannot be migrated in place/);
      assert.deepEqual(readLog(s.log), []);
      assert.deepEqual(snapshotTree(s.parent), snapshot);
      const m = await runCli(migrateArgs(s), growEnv(c.geometry, s.log));
      expectExit(m, 3);
      assert.match(m.stderr, c.message);
      assert.ok(m.stderr.includes(`rm -rf ${s.store}`), m.stderr);
      assert.deepEqual(snapshotTree(s.parent), snapshot);
    });
  }

  it("run and migrate refuse a hash-only store with exit 3, explaining why", async () => {
    const s = completedStore("cli-hashonly");
    const metaFile = path.join(s.store, "zarr.json");
    const meta = readJson(metaFile) as { attributes: { blockwise: Record<string, unknown> } };
    delete meta.attributes.blockwise["layout"];
    fs.writeFileSync(metaFile, JSON.stringify(meta, null, 2) + "\n");
    const snapshot = snapshotTree(s.parent);
    for (const args of [runArgs(s), migrateArgs(s), migrateArgs(s, ["--dry-run"])]) {
      const r = await runCli(args, growEnv(NEW, s.log));
      expectExit(r, 3);
      assert.match(r.stderr, /records only a layout hash/);
      assert.match(r.stderr, /cannot tell whether its blocks still line up/);
      assert.deepEqual(snapshotTree(s.parent), snapshot);
    }
  });

  for (const step of CRASH_STEPS) {
    it(`after a crash at "${step}", run recovers the ${step === "new-moved" ? "new" : "old"} store and runs only the blocks not kept`, async () => {
      const s = completedStore(`cli-crash-${step}`);
      crashMigration(s.store, growLayout(NEW), step);
      assert.ok(leftovers(s.tracking).length > 0);
      const r = await runCli(runArgs(s), growEnv(NEW, s.log));
      expectExit(r, 0);
      assert.match(r.stderr, /left by an interrupted migration/);
      assert.equal(
        r.stderr.includes("migrated in place"),
        step !== "new-moved",
        `the old store is migrated by the run, the new one is used as it is\n${r.stderr}`,
      );
      assert.deepEqual(readLog(s.log).sort(), expectedRerun(OLD, NEW).keys);
      assert.deepEqual(leftovers(s.tracking), []);
      assert.deepEqual(fs.readdirSync(s.tracking), ["grow"]);
    });

    it(`after a crash at "${step}", migrate --dry-run --json sees the complete ${step === "new-moved" ? "new" : "old"} store`, async () => {
      const s = completedStore(`cli-crash-dry-${step}`);
      const oldStore = snapshotTree(s.store);
      crashMigration(s.store, growLayout(NEW), step);
      const r = await runCli(migrateArgs(s, ["--dry-run", "--json"]), growEnv(NEW, s.log));
      expectExit(r, 0);
      assert.match(r.stderr, /interrupted migration/);
      const report = JSON.parse(r.stdout) as Record<string, unknown>;
      if (step === "new-moved") {
        assert.equal(report["action"], "none");
      } else {
        assert.equal(report["action"], "would-migrate");
        assert.deepEqual(snapshotTree(s.store), oldStore, "the old store, byte for byte");
      }
      assert.deepEqual(leftovers(s.tracking), []);
    });
  }
});
