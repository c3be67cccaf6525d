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
import type { Block, PipelineModule, RoiDefinition, TaskDefinition } from "../pipeline/spec.ts";
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
export const DEMO_SEED = 0x5eed_b10c;

const BACKGROUND = 40;
const NOISE = 24;

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

interface Blob {
  readonly z: number;
  readonly y: number;
  readonly x: number;
  readonly radius: number;
  readonly amplitude: number;
}

/** mulberry32: a small seeded PRNG of 32-bit integer operations (exact in every engine). */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The blobs of a volume of `size`^3: about one per 12,000 voxels, at least 6. */
export function demoBlobs(size: number): readonly Blob[] {
  const random = seededRandom(DEMO_SEED ^ size);
  const count = Math.max(6, Math.round(size ** 3 / 12000));
  const blobs: Blob[] = [];
  for (let i = 0; i < count; i++) {
    blobs.push(Object.freeze({
      z: random() * size,
      y: random() * size,
      x: random() * size,
      radius: 2 + size * (0.04 + 0.05 * random()),
      amplitude: 170 + 50 * random(),
    }));
  }
  return Object.freeze(blobs);
}

/** A 32-bit integer hash of a voxel coordinate (the seeded noise). */
function hash3(z: number, y: number, x: number): number {
  let h = DEMO_SEED ^ Math.imul(x, 0x27d4eb2d) ^ Math.imul(y, 0x165667b1) ^
    Math.imul(z, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 15), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** The raw volume over `roi`, in C order (z, y, x). */
export function synthesise(blobs: readonly Blob[], roi: RoiDefinition): Uint8Array {
  const [oz, oy, ox] = roi.offset as [number, number, number];
  const [sz, sy, sx] = roi.shape as [number, number, number];
  const out = new Uint8Array(sz * sy * sx);
  // Only blobs whose sphere reaches this box matter.
  const near = blobs.filter((b) =>
    distanceToRange(b.z, oz, sz) ** 2 + distanceToRange(b.y, oy, sy) ** 2 +
        distanceToRange(b.x, ox, sx) ** 2 < b.radius ** 2
  );
  let i = 0;
  for (let z = oz; z < oz + sz; z++) {
    for (let y = oy; y < oy + sy; y++) {
      for (let x = ox; x < ox + sx; x++) {
        let v = BACKGROUND;
        for (const b of near) {
          const d2 = ((z - b.z) ** 2 + (y - b.y) ** 2 + (x - b.x) ** 2) / (b.radius * b.radius);
          if (d2 < 1) v += b.amplitude * (1 - d2) * (1 - d2);
        }
        v += (hash3(z, y, x) % (2 * NOISE + 1)) - NOISE;
        out[i++] = v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v);
      }
    }
  }
  return out;
}

function distanceToRange(p: number, begin: number, length: number): number {
  const last = begin + length - 1;
  return p < begin ? begin - p : p > last ? p - last : 0;
}

// ---------------------------------------------------------------------------------------------
// smooth

/**
 * Windowed sums along one axis of a 3-D array `src` (shape `shape`, first voxel at global
 * `origin`): output voxel `g` along `axis` (for `g` in `[begin, begin + length)`) sums the
 * source voxels `g - r .. g + r` that lie inside the volume `[0, size)`. Other axes keep the
 * source's extent. Throws when the source lacks a voxel the window needs.
 */
function boxSumAxis(
  src: ArrayLike<number>,
  shape: readonly number[],
  origin: readonly number[],
  axis: number,
  begin: number,
  length: number,
  r: number,
  size: number,
): { data: Uint32Array; shape: number[]; origin: number[] } {
  const outShape = shape.map((s, d) => (d === axis ? length : s));
  const outOrigin = origin.map((o, d) => (d === axis ? begin : o));
  const lo = Math.max(begin - r, 0);
  const hi = Math.min(begin + length - 1 + r, size - 1);
  if (lo < origin[axis]! || hi >= origin[axis]! + shape[axis]!) {
    throw new RangeError(
      `Demo smooth: axis ${axis} needs voxels ${lo}..${hi} but the read ROI covers ` +
        `${origin[axis]}..${origin[axis]! + shape[axis]! - 1}`,
    );
  }
  const srcStrides = [shape[1]! * shape[2]!, shape[2]!, 1];
  const outStrides = [outShape[1]! * outShape[2]!, outShape[2]!, 1];
  // Window of every output position along the axis, as source indices along that axis.
  const first = new Int32Array(length);
  const last = new Int32Array(length);
  for (let k = 0; k < length; k++) {
    first[k] = Math.max(begin + k - r, 0) - origin[axis]!;
    last[k] = Math.min(begin + k + r, size - 1) - origin[axis]!;
  }
  const [p, q] = [0, 1, 2].filter((d) => d !== axis) as [number, number];
  const step = srcStrides[axis]!;
  const outStep = outStrides[axis]!;
  const out = new Uint32Array(outShape[0]! * outShape[1]! * outShape[2]!);
  for (let i = 0; i < outShape[p]!; i++) {
    for (let j = 0; j < outShape[q]!; j++) {
      const srcBase = i * srcStrides[p]! + j * srcStrides[q]!;
      const outBase = i * outStrides[p]! + j * outStrides[q]!;
      for (let k = 0; k < length; k++) {
        let sum = 0;
        const end = srcBase + last[k]! * step;
        for (let t = srcBase + first[k]! * step; t <= end; t += step) sum += src[t]!;
        out[outBase + k * outStep] = sum;
      }
    }
  }
  return { data: out, shape: outShape, origin: outOrigin };
}

/** In-volume voxels of the window around `g` along one axis. */
function windowCount(g: number, r: number, size: number): number {
  return Math.min(g + r, size - 1) - Math.max(g - r, 0) + 1;
}

/**
 * The box filter of `raw` (covering `read`) over `write`: the mean of the in-volume voxels of
 * the (2r+1)^3 window, rounded half up in exact integer arithmetic. Exported for tests.
 */
export function boxFilter(
  raw: ArrayLike<number>,
  read: RoiDefinition,
  write: RoiDefinition,
  r: number,
  size: number,
): Uint8Array {
  let step = { data: raw as ArrayLike<number>, shape: [...read.shape], origin: [...read.offset] };
  for (let axis = 0; axis < 3; axis++) {
    step = boxSumAxis(
      step.data,
      step.shape,
      step.origin,
      axis,
      write.offset[axis]!,
      write.shape[axis]!,
      r,
      size,
    );
  }
  const [wz, wy, wx] = write.shape as [number, number, number];
  const [oz, oy, ox] = write.offset as [number, number, number];
  const out = new Uint8Array(wz * wy * wx);
  let i = 0;
  for (let z = 0; z < wz; z++) {
    const cz = windowCount(oz + z, r, size);
    for (let y = 0; y < wy; y++) {
      const cyz = cz * windowCount(oy + y, r, size);
      for (let x = 0; x < wx; x++) {
        const count = cyz * windowCount(ox + x, r, size);
        out[i] = Math.floor((2 * step.data[i]! + count) / (2 * count));
        i++;
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// label

/**
 * 6-connected components of `mask` (shape `shape`, C order) by union-find; components are
 * numbered 1.. in scan order of their first voxel, background is 0.
 */
export function connectedComponents(
  mask: ArrayLike<boolean | number>,
  shape: readonly number[],
): { labels: Uint32Array; count: number } {
  const [sz, sy, sx] = shape as [number, number, number];
  const n = sz * sy * sx;
  const parent = new Int32Array(n).fill(-1);
  const find = (i: number): number => {
    let root = i;
    while (parent[root]! !== root) root = parent[root]!;
    while (parent[i]! !== root) {
      const next = parent[i]!;
      parent[i] = root;
      i = next;
    }
    return root;
  };
  const union = (a: number, b: number): void => {
    const ra = find(a);
    const rb = find(b);
    // Keep the smaller index as the root so numbering follows scan order.
    if (ra < rb) parent[rb] = ra;
    else if (rb < ra) parent[ra] = rb;
  };
  const plane = sy * sx;
  for (let i = 0, z = 0; z < sz; z++) {
    for (let y = 0; y < sy; y++) {
      for (let x = 0; x < sx; x++, i++) {
        if (!mask[i]) continue;
        parent[i] = i;
        if (x > 0 && parent[i - 1]! >= 0) union(i, i - 1);
        if (y > 0 && parent[i - sx]! >= 0) union(i, i - sx);
        if (z > 0 && parent[i - plane]! >= 0) union(i, i - plane);
      }
    }
  }
  const labels = new Uint32Array(n);
  let count = 0;
  for (let i = 0; i < n; i++) {
    if (parent[i]! < 0) continue;
    const root = find(i);
    if (root === i) labels[i] = ++count;
    else labels[i] = labels[root]!;
  }
  return { labels, count };
}

// ---------------------------------------------------------------------------------------------
// the pipeline

/** The block's chunk: its write ROI must be exactly one chunk (chunk shape = block shape). */
function writeBlock(
  path: string,
  meta: ZarrArrayMetadata,
  roi: RoiDefinition,
  data: Uint8Array | Uint32Array,
): void {
  writeChunkRegion(path, meta, roi.offset, roi.shape, data);
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

  const generate: TaskDefinition = {
    id: "generate",
    totalRoi: volume,
    readRoi: blockRoi,
    writeRoi: blockRoi,
    fit: "shrink",
    readWriteConflict: false,
    maxWorkers: o.maxWorkers,
    setup,
    process(block: Block, context: unknown): void {
      const arrays = arraysFrom(context, dir);
      writeBlock(paths.raw, arrays.raw, block.writeRoi, synthesise(blobs, block.writeRoi));
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
    setup,
    process(block: Block, context: unknown): void {
      const arrays = arraysFrom(context, dir);
      const { readRoi, writeRoi } = block;
      // raw is uint8 (ensured in setup), so its region is a Uint8Array.
      const raw = readRegion(paths.raw, arrays.raw, readRoi.offset, readRoi.shape) as Uint8Array;
      const smoothed = boxFilter(raw, readRoi, writeRoi, r, size);
      writeBlock(paths.smoothed, arrays.smoothed, writeRoi, smoothed);
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
    setup,
    process(block: Block, context: unknown): void {
      const arrays = arraysFrom(context, dir);
      const { readRoi, writeRoi } = block;
      const smoothed = readRegion(
        paths.smoothed,
        arrays.smoothed,
        readRoi.offset,
        readRoi.shape,
      ) as Uint8Array;
      const mask = new Uint8Array(smoothed.length);
      let foreground = 0;
      for (let i = 0; i < smoothed.length; i++) {
        if (smoothed[i]! > DEMO_THRESHOLD) {
          mask[i] = 1;
          foreground++;
        }
      }
      const { labels, count } = connectedComponents(mask, readRoi.shape);
      const id = Number(block.id);
      const base = id * 2 ** o.localBits;
      for (let i = 0; i < labels.length; i++) if (labels[i]! > 0) labels[i] = base + labels[i]!;
      writeBlock(paths.labels, arrays.labels, writeRoi, labels);
      const stats: LabelStats = {
        blockId: String(block.id),
        index: [...block.index],
        writeRoi: { offset: [...writeRoi.offset], shape: [...writeRoi.shape] },
        threshold: DEMO_THRESHOLD,
        objects: count,
        foregroundVoxels: foreground,
        firstLabel: base + 1,
      };
      writeFileAtomic(
        join(paths.labelStats, `${block.id}.json`),
        `${JSON.stringify(stats, null, 2)}\n`,
      );
    },
  };

  return { tasks: [generate, smooth, label] };
}

/** The demo's outputs under `dir`, one line each: path, then what it holds. */
export function describeDemoOutputs(dir: string, options: DemoOptions = {}): string[] {
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
  ];
}
