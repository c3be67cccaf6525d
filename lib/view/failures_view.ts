/**
 * The failures part of a report: the failed blocks (not done, with failed attempts) with their
 * last error from errors.jsonl, and identical messages grouped with a count.
 */

import { blockIdToJson, type TaskLayout } from "../blocks/mod.ts";
import type { FailedList } from "./status_json.ts";
import {
  type FailedBlockView,
  type FailureGroup,
  type FailureView,
  MAX_FAILED_LISTED,
} from "./report_data.ts";
import { userStack } from "./stack_frames.ts";

/** Failed blocks read for grouping: beyond it the groups count only these (`grouped`). */
export const MAX_FAILED_GROUPED = 100_000;

/** Block IDs listed per group. */
const GROUP_IDS = 5;

export const NO_ERROR_RECORDED = "no error recorded (failed before errors.jsonl was kept)";

/**
 * `failed`: the store's failed blocks as `failedBlocks` lists them (up to 100,000 for a full
 * document; a live frame lists the 1,000 `status --json` does, since reading errors.jsonl again
 * each second would cost more than the frame).
 */
export function failuresView(layout: TaskLayout, failed: FailedList): FailureView {
  const { blocks, total } = failed;
  const groups = new Map<string, { count: number; blocks: (number | string)[] }>();
  const listed: FailedBlockView[] = [];
  for (const b of blocks) {
    const coords = b.index.map((x, d) => x - layout.indexShift[d]!);
    const position = layout.positionOf(coords);
    const id = blockIdToJson(layout.blockIdOf(position));
    const message = b.last_error?.message ?? NO_ERROR_RECORDED;
    let group = groups.get(message);
    if (group === undefined) groups.set(message, group = { count: 0, blocks: [] });
    group.count++;
    if (group.blocks.length < GROUP_IDS) group.blocks.push(id);
    if (listed.length < MAX_FAILED_LISTED) {
      listed.push({
        position,
        coords,
        index: b.index,
        id,
        attempts: b.attempts,
        message: b.last_error?.message ?? null,
        stack: userStack(b.last_error?.stack ?? []),
        at: b.last_error?.at ?? null,
      });
    }
  }
  const sorted: FailureGroup[] = [...groups]
    .map(([message, g]) => ({ message, count: g.count, blocks: g.blocks }))
    .sort((a, b) => b.count - a.count || (a.message < b.message ? -1 : 1));
  return { total, grouped: blocks.length, groups: sorted, blocks: listed };
}
