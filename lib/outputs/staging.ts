/**
 * Where a block's outputs are staged and where they go, computed the same way by the worker
 * (which writes and hashes them) and the scheduler (which commits them). Staging lives on the
 * output's own filesystem, so the commit is a rename:
 *
 *   path output   <base>/.blockwise-staging/<run>/<task>/<block>/<name>/<relative path>
 *   zarr output   <array>/.blockwise-staging/<run>/<task>/<block>/   (a copy of the array's
 *                 metadata; the block's chunk files below it, by their chunk keys)
 *
 * `<block>` is the block's grid index (`3_0_12`): stable across a grown volume.
 */

import * as path from "node:path";
import { chunkKey } from "../zarr/chunk_grid.ts";
import type { Block } from "../pipeline/spec.ts";
import { type OutputPlan, STAGING_FOLDER, type ZarrOutputPlan } from "./output_plan.ts";

/** Per-block values of an output path's placeholders (no `{attempt}`). */
export function outputPlaceholderValues(block: Block): Record<string, string> {
  return {
    task_id: block.taskId,
    block_id: String(block.id),
    index: block.index.join(","),
    read_offset: block.readRoi.offset.join(","),
    read_shape: block.readRoi.shape.join(","),
    write_offset: block.writeRoi.offset.join(","),
    write_shape: block.writeRoi.shape.join(","),
  };
}

/** Fill a template's placeholders; `{{`/`}}` are literal braces. */
export function renderTemplate(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{|\}\}|\{([a-z_]+)\}/g, (match, name: string | undefined) => {
    if (match === "{{") return "{";
    if (match === "}}") return "}";
    const value = name === undefined ? undefined : values[name];
    if (value === undefined) throw new Error(`Unknown placeholder ${match} in ${template}`);
    return value;
  });
}

export function blockKey(index: readonly number[]): string {
  return index.join("_");
}

/** The staging folder of one run of one task under an output's base. */
export function runStagingRoot(plan: OutputPlan, runId: string, taskId: string): string {
  return path.join(plan.base, STAGING_FOLDER, runId, taskId);
}

/** The folder holding everything one block stages for one output's base. */
export function blockStagingRoot(plan: OutputPlan, runId: string, block: Block): string {
  return path.join(runStagingRoot(plan, runId, block.taskId), blockKey(block.index));
}

/** Where one block stages one output: a file/folder path (path) or a staged array folder (zarr). */
export function stagedLocation(
  plan: OutputPlan,
  runId: string,
  block: Block,
): string {
  const root = blockStagingRoot(plan, runId, block);
  if (plan.kind === "zarr") return root;
  return path.join(
    root,
    plan.name,
    ...renderTemplate(plan.relative, outputPlaceholderValues(block)).split("/"),
  );
}

/** Where a staged file goes: `relative` is its path below the staged location's root. */
export function finalLocation(plan: OutputPlan, relative: string): string {
  return path.join(plan.base, ...relative.split("/"));
}

/** The output's path below its base for a block (path outputs). */
export function relativeOutputPath(plan: OutputPlan & { kind: "path" }, block: Block): string {
  return renderTemplate(plan.relative, outputPlaceholderValues(block));
}

/** The chunk keys (relative file paths) a block owns in a Zarr output. */
export function ownedChunkKeys(plan: ZarrOutputPlan, writeRoi: Block["writeRoi"]): string[] {
  const dims = plan.storedChunk.length;
  const first: number[] = [];
  const last: number[] = [];
  for (let d = 0; d < dims; d++) {
    const begin = writeRoi.offset[d]! + plan.offset[d]!;
    const end = begin + writeRoi.shape[d]!;
    first.push(Math.floor(begin / plan.storedChunk[d]!));
    last.push(Math.min(Math.ceil(end / plan.storedChunk[d]!), plan.chunkGrid[d]!) - 1);
  }
  const keys: string[] = [];
  const c = [...first];
  if (first.some((f, d) => f > last[d]!)) return keys;
  for (;;) {
    // A key's "/" separators are folders below the array: the key is the relative path.
    keys.push(chunkKey(plan.keyEncoding, c));
    let d = dims - 1;
    for (; d >= 0; d--) {
      c[d]!++;
      if (c[d]! <= last[d]!) break;
      c[d] = first[d]!;
    }
    if (d < 0) return keys;
  }
}
