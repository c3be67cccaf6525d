/**
 * A task's tracking store: a Zarr v3 group whose single-chunk arrays (`done`, `failures` and,
 * with resource tracking, the per-block figures) are read and written through mmap. The main
 * thread is the only writer; any Zarr v3 reader can open the group while a run is in flight.
 *
 * Creation builds the whole group in a temporary folder beside the store (chunk files at full
 * size, filled and flushed first, array metadata next, group metadata last) and renames it into
 * place, so a reader or a crash never sees half a store. An existing store is checked by the
 * one validator every command uses (`readStoreMetadata`) before anything is mapped. Chunk files
 * are never truncated or resized.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import type { TaskLayout } from "../blocks/mod.ts";
import { deleteToStartFresh, errorCode, messageOf, StoreError } from "../errors.ts";
import { type MappedFile, type MmapKind, openMapped } from "../runtime/mod.ts";
import { VERSION } from "../version.ts";
import { type BlockUsage, Usage, USAGE_FIELDS } from "../run/block_report.ts";
import {
  createFilledFile,
  documentText,
  fsyncDirectory,
  groupDocument,
  hiddenSibling,
  writeFileDurable,
  writeJsonAtomic,
} from "../zarr/mod.ts";
import {
  arrayMetadata,
  arrayWanted,
  chunkKey,
  fillPattern,
  itemSize,
  TRACKING_ARRAYS,
  type TrackingArraySpec,
  WORKER_NONE,
} from "./arrays.ts";
import { describeLayoutChange, STORE_FORMAT, storedLayoutOf } from "./store_layout.ts";
import { restoreMissingChunks } from "./missing_chunks.ts";
import { readStoreMetadata, type StoreAttributes, type StoreMetadata } from "./store_metadata.ts";
import { taskHash } from "./task_hash.ts";
import {
  migrateStore,
  migrationRefusal,
  planMigration,
  recoverInterruptedMigration,
} from "./migrate.ts";
import { ensureFolder, refusingSystemErrors } from "./tracking_paths.ts";
import { forEachBlockRun } from "./block_runs.ts";
import { adoptWorkerLogs, isMissingOrEmpty } from "./store_folder.ts";

export type { StoreAttributes } from "./store_metadata.ts";

/** The provenance arrays of a store, uint64 ones as pairs of little-endian 32-bit words. */
export interface StoreProvenance {
  readonly content: Uint32Array;
  readonly recipe: Uint32Array;
  readonly upstream: Uint32Array;
  readonly inputs: Uint32Array;
  /** OUTPUTS_NONE, OUTPUTS_PRESENT or OUTPUTS_DELETED per block. */
  readonly outputs: Uint8Array;
}

export const OUTPUTS_NONE = 0;
export const OUTPUTS_PRESENT = 1;
export const OUTPUTS_DELETED = 2;

function setsOf(o: OpenStoreOptions): { resourceTracking: boolean; provenance: boolean } {
  return { resourceTracking: o.resourceTracking, provenance: o.provenance === true };
}

/** Store a non-negative integer below 2^53 as a little-endian uint64 without a BigInt. */
function setUint64(words: Uint32Array, cell: number, value: number): void {
  const v = value > 0 ? Math.round(value) : 0;
  words[2 * cell] = v % 0x1_0000_0000;
  words[2 * cell + 1] = Math.floor(v / 0x1_0000_0000);
}

export interface OpenStoreOptions {
  readonly taskId: string;
  readonly layout: TaskLayout;
  readonly resourceTracking: boolean;
  /** Keep per-block provenance (content hash, recipe, digests): tasks with outputs, version... */
  readonly provenance?: boolean;
  readonly mmap?: MmapKind | "auto";
  /** Migrate a grown volume in place (default true); false refuses it like any change. */
  readonly migrate?: boolean;
  readonly onNotice?: (message: string) => void;
}

/** The group `zarr.json` of a store. */
export function groupMetadata(attributes: StoreAttributes): Record<string, unknown> {
  return groupDocument({ blockwise: attributes });
}

/** Write one array (a full-size chunk filled with the fill value, then metadata) under `groupDir`. */
function writeArray(groupDir: string, spec: TrackingArraySpec, shape: readonly number[]): void {
  const dir = path.join(groupDir, spec.name);
  const cells = shape.reduce((a, b) => a * b, 1);
  const pattern = fillPattern(spec);
  createFilledFile(path.join(dir, chunkKey(shape.length)), cells * pattern.length, pattern);
  writeFileDurable(path.join(dir, "zarr.json"), documentText(arrayMetadata(spec, shape)));
}

type TypedName = "uint8" | "uint32" | "float32" | "float64";

export class TrackingStore {
  readonly path: string;
  readonly taskId: string;
  readonly layout: TaskLayout;
  readonly attributes: StoreAttributes;
  readonly resourceTracking: boolean;
  /** The provenance arrays, or null for a store without them. */
  readonly provenance: StoreProvenance | null;
  readonly mmapKind: MmapKind;
  readonly created: boolean;
  readonly done: Uint8Array;
  readonly failures: Uint32Array;
  readonly #files: Map<string, MappedFile>;
  #closed = false;
  readonly #wall: Float32Array | null;
  readonly #cpu: Float32Array | null;
  // uint64 arrays are written as pairs of 32-bit words (little-endian host, checked by
  // openMapped's typed views), which avoids a BigInt per value on the hot path.
  readonly #rss32: Uint32Array | null;
  readonly #ioRead32: Uint32Array | null;
  readonly #ioWrite32: Uint32Array | null;
  readonly #workerId: Uint32Array | null;
  readonly #sentAt: Float64Array | null;
  readonly #returnedAt: Float64Array | null;
  readonly #finishedAt: Float64Array | null;

  private constructor(
    dir: string,
    options: OpenStoreOptions,
    attributes: StoreAttributes,
    files: Map<string, MappedFile>,
    created: boolean,
  ) {
    this.path = dir;
    this.taskId = options.taskId;
    this.layout = options.layout;
    this.attributes = attributes;
    this.resourceTracking = options.resourceTracking;
    this.#files = files;
    this.provenance = options.provenance === true
      ? {
        content: files.get("content_hash")!.typed(Uint32Array),
        recipe: files.get("recipe")!.typed(Uint32Array),
        upstream: files.get("upstream_digest")!.typed(Uint32Array),
        inputs: files.get("inputs_digest")!.typed(Uint32Array),
        outputs: files.get("outputs_state")!.view(),
      }
      : null;
    this.created = created;
    this.mmapKind = files.get("done")!.kind;
    const view = (name: string, type: TypedName) => {
      const f = files.get(name);
      if (f === undefined) return null;
      switch (type) {
        case "uint8":
          return f.view();
        case "uint32":
          return f.typed(Uint32Array);
        case "float32":
          return f.typed(Float32Array);
        case "float64":
          return f.typed(Float64Array);
      }
    };
    this.done = view("done", "uint8") as Uint8Array;
    this.failures = view("failures", "uint32") as Uint32Array;
    const rt = options.resourceTracking;
    this.#wall = rt ? view("wall_seconds", "float32") as Float32Array : null;
    this.#cpu = rt ? view("cpu_seconds", "float32") as Float32Array : null;
    this.#rss32 = rt ? view("peak_rss_bytes", "uint32") as Uint32Array : null;
    this.#ioRead32 = rt ? view("io_read_bytes", "uint32") as Uint32Array : null;
    this.#ioWrite32 = rt ? view("io_write_bytes", "uint32") as Uint32Array : null;
    this.#workerId = rt ? view("worker_id", "uint32") as Uint32Array : null;
    this.#sentAt = rt ? view("sent_at", "float64") as Float64Array : null;
    this.#returnedAt = rt ? view("returned_at", "float64") as Float64Array : null;
    this.#finishedAt = rt ? view("finished_at", "float64") as Float64Array : null;
  }

  /**
   * Open the store at `dir` for writing, creating it when missing. Refuses (StoreError) a store
   * the validator finds damaged, one written for another layout (unless it is a grown volume,
   * which is migrated in place), or anything that is not a store.
   */
  static async open(dir: string, options: OpenStoreOptions): Promise<TrackingStore> {
    const abs = path.resolve(dir);
    const layout = options.layout;
    const expected: StoreAttributes = {
      format: STORE_FORMAT,
      task_hash: taskHash(layout),
      task_id: options.taskId,
      layout: storedLayoutOf(layout),
      resource_tracking: options.resourceTracking,
      ...(options.provenance === true ? { provenance: true } : {}),
      created_by: `blockwise ${VERSION}`,
    };
    const prepared = refusingSystemErrors(abs, "open the tracking store at", () => {
      const recovered = recoverInterruptedMigration(abs);
      if (recovered !== null) options.onNotice?.(recovered);
      if (isMissingOrEmpty(abs) && createStore(abs, expected)) {
        return { attributes: expected, created: true };
      }
      return { attributes: openExisting(abs, expected, options), created: false };
    });
    const files = new Map<string, MappedFile>();
    try {
      for (const spec of TRACKING_ARRAYS) {
        if (!arrayWanted(spec, setsOf(options))) continue;
        files.set(
          spec.name,
          await openMapped(path.join(abs, spec.name, chunkKey(layout.dims)), {
            byteLength: layout.trackingCellCount * itemSize(spec.dtype),
            create: false,
            kind: options.mmap ?? "auto",
          }),
        );
      }
    } catch (error) {
      for (const f of files.values()) f.close();
      throw new StoreError(`Cannot map the tracking store at ${abs}: ${messageOf(error)}`, abs);
    }
    return new TrackingStore(abs, options, prepared.attributes, files, prepared.created);
  }

  /** An array's bytes for a reader in this process (`run --serve`); null once closed. */
  bytesOf(name: string): Uint8Array | null {
    return this.#closed ? null : this.#files.get(name)?.view() ?? null;
  }

  isDone(cell: number): boolean {
    return this.done[cell] === 1;
  }

  markDone(cell: number): void {
    this.done[cell] = 1;
  }

  addFailure(cell: number): void {
    const f = this.failures;
    if (f[cell]! < 0xffffffff) f[cell] = f[cell]! + 1;
  }

  /** Record a finished block's figures (resource tracking only). */
  recordBlock(
    cell: number,
    sentAt: number,
    returnedAt: number,
    workerId: number,
    usage: BlockUsage | ArrayLike<number> | null,
  ): void {
    if (this.#sentAt === null) return;
    this.#sentAt[cell] = sentAt / 1000;
    this.#returnedAt![cell] = returnedAt / 1000;
    this.#workerId![cell] = workerId < 0 ? WORKER_NONE : workerId;
    if (usage === null) return;
    // The run loop passes the worker's figures as they arrived (`Usage` order, read in place on
    // the hot path); tests and tools may pass a `BlockUsage`.
    if ("length" in usage) {
      if (usage.length < USAGE_FIELDS) return;
      this.#wall![cell] = usage[Usage.WallSeconds]!;
      this.#finishedAt![cell] = usage[Usage.FinishedAt]!;
      this.#cpu![cell] = usage[Usage.CpuSeconds]!;
      setUint64(this.#rss32!, cell, usage[Usage.PeakRssBytes]!);
      setUint64(this.#ioRead32!, cell, usage[Usage.IoReadBytes]!);
      setUint64(this.#ioWrite32!, cell, usage[Usage.IoWriteBytes]!);
      return;
    }
    this.#wall![cell] = usage.wallSeconds;
    this.#cpu![cell] = usage.cpuSeconds;
    setUint64(this.#rss32!, cell, usage.peakRssBytes);
    setUint64(this.#ioRead32!, cell, usage.ioReadBytes);
    setUint64(this.#ioWrite32!, cell, usage.ioWriteBytes);
  }

  /** Done blocks, counted through the mapping (every page: a run uses `scanDoneMarkers`). */
  doneBlocks(): number {
    let n = 0;
    forEachBlockRun(this.layout, (_position, cell, length) => {
      for (let c = cell; c < cell + length; c++) if (this.done[c] === 1) n++;
    });
    return n;
  }

  flush(): void {
    if (this.#closed) return;
    for (const f of this.#files.values()) f.flush();
  }

  /**
   * Let the mapped pages leave this process's resident set (they stay in the file and the page
   * cache, written back in the background; `flush` makes them durable): a million-block run
   * then holds only the pages it wrote recently.
   */
  flushAndDropResident(): void {
    if (this.#closed) return;
    for (const f of this.#files.values()) f.flushAndDropResident();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const f of this.#files.values()) f.close();
  }
}

/**
 * Check an existing store with the validator; migrate a grown volume, add resource arrays
 * switched on later; refuse anything else that differs. Returns the store's attributes.
 */
function openExisting(
  dir: string,
  expected: StoreAttributes,
  options: OpenStoreOptions,
): StoreAttributes {
  const meta = readStoreMetadata(dir);
  for (const notice of restoreMissingChunks(meta)) options.onNotice?.(notice);
  let attributes = meta.attributes;
  if (meta.taskHash !== expected.task_hash) attributes = migrateOrRefuse(meta, expected, options);
  const sets = setsOf(options);
  // Also arrays added to the format later (`later`), to stores made before them.
  if (sets.resourceTracking || sets.provenance) {
    addMissingArrays(dir, expected.layout.grid_shape, sets);
  }
  const wanted = {
    ...attributes,
    ...(sets.resourceTracking ? { resource_tracking: true } : {}),
    ...(sets.provenance ? { provenance: true } : {}),
  };
  if (
    wanted.resource_tracking !== attributes.resource_tracking ||
    wanted.provenance !== attributes.provenance
  ) {
    attributes = wanted;
    writeJsonAtomic(path.join(dir, "zarr.json"), groupMetadata(attributes));
  }
  return attributes;
}

function migrateOrRefuse(
  meta: StoreMetadata,
  expected: StoreAttributes,
  options: OpenStoreOptions,
): StoreAttributes {
  const dir = meta.path;
  const changes = describeLayoutChange(meta.storedLayout, expected.layout);
  const mismatch =
    `Tracking store at ${dir} was written for a different task layout (stored hash = ${meta.taskHash}, expected = ${expected.task_hash})` +
    (changes.length > 0 ? `: ${changes.join("; ")}` : "");
  const refusal = migrationRefusal(meta.storedLayout, expected.layout);
  if (refusal !== null || options.migrate === false) {
    throw new StoreError(
      mismatch + (refusal === null ? "" : `. It cannot be migrated in place: ${refusal}`) +
        `. ${deleteToStartFresh(dir)}`,
      dir,
    );
  }
  const plan = planMigration(dir, meta.storedLayout, expected.layout);
  const migrated: StoreAttributes = {
    ...expected,
    resource_tracking: meta.attributes.resource_tracking,
    ...(meta.attributes.provenance === true ? { provenance: true } : {}),
  };
  if (plan.grownAxes.length === 0) {
    // Same blocks at the same cells (e.g. read and write ROIs moved together): only the
    // recorded hash and parameters change.
    writeJsonAtomic(path.join(dir, "zarr.json"), groupMetadata(migrated));
  } else {
    migrateStore(dir, plan, groupMetadata(migrated));
  }
  options.onNotice?.(
    `Task "${options.taskId}": tracking store ${dir} migrated in place: ${plan.grew}; kept ${plan.doneKept} of ${plan.doneBefore} done blocks` +
      (plan.doneDropped > 0
        ? ` (${plan.doneDropped} clipped by the old extent will run again)`
        : ""),
  );
  // The migrated store must pass the same checks as any other before it is mapped.
  return readStoreMetadata(dir).attributes;
}

/** Build the store beside `dir` and rename it into place; false when another run won the race. */
function createStore(dir: string, attributes: StoreAttributes): boolean {
  return refusingSystemErrors(dir, "create the tracking store", () => buildStore(dir, attributes));
}

function buildStore(dir: string, attributes: StoreAttributes): boolean {
  const shape = attributes.layout.grid_shape;
  const parent = path.dirname(dir);
  ensureFolder(parent, `the folder of tracking store ${path.basename(dir)}`);
  const tmp = hiddenSibling(dir, "creating");
  try {
    fs.mkdirSync(tmp);
    for (const spec of TRACKING_ARRAYS) {
      if (
        !arrayWanted(spec, {
          resourceTracking: attributes.resource_tracking,
          provenance: attributes.provenance === true,
        })
      ) continue;
      writeArray(tmp, spec, shape);
    }
    writeFileDurable(path.join(tmp, "zarr.json"), documentText(groupMetadata(attributes)));
    fsyncDirectory(tmp);
    try {
      if (fs.existsSync(dir)) {
        adoptWorkerLogs(dir, tmp); // empty but for them, checked by the caller
        fs.rmdirSync(dir);
      }
      fs.renameSync(tmp, dir);
    } catch (error) {
      const code = errorCode(error);
      if (code === "ENOTEMPTY" || code === "EEXIST") {
        fs.rmSync(tmp, { recursive: true, force: true });
        return false; // another run created it first; the caller verifies it
      }
      throw error;
    }
    fsyncDirectory(parent);
    return true;
  } catch (error) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw error;
  }
}

/** The wanted arrays a store lacks (a set switched on, or an array new to the format): add them. */
function addMissingArrays(
  dir: string,
  shape: readonly number[],
  sets: { readonly resourceTracking: boolean; readonly provenance: boolean },
): void {
  let added = false;
  for (const spec of TRACKING_ARRAYS) {
    if (!arrayWanted(spec, sets) || fs.existsSync(path.join(dir, spec.name, "zarr.json"))) continue;
    added = true;
    const target = path.join(dir, spec.name);
    const tmp = hiddenSibling(target, "adding");
    fs.mkdirSync(tmp);
    writeArray(tmp, { ...spec, name: "." }, shape);
    fs.rmSync(target, { recursive: true, force: true });
    fs.renameSync(tmp, target);
  }
  if (added) fsyncDirectory(dir);
}
