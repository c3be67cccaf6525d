/**
 * The one validator of a tracking store's metadata, which every command calls before it reads
 * or writes a store (`run` through `TrackingStore.open`, `status`, `reset`, `migrate`), so each
 * refuses a damaged store the same way, with the same message (StoreError, exit 3).
 *
 * It checks, in order: the path is a folder; `zarr.json` is a JSON Zarr v3 group (not the old
 * bare-array done marker) whose `attributes.blockwise` has this format, a task hash and the
 * layout parameters; those parameters describe a tiling (the task layout is rebuilt from them),
 * every derived parameter and the hash agree with it; `done` and `failures` exist, and every
 * array present has exactly the metadata this version writes (dtype, shape = tracking grid, one
 * chunk, plain little-endian `bytes`, fill value) and a chunk file of exactly its size. The
 * resource arrays are all present, or none, or (after a crash while a run was adding them) some
 * while `resource_tracking` is still false.
 *
 * Nothing is locked, mapped or written; a few small files are read and the chunk files stat'ed.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { type Fit, FITS, TaskLayout } from "../blocks/mod.ts";
import {
  createFailureAdvice,
  deleteToStartFresh,
  errorCode,
  isRecord,
  messageOf,
  StoreError,
} from "../errors.ts";
import { parseV3ArrayMetadata, type ZarrArrayMetadata, ZarrMetadataError } from "../zarr/mod.ts";
import {
  chunkKey,
  expectedArrayMetadata,
  itemSize,
  TRACKING_ARRAYS,
  type TrackingArraySpec,
} from "./arrays.ts";
import { STORE_FORMAT, type StoredLayout, storedLayoutOf } from "./store_layout.ts";
import { taskHash } from "./task_hash.ts";

/** `attributes.blockwise` of a store's group `zarr.json`. */
export interface StoreAttributes {
  readonly format: string;
  readonly task_hash: string;
  readonly task_id: string;
  readonly layout: StoredLayout;
  readonly resource_tracking: boolean;
  /** The store keeps per-block provenance arrays (absent: false). */
  readonly provenance?: boolean;
  readonly created_by: string;
}

/** What a store's metadata says, checked, with the task layout rebuilt from it. */
export interface StoreMetadata {
  /** Absolute path of the store folder. */
  readonly path: string;
  readonly attributes: StoreAttributes;
  readonly format: string;
  readonly taskId: string;
  readonly taskHash: string;
  /** The layout parameters, as `storedLayoutOf(layout)` gives them (checked to be equal). */
  readonly storedLayout: StoredLayout;
  readonly layout: TaskLayout;
  /** Every resource array is present. */
  readonly resourceTracking: boolean;
  /** Every provenance array is present. */
  readonly provenance: boolean;
  /** The arrays present in the store, in `TRACKING_ARRAYS` order. */
  readonly arrays: readonly TrackingArraySpec[];
  /**
   * Arrays (of `arrays`) whose chunk file is missing: in Zarr a missing chunk is the array's
   * fill value, so readers read it as such, and a writer recreates it (`restoreMissingChunks`).
   */
  readonly missingChunks: readonly string[];
}

/** What a folder must be to count as a store, for messages. */
export const WHAT_A_STORE_IS = "a folder whose zarr.json is a Zarr v3 group with " +
  "attributes.blockwise, as `blockwise run` writes";

const MISSING_HASH = "<missing zarr.json/attributes.blockwise.task_hash>";

/** The path of an array's single chunk file. */
export function chunkPath(meta: StoreMetadata, name: string): string {
  return path.join(meta.path, name, chunkKey(meta.layout.dims));
}

function intArray(value: unknown, dims: number | null): number[] | null {
  if (!Array.isArray(value)) return null;
  if (dims !== null && value.length !== dims) return null;
  for (const v of value) if (typeof v !== "number" || !Number.isSafeInteger(v)) return null;
  return value as number[];
}

function roiOf(value: unknown, dims: number | null): { offset: number[]; shape: number[] } | null {
  if (!isRecord(value)) return null;
  const offset = intArray(value["offset"], dims);
  const shape = intArray(value["shape"], offset === null ? dims : offset.length);
  return offset === null || shape === null ? null : { offset, shape };
}

function readText(file: string): { text: string } | { code: string | undefined; error: unknown } {
  try {
    return { text: fs.readFileSync(file, "utf8") };
  } catch (error) {
    return { code: errorCode(error), error };
  }
}

/**
 * Read and check the store at `dir` (see the module comment). Throws StoreError naming the
 * store, what is wrong and how to fix it.
 */
export function readStoreMetadata(dir: string): StoreMetadata {
  const abs = path.resolve(dir);
  const metaFile = path.join(abs, "zarr.json");
  const hint = deleteToStartFresh(abs);
  const refuse = (message: string) => new StoreError(message, abs);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(abs);
  } catch (error) {
    if (errorCode(error) === "ENOENT") {
      throw refuse(`No tracking store at ${abs}: the folder does not exist. Check the path`);
    }
    throw refuse(`Cannot read the tracking store at ${abs}: ${createFailureAdvice(error, abs)}`);
  }
  if (!stat.isDirectory()) {
    throw refuse(
      `Tracking path ${abs} is a file, not a tracking store; choose another path or remove the file`,
    );
  }
  const read = readText(metaFile);
  if (!("text" in read)) {
    if (read.code === "ENOENT") {
      throw refuse(
        `Tracking path ${abs} is not a tracking store: it has no zarr.json (a store is ${WHAT_A_STORE_IS}), so blockwise will not use it. Choose another tracking path, or remove an abandoned store. ${hint}`,
      );
    }
    throw refuse(
      `Tracking store metadata ${metaFile} cannot be read: ${messageOf(read.error)}. ${hint}`,
    );
  }
  let doc: unknown;
  try {
    doc = JSON.parse(read.text);
  } catch (error) {
    throw refuse(
      `Tracking store metadata ${metaFile} is invalid: not valid JSON (${
        messageOf(error)
      }). ${hint}`,
    );
  }
  if (!isRecord(doc)) {
    throw refuse(`Tracking store metadata ${metaFile} is invalid: not a JSON object. ${hint}`);
  }
  if (doc["node_type"] === "array") {
    throw refuse(
      `Tracking store at ${abs} holds the old bare-array done-marker layout (a Zarr array, not a group), which this version does not read. ${hint}`,
    );
  }
  const attributes = doc["attributes"];
  const b = isRecord(attributes) ? attributes["blockwise"] : undefined;
  if (doc["node_type"] !== "group" || !isRecord(b) || typeof b["task_hash"] !== "string") {
    throw refuse(
      `Tracking path ${abs} has a zarr.json without attributes.blockwise.task_hash (stored hash = ${MISSING_HASH}), so it is not a blockwise tracking store, or its metadata was overwritten. Choose another tracking path if it is not one; if it is, it cannot be used any more. ${hint}`,
    );
  }
  const invalid = (what: string) =>
    refuse(
      `Tracking store metadata ${metaFile} is invalid: attributes.blockwise.${what}. ${hint}`,
    );
  if (b["format"] !== STORE_FORMAT) {
    throw invalid(
      `format is ${
        JSON.stringify(b["format"])
      }, expected "${STORE_FORMAT}" (a store written by another version of blockwise)`,
    );
  }
  const hash = b["task_hash"];
  const stored = b["layout"];
  if (stored === undefined) {
    throw refuse(
      `Tracking store at ${abs} records only a layout hash, not the layout parameters (it was written before they were stored), so blockwise cannot tell whether its blocks still line up. ${hint}`,
    );
  }
  const layout = layoutOf(stored, invalid);
  const canonical = storedLayoutOf(layout);
  for (const key of Object.keys(canonical) as (keyof StoredLayout)[]) {
    const value = (stored as Record<string, unknown>)[key];
    if (JSON.stringify(value) !== JSON.stringify(canonical[key])) {
      throw invalid(
        `layout.${key} is ${
          JSON.stringify(value)
        }, which does not match its ROIs and fit (expected ${JSON.stringify(canonical[key])})`,
      );
    }
  }
  if (hash !== taskHash(layout)) {
    throw invalid(`task_hash ${hash} is not the hash of its layout (${taskHash(layout)})`);
  }
  const taskId = b["task_id"];
  if (typeof taskId !== "string" || taskId === "") throw invalid("task_id is not a task id");
  const flag = b["resource_tracking"] ?? false;
  if (typeof flag !== "boolean") throw invalid("resource_tracking is not true or false");
  const { arrays, missingChunks } = checkArrays(abs, layout, hint);
  const resourceTotal = TRACKING_ARRAYS.filter((s) => s.resourceTracking && !s.later).length;
  const resourcePresent = arrays.filter((s) => s.resourceTracking && !s.later).length;
  if (flag && resourcePresent < resourceTotal) {
    const missing = TRACKING_ARRAYS.filter((s) =>
      s.resourceTracking && !s.later && !arrays.includes(s)
    ).map((s) => s.name);
    throw refuse(
      `Tracking store at ${abs} is damaged: resource tracking arrays are missing (${
        missing.join(", ")
      }), although attributes.blockwise.resource_tracking is true. ${hint}`,
    );
  }
  const provenanceFlag = b["provenance"] ?? false;
  if (typeof provenanceFlag !== "boolean") throw invalid("provenance is not true or false");
  const provenanceTotal = TRACKING_ARRAYS.filter((s) => s.provenance === true).length;
  const provenancePresent = arrays.filter((s) => s.provenance === true).length;
  if (provenanceFlag && provenancePresent < provenanceTotal) {
    const missing = TRACKING_ARRAYS.filter((s) => s.provenance === true && !arrays.includes(s))
      .map((s) => s.name);
    throw refuse(
      `Tracking store at ${abs} is damaged: provenance arrays are missing (${
        missing.join(", ")
      }), although attributes.blockwise.provenance is true. ${hint}`,
    );
  }
  const createdBy = b["created_by"];
  return {
    path: abs,
    attributes: {
      format: STORE_FORMAT,
      task_hash: hash,
      task_id: taskId,
      layout: canonical,
      resource_tracking: flag,
      ...(provenanceFlag ? { provenance: true } : {}),
      created_by: typeof createdBy === "string" ? createdBy : "unknown",
    },
    format: STORE_FORMAT,
    taskId,
    taskHash: hash,
    storedLayout: canonical,
    layout,
    resourceTracking: resourcePresent === resourceTotal,
    provenance: provenancePresent === provenanceTotal,
    arrays,
    missingChunks,
  };
}

function layoutOf(stored: unknown, invalid: (what: string) => StoreError): TaskLayout {
  if (!isRecord(stored)) throw invalid("layout is not an object");
  const totalRoi = roiOf(stored["total_roi"], null);
  if (totalRoi === null) throw invalid("layout.total_roi is not an {offset, shape} of integers");
  const dims = totalRoi.offset.length;
  const readRoi = roiOf(stored["read_roi"], dims);
  const writeRoi = roiOf(stored["write_roi"], dims);
  if (readRoi === null || writeRoi === null) {
    throw invalid(`layout.read_roi / write_roi is not an {offset, shape} of ${dims} integers`);
  }
  const fit = stored["fit"];
  if (typeof fit !== "string" || !(FITS as readonly string[]).includes(fit)) {
    throw invalid(`layout.fit is ${JSON.stringify(fit)}, expected one of ${FITS.join(", ")}`);
  }
  try {
    // readWriteConflict only decides the levels, which no store reader uses; `false` keeps the
    // constructor from building per-level conflict tables.
    return new TaskLayout({
      totalRoi,
      readRoi,
      writeRoi,
      fit: fit as Fit,
      readWriteConflict: false,
    });
  } catch (error) {
    throw invalid(`layout describes no valid tiling: ${messageOf(error)}`);
  }
}

function describeArray(m: ZarrArrayMetadata): string {
  return `a ${m.dtype} array of shape [${m.shape.join(", ")}] in chunks [${
    m.chunkShape.join(", ")
  }], fill ${m.fillValue}${m.encoding === null ? "" : `, ${m.encoding}`}${
    m.endian === "big" ? ", big-endian" : ""
  }`;
}

function sameArray(a: ZarrArrayMetadata, b: ZarrArrayMetadata): boolean {
  const same = (x: readonly number[], y: readonly number[]) =>
    x.length === y.length && x.every((v, i) => v === y[i]);
  return a.dtype === b.dtype && same(a.shape, b.shape) && same(a.chunkShape, b.chunkShape) &&
    a.shardShape === null && a.encoding === null && a.endian === b.endian &&
    a.chunkKeyEncoding.name === b.chunkKeyEncoding.name &&
    a.chunkKeyEncoding.separator === b.chunkKeyEncoding.separator &&
    Object.is(a.fillValue, b.fillValue);
}

/**
 * Check every array present; returns them, and those whose chunk file is missing. `done` and
 * `failures` must be there (their zarr.json; a missing chunk reads as the fill value).
 */
function checkArrays(
  dir: string,
  layout: TaskLayout,
  hint: string,
): { arrays: TrackingArraySpec[]; missingChunks: string[] } {
  const damaged = (what: string) =>
    new StoreError(`Tracking store at ${dir} is damaged: ${what}. ${hint}`, dir);
  const present: TrackingArraySpec[] = [];
  const missingChunks: string[] = [];
  for (const spec of TRACKING_ARRAYS) {
    const file = path.join(dir, spec.name, "zarr.json");
    const read = readText(file);
    if (!("text" in read)) {
      if (read.code !== "ENOENT" && read.code !== "ENOTDIR") {
        throw damaged(`${file} cannot be read (${messageOf(read.error)})`);
      }
      if (spec.resourceTracking || spec.provenance === true) continue;
      throw damaged(`the array "${spec.name}" (${spec.name}/zarr.json) is missing`);
    }
    let meta: ZarrArrayMetadata;
    try {
      meta = parseV3ArrayMetadata(JSON.parse(read.text), file);
    } catch (error) {
      if (error instanceof ZarrMetadataError) throw damaged(error.message);
      throw damaged(`${file} is not valid JSON (${messageOf(error)})`);
    }
    const expected = expectedArrayMetadata(spec, layout.trackingShape);
    if (!sameArray(meta, expected)) {
      throw damaged(
        `${file} describes ${describeArray(meta)}; expected ${describeArray(expected)}`,
      );
    }
    const chunk = path.join(dir, spec.name, chunkKey(layout.dims));
    const byteLength = layout.trackingCellCount * itemSize(spec.dtype);
    let size: number;
    try {
      size = fs.statSync(chunk).size;
    } catch (error) {
      if (errorCode(error) !== "ENOENT") {
        throw damaged(`the chunk file ${chunk} cannot be read (${messageOf(error)})`);
      }
      present.push(spec);
      missingChunks.push(spec.name);
      continue;
    }
    if (size !== byteLength) {
      throw damaged(
        `the chunk file ${chunk} of array "${spec.name}" has ${size} bytes, expected ${byteLength}`,
      );
    }
    present.push(spec);
  }
  return { arrays: present, missingChunks };
}
