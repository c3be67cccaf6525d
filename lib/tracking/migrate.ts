/**
 * Resuming a grown volume (seed 000, "planned enhancement"): when a store's layout differs from
 * the task's only because `totalRoi` grew (same offset, write stride, contexts and fit), the
 * store is migrated in place instead of refused.
 *
 * The new store is built complete in a hidden sibling folder (every array the old store holds,
 * each old cell copied to its new C-order position in one pass, `runs.jsonl` carried over with
 * a migration record, the lock file copied), then swapped in with two renames: old → backup,
 * new → store; the backup is deleted last. A crash at any moment leaves the old store, the new
 * store, or the backup beside a missing store; `recoverInterruptedMigration` restores the
 * backup in that last case, so a reader never sees a mix.
 *
 * Only blocks whose read and write ROIs are identical under both extents, and that the old
 * extent held whole, keep their marks: a block clipped by `shrink`, or sticking out of the old
 * volume under `overhang`, runs again.
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { TaskLayout } from "../blocks/mod.ts";
import { coordToString, roiToString } from "../geometry/mod.ts";
import { errorCode, StoreError } from "../errors.ts";
import {
  documentText,
  fillWithPattern,
  fsyncDirectory,
  hiddenSibling,
  writeFileDurable,
} from "../zarr/mod.ts";
import { arrayMetadata, chunkKey, fillPattern, itemSize, TRACKING_ARRAYS } from "./arrays.ts";
import { isHolderAlive, readStoreLock } from "./lock.ts";
import { appendRunRecord, lastRunRecord } from "./runs_log.ts";
import { VERSION } from "../version.ts";
import type { StoredLayout } from "./store_layout.ts";

export interface MigrationPlan {
  readonly from: StoredLayout;
  readonly to: StoredLayout;
  /** One line: what grew, from what to what. */
  readonly grew: string;
  readonly arrays: readonly string[];
  readonly doneBefore: number;
  readonly doneKept: number;
  /** Done blocks that will run again because the old extent clipped them. */
  readonly doneDropped: number;
  /** Axes along which totalRoi grew (empty: the tiling is unchanged, only the hash differs). */
  readonly grownAxes: readonly number[];
  /** Kept cells as (old start, new start, length) triples over C-order cells. */
  readonly runs: Float64Array;
}

/** A simulated crash in tests: thrown from `onStep`, it leaves the files as a crash would. */
export class SimulatedCrash extends Error {
  override readonly name = "SimulatedCrash";
}

export type MigrationStep = "built" | "old-moved" | "new-moved" | "done";

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export function layoutFromStored(stored: StoredLayout): TaskLayout {
  return new TaskLayout({
    totalRoi: stored.total_roi,
    readRoi: stored.read_roi,
    writeRoi: stored.write_roi,
    fit: stored.fit as "valid" | "overhang" | "shrink",
    readWriteConflict: true,
  });
}

/** Why a changed layout cannot be migrated, or null when it is a pure growth. */
export function migrationRefusal(stored: StoredLayout, current: StoredLayout): string | null {
  const changed: string[] = [];
  if (!same(stored.write_shape, current.write_shape)) {
    changed.push(
      `the write stride changed from ${coordToString(stored.write_shape)} to ${
        coordToString(current.write_shape)
      }`,
    );
  }
  if (!same(stored.grid_offset, current.grid_offset)) {
    changed.push(
      `the grid offset (totalRoi offset) changed from ${coordToString(stored.grid_offset)} to ${
        coordToString(current.grid_offset)
      }`,
    );
  }
  if (
    !same(stored.context_begin, current.context_begin) ||
    !same(stored.context_end, current.context_end)
  ) {
    changed.push(
      `the read context changed from ${coordToString(stored.context_begin)}/${
        coordToString(stored.context_end)
      } to ${coordToString(current.context_begin)}/${
        coordToString(current.context_end)
      } (before/after the write ROI)`,
    );
  }
  if (stored.fit !== current.fit) {
    changed.push(`fit changed from "${stored.fit}" to "${current.fit}"`);
  }
  if (changed.length > 0) {
    return `only a grown totalRoi can be migrated, but ${changed.join(" and ")}`;
  }
  const shrunk = stored.total_roi.shape.map((s, d) => ({ s, n: current.total_roi.shape[d]!, d }))
    .filter(({ s, n }) => n < s);
  if (shrunk.length > 0) {
    return `totalRoi shrank on axis ${
      shrunk.map((x) => `${x.d} (${x.s} → ${x.n})`).join(", ")
    }; only growth keeps every recorded block inside the volume`;
  }
  return null;
}

/**
 * The old tracking cells whose marks are carried over, and where they go.
 * Both layouts share stride, offset, contexts and fit, so the rule separates by axis: along
 * each axis a cell keeps its coordinate, and is kept when a block sits there whose (unclipped)
 * write ROI lies inside the old total write ROI — then its read ROI lies inside the old total
 * ROI too, and neither ROI changes under the larger extent. Along an axis that did not grow,
 * every block keeps its ROIs.
 */
function cellRuns(from: TaskLayout, to: TaskLayout): Float64Array {
  const dims = from.dims;
  const keep: Uint8Array[] = [];
  for (let d = 0; d < dims; d++) {
    const w = from.writeRoi.shape[d]!;
    const tw0 = from.totalWriteRoi.offset[d]!;
    const twEnd = tw0 + from.totalWriteRoi.shape[d]!;
    // An axis that did not grow leaves every block's ROIs along it unchanged, clipped or not.
    const grew = from.totalRoi.shape[d] !== to.totalRoi.shape[d];
    const axis = new Uint8Array(from.trackingShape[d]!);
    for (let t = 0; t < axis.length; t++) {
      const g = t - from.indexShift[d]!;
      if (g < 0 || g >= from.gridShape[d]! || g >= to.gridShape[d]!) continue;
      if (!grew || tw0 + (g + 1) * w <= twEnd) axis[t] = 1;
    }
    keep.push(axis);
  }
  // Kept cells come in runs along the last axis; runs that are contiguous in both grids merge,
  // so growth along axis 0 alone is a single copy.
  const last = dims - 1;
  const rowLength = from.trackingShape[last]!;
  const segments: number[] = [];
  for (let t = 0; t < rowLength;) {
    if (keep[last]![t] !== 1) {
      t++;
      continue;
    }
    const begin = t;
    while (t < rowLength && keep[last]![t] === 1) t++;
    segments.push(begin, t - begin);
  }
  const runs: number[] = [];
  const rows = from.trackingCellCount / rowLength;
  const coords = new Array<number>(dims).fill(0);
  for (let row = 0; row < rows; row++) {
    let kept = true;
    let oldBase = 0;
    let newBase = 0;
    for (let d = 0; d < last; d++) {
      if (keep[d]![coords[d]!] !== 1) kept = false;
      oldBase += coords[d]! * from.trackingStrides[d]!;
      newBase += coords[d]! * to.trackingStrides[d]!;
    }
    if (kept) {
      for (let i = 0; i < segments.length; i += 2) {
        const o = oldBase + segments[i]!;
        const n = newBase + segments[i]!;
        const len = segments[i + 1]!;
        const k = runs.length - 3;
        if (k >= 0 && runs[k]! + runs[k + 2]! === o && runs[k + 1]! + runs[k + 2]! === n) {
          runs[k + 2]! += len;
        } else {
          runs.push(o, n, len);
        }
      }
    }
    for (let d = last - 1; d >= 0; d--) {
      if (++coords[d]! < from.trackingShape[d]!) break;
      coords[d] = 0;
    }
  }
  return Float64Array.from(runs);
}

function readChunk(dir: string, name: string, dims: number): Uint8Array | null {
  const file = path.join(dir, name, chunkKey(dims));
  return fs.existsSync(file) ? fs.readFileSync(file) : null;
}

export function planMigration(dir: string, from: StoredLayout, to: StoredLayout): MigrationPlan {
  const oldLayout = layoutFromStored(from);
  const newLayout = layoutFromStored(to);
  const runs = cellRuns(oldLayout, newLayout);
  const done = readChunk(dir, "done", oldLayout.dims);
  let doneBefore = 0;
  let doneKept = 0;
  if (done !== null) {
    for (let c = 0; c < done.length; c++) if (done[c] === 1) doneBefore++;
    for (let i = 0; i < runs.length; i += 3) {
      const end = runs[i]! + runs[i + 2]!;
      for (let c = runs[i]!; c < end; c++) if (done[c] === 1) doneKept++;
    }
  }
  const axes = from.total_roi.shape.map((_, d) => d).filter((d) =>
    from.total_roi.shape[d] !== to.total_roi.shape[d]
  );
  const arrays = TRACKING_ARRAYS.filter((a) => fs.existsSync(path.join(dir, a.name, "zarr.json")))
    .map((a) => a.name);
  return {
    from,
    to,
    grew: axes.length === 0
      ? `the tiling is unchanged (totalRoi ${roiToString(to.total_roi)}, tracking grid ${
        coordToString(to.grid_shape)
      })`
      : `totalRoi grew on axis ${axes.join(", ")} from ${roiToString(from.total_roi)} to ${
        roiToString(to.total_roi)
      } (tracking grid ${coordToString(from.grid_shape)} → ${coordToString(to.grid_shape)})`,
    grownAxes: axes,
    arrays,
    doneBefore,
    doneKept,
    doneDropped: doneBefore - doneKept,
    runs,
  };
}

/**
 * Migrate the store at `dir` (held under our lock) to the grown layout. `groupMetadata` is the
 * new group document. `onStep` lets tests stop the migration where a crash could.
 */
export function migrateStore(
  dir: string,
  plan: MigrationPlan,
  groupMetadata: Record<string, unknown>,
  onStep: (step: MigrationStep) => void = () => {},
): void {
  const oldLayout = layoutFromStored(plan.from);
  const newLayout = layoutFromStored(plan.to);
  const tmp = hiddenSibling(dir, "migrating");
  const backup = hiddenSibling(dir, "old");
  const dims = newLayout.dims;
  try {
    fs.mkdirSync(tmp);
    for (const name of plan.arrays) {
      const spec = TRACKING_ARRAYS.find((a) => a.name === name)!;
      const size = itemSize(spec.dtype);
      const pattern = fillPattern(spec);
      const target = new Uint8Array(newLayout.trackingCellCount * size);
      if (pattern.some((b) => b !== 0)) fillWithPattern(target, pattern);
      const source = readChunk(dir, name, oldLayout.dims);
      if (source !== null) {
        const runs = plan.runs;
        for (let i = 0; i < runs.length; i += 3) {
          const o = runs[i]! * size;
          target.set(source.subarray(o, o + runs[i + 2]! * size), runs[i + 1]! * size);
        }
      }
      writeFileDurable(path.join(tmp, name, chunkKey(dims)), target);
      writeFileDurable(
        path.join(tmp, name, "zarr.json"),
        documentText(arrayMetadata(spec, newLayout.trackingShape)),
      );
    }
    // The logs beside the arrays (runs, manifest, recipes, errors) and the lock come along.
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isFile() || entry.name === "zarr.json") continue;
      fs.copyFileSync(path.join(dir, entry.name), path.join(tmp, entry.name));
    }
    appendRunRecord(tmp, {
      kind: "migration",
      at: new Date().toISOString(),
      from: { total_roi: plan.from.total_roi, grid_shape: plan.from.grid_shape },
      to: { total_roi: plan.to.total_roi, grid_shape: plan.to.grid_shape },
      arrays: plan.arrays,
      done_before: plan.doneBefore,
      done_kept: plan.doneKept,
      done_dropped: plan.doneDropped,
      host: os.hostname(),
      blockwise_version: VERSION,
      pid: process.pid,
    });
    writeFileDurable(path.join(tmp, "zarr.json"), documentText(groupMetadata));
    fsyncDirectory(tmp);
    onStep("built");
    fs.renameSync(dir, backup);
    onStep("old-moved");
    fs.renameSync(tmp, dir);
    fsyncDirectory(path.dirname(dir));
    onStep("new-moved");
    fs.rmSync(backup, { recursive: true, force: true });
    onStep("done");
  } catch (error) {
    if (error instanceof SimulatedCrash) throw error;
    // A real failure: put the old store back if it was moved, drop the half-built one.
    if (!fs.existsSync(dir) && fs.existsSync(backup)) fs.renameSync(backup, dir);
    fs.rmSync(tmp, { recursive: true, force: true });
    throw new StoreError(
      `Migrating the tracking store at ${dir} failed, and the old store was left as it was: ${
        error instanceof Error ? error.message : String(error)
      }`,
      dir,
    );
  }
}

/**
 * Finish or undo a migration a crash interrupted, before the store is opened: a missing store
 * with a backup beside it gets the backup back; a backup beside a store is a finished swap and
 * is deleted; a half-built new store is deleted. Leftovers of a migration still running in a
 * live process are left alone. Returns a notice when something was done.
 */
export function recoverInterruptedMigration(dir: string): string | null {
  const parent = path.dirname(dir);
  const base = path.basename(dir);
  let names: string[];
  try {
    names = fs.readdirSync(parent);
  } catch (error) {
    // No parent folder (or a file there): nothing to recover; creating the store says why.
    const code = errorCode(error);
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw error;
  }
  const leftovers = names.filter((n) =>
    n.startsWith(`.${base}.old-`) || n.startsWith(`.${base}.migrating-`)
  );
  if (leftovers.length === 0) return null;
  const live = leftovers.some((n) => {
    const holder = readStoreLock(path.join(parent, n));
    if (holder === null) return false;
    if (holder.pid === process.pid && holder.host === os.hostname()) return false;
    return isHolderAlive(holder) !== false;
  });
  if (live) return null;
  const notices: string[] = [];
  const backups = leftovers.filter((n) => n.startsWith(`.${base}.old-`)).sort();
  if (fs.existsSync(dir) && backups.length > 0 && lastRunRecord(dir)?.["kind"] !== "migration") {
    // A backup beside a store that is not the result of a migration: do not guess which holds
    // the marks the user wants.
    throw new StoreError(
      `Tracking store ${dir} has a leftover migration backup ${
        path.join(parent, backups.at(-1)!)
      } beside it, but the store is not the result of that migration. Keep the one you want: ` +
        `remove the other, or move the backup to ${dir} after removing ${dir}`,
      dir,
    );
  }
  if (!fs.existsSync(dir) && backups.length > 0) {
    fs.renameSync(path.join(parent, backups.at(-1)!), dir);
    notices.push(
      `restored the store from ${
        backups.at(-1)
      } (a migration was interrupted before the new store was in place)`,
    );
  }
  for (const n of leftovers) {
    const p = path.join(parent, n);
    if (fs.existsSync(p)) {
      fs.rmSync(p, { recursive: true, force: true });
      notices.push(`removed ${n} left by an interrupted migration`);
    }
  }
  return notices.length === 0 ? null : `Tracking store ${dir}: ${notices.join("; ")}`;
}
