/**
 * What a store records about the layout it was written for (`attributes.blockwise.layout`),
 * and how to say what changed when a new run's layout differs.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { coordToString, roiToString } from "../geometry/mod.ts";

export const STORE_FORMAT = "blockwise-tracking/1";

export interface StoredLayout {
  readonly total_roi: { offset: number[]; shape: number[] };
  readonly read_roi: { offset: number[]; shape: number[] };
  readonly write_roi: { offset: number[]; shape: number[] };
  readonly fit: string;
  /** Where cell (0, ...) of the tracking grid starts: `totalRoi.offset`. */
  readonly grid_offset: number[];
  /** The write stride. */
  readonly write_shape: number[];
  readonly context_begin: number[];
  readonly context_end: number[];
  readonly grid_shape: number[];
  readonly block_grid_shape: number[];
}

export function storedLayoutOf(layout: TaskLayout): StoredLayout {
  const roi = (r: { offset: readonly number[]; shape: readonly number[] }) => ({
    offset: [...r.offset],
    shape: [...r.shape],
  });
  return {
    total_roi: roi(layout.totalRoi),
    read_roi: roi(layout.readRoi),
    write_roi: roi(layout.writeRoi),
    fit: layout.fit,
    grid_offset: [...layout.totalRoi.offset],
    write_shape: [...layout.writeRoi.shape],
    context_begin: [...layout.contextBegin],
    context_end: [...layout.contextEnd],
    grid_shape: [...layout.trackingShape],
    block_grid_shape: [...layout.gridShape],
  };
}

/** Human lines naming each parameter that differs, e.g. `write shape changed from (64) to (32)`. */
export function describeLayoutChange(
  stored: Partial<StoredLayout>,
  current: StoredLayout,
): string[] {
  const changes: string[] = [];
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const coords = (label: string, a: number[] | undefined, b: number[]) => {
    if (a !== undefined && !same(a, b)) {
      changes.push(`${label} changed from ${coordToString(a)} to ${coordToString(b)}`);
    }
  };
  const rois = (
    label: string,
    a: StoredLayout["total_roi"] | undefined,
    b: StoredLayout["total_roi"],
  ) => {
    if (a !== undefined && !same(a, b)) {
      changes.push(`${label} changed from ${roiToString(a)} to ${roiToString(b)}`);
    }
  };
  rois("totalRoi", stored.total_roi, current.total_roi);
  coords("write shape (block stride)", stored.write_shape, current.write_shape);
  coords("grid offset", stored.grid_offset, current.grid_offset);
  coords("read context before the write ROI", stored.context_begin, current.context_begin);
  coords("read context after the write ROI", stored.context_end, current.context_end);
  if (stored.fit !== undefined && stored.fit !== current.fit) {
    changes.push(`fit changed from "${stored.fit}" to "${current.fit}"`);
  }
  coords("tracking grid shape", stored.grid_shape, current.grid_shape);
  return changes;
}
