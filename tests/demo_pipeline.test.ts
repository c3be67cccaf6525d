import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { TaskLayout } from "../lib/blocks/layout.ts";
import type { Block, PipelineModule, TaskDefinition } from "../lib/pipeline/spec.ts";
import {
  connectedComponents,
  createDemoPipeline,
  DEMO_SMOOTH_RADIUS,
  DEMO_THRESHOLD,
  demoPaths,
  describeDemoOutputs,
  ensureDemoArrays,
  type LabelStats,
} from "../lib/demo/demo_pipeline.ts";
import { openArrayMetadata as openArray, readRegion } from "../lib/zarr/mod.ts";

const root = mkdtempSync(join(tmpdir(), "blockwise-demo-"));
after(() => rmSync(root, { recursive: true, force: true }));

function layoutOf(task: TaskDefinition): TaskLayout {
  return new TaskLayout({
    totalRoi: task.totalRoi,
    readRoi: task.readRoi,
    writeRoi: task.writeRoi,
    fit: task.fit ?? "valid",
    readWriteConflict: task.readWriteConflict ?? true,
  });
}

function blocksOf(task: TaskDefinition): Block[] {
  const layout = layoutOf(task);
  return [...layout.allPositions()].map((pos) => ({
    taskId: task.id,
    id: layout.blockIdOf(pos),
    index: layout.gridIndexOf(pos),
    readRoi: layout.readRoiOf(pos),
    writeRoi: layout.writeRoiOf(pos),
    attempt: 1,
  }));
}

/** Every block of every task, tasks in dependency order, blocks in daisy's level order. */
function runAll(pipeline: PipelineModule, withSetup = true): void {
  for (const task of pipeline.tasks) {
    const context = withSetup ? task.setup?.() : undefined;
    for (const block of blocksOf(task)) task.process!(block, context, { outputs: {}, params: {} });
  }
}

function task(pipeline: PipelineModule, id: string): TaskDefinition {
  const t = pipeline.tasks.find((x) => x.id === id);
  assert.ok(t, `task ${id}`);
  return t;
}

function readVolume(path: string, size: number): ArrayLike<number> {
  // The demo's arrays are uint8 and uint32: number elements.
  return readRegion(path, openArray(path), [0, 0, 0], [size, size, size]) as Uint32Array;
}

/** Naive whole-volume reference: mean of the in-volume voxels of the 5x5x5 window. */
function referenceSmooth(raw: ArrayLike<number>, size: number): Uint8Array {
  const r = DEMO_SMOOTH_RADIUS;
  const out = new Uint8Array(size ** 3);
  for (let z = 0; z < size; z++) {
    for (let y = 0; y < size; y++) {
      for (let x = 0; x < size; x++) {
        let sum = 0;
        let count = 0;
        for (let dz = -r; dz <= r; dz++) {
          for (let dy = -r; dy <= r; dy++) {
            for (let dx = -r; dx <= r; dx++) {
              const [zz, yy, xx] = [z + dz, y + dy, x + dx];
              if (zz < 0 || yy < 0 || xx < 0 || zz >= size || yy >= size || xx >= size) continue;
              sum += raw[(zz * size + yy) * size + xx]!;
              count++;
            }
          }
        }
        out[(z * size + y) * size + x] = Math.floor((2 * sum + count) / (2 * count));
      }
    }
  }
  return out;
}

function checkDemo(size: number, block: number): void {
  const dir = join(root, `run-${size}-${block}`);
  const pipeline = createDemoPipeline(dir, { size, block });
  const paths = demoPaths(dir);
  runAll(pipeline);

  const raw = readVolume(paths.raw, size);
  const smoothed = readVolume(paths.smoothed, size);
  const labels = readVolume(paths.labels, size);

  // Not a constant volume: blobs and noise are there.
  let bright = 0;
  for (let i = 0; i < raw.length; i++) if (raw[i]! > 150) bright++;
  assert.ok(bright > 0 && bright < raw.length / 2, `bright voxels: ${bright}`);

  // Smoothing blockwise with the read context equals smoothing the whole volume at once, on
  // the interior and (with the same in-volume boundary rule) everywhere.
  const reference = referenceSmooth(raw, size);
  const r = DEMO_SMOOTH_RADIUS;
  for (let z = 0; z < size; z++) {
    for (let y = 0; y < size; y++) {
      for (let x = 0; x < size; x++) {
        const i = (z * size + y) * size + x;
        if (smoothed[i] !== reference[i]) {
          const interior = [z, y, x].every((c) => c >= r && c < size - r);
          assert.fail(
            `smoothed (${z}, ${y}, ${x}) ${interior ? "interior" : "border"}: ${smoothed[i]} != ${
              reference[i]
            }`,
          );
        }
      }
    }
  }

  // Labels are nonzero exactly where smoothed is above the threshold.
  let foreground = 0;
  for (let i = 0; i < labels.length; i++) {
    const above = smoothed[i]! > DEMO_THRESHOLD;
    if (above !== (labels[i]! > 0)) {
      assert.fail(`voxel ${i}: smoothed ${smoothed[i]}, label ${labels[i]}`);
    }
    if (above) foreground++;
  }
  assert.ok(foreground > 0, "some voxels are above the threshold");

  // Per block: labels are the 6-connected components of that block's foreground, numbered
  // from blockId * 2^16 + 1, and the stats file says how many there are.
  const labelTask = task(pipeline, "label");
  const blocks = blocksOf(labelTask);
  const statsFiles = readdirSync(paths.labelStats).sort();
  assert.deepEqual(statsFiles, blocks.map((b) => `${b.id}.json`).sort());
  let objects = 0;
  let statsForeground = 0;
  const allLabels = new Set<number>();
  for (const b of blocks) {
    const stats = JSON.parse(
      readFileSync(join(paths.labelStats, `${b.id}.json`), "utf8"),
    ) as LabelStats;
    assert.equal(stats.blockId, String(b.id));
    assert.deepEqual(stats.index, b.index);
    assert.deepEqual(stats.writeRoi, b.writeRoi);
    assert.equal(stats.firstLabel, Number(b.id) * 2 ** 16 + 1);
    const mine = readRegion(
      paths.labels,
      openArray(paths.labels),
      b.writeRoi.offset,
      b.writeRoi.shape,
    ) as Uint32Array;
    const mask = (readRegion(
      paths.smoothed,
      openArray(paths.smoothed),
      b.writeRoi.offset,
      b.writeRoi.shape,
    ) as Uint8Array).map((v) => (v > DEMO_THRESHOLD ? 1 : 0));
    const components = connectedComponents(mask, b.writeRoi.shape);
    const distinct = new Set<number>();
    let fg = 0;
    for (let i = 0; i < mine.length; i++) {
      if (mine[i] === 0) continue;
      fg++;
      distinct.add(mine[i]!);
      assert.equal(mine[i], stats.firstLabel - 1 + components.labels[i]!);
    }
    assert.equal(distinct.size, stats.objects);
    assert.equal(components.count, stats.objects);
    assert.equal(fg, stats.foregroundVoxels);
    for (const l of distinct) {
      assert.ok(!allLabels.has(l), `label ${l} is unique across blocks`);
      allLabels.add(l);
    }
    objects += stats.objects;
    statsForeground += stats.foregroundVoxels;
  }
  assert.equal(statsForeground, foreground);
  assert.equal(objects, allLabels.size);
  assert.ok(objects > 0);
}

describe("demo pipeline", () => {
  test("shape of the pipeline: three tasks, dependencies, context, conflicts", () => {
    const p = createDemoPipeline(join(root, "shape"));
    assert.deepEqual(p.tasks.map((t) => t.id), ["generate", "smooth", "label"]);
    const [generate, smooth, label] = p.tasks as [TaskDefinition, TaskDefinition, TaskDefinition];
    assert.equal(generate.upstream, undefined);
    assert.equal(generate.readWriteConflict, false);
    assert.deepEqual(generate.readRoi, generate.writeRoi);
    assert.deepEqual(smooth.upstream, ["generate"]);
    assert.equal(smooth.fit, "shrink");
    assert.deepEqual(smooth.readRoi.offset, [-2, -2, -2]);
    assert.deepEqual(smooth.readRoi.shape, [36, 36, 36]);
    assert.deepEqual(smooth.writeRoi.shape, [32, 32, 32]);
    assert.deepEqual(label.upstream, ["smooth"]);
    assert.equal(label.readWriteConflict, false);
    // Default volume: 128^3 in 32^3 blocks, 64 blocks per task; write blocks tile the volume.
    for (const t of p.tasks) {
      const layout = layoutOf(t);
      assert.equal(layout.blockCount, 64, t.id);
      assert.deepEqual(layout.totalWriteRoi, { offset: [0, 0, 0], shape: [128, 128, 128] });
    }
  });

  test("32^3 in 16^3 blocks: smoothing across block borders, labels, stats", () => {
    checkDemo(32, 16);
  });

  test("27^3 in 12^3 blocks: shrunk edge blocks write padded edge chunks", () => {
    checkDemo(27, 12);
  });

  test("deterministic: a second run elsewhere writes identical arrays", () => {
    const a = join(root, "det-a");
    const b = join(root, "det-b");
    runAll(createDemoPipeline(a, { size: 20, block: 10 }));
    runAll(createDemoPipeline(b, { size: 20, block: 10 }));
    for (const name of ["raw", "smoothed", "labels"] as const) {
      assert.deepEqual(
        readVolume(demoPaths(a)[name], 20),
        readVolume(demoPaths(b)[name], 20),
        name,
      );
    }
  });

  test("process works without setup context once the arrays exist, in any block order", () => {
    const dir = join(root, "no-context");
    const pipeline = createDemoPipeline(dir, { size: 16, block: 8 });
    ensureDemoArrays(dir, { size: 16, block: 8 });
    for (const t of pipeline.tasks) {
      for (const block of blocksOf(t).reverse()) {
        t.process!(block, undefined, { outputs: {}, params: {} });
      }
    }
    const paths = demoPaths(dir);
    const raw = readVolume(paths.raw, 16);
    assert.deepEqual(readVolume(paths.smoothed, 16), referenceSmooth(raw, 16));
  });

  test("setup is idempotent and refuses a different existing volume", () => {
    const dir = join(root, "idempotent");
    const first = ensureDemoArrays(dir, { size: 16, block: 8 });
    const second = ensureDemoArrays(dir, { size: 16, block: 8 });
    assert.deepEqual(second, first);
    assert.throws(() => ensureDemoArrays(dir, { size: 32, block: 8 }), /rm -rf/);
  });

  test("options are validated", () => {
    assert.throws(() => createDemoPipeline(root, { size: 0 }), /size must be a positive integer/);
    assert.throws(() => createDemoPipeline(root, { block: 2.5 }), /block must be/);
    assert.throws(() => createDemoPipeline(root, { size: 4096, block: 8 }), /uint32 labels/);
  });

  test("outputs are Zarr v3 arrays zarrita opens", async () => {
    const dir = join(root, "zarrita");
    runAll(createDemoPipeline(dir, { size: 16, block: 8 }));
    const store = new FileSystemStore(join(dir, "demo.zarr"));
    const group = await zarr.open(zarr.root(store), { kind: "group" });
    assert.ok("blockwise_demo" in group.attrs);
    for (const [name, dtype] of [["raw", "uint8"], ["smoothed", "uint8"], ["labels", "uint32"]]) {
      const arr = await zarr.open(zarr.root(store).resolve(name!), { kind: "array" });
      assert.equal(arr.dtype, dtype);
      assert.deepEqual(arr.shape, [16, 16, 16]);
      assert.deepEqual(arr.chunks, [8, 8, 8]);
      const { data } = await zarr.get(arr);
      assert.deepEqual(
        Array.from(data as ArrayLike<number>),
        Array.from(readVolume(join(dir, "demo.zarr", name!), 16)),
      );
    }
  });

  test("describeDemoOutputs names every output path", () => {
    const dir = join(root, "describe");
    const lines = describeDemoOutputs(dir);
    const paths = demoPaths(dir);
    for (const p of [paths.root, paths.raw, paths.smoothed, paths.labels, paths.labelStats]) {
      assert.ok(lines.some((l) => l.startsWith(p)), p);
    }
    assert.ok(lines.every((l) => !l.includes("\n")));
    assert.equal(existsSync(dir), false, "describing writes nothing");
  });
});
