/**
 * The block value user code sees, built from a task layout and a position. Here, below
 * lib/tracking, lib/outputs and lib/execute, which all build blocks (lib/execute/block.ts
 * re-exports it).
 */

import type { TaskLayout } from "../blocks/mod.ts";
import type { Block } from "./spec.ts";

export function makeBlock(
  taskId: string,
  layout: TaskLayout,
  position: number,
  attempt: number,
): Block {
  return {
    taskId,
    id: layout.blockIdOf(position),
    index: layout.gridIndexOf(position),
    readRoi: layout.readRoiOf(position),
    writeRoi: layout.writeRoiOf(position),
    attempt,
  };
}

/** `task/id`, the name a block goes by in messages and summaries. */
export function blockName(block: Pick<Block, "taskId" | "id">): string {
  return `${block.taskId}/${block.id}`;
}
