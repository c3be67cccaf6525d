/**
 * A task's declared outputs, resolved at the start of a run: for a per-block path, the folder it
 * lives under and the template below it; for a Zarr array, its metadata, checked against the
 * task's tiling so that every block owns whole stored chunks (chunk files, or shards). Blocks
 * that shared a chunk would overwrite each other's part of it: that is refused here, naming
 * the task, the chunk shape and the write ROI.
 *
 * Plans are plain data: they travel to workers in `init`.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import type { TaskLayout } from "../blocks/mod.ts";
import { createFailureAdvice, errorCode, InputError, StoreError } from "../errors.ts";
import type { OutputConfig, TaskConfig } from "../pipeline/spec.ts";
import {
  chunkGridShape,
  openArrayMetadata,
  storedChunkShape,
  type ZarrArrayMetadata,
} from "../zarr/mod.ts";

/** The folder every staging area lives in, beside (or inside) what it stages for. */
export const STAGING_FOLDER = ".blockwise-staging";

export interface PathOutputPlan {
  readonly kind: "path";
  readonly name: string;
  /** The static folder the template's files live under (absolute). */
  readonly base: string;
  /** The template below `base`, `/`-separated, with placeholders. */
  readonly relative: string;
  /** As written in the pipeline (for messages). */
  readonly written: string;
}

export interface ZarrOutputPlan {
  readonly kind: "zarr";
  readonly name: string;
  /** The array's folder (absolute). */
  readonly base: string;
  readonly written: string;
  readonly zarrFormat: 2 | 3;
  /** The metadata files a staging copy of the array needs, with their text. */
  readonly metadataFiles: readonly { readonly name: string; readonly text: string }[];
  /** Array index of coordinate 0, per axis. */
  readonly offset: readonly number[];
  /** Elements per stored chunk (file): chunks, or shards. */
  readonly storedChunk: readonly number[];
  readonly chunkGrid: readonly number[];
  readonly keyEncoding: { readonly name: "default" | "v2"; readonly separator: "/" | "." };
}

export type OutputPlan = PathOutputPlan | ZarrOutputPlan;

/** The outputs of one task, or an empty list. */
export function planOutputs(task: TaskConfig, layout: TaskLayout): OutputPlan[] {
  return task.outputs.map((o) => o.kind === "path" ? pathPlan(o) : zarrPlan(task.id, o, layout));
}

function pathPlan(o: OutputConfig): PathOutputPlan {
  const parts = o.target.split(path.sep);
  const first = parts.findIndex((p) => p.includes("{"));
  return {
    kind: "path",
    name: o.name,
    base: parts.slice(0, first).join(path.sep) || path.sep,
    relative: parts.slice(first).join("/"),
    written: o.written,
  };
}

function zarrPlan(taskId: string, o: OutputConfig, layout: TaskLayout): ZarrOutputPlan {
  const where = `Task "${taskId}": output "${o.name}" (${o.written})`;
  let meta: ZarrArrayMetadata;
  try {
    meta = openArrayMetadata(o.target);
  } catch (error) {
    throw new InputError(
      `${where} cannot be opened as a Zarr array: ${
        (error as Error).message
      }. Create the array before the run (for example with zarr-python's zarr.create_array, or in the pipeline module), with chunks that match the task's writeRoi.`,
    );
  }
  const rank = meta.shape.length;
  const dims = layout.dims;
  if (rank !== dims) {
    throw new InputError(
      `${where} has ${rank} axes but the task's ROIs have ${dims}; give the array one axis per ROI axis.`,
    );
  }
  const offset = o.offset ?? new Array<number>(dims).fill(0);
  if (offset.length !== dims) {
    throw new InputError(`${where}: "offset" has ${offset.length} entries; give ${dims}.`);
  }
  const unit = storedChunkShape(meta);
  const what = meta.shardShape === null ? "chunks" : "shards";
  const write = layout.writeRoi.shape;
  const total = layout.totalWriteRoi;
  for (let d = 0; d < dims; d++) {
    const start = total.offset[d]! + offset[d]!;
    if (write[d]! % unit[d]! !== 0 || start % unit[d]! !== 0) {
      throw new InputError(
        `${where} has ${what} of ${unit.join(",")} elements, but the task's blocks write ${
          write.join(",")
        } starting at ${
          total.offset.map((x, i) => x + offset[i]!).join(",")
        } (array index): every block must write whole ${what}, or blocks sharing one would lose each other's writes. Make writeRoi's shape a multiple of ${
          unit.join(",")
        } with blocks starting on a ${
          what.slice(0, -1)
        } boundary, or store the array with ${what} that divide the write ROI.`,
      );
    }
    const end = start + total.shape[d]!;
    if (start < 0 || end > meta.shape[d]!) {
      throw new InputError(
        `${where} has shape ${meta.shape.join(",")} but the task writes array indices ${
          total.offset.map((x, i) => x + offset[i]!).join(",")
        } to ${
          total.offset.map((x, i) => x + offset[i]! + total.shape[i]!).join(",")
        } (exclusive) on axis ${d}; make the array cover the task's total write ROI, or set the output's offset.`,
      );
    }
  }
  return {
    kind: "zarr",
    name: o.name,
    base: o.target,
    written: o.written,
    zarrFormat: meta.zarrFormat,
    metadataFiles: metadataFilesOf(o.target, meta.zarrFormat),
    offset,
    storedChunk: unit,
    chunkGrid: chunkGridShape(meta),
    keyEncoding: meta.chunkKeyEncoding,
  };
}

function metadataFilesOf(dir: string, format: 2 | 3): { name: string; text: string }[] {
  const names = format === 3 ? ["zarr.json"] : [".zarray", ".zattrs"];
  const out: { name: string; text: string }[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    if (fs.existsSync(file)) out.push({ name, text: fs.readFileSync(file, "utf8") });
  }
  return out;
}

/**
 * Refuses (StoreError, exit 3) an output whose location cannot be written (a read-only file
 * system, no permission), before any block runs: otherwise every block would fail the same way
 * and burn its retries. Checks the output's folder, or the nearest folder above it that exists,
 * with access(W_OK), which reports EROFS even for root; nothing is created.
 */
export function checkOutputWritable(taskId: string, plan: OutputPlan): void {
  let folder = plan.base;
  while (!fs.existsSync(folder) && path.dirname(folder) !== folder) folder = path.dirname(folder);
  try {
    fs.accessSync(folder, fs.constants.W_OK);
  } catch (error) {
    if (errorCode(error) === undefined) throw error;
    throw new StoreError(
      `Cannot write output "${plan.name}" of task "${taskId}" in ${folder}: ${
        createFailureAdvice(error, folder)
      }`,
      folder,
    );
  }
}
