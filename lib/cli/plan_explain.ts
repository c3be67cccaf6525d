/**
 * `plan` against the tracking stores (`--tracking-dir`, or tasks with their own `tracking`
 * path): the words and JSON fields that say why each block would run or not
 * (lib/outputs/explain.ts decides). The JSON fields are documented in docs/guide/why-blocks-run.md
 * ("Why blocks run: plan against the stores").
 */

import type { DependencyGraph } from "../graph/mod.ts";
import type { SkipMask } from "../masks/mod.ts";
import { explainPipeline, type ReasonKind, type TaskExplanation } from "../outputs/explain.ts";
import { ForcedBlocks } from "../outputs/forced.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import { formatCount, formatTable } from "../report/table.ts";
import { resolveTrackingPath } from "../tracking/session.ts";

/** `explain` of a task in `plan --json`. */
export interface TaskExplainJson {
  readonly store: string | null;
  readonly note: string | null;
  /** Blocks the run processes (certainly, or maybe: upstream_may_change). */
  readonly runs: number;
  readonly reasons: readonly { reason: ReasonKind; text: string; blocks: number }[];
}

/**
 * Explanations of every task (indexed like `pipeline.tasks`), or null when no task has a
 * tracking store to read (plan then says what it always said).
 */
export function explainForPlan(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  masks: readonly (SkipMask | null)[],
  trackingDir: string | null,
  force: readonly string[],
): (TaskExplanation | null)[] | null {
  const tracked = pipeline.tasks.some((_, t) =>
    resolveTrackingPath(pipeline, t, trackingDir) !== null
  );
  if (!tracked) return null;
  const forced = ForcedBlocks.parse(force, pipeline, graph.layouts);
  const list = explainPipeline(pipeline, graph, { trackingDir, masks, forced });
  return pipeline.tasks.map((task) => list.find((e) => e.task === task.id) ?? null);
}

export function explainJson(e: TaskExplanation): TaskExplainJson {
  return {
    store: e.store,
    note: e.note,
    runs: e.runs,
    reasons: [...e.counts].map(([text, c]) => ({ reason: c.kind, text, blocks: c.blocks })),
  };
}

/** The summary's section: per task, how many blocks run and why. */
export function explainSummary(
  explained: readonly (TaskExplanation | null)[],
  order: readonly number[],
): string[] {
  const rows = order.map((t) => explained[t]).filter((e): e is TaskExplanation => e != null)
    .map((e) => [
      e.task,
      `${formatCount(e.runs)}/${formatCount(e.blocks)}`,
      [...e.counts].map(([text, c]) => `${formatCount(c.blocks)} ${text}`).join(", ") +
      (e.note === null ? "" : ` (${e.note})`),
    ]);
  const total = order.reduce((n, t) => n + (explained[t]?.runs ?? 0), 0);
  return [
    "",
    `A run would process ${formatCount(total)} block${total === 1 ? "" : "s"}:`,
    "",
    formatTable([{ header: "task" }, { header: "runs", align: "right" }, { header: "why" }], rows),
  ];
}
