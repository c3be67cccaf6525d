/**
 * The start of `blockwise run` on existing stores: count the done markers (streamed, window by
 * window) and decide which done blocks the run skips in bulk (lib/execute/resume_plan.ts).
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { planResume, RESUME_SET_LIMIT, type ResumePlan } from "../execute/mod.ts";
import type { DependencyGraph } from "../graph/mod.ts";
import type { SkipMask } from "../masks/mod.ts";
import type { ForcedBlocks, RunOutputs } from "../outputs/mod.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { formatCount } from "../report/table.ts";
import { resolveTrackingPath, type TrackingSession } from "../tracking/mod.ts";

/** Runs tracking at least this many blocks say what they do while they open and count. */
export const LARGE_RUN_BLOCKS = 1_000_000;

/** Blocks of the tasks that have a tracking store in this run. */
export function trackedBlocks(
  pipeline: PipelineConfig,
  layouts: readonly TaskLayout[],
  trackingDir: string | null,
): number {
  let n = 0;
  pipeline.tasks.forEach((_, t) => {
    if (resolveTrackingPath(pipeline, t, trackingDir) !== null) n += layouts[t]!.blockCount;
  });
  return n;
}

export interface RunResumeInputs {
  readonly pipeline: PipelineConfig;
  readonly graph: DependencyGraph;
  readonly tracking: TrackingSession;
  readonly outputs: RunOutputs;
  readonly forced: ForcedBlocks;
  readonly masks: readonly (SkipMask | null)[];
  /** Awaited between steps: yields, and throws when a signal asks to stop. */
  readonly checkpoint: () => Promise<void>;
  /** Where progress messages go (large runs), or null. */
  readonly notice: ((message: string) => void) | null;
}

export async function planRunResume(i: RunResumeInputs): Promise<ResumePlan> {
  const { pipeline, graph, tracking, outputs, forced, masks } = i;
  const decides = (t: number) => tracking.store(t) !== null && outputs.markersDecide(t, forced);
  let existing = 0;
  pipeline.tasks.forEach((_, t) => {
    const store = tracking.store(t);
    if (store !== null && !store.created) existing += graph.layouts[t]!.blockCount;
  });
  if (existing > 0) {
    i.notice?.(`Resuming: checking the done markers of ${formatCount(existing)} blocks...`);
  }
  const scans = await tracking.countDone({
    keep: (t) => {
      if (!decides(t)) return null;
      const mask = masks[t] ?? null;
      return mask === null ? () => true : (p) => !mask.isMasked(p);
    },
    limit: RESUME_SET_LIMIT,
    pause: i.checkpoint,
  });
  const plan = await planResume(
    graph,
    pipeline.tasks.map((_, t) => {
      const precheck = tracking.precheck(t);
      return {
        scan: scans[t] ?? null,
        markersDecide: decides(t),
        alreadyDone: outputs.fullyFresh(t, (u) => tracking.fullyDone(u), forced),
        isDone: (p: number) => precheck?.(p) === "done",
      };
    }),
    { pause: i.checkpoint },
  );
  pipeline.tasks.forEach((task, t) => {
    const except = plan.except(t);
    if (except === null) return;
    const { done, masked } = plan.skipped(t);
    i.notice?.(
      `Task "${task.id}": ${formatCount(done + masked)} blocks skipped at once, ${
        formatCount(except.size)
      } to run or to check one by one`,
    );
  });
  return plan;
}
