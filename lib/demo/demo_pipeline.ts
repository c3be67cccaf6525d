/**
 * The built-in demo (`blockwise demo`): a three-task 3-D pipeline over a generated volume that
 * does real work and writes Zarr v3 arrays any Zarr reader opens.
 *
 *   generate  synthesises smooth blobs plus seeded noise into `raw` (uint8)
 *   smooth    reads `raw` with a 2-voxel context and writes a 5x5x5 box-filtered `smoothed`
 *   label     thresholds `smoothed` and writes per-block connected components into `labels`
 *             (uint32, globally unique as `blockId * 2^localBits + local`), plus one small JSON
 *             file of statistics per block
 *
 * Every `process` is pure per block: it reads only what `block.readRoi` covers, writes only the
 * one chunk that `block.writeRoi` is (chunk shape = write block shape), and touches no mutable
 * module state, so blocks may run in any order the scheduler allows, in parallel Web Workers.
 * The volume is a function of the voxel coordinate alone (the blob list is derived from a fixed
 * seed when the pipeline is created, and only +, -, *, / are used, which IEEE 754 rounds the
 * same way in every engine), so Bun and Deno produce identical bytes.
 */

import { join } from "node:path";
import { mkdirSync } from "node:fs";
import { cantorNumber } from "../blocks/block_id.ts";
import {
  boxFilter,
  connectedComponents,
  DEMO_SEED,
  demoBlobs,
  synthesise,
} from "./demo_kernels.ts";
export { boxFilter, connectedComponents, DEMO_SEED, demoBlobs, synthesise };
import type {
  Block,
  BlockContext,
  OutputDefinition,
  PipelineModule,
  RoiDefinition,
  TaskDefinition,
} from "../pipeline/spec.ts";
import {
  ensureArray,
  ensureGroup,
  openArrayMetadata,
  readRegion,
  writeChunkRegion,
  writeFileAtomic,
  type ZarrArrayMetadata,
} from "../zarr/mod.ts";

export interface DemoOptions {
  /** Voxels per axis of the cubic volume (default 128). */
  readonly size?: number;
  /** Voxels per axis of a write block, and of a chunk (default 32). */
  readonly block?: number;
  /** `maxWorkers` of each task (default 2). */
  readonly maxWorkers?: number;
}

export const DEMO_DEFAULT_SIZE = 128;
export const DEMO_DEFAULT_BLOCK = 32;
/** Read context of `smooth` on each side, and the box filter's radius. */
export const DEMO_SMOOTH_RADIUS = 2;
/** `label` marks voxels whose smoothed value is strictly above this. */
export const DEMO_THRESHOLD = 100;

/** The arrays of one demo volume; `setup` returns this as the `process` context. */
export interface DemoArrays {
  readonly kind: "blockwise-demo-arrays";
  readonly raw: ZarrArrayMetadata;
  readonly smoothed: ZarrArrayMetadata;
  readonly labels: ZarrArrayMetadata;
}

export interface DemoPaths {
  readonly root: string;
  readonly raw: string;
  readonly smoothed: string;
  readonly labels: string;
  readonly labelStats: string;
}

/** Statistics file `label_stats/<blockId>.json` of one `label` block. */
export interface LabelStats {
  readonly blockId: string;
  readonly index: readonly number[];
  readonly writeRoi: RoiDefinition;
  readonly threshold: number;
  readonly objects: number;
  readonly foregroundVoxels: number;
  /** Labels in this block run from `firstLabel` to `firstLabel + objects - 1`. */
  readonly firstLabel: number;
}

export function demoPaths(dir: string): DemoPaths {
  const root = join(dir, "demo.zarr");
  return {
    root,
    raw: join(root, "raw"),
    smoothed: join(root, "smoothed"),
    labels: join(root, "labels"),
    labelStats: join(root, "label_stats"),
  };
}

interface Resolved {
  readonly size: number;
  readonly block: number;
  readonly maxWorkers: number;
  readonly localBits: number;
}

function resolve(options: DemoOptions): Resolved {
  const size = options.size ?? DEMO_DEFAULT_SIZE;
  const block = options.block ?? DEMO_DEFAULT_BLOCK;
  const maxWorkers = options.maxWorkers ?? 2;
  for (const [name, value] of [["size", size], ["block", block], ["maxWorkers", maxWorkers]]) {
    if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
      throw new RangeError(`Demo option ${name} must be a positive integer, got ${value}`);
    }
  }
  // Labels are `blockId * 2^localBits + local`; 6-connected components in a block number at
  // most ceil(voxels / 2) (a checkerboard), and every label must fit a uint32.
  const maxLocal = Math.ceil(Math.min(block, size) ** 3 / 2);
  const localBits = Math.max(16, Math.ceil(Math.log2(maxLocal + 1)));
  const g = Math.ceil(size / block) - 1;
  const maxId = cantorNumber([g, g, g]);
  if ((maxId + 1) * 2 ** localBits > 2 ** 32) {
    throw new RangeError(
      `Demo volume ${size}^3 in blocks of ${block}^3 has block IDs up to ${maxId}, too many for ` +
        `uint32 labels (blockId * 2^${localBits} + local); use a larger block or a smaller size`,
    );
  }
  return { size, block, maxWorkers, localBits };
}

function cube(n: number): number[] {
  return [n, n, n];
}

/**
 * Create the demo group and its arrays unless they exist (atomically, so several workers may
 * call it at once), and check that existing ones match this volume.
 */
export function ensureDemoArrays(dir: string, options: DemoOptions = {}): DemoArrays {
  const o = resolve(options);
  const paths = demoPaths(dir);
  const common = {
    shape: cube(o.size),
    chunkShape: cube(Math.min(o.block, o.size)),
    fillValue: 0,
    dimensionNames: ["z", "y", "x"],
  };
  ensureGroup(paths.root, {
    blockwise_demo: {
      size: o.size,
      block: o.block,
      seed: DEMO_SEED,
      smooth_radius: DEMO_SMOOTH_RADIUS,
      threshold: DEMO_THRESHOLD,
    },
  });
  const raw = ensureArray(paths.raw, {
    ...common,
    dtype: "uint8",
    attributes: { description: "smooth blobs plus seeded noise", task: "generate" },
  });
  const smoothed = ensureArray(paths.smoothed, {
    ...common,
    dtype: "uint8",
    attributes: {
      description: `box filter of raw, ${2 * DEMO_SMOOTH_RADIUS + 1} voxels wide`,
      task: "smooth",
    },
  });
  const labels = ensureArray(paths.labels, {
    ...common,
    dtype: "uint32",
    attributes: {
      description: `6-connected components of smoothed > ${DEMO_THRESHOLD}, per block`,
      task: "label",
      label_encoding: `blockId * 2^${o.localBits} + local`,
      local_bits: o.localBits,
    },
  });
  mkdirSync(paths.labelStats, { recursive: true });
  return { kind: "blockwise-demo-arrays", raw, smoothed, labels };
}

/** Open the arrays `ensureDemoArrays` created (when `process` runs without `setup`). */
export function openDemoArrays(dir: string): DemoArrays {
  const paths = demoPaths(dir);
  return {
    kind: "blockwise-demo-arrays",
    raw: openArrayMetadata(paths.raw),
    smoothed: openArrayMetadata(paths.smoothed),
    labels: openArrayMetadata(paths.labels),
  };
}

function arraysFrom(context: unknown, dir: string): DemoArrays {
  if (
    typeof context === "object" && context !== null && "kind" in context &&
    context.kind === "blockwise-demo-arrays"
  ) {
    return context as DemoArrays;
  }
  return openDemoArrays(dir);
}

// ---------------------------------------------------------------------------------------------
// generate

/**
 * Write a block's chunk. Under `blockwise run` the task's declared output is staged: `staged` is
 * the staging copy of the array, committed once the block returns. Called directly (tests,
 * `runAll`), there is no staging and the block writes the array in place.
 */
function writeBlock(
  staged: string | undefined,
  path: string,
  meta: ZarrArrayMetadata,
  roi: RoiDefinition,
  data: Uint8Array | Uint32Array,
): void {
  writeChunkRegion(staged ?? path, meta, roi.offset, roi.shape, data);
}

/** The declared outputs of the demo's tasks, so every chunk goes through the output commit. */
export function demoOutputs(dir: string): Record<string, Record<string, OutputDefinition>> {
  const p = demoPaths(dir);
  return {
    generate: { raw: { zarr: p.raw } },
    smooth: { smoothed: { zarr: p.smoothed } },
    label: { labels: { zarr: p.labels }, stats: { path: join(p.labelStats, "{block_id}.json") } },
  };
}

export function createDemoPipeline(dir: string, options: DemoOptions = {}): PipelineModule {
  const o = resolve(options);
  const paths = demoPaths(dir);
  const blobs = demoBlobs(o.size);
  const r = DEMO_SMOOTH_RADIUS;
  const size = o.size;
  const setup = (): DemoArrays => ensureDemoArrays(dir, options);
  const zero = cube(0);
  const volume = { offset: zero, shape: cube(size) };
  const blockRoi = { offset: zero, shape: cube(o.block) };
  const outputs = demoOutputs(dir);

  const generate: TaskDefinition = {
    id: "generate",
    totalRoi: volume,
    readRoi: blockRoi,
    writeRoi: blockRoi,
    fit: "shrink",
    readWriteConflict: false,
    maxWorkers: o.maxWorkers,
    version: "1",
    outputs: outputs["generate"]!,
    setup,
    process(block: Block, context: unknown, run?: BlockContext): void {
      const arrays = arraysFrom(context, dir);
      const data = synthesise(blobs, block.writeRoi);
      writeBlock(run?.outputs["raw"], paths.raw, arrays.raw, block.writeRoi, data);
    },
  };

  const smooth: TaskDefinition = {
    id: "smooth",
    upstream: ["generate"],
    // The total ROI reaches r voxels past the volume so that the total write ROI is the volume
    // itself and write blocks stay aligned with the chunks; voxels outside read as fill and are
    // left out of the mean.
    totalRoi: { offset: cube(-r), shape: cube(size + 2 * r) },
    readRoi: { offset: cube(-r), shape: cube(o.block + 2 * r) },
    writeRoi: blockRoi,
    fit: "shrink",
    // Not needed for correctness (raw is read, smoothed written); kept on so the demo shows
    // daisy's level scheduling of blocks with overlapping read contexts.
    readWriteConflict: true,
    maxWorkers: o.maxWorkers,
    version: "1",
    outputs: outputs["smooth"]!,
    setup,
    process(block: Block, context: unknown, run?: BlockContext): void {
      const arrays = arraysFrom(context, dir);
      const { readRoi, writeRoi } = block;
      // raw is uint8 (ensured in setup), so its region is a Uint8Array.
      const raw = readRegion(paths.raw, arrays.raw, readRoi.offset, readRoi.shape) as Uint8Array;
      const smoothed = boxFilter(raw, readRoi, writeRoi, r, size);
      writeBlock(run?.outputs["smoothed"], paths.smoothed, arrays.smoothed, writeRoi, smoothed);
    },
  };

  const label: TaskDefinition = {
    id: "label",
    upstream: ["smooth"],
    totalRoi: volume,
    readRoi: blockRoi,
    writeRoi: blockRoi,
    fit: "shrink",
    readWriteConflict: false,
    maxWorkers: o.maxWorkers,
    version: "1",
    params: { threshold: DEMO_THRESHOLD },
    outputs: outputs["label"]!,
    setup,
    process(block: Block, context: unknown, run?: BlockContext): void {
      const arrays = arraysFrom(context, dir);
      const { readRoi, writeRoi } = block;
      const param = run?.params["threshold"];
      const threshold = typeof param === "number" ? param : DEMO_THRESHOLD;
      const smoothed = readRegion(
        paths.smoothed,
        arrays.smoothed,
        readRoi.offset,
        readRoi.shape,
      ) as Uint8Array;
      const mask = new Uint8Array(smoothed.length);
      let foreground = 0;
      for (let i = 0; i < smoothed.length; i++) {
        if (smoothed[i]! > threshold) {
          mask[i] = 1;
          foreground++;
        }
      }
      const { labels, count } = connectedComponents(mask, readRoi.shape);
      const id = Number(block.id);
      const base = id * 2 ** o.localBits;
      for (let i = 0; i < labels.length; i++) if (labels[i]! > 0) labels[i] = base + labels[i]!;
      writeBlock(run?.outputs["labels"], paths.labels, arrays.labels, writeRoi, labels);
      const stats: LabelStats = {
        blockId: String(block.id),
        index: [...block.index],
        writeRoi: { offset: [...writeRoi.offset], shape: [...writeRoi.shape] },
        threshold,
        objects: count,
        foregroundVoxels: foreground,
        firstLabel: base + 1,
      };
      writeFileAtomic(
        run?.outputs["stats"] ?? join(paths.labelStats, `${block.id}.json`),
        `${JSON.stringify(stats, null, 2)}\n`,
      );
    },
  };

  return { tasks: [generate, smooth, label] };
}

/** The demo's outputs under `dir`, one line each: path, then what it holds. */
export function describeDemoOutputs(
  dir: string,
  options: DemoOptions = {},
  trackingDir = join(dir, "tracking"),
): string[] {
  const o = resolve(options);
  const p = demoPaths(dir);
  const dims = `${o.size}x${o.size}x${o.size} in ${o.block}^3 chunks`;
  return [
    `${p.root}: Zarr v3 group holding the arrays below (open with zarr-python, zarrita, ...)`,
    `${p.raw}: uint8 ${dims}, synthetic blobs plus seeded noise (task generate)`,
    `${p.smoothed}: uint8 ${dims}, ${
      2 * DEMO_SMOOTH_RADIUS + 1
    }^3 box filter of raw, read with a ${DEMO_SMOOTH_RADIUS}-voxel context (task smooth)`,
    `${p.labels}: uint32 ${dims}, connected components of smoothed > ${DEMO_THRESHOLD} per ` +
    `block, label = blockId * 2^${o.localBits} + n (task label)`,
    `${join(p.labelStats, "<blockId>.json")}: objects and foreground voxels of each label block`,
    `${trackingDir}: each task's ledger and output manifest (blockwise status ${trackingDir})`,
  ];
}
