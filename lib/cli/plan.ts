/**
 * `blockwise plan PIPELINE [--json] [--blocks]`: what a run would do, without running anything.
 */

import { blockIdToJson, coverageNotice, type TaskLayout } from "../blocks/mod.ts";
import { roiToJson, roiToString } from "../geometry/mod.ts";
import process from "node:process";
import { InputError } from "../errors.ts";
import { buildPipelineGraph } from "../execute/mod.ts";
import {
  describeWorkerEnvironment,
  hasWorkerProcesses,
  workerEnvironment,
} from "../execute/worker_profile.ts";
import type { DependencyGraph } from "../graph/mod.ts";
import {
  describeDevices,
  type DeviceSeats,
  deviceSeats,
  taskDevices,
} from "../execute/device_seats.ts";
import type { GpuOption } from "../schedule/mod.ts";
import { loadPipeline } from "../pipeline/mod.ts";
import { checkPythonSyntax } from "../pipeline/python_syntax.ts";
import { describeModuleChoices, moduleChoices } from "../pipeline/provided_modules.ts";
import { describeSelection, selectForCommand } from "../pipeline/task_selection.ts";
import type { PipelineConfig, TaskConfig } from "../pipeline/spec.ts";
import { formatCount, formatShape, formatTable } from "../report/table.ts";
import { LineWriter } from "./output.ts";
import { loadRunMasks, parseSkipMaskFlags, type SkipMask } from "../masks/mod.ts";
import { RUNS, type TaskExplanation } from "../outputs/explain.ts";
import {
  explainForPlan,
  explainJson,
  explainSummary,
  type TaskExplainJson,
} from "./plan_explain.ts";

export interface PlanOptions {
  readonly json?: boolean;
  readonly blocks?: boolean;
  /** `--skip-mask TASK=PATH`, repeatable. */
  readonly skipMask?: readonly string[];
  /** `--tracking-dir DIR`: explain every block against the stores (read-only). */
  readonly trackingDir?: string;
  /** `--force TASK[:OFFSET:SHAPE]`, repeatable, as `run` takes it. */
  readonly force?: readonly string[];
  /** `--tasks A,B`, repeatable, as `run` takes it. */
  readonly tasks?: readonly string[];
  /** `--resources gpu=...`, as `run` takes it: which worker gets which GPU. */
  readonly gpu?: GpuOption | null;
}

export interface TaskPlan {
  readonly task: string;
  readonly blocks: number;
  readonly levels: number;
  readonly block_grid_shape: readonly number[];
  readonly tracking_grid_shape: readonly number[];
  readonly fit: string;
  readonly read_write_conflict: boolean;
  readonly upstream: readonly string[];
  readonly total_write_roi: { offset: number[]; shape: number[] };
  readonly warnings: readonly string[];
  /** The skip mask of the task for this plan, or null. */
  readonly skip_mask: { readonly source: string; readonly skipped: number } | null;
  /** Why blocks run, against the tracking stores (only when there are stores to read). */
  readonly explain?: TaskExplainJson;
}

export function taskPlan(
  task: TaskConfig,
  layout: TaskLayout,
  mask: SkipMask | null = null,
): TaskPlan {
  return {
    task: task.id,
    blocks: layout.blockCount,
    levels: layout.blockCount === 0 ? 0 : layout.levelCount,
    block_grid_shape: layout.gridShape,
    tracking_grid_shape: layout.trackingShape,
    fit: layout.fit,
    read_write_conflict: layout.readWriteConflict,
    upstream: task.upstream,
    total_write_roi: roiToJson(layout.totalWriteRoi),
    warnings: [...layoutWarnings(task, layout), ...coverageWarnings(task, layout)],
    skip_mask: mask === null ? null : { source: mask.source, skipped: mask.skipCount },
  };
}

/** Why a task has no blocks, for `plan` and `run` (empty when it has some). */
export function layoutWarnings(task: TaskConfig, layout: TaskLayout): string[] {
  if (layout.blockCount > 0) return [];
  const w = layout.writeRoi.shape;
  const t = layout.totalWriteRoi.shape;
  const axis = t.findIndex((s, d) => layout.fit === "valid" ? s < w[d]! : s <= 0);
  return [
    `Task "${task.id}" has no blocks: its total write ROI ${
      roiToString(layout.totalWriteRoi)
    } is smaller than one write block (${formatShape(w)}) on axis ${axis}` +
    (layout.fit === "valid" ? `; use fit "shrink" or "overhang" to keep a partial block` : ""),
  ];
}

/** What no block writes of the task's total write ROI (fit "valid"), for `plan` and `run`. */
export function coverageWarnings(task: TaskConfig, layout: TaskLayout): string[] {
  const notice = coverageNotice(task.id, layout);
  return notice === null ? [] : [notice];
}

/**
 * What `run` says of tasks without blocks: a task whose volume holds no block is almost always
 * a mistake in its ROIs, so the run is refused (exit 2) unless `--allow-empty` lets it go on
 * with a warning per such task. Then the tasks whose blocks leave part of their total write ROI
 * unwritten (`coverageWarnings`), one warning each.
 */
export function emptyTasks(
  pipeline: PipelineConfig,
  layouts: readonly TaskLayout[],
  allowEmpty: boolean,
): string[] {
  const warnings = pipeline.tasks.flatMap((task, t) => layoutWarnings(task, layouts[t]!));
  if (warnings.length > 0 && !allowEmpty) {
    throw new InputError(
      `${warnings.join("; ")}. Fix the ROIs, or pass --allow-empty to run the other tasks anyway.`,
    );
  }
  return [...warnings, ...pipeline.tasks.flatMap((task, t) => coverageWarnings(task, layouts[t]!))];
}

export async function planCommand(file: string, options: PlanOptions): Promise<void> {
  const selection = selectForCommand(await loadPipeline(file), options);
  const pipeline = selection.pipeline;
  checkPythonSyntax(pipeline);
  const leftOut = selection.leftOut.length === 0 ? {} : { tasks_left_out: selection.leftOut };
  const graph = buildPipelineGraph(pipeline);
  // A pool a run would refuse is a warning here: plan may run where the workers will not.
  let devices: DeviceSeats | string;
  try {
    devices = deviceSeats(
      pipeline,
      pipeline.tasks.map((t) => t.launch),
      options.gpu ?? null,
      process.env,
    );
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    devices = `warning: ${error.message} (a run here would be refused)`;
  }
  const masks = await loadRunMasks(
    pipeline,
    graph.layouts,
    parseSkipMaskFlags(options.skipMask ?? []),
  );
  const explained = explainForPlan(
    pipeline,
    graph,
    masks,
    options.trackingDir ?? null,
    options.force ?? [],
  );
  const out = new LineWriter();
  if (options.blocks) {
    await writeBlocks(pipeline, graph, options.json === true, out, masks, explained);
  } else if (options.json) {
    const assigned = typeof devices === "string" ? [] : taskDevices(pipeline, devices);
    const gpus = new Map(assigned.map(({ task, ...d }) => [task, d]));
    const tasks = graph.dag.order.map((t) => {
      const task = pipeline.tasks[t]!;
      const gpu = gpus.get(task.id);
      const plan = {
        ...taskPlan(task, graph.layouts[t]!, masks[t] ?? null),
        ...workerEnvironmentJson(task),
        ...(gpu === undefined ? {} : { gpus: gpu }),
      };
      const e = explained?.[t] ?? null;
      return e === null ? plan : { ...plan, explain: explainJson(e) };
    });
    const modules = moduleChoices(pipeline.path);
    await out.line(
      JSON.stringify({ pipeline: pipeline.path, ...leftOut, tasks, modules }, null, 2),
    );
  } else {
    const selected = describeSelection(selection, "Planning");
    if (selected !== null) await out.line(selected);
    for (const line of planSummary(pipeline, graph, masks)) await out.line(line);
    const gpus = typeof devices === "string" ? [devices] : describeDevices(pipeline, devices);
    if (gpus.length > 0) { for (const line of ["", ...gpus]) await out.line(line); }
    if (explained !== null) {
      for (const line of explainSummary(explained, graph.dag.order)) await out.line(line);
    }
  }
  await out.flush();
}

/** `worker_environment` for a task whose workers are processes: what they get. */
function workerEnvironmentJson(task: TaskConfig): Record<string, unknown> {
  if (!hasWorkerProcesses(task)) return {};
  const environment = workerEnvironment(task, process.env);
  return {
    worker_environment: {
      profile: environment.profiled,
      applied: environment.applied,
      kept: environment.kept,
      env: task.env ?? {},
    },
  };
}

export function planSummary(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  masks: readonly (SkipMask | null)[] = [],
): string[] {
  const plans = graph.dag.order.map((t) =>
    taskPlan(pipeline.tasks[t]!, graph.layouts[t]!, masks[t] ?? null)
  );
  const masked = plans.some((p) => p.skip_mask !== null);
  const total = plans.reduce((n, p) => n + p.blocks, 0);
  const lines = [
    `Pipeline ${pipeline.path}`,
    `${plans.length} task${plans.length === 1 ? "" : "s"}, ${formatCount(total)} blocks`,
    "",
    formatTable(
      [
        { header: "task" },
        { header: "blocks", align: "right" },
        { header: "levels", align: "right" },
        { header: "block grid" },
        { header: "tracking grid" },
        { header: "fit" },
        { header: "upstream" },
        ...(masked ? [{ header: "mask skips", align: "right" as const }] : []),
      ],
      plans.map((p) => [
        p.task,
        formatCount(p.blocks),
        String(p.levels),
        formatShape(p.block_grid_shape),
        formatShape(p.tracking_grid_shape),
        p.fit + (p.read_write_conflict ? "" : " (no conflicts)"),
        p.upstream.length === 0 ? "-" : p.upstream.join(", "),
        ...(masked ? [p.skip_mask === null ? "-" : formatCount(p.skip_mask.skipped)] : []),
      ]),
    ),
  ];
  const environments = graph.dag.order.flatMap((t) => {
    const task = pipeline.tasks[t]!;
    const line = describeWorkerEnvironment(task, workerEnvironment(task, process.env));
    return line === null ? [] : [line];
  });
  if (environments.length > 0) lines.push("", ...environments);
  lines.push("", `Modules: ${describeModuleChoices(moduleChoices(pipeline.path)).join(", ")}`);
  const warnings = plans.flatMap((p) => p.warnings);
  if (warnings.length > 0) lines.push("", ...warnings.map((w) => `warning: ${w}`));
  return lines;
}

async function writeBlocks(
  pipeline: PipelineConfig,
  graph: DependencyGraph,
  json: boolean,
  out: LineWriter,
  masks: readonly (SkipMask | null)[],
  explained: readonly (TaskExplanation | null)[] | null,
): Promise<void> {
  for (const t of graph.dag.order) {
    const task = pipeline.tasks[t]!;
    const layout = graph.layouts[t]!;
    const mask = masks[t] ?? null;
    const e = explained?.[t] ?? null;
    for (const position of layout.allPositions()) {
      const upstream = graph.upstreamOf(t, position).map((r) => ({
        task: pipeline.tasks[r.task]!.id,
        id: graph.blockIdOf(r),
      }));
      const id = layout.blockIdOf(position);
      const index = layout.gridIndexOf(position);
      const level = layout.levelOf(position);
      const read = layout.readRoiOf(position);
      const write = layout.writeRoiOf(position);
      const why = e === null ? null : e.reason(position);
      if (json) {
        await out.line(JSON.stringify({
          task: task.id,
          id: blockIdToJson(id),
          index,
          level,
          read_roi: roiToJson(read),
          write_roi: roiToJson(write),
          upstream: upstream.map((u) => ({ task: u.task, id: blockIdToJson(u.id) })),
          ...(mask === null ? {} : { masked: mask.isMasked(position) }),
          ...(why === null ? {} : { reason: why.kind, why: why.text, runs: RUNS[why.kind] }),
        }));
      } else {
        const deps = upstream.length === 0
          ? "-"
          : upstream.map((u) => `${u.task}/${u.id}`).join(" ");
        await out.line(
          `${task.id}/${id}  index (${index.join(", ")})  level ${level}  read ${
            roiToString(read)
          }  write ${roiToString(write)}  upstream ${deps}${
            why !== null
              ? `  (${why.text})`
              : mask !== null && mask.isMasked(position)
              ? "  (masked)"
              : ""
          }`,
        );
      }
    }
  }
}
