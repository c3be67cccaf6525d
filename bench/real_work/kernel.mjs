/**
 * The real-work bench's JavaScript block, the same work as kernel.py: read 70^3 float32
 * (context 3) from a Zarr v3 array on disk with zarrita, three passes of a 3-tap box filter
 * along each axis in typed arrays (each pass allocates a new array), write 64^3 into another
 * Zarr v3 array. Used by bare.mjs (the bare loops) and by the bench's pipelines.
 */

import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";

export const GRID = Number(process.env.REAL_WORK_GRID ?? "8");
export const BLOCK = 64;
export const CONTEXT = 3;

const FORMAT = {
  chunkShape: [BLOCK, BLOCK, BLOCK],
  dtype: "float32",
  codecs: [{ name: "bytes", configuration: { endian: "little" } }],
  fillValue: 0,
};

export async function makeArrays(folder) {
  const side = GRID * BLOCK;
  const store = new FileSystemStore(folder);
  const raw = await zarr.create(zarr.root(store).resolve("in.zarr"), {
    shape: [side + 2 * CONTEXT, side + 2 * CONTEXT, side + 2 * CONTEXT],
    ...FORMAT,
  });
  await zarr.create(zarr.root(store).resolve("out.zarr"), {
    shape: [side, side, side],
    ...FORMAT,
  });
  const n = raw.shape[0];
  let seed = 1;
  for (let z = 0; z < n; z += BLOCK) {
    const depth = Math.min(BLOCK, n - z);
    const data = new Float32Array(depth * n * n);
    for (let i = 0; i < data.length; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      data[i] = seed / 4294967296;
    }
    await zarr.set(raw, [zarr.slice(z, z + depth), null, null], {
      data,
      shape: [depth, n, n],
      stride: [n * n, n, 1],
    });
  }
}

export async function openArrays(folder) {
  const store = new FileSystemStore(folder);
  return {
    raw: await zarr.open(zarr.root(store).resolve("in.zarr"), { kind: "array" }),
    out: await zarr.open(zarr.root(store).resolve("out.zarr"), { kind: "array" }),
  };
}

/** One 3-tap box pass along `axis` of a C-order box `shape`: a new array, 2 shorter there. */
function boxPass(x, shape, axis) {
  const [, d1, d2] = shape;
  const next = shape.slice();
  next[axis] -= 2;
  const [n0, n1, n2] = next;
  const y = new Float32Array(n0 * n1 * n2);
  const step = axis === 0 ? d1 * d2 : axis === 1 ? d2 : 1;
  const third = 1 / 3;
  let o = 0;
  for (let i = 0; i < n0; i++) {
    for (let j = 0; j < n1; j++) {
      let s = (i * d1 + j) * d2;
      for (let k = 0; k < n2; k++, s++, o++) {
        y[o] = (x[s] + x[s + step] + x[s + 2 * step]) * third;
      }
    }
  }
  return { data: y, shape: next };
}

export async function runBlock(arrays, index) {
  const [z, y, x] = index.map((i) => i * BLOCK);
  const span = BLOCK + 2 * CONTEXT;
  const read = await zarr.get(arrays.raw, [
    zarr.slice(z, z + span),
    zarr.slice(y, y + span),
    zarr.slice(x, x + span),
  ]);
  let box = { data: read.data, shape: [span, span, span] };
  for (let axis = 0; axis < 3; axis++) {
    for (let pass = 0; pass < CONTEXT; pass++) box = boxPass(box.data, box.shape, axis);
  }
  await zarr.set(arrays.out, [
    zarr.slice(z, z + BLOCK),
    zarr.slice(y, y + BLOCK),
    zarr.slice(x, x + BLOCK),
  ], { data: box.data, shape: [BLOCK, BLOCK, BLOCK], stride: [BLOCK * BLOCK, BLOCK, 1] });
}
