/**
 * The demo's image processing: synthetic blobs with seeded noise, a separable box filter, and
 * connected components per block. Pure functions over typed arrays, used by demo_pipeline.ts.
 */

import type { RoiDefinition } from "../pipeline/spec.ts";

/** Seed of the demo volume: the same blobs and noise every time. */
export const DEMO_SEED = 0x5eed_b10c;
const BACKGROUND = 40;
const NOISE = 24;

export interface Blob {
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
