/**
 * Where a block's outputs are staged and where they go, computed the same way by the worker
 * (which writes and hashes them) and the scheduler (which commits them). Staging lives on the
 * output's own filesystem, so the commit is a rename:
 *
 *   path output   <base>/.blockwise-staging/<run>/<task>/<name>/<block>-<file name>
 *   zarr output   <array>/.blockwise-staging/<run>/<task>/<block>/   (a copy of the array's
 *                 metadata; the block's chunk files below it, by their chunk keys)
 *
 * `<block>` is the block's grid index (`3_0_12`): stable across a grown volume. A path output
 * is staged flat, one file (or folder) per block in a folder per output, so a commit is one
 * rename and leaves no folder behind: creating and removing a folder per block costs more
 * than writing a small block's file. The staged name ends as the final one (same extension).
 * Output names start with a letter and block keys with a digit, so the two never collide.
 */

import * as path from "node:path";
import { chunkKey } from "../zarr/chunk_grid.ts";
import type { Block } from "../pipeline/spec.ts";
import {
  type OutputPlan,
  type PathOutputPlan,
  STAGING_FOLDER,
  type ZarrOutputPlan,
} from "./output_plan.ts";

/** Per-block value of one output path placeholder (no `{attempt}`), or undefined. */
function placeholderValue(name: string, block: Block): string | undefined {
  switch (name) {
    case "task_id":
      return block.taskId;
    case "block_id":
      return String(block.id);
    case "index":
      return block.index.join(",");
    case "read_offset":
      return block.readRoi.offset.join(",");
    case "read_shape":
      return block.readRoi.shape.join(",");
    case "write_offset":
      return block.writeRoi.offset.join(",");
    case "write_shape":
      return block.writeRoi.shape.join(",");
    default:
      return undefined;
  }
}

/** A template split once into literal text (even places) and placeholder names (odd places). */
const compiled = new Map<string, readonly string[]>();

function compile(template: string): readonly string[] {
  let parts = compiled.get(template);
  if (parts !== undefined) return parts;
  const out: string[] = [""];
  let last = 0;
  for (const match of template.matchAll(/\{\{|\}\}|\{([a-z_]+)\}/g)) {
    out[out.length - 1] += template.slice(last, match.index);
    last = match.index + match[0].length;
    if (match[0] === "{{") out[out.length - 1] += "{";
    else if (match[0] === "}}") out[out.length - 1] += "}";
    else out.push(match[1]!, "");
  }
  out[out.length - 1] += template.slice(last);
  parts = out;
  compiled.set(template, parts);
  return parts;
}

/** Fill a template's placeholders with a block's values; `{{`/`}}` are literal braces. */
export function renderTemplate(template: string, block: Block): string {
  const parts = compile(template);
  let text = parts[0]!;
  for (let i = 1; i < parts.length; i += 2) {
    const value = placeholderValue(parts[i]!, block);
    if (value === undefined) throw new Error(`Unknown placeholder {${parts[i]}} in ${template}`);
    text += value + parts[i + 1]!;
  }
  return text;
}

export function blockKey(index: readonly number[]): string {
  return index.join("_");
}

/** The staging folder of one run of one task under an output's base. */
export function runStagingRoot(plan: OutputPlan, runId: string, taskId: string): string {
  return path.join(plan.base, STAGING_FOLDER, runId, taskId);
}

/** The folder a Zarr output's block stages its copy of the array in. */
export function blockStagingRoot(plan: ZarrOutputPlan, runId: string, block: Block): string {
  return path.join(runStagingRoot(plan, runId, block.taskId), blockKey(block.index));
}

/** The folder every block of a path output stages its file (or folder) in. */
export function pathStagingFolder(plan: OutputPlan, runId: string, taskId: string): string {
  // Per block and per commit: remembered per plan (a run has one run id).
  const key = `${runId}\0${taskId}`;
  const known = stagingFolders.get(plan);
  if (known?.key === key) return known.folder;
  const folder = path.join(runStagingRoot(plan, runId, taskId), plan.name);
  stagingFolders.set(plan, { key, folder });
  return folder;
}

const stagingFolders = new WeakMap<OutputPlan, { key: string; folder: string }>();

/** Where one block stages one output: a file/folder path (path) or a staged array folder (zarr). */
export function stagedLocation(
  plan: OutputPlan,
  runId: string,
  block: Block,
): string {
  if (plan.kind === "zarr") return blockStagingRoot(plan, runId, block);
  return stagedPath(plan, runId, block, relativeOutputPath(plan, block));
}

/** Where a path output's block stages what goes to `relative` (its path below the base). */
export function stagedPath(
  plan: PathOutputPlan,
  runId: string,
  block: Block,
  relative: string,
): string {
  return `${pathStagingFolder(plan, runId, block.taskId)}${path.sep}${
    stagingLane(block.index)
  }${path.sep}${blockKey(block.index)}-${relative.slice(relative.lastIndexOf("/") + 1)}`;
}

/**
 * Which of 16 sub-folders ("0" to "f") a block stages a path output in, from its grid index. Two
 * workers creating files in one folder queue on its lock in the kernel (and spin there, costing
 * CPU), and so do the renames out of it; spread over 16 they rarely meet. Python workers compute
 * the same (workers/python/blockwise_worker.py).
 */
export function stagingLane(index: readonly number[]): string {
  let h = 0;
  for (const x of index) h = (Math.imul(h, 31) + x) | 0;
  return LANES[Math.imul(h, 0x9e3779b1) >>> 28]!;
}

const LANES = "0123456789abcdef";

/** A `/`-separated relative path that joins as it is: no empty, `.` or `..` segment. */
const PLAIN_RELATIVE = /^(?!\.\.?(\/|$))(?!.*\/\.\.?(\/|$))[^/]+(\/[^/]+)*$/;

/** Where a staged file goes: `relative` is its path below the staged location's root. */
export function finalLocation(plan: OutputPlan, relative: string): string {
  // The common case without path.join's normalisation (it is per file, per commit).
  if (path.sep === "/" && plan.base !== "/" && PLAIN_RELATIVE.test(relative)) {
    return `${plan.base}/${relative}`;
  }
  return path.join(plan.base, ...relative.split("/"));
}

/** The output's path below its base for a block (path outputs). */
export function relativeOutputPath(plan: PathOutputPlan, block: Block): string {
  return renderTemplate(plan.relative, block);
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
