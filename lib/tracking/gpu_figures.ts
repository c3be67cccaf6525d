/**
 * Writes a block's GPU figures (docs/design/GPU.md) into its store's `gpu_util_pct` (float32)
 * and `gpu_mem_bytes` (uint64) cells, little-endian, through the store's own mapped bytes. Kept
 * beside TrackingStore rather than in it: the store's other figures arrive in the worker's
 * `Usage` record, these come from the scheduler's sampler.
 */

import type { TrackingStore } from "./store.ts";

export class GpuFigureWriter {
  readonly #store: TrackingStore;

  private constructor(store: TrackingStore) {
    this.#store = store;
  }

  /** A writer for `store`, or null when it keeps no resource figures. */
  static of(store: TrackingStore): GpuFigureWriter | null {
    return store.resourceTracking ? new GpuFigureWriter(store) : null;
  }

  /**
   * Record `utilPct` (NaN: not measured) and `memBytes` (0: not measured) for `cell`. Returns
   * false when the store is closed or lacks the arrays.
   */
  write(cell: number, utilPct: number, memBytes: number): boolean {
    const util = this.#store.bytesOf("gpu_util_pct");
    const mem = this.#store.bytesOf("gpu_mem_bytes");
    if (util === null || mem === null) return false;
    new DataView(util.buffer, util.byteOffset, util.byteLength).setFloat32(4 * cell, utilPct, true);
    const bytes = memBytes > 0 ? Math.round(memBytes) : 0;
    const words = new DataView(mem.buffer, mem.byteOffset, mem.byteLength);
    words.setUint32(8 * cell, bytes % 0x1_0000_0000, true);
    words.setUint32(8 * cell + 4, Math.floor(bytes / 0x1_0000_0000), true);
    return true;
  }
}
