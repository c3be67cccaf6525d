/** Grid indices (as the manifest records them) back to block positions. */

import type { TaskLayout } from "../blocks/mod.ts";

/** The position of the block at grid `index` in `layout`, or -1 when it is not one of its blocks. */
export function positionOfIndex(layout: TaskLayout, index: readonly number[]): number {
  if (index.length !== layout.dims) return -1;
  const coords = index.map((g, d) => g - layout.indexShift[d]!);
  return layout.inGrid(coords) ? layout.positionOf(coords) : -1;
}
