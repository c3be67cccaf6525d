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
import { arrayWanted, TRACKING_ARRAYS } from "../lib/tracking/arrays.ts";
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
async function bench(resourceTracking: boolean, root: string): Promise<number> {
  const label = resourceTracking ? "with resource tracking arrays" : "done/failures only";
  const template = path.join(root, `template-${resourceTracking ? "rt" : "done"}`, "store");
  let t = performance.now();
  await buildTemplate(template, resourceTracking);
  const arrays = TRACKING_ARRAYS.filter((a) =>
    arrayWanted(a, { resourceTracking, provenance: false })
  )
    .map((a) => a.name);
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
