/**
 * A task's tracking store: a Zarr v3 group whose single-chunk arrays (`done`, `failures` and,
 * with resource tracking, the per-block figures) are read and written through mmap. The main
 * thread is the only writer; any Zarr v3 reader can open the group while a run is in flight.
 *
 * Creation builds the whole group in a temporary folder beside the store (chunk files at full
 * size and filled first, array metadata next, group metadata last) and renames it into place,
 * so a reader or a crash never sees half a store. Chunk files are never truncated or resized.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import type { TaskLayout } from "../blocks/mod.ts";
import { StoreError } from "../errors.ts";
import { type MappedFile, type MmapKind, openMapped } from "../runtime/mod.ts";
import { VERSION } from "../version.ts";
import { type BlockUsage, Usage, USAGE_FIELDS } from "../execute/worker_protocol.ts";

/** Store a non-negative integer below 2^53 as a little-endian uint64 without a BigInt. */
function setUint64(words: Uint32Array, cell: number, value: number): void {
  const v = value > 0 ? Math.round(value) : 0;
  words[2 * cell] = v % 0x1_0000_0000;
  words[2 * cell + 1] = Math.floor(v / 0x1_0000_0000);
}
import {
  arrayMetadata,
  chunkKey,
  fillPattern,
  itemSize,
  TRACKING_ARRAYS,
  type TrackingArraySpec,
  WORKER_NONE,
} from "./arrays.ts";
import {
  describeLayoutChange,
  STORE_FORMAT,
  type StoredLayout,
  storedLayoutOf,
} from "./store_layout.ts";
import { taskHash } from "./task_hash.ts";
import {
  fillWithPattern,
  migrateStore,
  migrationRefusal,
  planMigration,
  recoverInterruptedMigration,
} from "./migrate.ts";

export interface StoreAttributes {
  readonly format: string;
  readonly task_hash: string;
  readonly task_id: string;
  readonly layout: StoredLayout;
  readonly resource_tracking: boolean;
  readonly created_by: string;
}

export interface OpenStoreOptions {
  readonly taskId: string;
  readonly layout: TaskLayout;
  readonly resourceTracking: boolean;
  readonly mmap?: MmapKind | "auto";
  /** Migrate a grown volume in place (default true); false refuses it like any change. */
  readonly migrate?: boolean;
  readonly onNotice?: (message: string) => void;
}

function readJson(file: string): unknown {
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

function writeJsonAtomic(file: string, value: unknown): void {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, JSON.stringify(value, null, 2) + "\n");
  fs.renameSync(tmp, file);
}

function rmHint(dir: string): string {
  return `Delete it to start fresh:\n    rm -rf ${dir}`;
}

export function groupMetadata(attributes: StoreAttributes): Record<string, unknown> {
  return { zarr_format: 3, node_type: "group", attributes: { blockwise: attributes } };
}

/** Write one array (metadata and a full-size chunk filled with the fill value) under `groupDir`. */
function writeArray(groupDir: string, spec: TrackingArraySpec, shape: readonly number[]): void {
  const dir = path.join(groupDir, spec.name);
  const chunk = path.join(dir, chunkKey(shape.length));
  fs.mkdirSync(path.dirname(chunk), { recursive: true });
  const cells = shape.reduce((a, b) => a * b, 1);
  const pattern = fillPattern(spec);
  const size = cells * pattern.length;
  const fd = fs.openSync(chunk, "w");
  try {
    if (pattern.every((b) => b === 0)) {
      fs.ftruncateSync(fd, size); // zeros: a sparse file, no memory, no writes
    } else {
      // A bounded buffer written repeatedly: creating a store never holds a whole chunk in memory.
      const piece = new Uint8Array(
        Math.min(size, 1 << 20) - (Math.min(size, 1 << 20) % pattern.length),
      );
      fillWithPattern(piece, pattern);
      for (let at = 0; at < size; at += piece.length) {
        fs.writeSync(fd, piece, 0, Math.min(piece.length, size - at), at);
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  writeJsonAtomic(path.join(dir, "zarr.json"), arrayMetadata(spec, shape));
}

function tempSibling(dir: string, label: string): string {
  return path.join(
    path.dirname(dir),
    `.${path.basename(dir)}.${label}-${process.pid}-${Date.now().toString(36)}`,
  );
}

export class TrackingStore {
  readonly path: string;
  readonly taskId: string;
  readonly layout: TaskLayout;
  readonly attributes: StoreAttributes;
  readonly resourceTracking: boolean;
  readonly mmapKind: MmapKind;
  readonly created: boolean;
  private readonly files: Map<string, MappedFile>;
  private closed = false;

  readonly done: Uint8Array;
  readonly failures: Uint32Array;
  private readonly wall: Float32Array | null;
  private readonly cpu: Float32Array | null;
  private readonly rss32: Uint32Array | null;
  private readonly ioRead32: Uint32Array | null;
  private readonly ioWrite32: Uint32Array | null;
  private readonly workerId: Uint32Array | null;
  private readonly sentAt: Float64Array | null;
  private readonly returnedAt: Float64Array | null;

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
    this.files = files;
    this.created = created;
    this.mmapKind = files.get("done")!.kind;
    const typed = <
      C extends
        | Uint8ArrayConstructor
        | Uint32ArrayConstructor
        | Float32ArrayConstructor
        | Float64ArrayConstructor
        | BigUint64ArrayConstructor,
    >(
      name: string,
      ctor: C,
    ) => {
      const f = files.get(name);
      return f === undefined ? null : f.typed(ctor) as InstanceType<C>;
    };
    this.done = typed("done", Uint8Array)!;
    this.failures = typed("failures", Uint32Array)!;
    const rt = options.resourceTracking;
    this.wall = rt ? typed("wall_seconds", Float32Array) : null;
    this.cpu = rt ? typed("cpu_seconds", Float32Array) : null;
    // uint64 arrays are written as pairs of 32-bit words (little-endian host, checked by
    // openMapped's typed views), which avoids a BigInt per value on the hot path.
    this.rss32 = rt ? typed("peak_rss_bytes", Uint32Array) : null;
    this.ioRead32 = rt ? typed("io_read_bytes", Uint32Array) : null;
    this.ioWrite32 = rt ? typed("io_write_bytes", Uint32Array) : null;
    this.workerId = rt ? typed("worker_id", Uint32Array) : null;
    this.sentAt = rt ? typed("sent_at", Float64Array) : null;
    this.returnedAt = rt ? typed("returned_at", Float64Array) : null;
  }

  /**
   * Open the store at `dir` for writing, creating it when missing. Refuses (StoreError) a store
   * written for another layout, the old bare-array layout, or anything that is not a store.
   */
  static async open(dir: string, options: OpenStoreOptions): Promise<TrackingStore> {
    const abs = path.resolve(dir);
    const layout = options.layout;
    const expected: StoreAttributes = {
      format: STORE_FORMAT,
      task_hash: taskHash({
        totalRoi: layout.totalRoi,
        readRoi: layout.readRoi,
        writeRoi: layout.writeRoi,
        fit: layout.fit,
        readWriteConflict: layout.readWriteConflict,
      }),
      task_id: options.taskId,
      layout: storedLayoutOf(layout),
      resource_tracking: options.resourceTracking,
      created_by: `blockwise ${VERSION}`,
    };
    const recovered = recoverInterruptedMigration(abs);
    if (recovered !== null) options.onNotice?.(recovered);
    let created = false;
    let attributes: StoreAttributes;
    if (
      !fs.existsSync(abs) || (fs.statSync(abs).isDirectory() && fs.readdirSync(abs).length === 0)
    ) {
      created = createStore(abs, expected);
    }
    if (created) {
      attributes = expected;
    } else {
      const verdict = verifyStore(abs, expected);
      if ("mismatch" in verdict) {
        const refusal = migrationRefusal(verdict.stored.layout, expected.layout);
        if (refusal !== null || options.migrate === false) {
          throw new StoreError(
            verdict.mismatch +
              (refusal === null ? "" : `. It cannot be migrated in place: ${refusal}`) +
              `. ${rmHint(abs)}`,
            abs,
          );
        }
        const plan = planMigration(abs, verdict.stored.layout!, expected.layout);
        const migrated: StoreAttributes = {
          ...expected,
          resource_tracking: verdict.stored.resource_tracking ?? false,
        };
        if (plan.grownAxes.length === 0) {
          // Same blocks at the same cells (e.g. read and write ROIs moved together): only the
          // recorded hash and parameters change.
          writeJsonAtomic(path.join(abs, "zarr.json"), groupMetadata(migrated));
        } else {
          migrateStore(abs, plan, groupMetadata(migrated));
        }
        options.onNotice?.(
          `Task "${options.taskId}": tracking store ${abs} migrated in place: ${plan.grew}; kept ${plan.doneKept} of ${plan.doneBefore} done blocks` +
            (plan.doneDropped > 0
              ? ` (${plan.doneDropped} clipped by the old extent will run again)`
              : ""),
        );
        attributes = migrated;
      } else {
        attributes = verdict;
      }
      if (options.resourceTracking) {
        addMissingArrays(abs, layout.trackingShape);
        if (attributes.resource_tracking !== true) {
          attributes = { ...attributes, resource_tracking: true };
          writeJsonAtomic(path.join(abs, "zarr.json"), groupMetadata(attributes));
        }
      }
    }
    const files = new Map<string, MappedFile>();
    try {
      for (const spec of TRACKING_ARRAYS) {
        if (spec.resourceTracking && !options.resourceTracking) continue;
        const chunk = path.join(abs, spec.name, chunkKey(layout.dims));
        const byteLength = layout.trackingCellCount * itemSize(spec.dtype);
        checkChunkSize(abs, spec, chunk, byteLength);
        files.set(
          spec.name,
          await openMapped(chunk, { byteLength, create: false, kind: options.mmap ?? "auto" }),
        );
      }
    } catch (error) {
      for (const f of files.values()) f.close();
      if (error instanceof StoreError) throw error;
      throw new StoreError(
        `Cannot map the tracking store at ${abs}: ${
          error instanceof Error ? error.message : String(error)
        }`,
        abs,
      );
    }
    return new TrackingStore(abs, options, attributes, files, created);
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
    if (this.sentAt === null) return;
    this.sentAt[cell] = sentAt / 1000;
    this.returnedAt![cell] = returnedAt / 1000;
    this.workerId![cell] = workerId < 0 ? WORKER_NONE : workerId;
    if (usage === null) return;
    // The run loop passes the worker's figures as they arrived (`Usage` order, read in place on
    // the hot path); tests and tools may pass a `BlockUsage`.
    if ("length" in usage) {
      if (usage.length < USAGE_FIELDS) return;
      this.wall![cell] = usage[Usage.WallSeconds]!;
      this.cpu![cell] = usage[Usage.CpuSeconds]!;
      setUint64(this.rss32!, cell, usage[Usage.PeakRssBytes]!);
      setUint64(this.ioRead32!, cell, usage[Usage.IoReadBytes]!);
      setUint64(this.ioWrite32!, cell, usage[Usage.IoWriteBytes]!);
      return;
    }
    this.wall![cell] = usage.wallSeconds;
    this.cpu![cell] = usage.cpuSeconds;
    setUint64(this.rss32!, cell, usage.peakRssBytes);
    setUint64(this.ioRead32!, cell, usage.ioReadBytes);
    setUint64(this.ioWrite32!, cell, usage.ioWriteBytes);
  }

  /** How many of the task's blocks are marked done. */
  doneBlocks(): number {
    const layout = this.layout;
    let n = 0;
    for (let p = 0; p < layout.blockCount; p++) {
      const cell = layout.trackingCellOf(p);
      if (cell >= 0 && this.done[cell] === 1) n++;
    }
    return n;
  }

  flush(): void {
    if (this.closed) return;
    for (const f of this.files.values()) f.flush();
  }

  /**
   * Flush, and let the mapped pages leave this process's resident set (they stay in the file
   * and the page cache): a million-block run then holds only the pages it wrote recently.
   */
  flushAndDropResident(): void {
    if (this.closed) return;
    for (const f of this.files.values()) f.flushAndDropResident();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const f of this.files.values()) f.close();
  }
}

/** Build the store beside `dir` and rename it into place; false when another run won the race. */
function createStore(dir: string, attributes: StoreAttributes): boolean {
  const shape = attributes.layout.grid_shape;
  const tmp = tempSibling(dir, "creating");
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  try {
    fs.mkdirSync(tmp);
    for (const spec of TRACKING_ARRAYS) {
      if (spec.resourceTracking && !attributes.resource_tracking) continue;
      writeArray(tmp, spec, shape);
    }
    writeJsonAtomic(path.join(tmp, "zarr.json"), groupMetadata(attributes));
    try {
      if (fs.existsSync(dir)) fs.rmdirSync(dir); // empty, checked by the caller
      fs.renameSync(tmp, dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOTEMPTY" || code === "EEXIST") {
        fs.rmSync(tmp, { recursive: true, force: true });
        return false; // another run created it first; the caller verifies it
      }
      throw error;
    }
    return true;
  } catch (error) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw new StoreError(
      `Cannot create the tracking store at ${dir}: ${
        error instanceof Error ? error.message : String(error)
      }. Check that the parent folder is writable.`,
      dir,
    );
  }
}

/** Resource tracking switched on for a store created without it: add its arrays. */
function addMissingArrays(dir: string, shape: readonly number[]): void {
  for (const spec of TRACKING_ARRAYS) {
    if (!spec.resourceTracking || fs.existsSync(path.join(dir, spec.name, "zarr.json"))) continue;
    const tmp = tempSibling(path.join(dir, spec.name), "adding");
    fs.mkdirSync(tmp);
    writeArray(tmp, { ...spec, name: "." }, shape);
    fs.rmSync(path.join(dir, spec.name), { recursive: true, force: true });
    fs.renameSync(tmp, path.join(dir, spec.name));
  }
}

function checkChunkSize(
  dir: string,
  spec: TrackingArraySpec,
  chunk: string,
  byteLength: number,
): void {
  let size: number;
  try {
    size = fs.statSync(chunk).size;
  } catch {
    throw new StoreError(
      `Tracking store at ${dir} is damaged: the chunk file ${chunk} of array "${spec.name}" is missing. ${
        rmHint(dir)
      }`,
      dir,
    );
  }
  if (size !== byteLength) {
    throw new StoreError(
      `Tracking store at ${dir} is damaged: the chunk file ${chunk} of array "${spec.name}" has ${size} bytes, expected ${byteLength}. ${
        rmHint(dir)
      }`,
      dir,
    );
  }
}

interface LayoutMismatch {
  readonly mismatch: string;
  readonly stored: Partial<StoreAttributes>;
}

/**
 * Read and check an existing store's metadata against the expected layout: the stored
 * attributes, or a mismatch (a different hash) the caller may migrate.
 */
export function verifyStore(
  dir: string,
  expected: StoreAttributes,
): StoreAttributes | LayoutMismatch {
  const metaFile = path.join(dir, "zarr.json");
  if (!fs.statSync(dir).isDirectory()) {
    throw new StoreError(
      `Tracking path ${dir} is a file, not a tracking store; choose another path or remove the file`,
      dir,
    );
  }
  if (!fs.existsSync(metaFile)) {
    throw new StoreError(
      `Tracking path ${dir} is a non-empty folder without zarr.json, so it is not a tracking store; blockwise will not write into it. Choose another tracking path, or if it is an abandoned store, ${
        rmHint(dir)
      }`,
      dir,
    );
  }
  let meta: unknown;
  try {
    meta = readJson(metaFile);
  } catch (error) {
    throw new StoreError(
      `Tracking store metadata at ${metaFile} is invalid: ${
        error instanceof Error ? error.message : String(error)
      }. ${rmHint(dir)}`,
      dir,
    );
  }
  const m = meta as {
    node_type?: unknown;
    attributes?: { blockwise?: Partial<StoreAttributes>; daisy_task_hash?: unknown };
  };
  if (m.node_type === "array") {
    throw new StoreError(
      `Tracking store at ${dir} holds the old bare-array done-marker layout (a Zarr array, not a group), which this version does not read. ${
        rmHint(dir)
      }`,
      dir,
    );
  }
  const stored = m.attributes?.blockwise;
  if (m.node_type !== "group" || stored === undefined || typeof stored.task_hash !== "string") {
    throw new StoreError(
      `Tracking store at ${dir} was written for a different task layout (stored hash = <missing zarr.json/attributes.blockwise.task_hash>, expected = ${expected.task_hash}). ${
        rmHint(dir)
      }`,
      dir,
    );
  }
  if (stored.task_hash !== expected.task_hash) {
    const changes = stored.layout === undefined
      ? []
      : describeLayoutChange(stored.layout, expected.layout);
    return {
      mismatch:
        `Tracking store at ${dir} was written for a different task layout (stored hash = ${stored.task_hash}, expected = ${expected.task_hash})` +
        (changes.length > 0 ? `: ${changes.join("; ")}` : ""),
      stored,
    };
  }
  const shape = stored.layout?.grid_shape;
  if (JSON.stringify(shape) !== JSON.stringify(expected.layout.grid_shape)) {
    throw new StoreError(
      `Tracking store metadata at ${metaFile} is invalid: grid shape ${
        JSON.stringify(shape)
      } is inconsistent with the task layout despite a matching hash (expected ${
        JSON.stringify(expected.layout.grid_shape)
      }). ${rmHint(dir)}`,
      dir,
    );
  }
  return stored as StoreAttributes;
}
