/**
 * A tracking store of a GPU task for the report's tests: 4 x 3 blocks of 10 x 10, every one
 * done by one of two workers with resource figures, and scripted GPU figures written as the
 * scheduler writes them (lib/tracking/gpu_figures.ts): a block without a utilisation figure,
 * one without a memory figure, memory above 2^32 (both words of the uint64). Or, with
 * `gpu: false`, the same store with the arrays left at their fills (NaN, 0).
 */

import { TaskLayout } from "../../lib/blocks/mod.ts";
import { GpuFigureWriter } from "../../lib/tracking/gpu_figures.ts";
import { TrackingStore } from "../../lib/tracking/store.ts";

export const GPU_GRID = [4, 3] as const;
export const GPU_T0 = 1_767_000_000;
/** The block at position 8 has no utilisation figure, the ones at 8 and 10 no memory figure. */
export const NO_UTIL = 8;
export const NO_MEM: readonly number[] = [8, 10];

export interface GpuBlock {
  readonly position: number;
  readonly worker: number;
  /** When it ran, epoch seconds. */
  readonly start: number;
  readonly wall: number;
  /** NaN: not recorded. */
  readonly util: number;
  /** 0: not recorded. */
  readonly mem: number;
}

/** The scripted blocks, in grid order (positions 0..11, each its own tracking cell). */
export function gpuBlocks(): GpuBlock[] {
  const out: GpuBlock[] = [];
  const free = [GPU_T0, GPU_T0];
  for (let p = 0; p < GPU_GRID[0] * GPU_GRID[1]; p++) {
    const worker = p % 2;
    const wall = 0.5 + 0.25 * (p % 3);
    const start = free[worker]!;
    free[worker] = start + wall + 0.125;
    out.push({
      position: p,
      worker,
      start,
      wall,
      util: p === NO_UTIL ? Number.NaN : 20 + 15 * (p % 5),
      mem: NO_MEM.includes(p) ? 0 : (1 + (p % 4)) * 2 ** 31 + p,
    });
  }
  return out;
}

export function gpuLayout(): TaskLayout {
  return new TaskLayout({
    totalRoi: { offset: [0, 0], shape: [GPU_GRID[0] * 10, GPU_GRID[1] * 10] },
    readRoi: { offset: [0, 0], shape: [10, 10] },
    writeRoi: { offset: [0, 0], shape: [10, 10] },
    fit: "valid",
    readWriteConflict: false,
  });
}

/** Write the store at `dir` (task `taskId`) and close it. */
export async function writeGpuStore(
  dir: string,
  options: { readonly taskId?: string; readonly gpu?: boolean } = {},
): Promise<GpuBlock[]> {
  const layout = gpuLayout();
  const store = await TrackingStore.open(dir, {
    taskId: options.taskId ?? "predict",
    layout,
    resourceTracking: true,
    provenance: false,
    mmap: "auto",
  });
  const blocks = gpuBlocks();
  try {
    const writer = GpuFigureWriter.of(store)!;
    for (const b of blocks) {
      const finished = b.start + b.wall;
      const usage = [b.wall, b.wall * 0.9, 3 * 2 ** 28, 4096, 8192, finished, 0];
      store.recordBlock(b.position, b.start * 1000, (finished + 0.01) * 1000, b.worker, usage);
      store.markDone(b.position);
      if (options.gpu !== false) writer.write(b.position, b.util, b.mem);
    }
  } finally {
    store.close();
  }
  return blocks;
}
