/**
 * A task's skip mask for one run (seed 000, "Skip masks"): one cell per block, nonzero means
 * "skip this block". The cell of a block is its grid coordinate counted from the total write
 * ROI, `(block.write_roi.offset - total_write_roi.offset) // write_roi.shape`, flattened in C
 * order over `block_grid_shape`. That is exactly a `TaskLayout` position, so a mask lookup is
 * one byte read: `cells[position]`.
 *
 * The tracking store's grid is anchored at `totalRoi` instead and shifts by
 * `context // write shape` once the read context is at least one block wide; the two are
 * deliberately different and must not be mixed up.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { InputError } from "../errors.ts";
import { INLINE_SOURCE, loadMaskArray, type MaskArray, type MaskSource } from "./load_mask.ts";

export interface SkipMask {
  /** Whether the block at this layout position is skipped by the mask in this run. */
  isMasked(position: number): boolean;
  /** How many blocks the mask skips. */
  readonly skipCount: number;
  /** Where the mask came from (a path, or `INLINE_SOURCE`). */
  readonly source: string;
  /** One byte per position, 1 = skip (do not modify). */
  readonly cells: Uint8Array;
}

/** What `prepareSkipMask` needs of a loaded mask. */
export type SkipMaskInput = Pick<MaskArray, "data" | "shape" | "source"> & {
  readonly flat?: boolean;
};

/**
 * Checks that `mask` has exactly the task's block grid shape and returns its lookup. A flat
 * in-module array without a shape is accepted when it has one entry per block (C order).
 */
export function prepareSkipMask(
  layout: TaskLayout,
  mask: SkipMaskInput,
  taskId: string,
): SkipMask {
  const grid = layout.gridShape;
  const label = mask.source === INLINE_SOURCE ? mask.source : `"${mask.source}"`;
  const gridText = `${formatTuple(grid)} (blocks per axis for fit "${layout.fit}")`;
  const fix = `regenerate it with blockwise mask import`;
  if (mask.flat === true && mask.shape.length === 1 && grid.length !== 1) {
    if (mask.data.length !== layout.blockCount) {
      throw new InputError(
        `Task "${taskId}": skip mask ${label} has ${mask.data.length} cells but the task's block grid ${gridText} has ${layout.blockCount} blocks; give one cell per block in C order, or { data, shape }, or ${fix}`,
      );
    }
  } else if (!sameShape(mask.shape, grid)) {
    const tracking = sameShape(mask.shape, layout.trackingShape)
      ? ` (that is the tracking grid's shape, anchored at totalRoi; a skip mask is anchored at the total write ROI)`
      : "";
    throw new InputError(
      `Task "${taskId}": skip mask ${label} has shape ${
        formatTuple(mask.shape)
      } but the task's block grid is ${gridText}${tracking}; ${fix}`,
    );
  }
  const cells = mask.data;
  if (cells.length !== layout.blockCount) {
    throw new InputError(
      `Task "${taskId}": skip mask ${label} has ${cells.length} cells for shape ${
        formatTuple(mask.shape)
      }; the data is inconsistent with its shape`,
    );
  }
  let skipCount = 0;
  for (let i = 0; i < cells.length; i++) if (cells[i] !== 0) skipCount++;
  return {
    isMasked: (position: number) => cells[position] !== 0,
    skipCount,
    source: mask.source,
    cells,
  };
}

/**
 * Loads a task's `skipMask` (a path resolved against `baseDir`, the pipeline file's folder, or
 * an in-module array) and checks it against the task's layout.
 */
export async function loadSkipMask(
  layout: TaskLayout,
  source: MaskSource,
  taskId: string,
  baseDir: string,
): Promise<SkipMask> {
  let mask: MaskArray;
  try {
    mask = await loadMaskArray(source, baseDir);
  } catch (error) {
    if (error instanceof InputError) {
      throw new InputError(`Task "${taskId}": ${error.message}`, { cause: error });
    }
    throw error;
  }
  return prepareSkipMask(layout, mask, taskId);
}

/** Python-style tuple text, as numpy prints shapes: `(8, 12, 16)`, `(5,)`. */
export function formatTuple(shape: readonly number[]): string {
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
