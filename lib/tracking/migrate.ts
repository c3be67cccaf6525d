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
import { StoreError } from "../errors.ts";
import { arrayMetadata, chunkKey, fillPattern, itemSize, TRACKING_ARRAYS } from "./arrays.ts";
import { isHolderAlive, LOCK_FILE, readStoreLock } from "./lock.ts";
import { appendRunRecord, RUNS_LOG_FILE } from "./runs_log.ts";
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
export function migrationRefusal(
  stored: Partial<StoredLayout> | undefined,
  current: StoredLayout,
): string | null {
  if (
    stored === undefined || stored.total_roi === undefined || stored.write_shape === undefined ||
    stored.context_begin === undefined || stored.context_end === undefined ||
    stored.fit === undefined ||
    stored.grid_offset === undefined || stored.grid_shape === undefined ||
    stored.read_roi === undefined ||
    stored.write_roi === undefined
  ) {
    return "the store records only a layout hash, not the layout parameters (it was written before they were stored), so blockwise cannot tell whether its blocks still line up";
  }
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
 * For each old tracking cell: its new cell, or -1 when its marks must not be carried over.
 * Both layouts share stride, offset, contexts and fit, so the rule separates by axis: along
 * each axis a cell keeps its coordinate, and is kept when a block sits there whose (unclipped)
 * write ROI lies inside the old total write ROI — then its read ROI lies inside the old total
 * ROI too, and neither ROI changes under the larger extent. Along an axis that did not grow,
 * every block keeps its ROIs.
 */
function cellMapping(from: TaskLayout, to: TaskLayout): Float64Array {
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
  const map = new Float64Array(from.trackingCellCount).fill(-1);
  const t = new Array<number>(dims).fill(0);
  for (let c = 0; c < map.length; c++) {
    let kept = true;
    let n = 0;
    for (let d = 0; d < dims; d++) {
      if (keep[d]![t[d]!] !== 1) {
        kept = false;
        break;
      }
      n += t[d]! * to.trackingStrides[d]!;
    }
    if (kept) map[c] = n;
    for (let d = dims - 1; d >= 0; d--) {
      if (++t[d]! < from.trackingShape[d]!) break;
      t[d] = 0;
    }
  }
  return map;
}

function readChunk(dir: string, name: string, dims: number): Uint8Array | null {
  const file = path.join(dir, name, chunkKey(dims));
  return fs.existsSync(file) ? new Uint8Array(fs.readFileSync(file)) : null;
}

export function planMigration(dir: string, from: StoredLayout, to: StoredLayout): MigrationPlan {
  const oldLayout = layoutFromStored(from);
  const newLayout = layoutFromStored(to);
  const map = cellMapping(oldLayout, newLayout);
  const done = readChunk(dir, "done", oldLayout.dims);
  let doneBefore = 0;
  let doneKept = 0;
  if (done !== null) {
    for (let c = 0; c < done.length; c++) {
      if (done[c] !== 1) continue;
      doneBefore++;
      if (map[c]! >= 0) doneKept++;
    }
  }
  const axes = from.total_roi.shape.map((s, d) => d).filter((d) =>
    from.total_roi.shape[d] !== to.total_roi.shape[d]
  );
  const arrays = TRACKING_ARRAYS.filter((a) => fs.existsSync(path.join(dir, a.name, "zarr.json")))
    .map((a) => a.name);
  return {
    from,
    to,
    grew: `totalRoi grew on axis ${axes.join(", ")} from ${roiToString(from.total_roi)} to ${
      roiToString(to.total_roi)
    } (tracking grid ${coordToString(from.grid_shape)} → ${coordToString(to.grid_shape)})`,
    arrays,
    doneBefore,
    doneKept,
    doneDropped: doneBefore - doneKept,
  };
}

/** Copy element `c` of `source` to element `map[c]` of `target`, for every kept cell. */
function copyCells(source: Uint8Array, target: Uint8Array, size: number, map: Float64Array): void {
  if (size === 1) {
    for (let c = 0; c < map.length; c++) {
      const n = map[c]!;
      if (n >= 0) target[n] = source[c]!;
    }
    return;
  }
  // 4- and 8-byte elements move as 32-bit words: exact bits (NaN payloads included), no BigInt.
  const words = size / 4;
  const from = new Uint32Array(source.buffer, source.byteOffset, source.byteLength / 4);
  const to = new Uint32Array(target.buffer, target.byteOffset, target.byteLength / 4);
  for (let c = 0; c < map.length; c++) {
    const n = map[c]!;
    if (n < 0) continue;
    for (let w = 0; w < words; w++) to[n * words + w] = from[c * words + w]!;
  }
}

function hiddenSibling(dir: string, label: string): string {
  return path.join(
    path.dirname(dir),
    `.${path.basename(dir)}.${label}-${process.pid}-${Date.now().toString(36)}`,
  );
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
  const map = cellMapping(oldLayout, newLayout);
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
      if (pattern.some((b) => b !== 0)) {
        for (let i = 0; i < target.length; i += size) target.set(pattern, i);
      }
      const source = readChunk(dir, name, oldLayout.dims);
      if (source !== null) copyCells(source, target, size, map);
      const chunk = path.join(tmp, name, chunkKey(dims));
      fs.mkdirSync(path.dirname(chunk), { recursive: true });
      fs.writeFileSync(chunk, target);
      fs.writeFileSync(
        path.join(tmp, name, "zarr.json"),
        JSON.stringify(arrayMetadata(spec, newLayout.trackingShape), null, 2) + "\n",
      );
    }
    const runs = path.join(dir, RUNS_LOG_FILE);
    if (fs.existsSync(runs)) fs.copyFileSync(runs, path.join(tmp, RUNS_LOG_FILE));
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
      pid: process.pid,
    });
    const lock = path.join(dir, LOCK_FILE);
    if (fs.existsSync(lock)) fs.copyFileSync(lock, path.join(tmp, LOCK_FILE));
    fs.writeFileSync(path.join(tmp, "zarr.json"), JSON.stringify(groupMetadata, null, 2) + "\n");
    onStep("built");
    fs.renameSync(dir, backup);
    onStep("old-moved");
    fs.renameSync(tmp, dir);
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
  if (!fs.existsSync(parent)) return null;
  const leftovers = fs.readdirSync(parent).filter((n) =>
    n.startsWith(`.${base}.old-`) || n.startsWith(`.${base}.migrating-`)
  );
  if (leftovers.length === 0) return null;
  const live = leftovers.some((n) => {
    const holder = readStoreLock(path.join(parent, n));
    return holder !== null && isHolderAlive(holder) !== false;
  });
  if (live) return null;
  const notices: string[] = [];
  const backups = leftovers.filter((n) => n.startsWith(`.${base}.old-`)).sort();
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
