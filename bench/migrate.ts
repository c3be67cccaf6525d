/**
 * Grown-volume migration benchmark (seed 000, "resuming a grown volume": "one pass, one byte
 * per block; milliseconds even for millions of blocks").
 *
 * Builds a one-million-block store (100×100×100 tracking grid, write 1³, no context), once with
 * the resource tracking arrays (90% of blocks done, every figure filled) and once with only
 * `done`/`failures`, then times migrating a fresh copy of it to a grid grown by 10% along
 * axis 0 (planMigration + migrateStore, exactly what TrackingStore.open does on a grown
 * layout). Median of 3, each on a fresh copy. Also prints a breakdown of where the time goes
 * (the same file and memory operations migrateStore performs, timed one by one) and the
 * end-to-end TrackingStore.open of a grown layout.
 *
 * Runtime-neutral: `npx bun bench/migrate.ts` or `npx deno run -A bench/migrate.ts`.
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { TaskLayout } from "../lib/blocks/layout.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import { groupMetadata, type StoreAttributes, TrackingStore } from "../lib/tracking/store.ts";
import { storedLayoutOf } from "../lib/tracking/store_layout.ts";
import { taskHash } from "../lib/tracking/task_hash.ts";
import { fillPattern, itemSize, TRACKING_ARRAYS } from "../lib/tracking/arrays.ts";
import { migrateStore, planMigration } from "../lib/tracking/migrate.ts";

const BUDGET_MS = 200;
const REPETITIONS = 3;
const SIDE = 100;
const GROWN = 110;

const runtime = "Bun" in globalThis ? "bun" : "Deno" in globalThis ? "deno" : "node";

function layout(z: number): TaskLayout {
  return new TaskLayout({
    totalRoi: makeRoi([0, 0, 0], [z, SIDE, SIDE]),
    readRoi: makeRoi([0, 0, 0], [1, 1, 1]),
    writeRoi: makeRoi([0, 0, 0], [1, 1, 1]),
    fit: "valid",
    readWriteConflict: true,
  });
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

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function buildTemplate(dir: string, resourceTracking: boolean): Promise<void> {
  const store = await TrackingStore.open(dir, {
    taskId: "bench",
    layout: layout(SIDE),
    resourceTracking,
  });
  const cells = store.done.length;
  const t0 = 1_700_000_000_000;
  for (let c = 0; c < cells; c++) {
    if (c % 10 === 9) {
      if (c % 20 === 19) store.addFailure(c);
      continue;
    }
    store.markDone(c);
    if (resourceTracking) {
      store.recordBlock(c, t0 + c, t0 + c + 12.5, c % 16, {
        wallSeconds: 0.0125,
        cpuSeconds: 0.01 + (c % 7) / 1000,
        peakRssBytes: 200_000_000 + c,
        ioReadBytes: 4096 * (c % 5),
        ioWriteBytes: 4096,
      });
    }
  }
  store.close();
}

interface Timing {
  readonly totalMs: number;
  readonly planMs: number;
  readonly migrateMs: number;
  readonly doneKept: number;
}

function timeMigration(dir: string): Timing {
  const to = layout(GROWN);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, "zarr.json"), "utf8")) as {
    attributes: { blockwise: StoreAttributes };
  };
  const stored = meta.attributes.blockwise;
  const target = storedLayoutOf(to);
  const document = groupMetadata({ ...stored, task_hash: taskHash(to), layout: target });
  const start = performance.now();
  const plan = planMigration(dir, stored.layout, target);
  const planned = performance.now();
  migrateStore(dir, plan, document);
  const end = performance.now();
  return {
    totalMs: end - start,
    planMs: planned - start,
    migrateMs: end - planned,
    doneKept: plan.doneKept,
  };
}

/**
 * The operations migrateStore performs for each array, timed separately on the same data:
 * read the chunk, allocate and fill the target with the fill pattern, copy the kept cells
 * (here a plain C-order remap, which is what the cell map amounts to for this grid), write.
 */
function breakdown(dir: string, arrays: readonly string[]): Record<string, number> {
  const out: Record<string, number> = { read: 0, fill: 0, copy: 0, write: 0, mapping: 0 };
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-migrate-parts-"));
  try {
    // A replica of the per-cell map (one Float64 per old cell, the per-axis loop).
    let t = performance.now();
    const oldShape = [SIDE, SIDE, SIDE];
    const strides = [SIDE * SIDE, SIDE, 1];
    const map = new Float64Array(SIDE ** 3).fill(-1);
    const idx = [0, 0, 0];
    for (let c = 0; c < map.length; c++) {
      let n = 0;
      for (let d = 0; d < 3; d++) n += idx[d]! * strides[d]!;
      map[c] = n;
      for (let d = 2; d >= 0; d--) {
        if (++idx[d]! < oldShape[d]!) break;
        idx[d] = 0;
      }
    }
    out["mapping"] = performance.now() - t;
    for (const name of arrays) {
      const spec = TRACKING_ARRAYS.find((a) => a.name === name)!;
      const size = itemSize(spec.dtype);
      const pattern = fillPattern(spec);
      t = performance.now();
      const source = new Uint8Array(fs.readFileSync(path.join(dir, name, "c", "0", "0", "0")));
      out["read"]! += performance.now() - t;
      t = performance.now();
      const target = new Uint8Array(GROWN * SIDE * SIDE * size);
      if (pattern.some((b) => b !== 0)) {
        for (let i = 0; i < target.length; i += size) target.set(pattern, i);
      }
      out["fill"]! += performance.now() - t;
      t = performance.now();
      if (size === 1) {
        for (let c = 0; c < map.length; c++) target[map[c]!] = source[c]!;
      } else {
        const words = size / 4;
        const from = new Uint32Array(source.buffer, source.byteOffset, source.byteLength / 4);
        const to = new Uint32Array(target.buffer, target.byteOffset, target.byteLength / 4);
        for (let c = 0; c < map.length; c++) {
          const n = map[c]!;
          for (let w = 0; w < words; w++) to[n * words + w] = from[c * words + w]!;
        }
      }
      out["copy"]! += performance.now() - t;
      t = performance.now();
      fs.writeFileSync(path.join(scratch, name), target);
      out["write"]! += performance.now() - t;
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  return out;
}

/**
 * A prototype of the proposed change (not in lib): the kept cells as C-order runs (one
 * `subarray`/`set` copy per run, consecutive runs merged) instead of a per-cell Float64 map and
 * a per-word loop; fills by doubling `copyWithin`; the chunk read without a second copy; the
 * map computed once. Writes every array of the grown store into `out`, for comparison.
 */
function proposedMigration(dir: string, arrays: readonly string[], out: string): number {
  const start = performance.now();
  const from = layout(SIDE);
  const to = layout(GROWN);
  const dims = from.dims;
  // Per axis, which tracking coordinates keep their marks (the rule of migrate.ts).
  const keep: Uint8Array[] = [];
  for (let d = 0; d < dims; d++) {
    const w = from.writeRoi.shape[d]!;
    const tw0 = from.totalWriteRoi.offset[d]!;
    const twEnd = tw0 + from.totalWriteRoi.shape[d]!;
    const grew = from.totalRoi.shape[d] !== to.totalRoi.shape[d];
    const axis = new Uint8Array(from.trackingShape[d]!);
    for (let t = 0; t < axis.length; t++) {
      const g = t - from.indexShift[d]!;
      if (g < 0 || g >= from.gridShape[d]! || g >= to.gridShape[d]!) continue;
      if (!grew || tw0 + (g + 1) * w <= twEnd) axis[t] = 1;
    }
    keep.push(axis);
  }
  // Runs along the last axis, merged when contiguous in both grids.
  const runs: number[] = [];
  const last = dims - 1;
  const rows = from.trackingCellCount / from.trackingShape[last]!;
  const t = new Array<number>(dims).fill(0);
  for (let row = 0; row < rows; row++) {
    let kept = true;
    let srcRow = 0;
    let dstRow = 0;
    for (let d = 0; d < last; d++) {
      if (keep[d]![t[d]!] !== 1) kept = false;
      srcRow += t[d]! * from.trackingStrides[d]!;
      dstRow += t[d]! * to.trackingStrides[d]!;
    }
    if (kept) {
      const axis = keep[last]!;
      for (let a = 0; a < axis.length;) {
        if (axis[a] !== 1) {
          a++;
          continue;
        }
        let b = a;
        while (b < axis.length && axis[b] === 1) b++;
        const n = runs.length;
        if (
          n > 0 && runs[n - 3]! + runs[n - 1]! === srcRow + a &&
          runs[n - 2]! + runs[n - 1]! === dstRow + a
        ) {
          runs[n - 1]! += b - a;
        } else {
          runs.push(srcRow + a, dstRow + a, b - a);
        }
        a = b;
      }
    }
    for (let d = last - 1; d >= 0; d--) {
      if (++t[d]! < from.trackingShape[d]!) break;
      t[d] = 0;
    }
  }
  for (const name of arrays) {
    const spec = TRACKING_ARRAYS.find((a) => a.name === name)!;
    const size = itemSize(spec.dtype);
    const pattern = fillPattern(spec);
    const target = new Uint8Array(to.trackingCellCount * size);
    if (pattern.some((b) => b !== 0)) {
      target.set(pattern, 0);
      for (let n = size; n < target.length; n *= 2) {
        target.copyWithin(n, 0, Math.min(n, target.length - n));
      }
    }
    const source = fs.readFileSync(path.join(dir, name, "c", "0", "0", "0"));
    for (let r = 0; r < runs.length; r += 3) {
      const s = runs[r]! * size;
      target.set(source.subarray(s, s + runs[r + 2]! * size), runs[r + 1]! * size);
    }
    fs.mkdirSync(path.join(out, name), { recursive: true });
    fs.writeFileSync(path.join(out, name, "chunk"), target);
  }
  return performance.now() - start;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

async function bench(resourceTracking: boolean, root: string): Promise<number> {
  const label = resourceTracking ? "with resource tracking arrays" : "done/failures only";
  const template = path.join(root, `template-${resourceTracking ? "rt" : "done"}`, "store");
  let t = performance.now();
  await buildTemplate(template, resourceTracking);
  const arrays = TRACKING_ARRAYS.filter((a) => resourceTracking || !a.resourceTracking).map((a) =>
    a.name
  );
  const bytes = arrays.reduce(
    (n, name) => n + fs.statSync(path.join(template, name, "c", "0", "0", "0")).size,
    0,
  );
  console.log(
    `\n${label}: ${SIDE}x${SIDE}x${SIDE} = ${SIDE ** 3} blocks, ${arrays.length} arrays, ${
      (bytes / 2 ** 20).toFixed(1)
    } MiB (built in ${(performance.now() - t).toFixed(0)} ms); grown to ${GROWN}x${SIDE}x${SIDE}`,
  );
  const timings: Timing[] = [];
  for (let r = 0; r < REPETITIONS; r++) {
    const copy = path.join(root, `copy-${resourceTracking ? "rt" : "done"}-${r}`, "store");
    copyTree(template, copy);
    timings.push(timeMigration(copy));
    fs.rmSync(path.dirname(copy), { recursive: true, force: true });
  }
  const total = median(timings.map((x) => x.totalMs));
  console.log(
    `  planMigration + migrateStore: median ${total.toFixed(1)} ms of ${REPETITIONS} (${
      timings.map((x) => x.totalMs.toFixed(1)).join(", ")
    }); planMigration ${median(timings.map((x) => x.planMs)).toFixed(1)} ms, migrateStore ${
      median(timings.map((x) => x.migrateMs)).toFixed(1)
    } ms; ${timings[0]!.doneKept} done blocks kept`,
  );

  // End to end: TrackingStore.open on the grown layout (verify, plan, migrate, map).
  const copy = path.join(root, `open-${resourceTracking ? "rt" : "done"}`, "store");
  copyTree(template, copy);
  t = performance.now();
  const store = await TrackingStore.open(copy, {
    taskId: "bench",
    layout: layout(GROWN),
    resourceTracking,
  });
  const openMs = performance.now() - t;
  store.close();
  fs.rmSync(path.dirname(copy), { recursive: true, force: true });
  console.log(`  TrackingStore.open with the grown layout, end to end: ${openMs.toFixed(1)} ms`);

  // The proposed change, prototyped here: same output bytes as migrateStore's, timed.
  const reference = path.join(root, `ref-${resourceTracking ? "rt" : "done"}`, "store");
  copyTree(template, reference);
  timeMigration(reference);
  const proposed: number[] = [];
  for (let r = 0; r < REPETITIONS; r++) {
    const out = path.join(root, `proposed-${r}`);
    proposed.push(proposedMigration(template, arrays, out));
    for (const name of arrays) {
      const want = fs.readFileSync(path.join(reference, name, "c", "0", "0", "0"));
      if (!sameBytes(fs.readFileSync(path.join(out, name, "chunk")), want)) {
        throw new Error(`the prototype's ${name} differs from migrateStore's`);
      }
    }
    fs.rmSync(out, { recursive: true, force: true });
  }
  fs.rmSync(path.dirname(reference), { recursive: true, force: true });
  console.log(
    `  prototype of the proposed change (run copies, doubling fill, no second read copy, one map): median ${
      median(proposed).toFixed(1)
    } ms (${proposed.map((x) => x.toFixed(1)).join(", ")}), byte-identical output`,
  );

  const parts = breakdown(template, arrays);
  console.log(
    `  where the time goes (same operations, timed apart): ${
      Object.entries(parts).map(([k, v]) => `${k} ${v.toFixed(1)} ms`).join(", ")
    }`,
  );
  fs.rmSync(path.dirname(template), { recursive: true, force: true });
  return total;
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-migrate-"));
try {
  console.log(`Grown-volume migration benchmark (${runtime}, ${os.cpus().length} CPUs)`);
  const withRt = await bench(true, root);
  const doneOnly = await bench(false, root);
  const pass = withRt < BUDGET_MS ? "PASS" : "FAIL";
  console.log(
    `\nmigrate 1M blocks with resource tracking arrays: ${
      withRt.toFixed(1)
    } ms (budget < ${BUDGET_MS} ms with resource tracking arrays) ${pass}`,
  );
  console.log(
    `migrate 1M blocks, done/failures only: ${
      doneOnly.toFixed(1)
    } ms (seed: "milliseconds even for millions of blocks")`,
  );
  if (pass === "FAIL") process.exitCode = 1;
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
