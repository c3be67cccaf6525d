/**
 * `mask import`: turn a mask from elsewhere into a block-grid mask file for one task.
 *
 * A source whose shape is the task's block grid is taken as a block-grid mask as it is (nonzero
 * = skip), unless `voxelSize` is given. Any other source is a voxel mask (nonzero = something to
 * process, e.g. tissue): its voxel size and offset come from the options, else from the array's
 * attributes (`voxel_size` or `resolution`, `offset`); a missing offset means the origin. Each
 * block is then judged on the voxels under its write ROI (see `block_reduce.ts`).
 */

import { resolve } from "node:path";
import process from "node:process";
import { TaskLayout } from "../blocks/mod.ts";
import { InputError } from "../errors.ts";
import { loadPipeline } from "../pipeline/mod.ts";
import { reduceVoxelMask, type SkipRule } from "./block_reduce.ts";
import { loadMaskArray, type MaskArray } from "./load_mask.ts";
import { checkMaskOutput, writeBlockMask } from "./mask_file.ts";
import { formatTuple } from "./skip_mask.ts";

export interface MaskImportOptions {
  /** The mask to import: a `.npy` file or a Zarr v2/v3 array directory. */
  readonly source: string;
  readonly pipeline: string;
  readonly task: string;
  /** `.npy` or `.zarr` output path. */
  readonly out: string;
  /** World units per mask voxel; one value (every axis) or one per axis. */
  readonly voxelSize?: readonly number[];
  /** World coordinate of mask voxel 0; one value or one per axis. */
  readonly offset?: readonly number[];
  readonly skipIf?: SkipRule;
  readonly invert?: boolean;
  readonly outside?: "skip" | "keep";
  /** Relative paths resolve against this folder; default the working directory. */
  readonly cwd?: string;
}

export interface MaskImportResult {
  readonly task: string;
  readonly pipeline: string;
  readonly source: string;
  /** `block-grid`: the source's cells were taken as they are; `voxel`: reduced per block. */
  readonly mode: "block-grid" | "voxel";
  readonly grid_shape: readonly number[];
  readonly blocks: number;
  readonly skipped: number;
  /** The rule applied (`nonzero` for a block-grid source). */
  readonly skip_if: string;
  readonly invert: boolean;
  readonly outside: "skip" | "keep" | null;
  readonly voxel_size: readonly number[] | null;
  readonly offset: readonly number[] | null;
  /** Blocks not entirely covered by a voxel mask (0 for a block-grid source). */
  readonly blocks_outside_mask: number;
  /** The output path as given. */
  readonly out: string;
  /** Things the user should know (assumed offset, ambiguous source), one sentence each. */
  readonly notes: readonly string[];
}

export async function importMask(options: MaskImportOptions): Promise<MaskImportResult> {
  const cwd = options.cwd ?? process.cwd();
  const outPath = resolve(cwd, options.out);
  await checkMaskOutput(outPath);
  const pipeline = await loadPipeline(options.pipeline, cwd);
  const task = pipeline.tasks.find((t) => t.id === options.task);
  if (task === undefined) {
    throw new InputError(
      `Cannot import a mask for task "${options.task}": pipeline "${pipeline.path}" has no such task. Its tasks: ${
        pipeline.tasks.map((t) => `"${t.id}"`).join(", ")
      }.`,
    );
  }
  const layout = new TaskLayout(task.layout);
  const mask = await loadMaskArray(options.source, cwd);
  const where = `Cannot import mask "${mask.source}" for task "${task.id}"`;
  const grid = layout.gridShape;
  const invert = options.invert === true;
  const notes: string[] = [];
  const gridShaped = sameShape(mask.shape, grid);
  const base = (
    mode: "block-grid" | "voxel",
    skipIf: string,
    outside: "skip" | "keep" | null,
    voxelSize: readonly number[] | null,
    offset: readonly number[] | null,
  ): Omit<MaskImportResult, "skipped" | "notes" | "blocks_outside_mask"> => ({
    task: task.id,
    pipeline: pipeline.path,
    source: mask.source,
    mode,
    grid_shape: grid,
    blocks: layout.blockCount,
    skip_if: skipIf,
    invert,
    outside,
    voxel_size: voxelSize,
    offset,
    out: options.out,
  });

  let cells: Uint8Array;
  let result: Omit<MaskImportResult, "skipped" | "notes" | "blocks_outside_mask">;
  let blocksOutsideMask = 0;
  if (gridShaped && options.voxelSize === undefined) {
    const given = [
      options.skipIf !== undefined ? "--skip-if" : null,
      options.outside !== undefined ? "--outside" : null,
      options.offset !== undefined ? "--offset" : null,
    ].filter((f) => f !== null);
    if (given.length > 0) {
      throw new InputError(
        `${where}: its shape ${
          formatTuple(mask.shape)
        } is the task's block grid, so its cells are taken as they are (nonzero = skip) and ${
          given.join(", ")
        } do not apply. To read it as a voxel mask instead, pass --voxel-size.`,
      );
    }
    const attributeSize = attributeVectorOrNull(mask, ["voxel_size", "resolution"]);
    if (attributeSize !== null) {
      notes.push(
        `"${mask.source}" has the task's block grid shape ${
          formatTuple(grid)
        }, so its cells were taken as skip flags (nonzero = skip), although it carries a voxel size ${
          formatTuple(attributeSize.value)
        }; if it is a voxel mask (nonzero = keep), pass --voxel-size to import it as one.`,
      );
    }
    cells = new Uint8Array(mask.data.length);
    for (let i = 0; i < cells.length; i++) cells[i] = (mask.data[i] !== 0) !== invert ? 1 : 0;
    result = base("block-grid", "nonzero", null, null, null);
  } else {
    if (mask.shape.length !== layout.dims) {
      throw new InputError(
        `${where}: it has ${mask.shape.length} axes (shape ${
          formatTuple(mask.shape)
        }) but the task has ${layout.dims}. Give a mask with one axis per task axis.`,
      );
    }
    const voxelSize = voxelSizeOf(mask, options.voxelSize, layout.dims, where, grid);
    const offset = offsetOf(mask, options.offset, layout.dims, where, notes);
    const rule = options.skipIf ?? { kind: "empty" };
    const outside = options.outside ?? "skip";
    const reduced = reduceVoxelMask(layout, mask, { voxelSize, offset, rule, invert, outside });
    cells = reduced.cells;
    blocksOutsideMask = reduced.blocksOutsideMask;
    if (blocksOutsideMask > 0) {
      const extent = mask.shape.map((n, d) => n * voxelSize[d]!);
      notes.push(
        `${blocksOutsideMask} of ${layout.blockCount} blocks stick out of the mask (offset ${
          formatTuple(offset)
        }, extent ${formatTuple(extent)} in world units); ${
          outside === "keep"
            ? "they are never skipped (--outside keep)"
            : "the part outside counts as zero voxels (pass --outside keep to never skip them)"
        }.`,
      );
    }
    result = base("voxel", skipRuleToString(rule), outside, voxelSize, offset);
  }

  let skipped = 0;
  for (let i = 0; i < cells.length; i++) skipped += cells[i]!;
  await writeBlockMask(outPath, cells, grid, {
    task: task.id,
    pipeline: pipeline.path,
    skip_if: result.skip_if,
    source: mask.source,
    mode: result.mode,
    invert,
  });
  return { ...result, skipped, blocks_outside_mask: blocksOutsideMask, notes };
}

/** The one-line summary `mask import` prints. */
export function importSummary(result: MaskImportResult): string {
  const percent = result.blocks === 0 ? 0 : (100 * result.skipped) / result.blocks;
  return `Skipping ${result.skipped} of ${result.blocks} blocks (${
    percent.toFixed(1)
  }%) of task "${result.task}"; wrote ${result.out}`;
}

/** `empty`, `full` or `fraction<X` (X in 0..1). */
export function parseSkipRule(text: string): SkipRule {
  const trimmed = text.trim();
  if (trimmed === "empty") return { kind: "empty" };
  if (trimmed === "full") return { kind: "full" };
  const match = /^fraction\s*<\s*(.+)$/.exec(trimmed);
  if (match !== null) {
    const value = match[1]!.trim();
    const below = /^(\d+(\.\d*)?|\.\d+)$/.test(value) ? Number(value) : NaN;
    if (below >= 0 && below <= 1) return { kind: "fraction", below };
    throw new InputError(
      `--skip-if "${text}": the fraction must be a number from 0 to 1, e.g. "fraction<0.05".`,
    );
  }
  throw new InputError(
    `--skip-if "${text}" is not a rule. Use empty (no nonzero voxel), full (every voxel nonzero) or "fraction<X" (nonzero fraction below X, 0..1; quote it in a shell).`,
  );
}

export function skipRuleToString(rule: SkipRule): string {
  return rule.kind === "fraction" ? `fraction<${rule.below}` : rule.kind;
}

/** `8,8,8` or `8` → numbers; refuses anything that is not a comma-separated list of numbers. */
export function parseNumberList(text: string, flag: string): number[] {
  const parts = text.split(",").map((p) => p.trim());
  const values = parts.map((p) => (/^[-+]?\d+(\.\d+)?$/.test(p) ? Number(p) : NaN));
  if (parts.length === 0 || values.some((v) => !Number.isFinite(v))) {
    throw new InputError(`${flag} "${text}" is not a comma-separated list of numbers, e.g. 8,8,8.`);
  }
  return values;
}

function voxelSizeOf(
  mask: MaskArray,
  given: readonly number[] | undefined,
  dims: number,
  where: string,
  grid: readonly number[],
): number[] {
  let values: readonly number[];
  let from: string;
  if (given !== undefined) {
    values = given;
    from = "--voxel-size";
  } else {
    const attribute = attributeVector(mask, ["voxel_size", "resolution"]);
    if (attribute === null) {
      throw new InputError(
        `${where}: its shape ${formatTuple(mask.shape)} is not the task's block grid ${
          formatTuple(grid)
        }, so it is read as a voxel mask, but its voxel size is unknown (no "voxel_size" or "resolution" attribute). ` +
          `Pass --voxel-size ${
            new Array(dims).fill("N").join(",")
          } (world units per mask voxel on each axis).`,
      );
    }
    values = attribute.value;
    from = `its "${attribute.name}" attribute`;
  }
  const size = broadcast(values, dims, `${where}: the voxel size from ${from}`);
  if (!size.every((v) => Number.isSafeInteger(v) && v > 0)) {
    throw new InputError(
      `${where}: the voxel size ${
        formatTuple(size)
      } from ${from} must be positive integers (world units per voxel).`,
    );
  }
  return size;
}

function offsetOf(
  mask: MaskArray,
  given: readonly number[] | undefined,
  dims: number,
  where: string,
  notes: string[],
): number[] {
  let values: readonly number[];
  let from: string;
  if (given !== undefined) {
    values = given;
    from = "--offset";
  } else {
    const attribute = attributeVector(mask, ["offset"]);
    if (attribute === null) {
      const origin = new Array<number>(dims).fill(0);
      notes.push(
        `"${mask.source}" gives no offset; assuming its voxel 0 is at world ${
          formatTuple(origin)
        } (pass --offset to place it elsewhere).`,
      );
      return origin;
    }
    values = attribute.value;
    from = `its "offset" attribute`;
  }
  const offset = broadcast(values, dims, `${where}: the offset from ${from}`);
  if (!offset.every((v) => Number.isSafeInteger(v))) {
    throw new InputError(
      `${where}: the offset ${formatTuple(offset)} from ${from} must be integers.`,
    );
  }
  return offset;
}

function broadcast(values: readonly number[], dims: number, what: string): number[] {
  if (values.length === dims) return [...values];
  if (values.length === 1) return new Array<number>(dims).fill(values[0]!);
  throw new InputError(
    `${what} has ${values.length} values but the task has ${dims} axes; give one value or ${dims}.`,
  );
}

/** A numeric vector attribute (a list of numbers, or one number) under the first name present. */
function attributeVector(
  mask: MaskArray,
  names: readonly string[],
): { name: string; value: number[] } | null {
  for (const name of names) {
    const value = mask.attributes[name];
    if (value === undefined || value === null) continue;
    if (typeof value === "number") return { name, value: [value] };
    if (Array.isArray(value) && value.every((v) => typeof v === "number")) {
      return { name, value: value as number[] };
    }
    throw new InputError(
      `Cannot import mask "${mask.source}": its "${name}" attribute is ${
        JSON.stringify(value)
      }, not a list of numbers. Pass the value with a flag instead.`,
    );
  }
  return null;
}

function attributeVectorOrNull(
  mask: MaskArray,
  names: readonly string[],
): { name: string; value: number[] } | null {
  try {
    return attributeVector(mask, names);
  } catch {
    return null;
  }
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
