/**
 * The live map of `run --serve` (issue 48 item 12): what a frame says of a store the run holds
 * (its state layer, its counts for `status`, its failed blocks and, with resource tracking, its
 * resource figures), kept up to date from the blocks the run finishes instead of a pass over
 * the whole ledger per frame.
 *
 * - Once, at the first frame: one pass over the store (the map pass of map_build.ts, and the
 *   resource arrays) counts every block into the cells of the map, as a report does.
 * - Per block the run finishes an attempt of (`touch`, from the run's observer): its cell is
 *   marked dirty, a few integer operations.
 * - Per frame (`refresh`): each dirty cell is counted again from the arrays the run holds (its
 *   mapping, or the fs fallback's arrays), a box of at most `cellShape` blocks, and the totals
 *   move by the difference. A frame then costs the cells touched since the last one, never more
 *   than one pass, plus encoding the 2^20-cell state layer.
 *
 * Invariant: every block whose `done`, `failures`, `outputs_state` or resource entries changed
 * since the pass lies in a dirty cell or in a cell counted after its change, so the map equals a
 * pass over the ledger at the time of the frame. The run changes a block's entries only when it
 * finishes an attempt, and observers hear of it after the write; what else writes a ledger
 * during a run is outside this: the deletion of temporary outputs (a temporary task's map is
 * not kept live), and commits that settle after the run loop ended (the dashboard stops using
 * the live map when the run finishes). Once the store is closed (`bytesOf` answers null) the map
 * is no longer used.
 */

import type { MmapKind } from "../runtime/mod.ts";
import { itemSize, type TrackingArraySpec } from "../tracking/arrays.ts";
import { forEachBlockRun } from "../tracking/block_runs.ts";
import { streamChunks } from "../tracking/chunk_reads.ts";
import type { KnownCounts } from "../tracking/inspect.ts";
import type { ResourceReport } from "../tracking/resource_report.ts";
import { readStoreMetadata, type StoreMetadata } from "../tracking/store_metadata.ts";
import { LiveErrors } from "./live_errors.ts";
import { type FailedPositions, firstFailed } from "./live_failures.ts";
import {
  addResources,
  EMPTY_RESOURCES,
  RESOURCE_NAMES,
  type ResourceArrays,
  resourceArrays,
  ResourceCells,
  resourcePass,
} from "./live_resources.ts";
import { buildBlockMap, type WindowSource } from "./map_build.ts";
import { type BlockMap, MAX_MAP_CELLS } from "./report_data.ts";
import { type CellGrid, cellGridOf, countState, StateCounts, stateLayerOf } from "./state_cells.ts";
import type { FailedList } from "./status_json.ts";

/** What the run holds of a store: a `TrackingStore` (lib/tracking/store.ts). */
export interface HeldStore {
  readonly path: string;
  /** "fs": the arrays are ahead of the files until a flush; a mapping writes through at once. */
  readonly mmapKind: MmapKind;
  /** An array's bytes, or null once the store is closed. */
  bytesOf(name: string): Uint8Array | null;
}

/** The arrays of a held store, read in place. */
interface Held {
  readonly done: Uint8Array;
  readonly failures: Uint32Array;
  readonly outputs: Uint8Array | null;
  readonly resources: ResourceArrays | null;
}

/** The live map of one store (see the module comment). */
export class LiveStoreMap {
  readonly path: string;
  /** Cells of the map at most (`BuildOptions.maxCells`). */
  readonly maxCells: number;
  readonly #store: HeldStore;
  readonly #errors: LiveErrors;
  /** Set by the first pass. */
  #meta: StoreMetadata | null = null;
  #grid: CellGrid | null = null;
  #counts: StateCounts | null = null;
  #resources: ResourceCells | null = null;
  /** Failed blocks per row of cells (cells that differ only along the last axis). */
  #rowFailed = new Uint32Array(0);
  #dirty = new Uint8Array(0);
  #dirtyList: number[] = [];
  #totals = { blocks: 0, done: 0, failed: 0, attempts: 0 };
  // Caches, dropped when a recount changes what they show.
  #map: BlockMap | null = null;
  #resourceReport: ResourceReport | null = null;
  #failed: FailedPositions | null = null;
  #failedLimit = 0;
  // Scratch of a recount: one cell.
  readonly #one = new StateCounts(1);
  #oneResources: ResourceCells | null = null;

  constructor(store: HeldStore, maxCells = MAX_MAP_CELLS) {
    this.path = store.path;
    this.#store = store;
    this.maxCells = maxCells;
    this.#errors = new LiveErrors(store.path);
  }

  /**
   * The block at daisy grid `index` (as run observers name it) finished an attempt. Before the
   * first pass nothing is kept: the pass reads what the block became.
   */
  touch(index: readonly number[]): void {
    const grid = this.#grid;
    if (grid === null) return;
    const layout = this.#meta!.layout;
    let c = 0;
    for (let d = 0; d < layout.dims; d++) {
      const g = index[d]! - layout.indexShift[d]!;
      if (!(g >= 0 && g < layout.gridShape[d]!)) return;
      c += Math.floor(g / grid.cellShape[d]!) * grid.strides[d]!;
    }
    if (this.#dirty[c] === 1) return;
    this.#dirty[c] = 1;
    this.#dirtyList.push(c);
  }

  /**
   * Bring the map up to the ledger: the first call makes the pass, later ones count the dirty
   * cells again. False when the store is closed: the map can no longer be used. Throws
   * StoreError as the reads of the pass do.
   */
  refresh(): boolean {
    if (this.#store.bytesOf("done") === null) return false;
    const meta = this.#meta ?? readStoreMetadata(this.path);
    const held = this.#held(meta);
    if (held === null) return false;
    if (this.#counts === null) this.#pass(meta, held);
    else this.#recountDirty(held);
    return true;
  }

  /** What `status` counts of the store (call `refresh` first). */
  counts(): KnownCounts {
    if (this.#resources !== null) this.#resourceReport ??= this.#resources.report();
    return { ...this.#totals, resources: this.#resourceReport };
  }

  /** The frame's map: the state layer only, as `buildBlockMap` gives it for a frame. */
  blockMap(): BlockMap {
    this.#map ??= {
      cell_shape: this.#grid!.cellShape,
      shape: this.#grid!.shape,
      state: stateLayerOf(this.#counts!, this.#grid!),
      metrics: [],
      workers: null,
    };
    return this.#map;
  }

  /** The first `limit` failed blocks with their last errors, and how many there are. */
  failedList(limit: number): FailedList {
    const meta = this.#meta!;
    const held = this.#held(meta);
    const layout = meta.layout;
    if (held !== null && (this.#failed === null || this.#failedLimit !== limit)) {
      const grid = this.#grid!;
      const { failed } = this.#counts!;
      this.#failed = firstFailed(
        layout,
        grid,
        failed,
        this.#rowFailed,
        held.done,
        held.failures,
        limit,
      );
      this.#failedLimit = limit;
    }
    const listed = this.#failed ?? { positions: [], attempts: [] };
    return { blocks: this.#errors.reports(layout, listed), total: this.#totals.failed };
  }

  /** The held arrays `meta` says the store has, or null once it is closed. */
  #held(meta: StoreMetadata): Held | null {
    const store = this.#store;
    const done = store.bytesOf("done");
    const failures = store.bytesOf("failures");
    if (done === null || failures === null) return null;
    const cells = meta.layout.trackingCellCount;
    const outputs = meta.provenance ? store.bytesOf("outputs_state") : null;
    if (meta.provenance && outputs === null) return null;
    let resources: ResourceArrays | null = null;
    if (meta.resourceTracking) {
      const bytes: Uint8Array[] = [];
      for (const name of RESOURCE_NAMES) {
        const b = store.bytesOf(name);
        if (b === null) return null;
        bytes.push(b);
      }
      resources = resourceArrays(bytes, cells);
    }
    return {
      done,
      failures: new Uint32Array(failures.buffer, failures.byteOffset, cells),
      outputs,
      resources,
    };
  }

  /** The first pass: the map pass of a report, and the resource arrays. */
  #pass(meta: StoreMetadata, held: Held): void {
    const layout = meta.layout;
    const grid = cellGridOf(layout.gridShape, this.maxCells);
    const counts = new StateCounts(grid.count);
    const windows = this.#windows(meta);
    const map = buildBlockMap(meta, {
      maxCells: this.maxCells,
      full: false,
      stats: null,
      counts,
      windows,
    });
    const resources = held.resources === null ? null : resourcePass(meta, grid, windows);
    const totals = { blocks: 0, done: 0, failed: 0, attempts: 0 };
    const perRow = layout.dims === 0 ? 1 : grid.shape[layout.dims - 1]!;
    const rowFailed = new Uint32Array(grid.count / perRow);
    for (let c = 0; c < grid.count; c++) {
      totals.blocks += counts.blocks[c]!;
      totals.done += counts.done[c]!;
      totals.failed += counts.failed[c]!;
      totals.attempts += counts.failureSum[c]!;
      rowFailed[(c / perRow) | 0]! += counts.failed[c]!;
    }
    this.#meta = meta;
    this.#grid = grid;
    this.#counts = counts;
    this.#resources = resources;
    this.#oneResources = resources === null ? null : new ResourceCells(1);
    this.#rowFailed = rowFailed;
    this.#dirty = new Uint8Array(grid.count);
    this.#totals = totals;
    this.#map = map;
  }

  /** Where the first pass reads: the files (a mapping writes through), or the fs arrays. */
  #windows(meta: StoreMetadata): WindowSource {
    if (this.#store.mmapKind !== "fs") {
      return (specs, windowCells, visit) => streamChunks(meta, specs, windowCells, null, visit);
    }
    const store = this.#store;
    const total = meta.layout.trackingCellCount;
    return (specs: readonly TrackingArraySpec[], windowCells, visit) => {
      const arrays = specs.map((spec) => store.bytesOf(spec.name)!);
      const sizes = specs.map((spec) => itemSize(spec.dtype));
      for (let first = 0; first < total; first += windowCells) {
        const n = Math.min(windowCells, total - first);
        visit(
          first,
          n,
          arrays.map((a, i) => a.subarray(first * sizes[i]!, (first + n) * sizes[i]!)),
        );
      }
    };
  }

  #recountDirty(held: Held): void {
    const list = this.#dirtyList;
    if (list.length === 0) return;
    for (const c of list) this.#recount(c, held);
    for (const c of list) this.#dirty[c] = 0;
    this.#dirtyList = [];
    if (held.resources !== null) this.#resourceReport = null;
  }

  /** Count cell `c` again from the held arrays and move the totals by the difference. */
  #recount(c: number, held: Held): void {
    const layout = this.#meta!.layout;
    const grid = this.#grid!;
    const counts = this.#counts!;
    const one = this.#one;
    for (const counter of [one.blocks, one.done, one.failed, one.deleted, one.failureSum]) {
      counter[0] = 0;
    }
    const res = this.#oneResources;
    if (res !== null) res.set(0, EMPTY_RESOURCES);
    const lo: number[] = [];
    const hi: number[] = [];
    let rest = c;
    for (let d = 0; d < layout.dims; d++) {
      const k = Math.floor(rest / grid.strides[d]!);
      rest -= k * grid.strides[d]!;
      lo.push(k * grid.cellShape[d]!);
      hi.push(Math.min(lo[d]! + grid.cellShape[d]!, layout.gridShape[d]!));
    }
    const { done, failures, outputs, resources } = held;
    forEachBlockRun(layout, (_position, cell, length) => {
      for (let k = cell; k < cell + length; k++) {
        countState(one, done, failures, outputs, k, 0);
        if (res !== null) addResources(res, resources!, k, 0);
      }
    }, { lo, hi });
    if (res !== null) this.#resources!.set(c, res);
    const oldFailed = counts.failed[c]!;
    const newFailed = one.failed[0]!;
    if (oldFailed > 0 || newFailed > 0) this.#failed = null;
    if (
      one.blocks[0] !== counts.blocks[c] || one.done[0] !== counts.done[c] ||
      newFailed !== oldFailed || one.deleted[0] !== counts.deleted[c]
    ) {
      this.#map = null;
    }
    const perRow = layout.dims === 0 ? 1 : grid.shape[layout.dims - 1]!;
    this.#rowFailed[(c / perRow) | 0]! += newFailed - oldFailed;
    const t = this.#totals;
    t.blocks += one.blocks[0]! - counts.blocks[c]!;
    t.done += one.done[0]! - counts.done[c]!;
    t.failed += newFailed - oldFailed;
    t.attempts += one.failureSum[0]! - counts.failureSum[c]!;
    counts.blocks[c] = one.blocks[0]!;
    counts.done[c] = one.done[0]!;
    counts.failed[c] = newFailed;
    counts.deleted[c] = one.deleted[0]!;
    counts.failureSum[c] = one.failureSum[0]!;
  }
}
