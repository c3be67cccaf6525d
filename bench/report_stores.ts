/**
 * Synthetic tracking stores for bench/report.ts: a store made with the store code, then its
 * chunk files written directly with plausible per-block figures (a slow region, failed blocks
 * with three distinct errors, a never-run slab, 16 workers' timelines), so a million-block store
 * takes a second to make instead of a million-block run.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { TrackingStore } from "../lib/tracking/store.ts";
import { chunkPath, readStoreMetadata } from "../lib/tracking/store_metadata.ts";
import { forEachBlockRun } from "../lib/tracking/block_runs.ts";

export interface SyntheticStore {
  readonly dir: string;
  readonly blocks: number;
  readonly failed: number;
}

/** A store of `grid` blocks of 16 voxels per axis; every figure filled when `resources`. */
export async function makeSyntheticStore(
  dir: string,
  task: string,
  grid: readonly number[],
  resources: boolean,
): Promise<SyntheticStore> {
  const write = grid.map(() => 16);
  const layout = new TaskLayout({
    totalRoi: { offset: grid.map(() => 0), shape: grid.map((g) => g * 16) },
    readRoi: { offset: grid.map(() => 0), shape: write },
    writeRoi: { offset: grid.map(() => 0), shape: write },
    fit: "valid",
    readWriteConflict: false,
  });
  const storeDir = path.join(dir, task);
  (await TrackingStore.open(storeDir, { taskId: task, layout, resourceTracking: resources }))
    .close();
  const meta = readStoreMetadata(storeDir);
  const n = layout.trackingCellCount;
  const done = new Uint8Array(n);
  const failures = new Uint32Array(n);
  const dims = grid.length;
  const coords = new Array<number>(dims).fill(0);
  let seed = 7;
  const random = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296;
  };
  const wall = resources ? new Float32Array(n).fill(Number.NaN) : null;
  const cpu = resources ? new Float32Array(n).fill(Number.NaN) : null;
  const rss = resources ? new BigUint64Array(n) : null;
  const ioRead = resources ? new BigUint64Array(n) : null;
  const ioWrite = resources ? new BigUint64Array(n) : null;
  const worker = resources ? new Uint32Array(n).fill(2 ** 32 - 1) : null;
  const sent = resources ? new Float64Array(n).fill(Number.NaN) : null;
  const returned = resources ? new Float64Array(n).fill(Number.NaN) : null;
  const clocks = new Float64Array(16).fill(1_765_000_000);
  const errors: string[] = [];
  const messages = [
    "ValueError: segmentation produced no objects",
    "MemoryError: cannot allocate 2.1 GiB",
    "OSError: [Errno 5] Input/output error: 'raw/c/3/1/7'",
  ];
  let failed = 0;
  let blocks = 0;
  forEachBlockRun(layout, (position, cell, length) => {
    for (let i = 0; i < length; i++) {
      const p = position + i;
      const c = cell + i;
      blocks++;
      layout.coordsOf(p, coords);
      const neverRun = coords[0]! >= grid[0]! - Math.max(1, Math.floor(grid[0]! / 50));
      if (neverRun) continue;
      if (random() < 0.002) {
        failures[c] = 1 + Math.floor(random() * 3);
        failed++;
        const index = [...coords];
        const message = messages[Math.floor(random() * 3)]!;
        errors.push(JSON.stringify({
          task,
          block: String(layout.blockIdOf(p)),
          index,
          attempt: failures[c],
          run_id: "bench",
          at: "2025-12-06T04:00:00.000Z",
          message,
          stack: [message, "    at process (pipeline.py:12)"],
          permanent: true,
        }));
        continue;
      }
      done[c] = 1;
      if (random() < 0.01) failures[c] = 1;
      if (!resources) continue;
      // A slow blob in the middle of the volume, and a gradient along the last axis.
      let r2 = 0;
      for (let d = 0; d < dims; d++) r2 += ((coords[d]! - grid[d]! / 2) / grid[d]!) ** 2;
      const slow = r2 < 0.02 ? 8 : 1;
      const w = 0.05 * slow * (1 + coords[dims - 1]! / grid[dims - 1]!) * (0.5 + random());
      wall![c] = w;
      cpu![c] = w * (0.7 + 0.3 * random());
      rss![c] = BigInt(Math.round(1e8 + 5e7 * random() + (slow > 1 ? 4e8 : 0)));
      ioRead![c] = BigInt(Math.round(2e6 * (0.9 + 0.2 * random())));
      ioWrite![c] = BigInt(Math.round(1e6 * (0.9 + 0.2 * random())));
      const k = p % 16;
      worker![c] = k;
      sent![c] = clocks[k]!;
      returned![c] = clocks[k]! + w;
      clocks[k]! += w + 0.001;
    }
  });
  const put = (name: string, array: ArrayBufferView) =>
    fs.writeFileSync(
      chunkPath(meta, name),
      new Uint8Array(array.buffer, array.byteOffset, array.byteLength),
    );
  put("done", done);
  put("failures", failures);
  if (resources) {
    put("wall_seconds", wall!);
    put("cpu_seconds", cpu!);
    put("peak_rss_bytes", rss!);
    put("io_read_bytes", ioRead!);
    put("io_write_bytes", ioWrite!);
    put("worker_id", worker!);
    put("sent_at", sent!);
    put("returned_at", returned!);
  }
  fs.writeFileSync(path.join(storeDir, "errors.jsonl"), errors.join("\n") + "\n");
  const run = (id: string, started: string, seconds: number, completed: number) =>
    JSON.stringify({
      kind: "run",
      run_id: id,
      started_at: started,
      ended_at: new Date(Date.parse(started) + seconds * 1000).toISOString(),
      seconds,
      outcome: "incomplete",
      exit_code: 1,
      host: "bench",
      blocks: { total: blocks, completed, skipped: 0, failed, orphaned: 0 },
    });
  fs.writeFileSync(
    path.join(storeDir, "runs.jsonl"),
    `${run("a", "2025-12-06T03:00:00.000Z", 1800, Math.floor(blocks / 2))}\n${
      run("b", "2025-12-06T04:00:00.000Z", 1700, blocks - failed)
    }\n`,
  );
  return { dir: storeDir, blocks, failed };
}
