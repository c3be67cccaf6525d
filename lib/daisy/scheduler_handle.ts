/**
 * daisy's `Scheduler` and dependency graphs, driven one call at a time from Python: the
 * binary's own `Scheduler` and `DependencyGraph` over a validated pipeline, with no ledger and
 * no workers. Python acquires a block, runs it however it likes and releases it as succeeded or
 * failed; the counters, retries, orphans and daisy's block order are the scheduler's.
 */

import { blockIdToJson, type TaskLayout } from "../blocks/mod.ts";
import { buildPipelineGraph } from "../execute/pipeline_graph.ts";
import { schedulerOptions } from "../execute/scheduler_options.ts";
import { type Coord, intersect, makeRoi, type Roi, roiToJson } from "../geometry/mod.ts";
import type { DependencyGraph } from "../graph/mod.ts";
import { Scheduler } from "../schedule/mod.ts";
import type { CounterSnapshot } from "../schedule/counters.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import type { JsonObject } from "./json_lines.ts";
import { SessionRefusal } from "./pipeline_json.ts";

/** A block as the session sends it (DAISY_API.md, "Values"). */
export function blockJson(
  taskId: string,
  layout: TaskLayout,
  position: number,
  attempt: number,
): JsonObject {
  return {
    task: taskId,
    id: blockIdToJson(layout.blockIdOf(position)),
    position,
    index: layout.gridIndexOf(position),
    readRoi: roiToJson(layout.readRoiOf(position)),
    writeRoi: roiToJson(layout.writeRoiOf(position)),
    attempt,
  };
}

/** daisy's TaskState fields, from a counter snapshot and the task's worker figures. */
export function countersJson(
  snapshot: CounterSnapshot,
  workerFailures = 0,
  restarts = 0,
): JsonObject {
  return {
    total: snapshot.total,
    ready: snapshot.ready,
    processing: snapshot.processing,
    pending: snapshot.pending,
    completed: snapshot.completed,
    skipped: snapshot.skipped,
    failed: snapshot.failed,
    orphaned: snapshot.orphaned,
    started: snapshot.started,
    done: snapshot.phase !== "running",
    abandoned: snapshot.phase === "abandoned",
    workerFailures,
    workerRestarts: restarts,
  };
}

export class SchedulerHandle {
  readonly #pipeline: PipelineConfig;
  readonly #graph: DependencyGraph;
  readonly #scheduler: Scheduler;

  constructor(pipeline: PipelineConfig) {
    this.#pipeline = pipeline;
    this.#graph = buildPipelineGraph(pipeline);
    this.#scheduler = new Scheduler(this.#graph, schedulerOptions(pipeline, {}));
  }

  /** Each task's block, level and root counts, in pipeline order. */
  describe(): JsonObject[] {
    return this.#pipeline.tasks.map((task, t) => {
      const layout = this.#graph.layouts[t]!;
      return {
        id: task.id,
        blocks: layout.blockCount,
        levels: layout.blockCount === 0 ? 0 : layout.levelCount,
        roots: layout.blockCount === 0 ? 0 : layout.levelSize(0),
      };
    });
  }

  acquire(taskId: string): JsonObject | null {
    const t = this.#task(taskId);
    const position = this.#scheduler.acquire(t);
    if (position < 0) return null;
    return this.#block(t, position);
  }

  release(taskId: string, position: unknown, status: unknown): void {
    const t = this.#task(taskId);
    const layout = this.#graph.layouts[t]!;
    if (
      typeof position !== "number" || !Number.isSafeInteger(position) || position < 0 ||
      position >= layout.blockCount
    ) {
      throw new SessionRefusal(
        "ValueError",
        `Cannot release block ${JSON.stringify(position)} of task "${taskId}": it has blocks 0 to ${
          layout.blockCount - 1
        }; release a block that acquire_block returned`,
      );
    }
    if (status === "success") this.#scheduler.succeed(t, position);
    else if (status === "failed") this.#scheduler.fail(t, position);
    else {
      throw new SessionRefusal(
        "ValueError",
        `Cannot release a block with status ${
          JSON.stringify(status)
        }: set block.status to BlockStatus.SUCCESS or BlockStatus.FAILED before release_block`,
      );
    }
  }

  states(): JsonObject {
    const states: JsonObject = {};
    this.#pipeline.tasks.forEach((task, t) => {
      states[task.id] = countersJson(this.#scheduler.snapshot(t));
    });
    return states;
  }

  /** The dependencies of the block of `taskId` whose write ROI is `writeRoi`, in any task. */
  neighbours(
    direction: "upstream" | "downstream",
    taskId: string,
    writeRoi: unknown,
  ): JsonObject[] {
    const t = this.#task(taskId);
    const position = this.#locate(t, roiOf(writeRoi, "writeRoi"));
    const refs = direction === "upstream"
      ? this.#graph.upstreamOf(t, position)
      : this.#graph.downstreamOf(t, position);
    return refs.map((r) => this.#block(r.task, r.position));
  }

  /** `all` blocks (level by level), the `roots` (level 0), or those whose write ROI meets `roi`. */
  blocks(taskId: string, which: unknown, roi: unknown): JsonObject[] {
    const t = this.#task(taskId);
    const layout = this.#graph.layouts[t]!;
    const out: JsonObject[] = [];
    if (layout.blockCount === 0) return out;
    if (which === "all" || which === "roots") {
      const levels = which === "roots" ? 1 : layout.levelCount;
      for (let level = 0; level < levels; level++) {
        const cursor = layout.levelCursor(level);
        for (let p = cursor.next(); p >= 0; p = cursor.next()) out.push(this.#block(t, p));
      }
      return out;
    }
    if (which !== "within") {
      throw new SessionRefusal(
        "ValueError",
        `Unknown block selection ${JSON.stringify(which)}: use "all", "roots" or "within"`,
      );
    }
    const area = intersect(roiOf(roi, "roi"), layout.totalWriteRoi);
    if (area.shape.some((s) => s <= 0)) return out;
    const w = layout.writeRoi.shape;
    const origin = layout.totalWriteRoi.offset;
    const lo = area.offset.map((o, d) => Math.floor((o - origin[d]!) / w[d]!));
    const hi = area.offset.map((o, d) =>
      Math.min(layout.gridShape[d]!, Math.ceil((o + area.shape[d]! - origin[d]!) / w[d]!))
    );
    const coords = [...lo];
    for (;;) {
      out.push(this.#block(t, layout.positionOf(coords)));
      let d = coords.length - 1;
      while (d >= 0 && ++coords[d]! >= hi[d]!) coords[d] = lo[d--]!;
      if (d < 0) break;
    }
    return out;
  }

  #block(t: number, position: number): JsonObject {
    return blockJson(
      this.#pipeline.tasks[t]!.id,
      this.#graph.layouts[t]!,
      position,
      this.#scheduler.attemptOf(t, position),
    );
  }

  #task(taskId: unknown): number {
    const t = this.#pipeline.tasks.findIndex((task) => task.id === taskId);
    if (t < 0) {
      throw new SessionRefusal(
        "KeyError",
        `No task ${JSON.stringify(taskId)} in this scheduler: its tasks are ${
          this.#pipeline.tasks.map((task) => JSON.stringify(task.id)).join(", ")
        }`,
      );
    }
    return t;
  }

  /** The position of the block whose write ROI starts at `roi`'s offset. */
  #locate(t: number, roi: Roi): number {
    const layout = this.#graph.layouts[t]!;
    const w = layout.writeRoi.shape;
    const origin = layout.totalWriteRoi.offset;
    const coords: number[] = [];
    for (let d = 0; d < layout.dims; d++) {
      const delta = (roi.offset[d] ?? Number.NaN) - origin[d]!;
      coords.push(delta / w[d]!);
    }
    if (
      roi.offset.length !== layout.dims || coords.some((c) => !Number.isInteger(c)) ||
      !layout.inGrid(coords)
    ) {
      throw new SessionRefusal(
        "ValueError",
        `Task "${this.#pipeline.tasks[t]!.id}" has no block whose write ROI starts at (${
          roi.offset.join(", ")
        }): its blocks' write ROIs start at (${origin.join(", ")}) plus multiples of (${
          w.join(", ")
        }); pass a block of this task`,
      );
    }
    return layout.positionOf(coords);
  }
}

function roiOf(value: unknown, name: string): Roi {
  const v = value as { offset?: unknown; shape?: unknown } | null;
  const ints = (x: unknown): x is number[] =>
    Array.isArray(x) && x.every((n) => typeof n === "number" && Number.isSafeInteger(n));
  if (v === null || typeof v !== "object" || !ints(v.offset) || !ints(v.shape)) {
    throw new SessionRefusal(
      "TypeError",
      `"${name}" must be {"offset": [ints], "shape": [ints]}; got ${JSON.stringify(value)}`,
    );
  }
  return makeRoi(v.offset as Coord, v.shape as Coord);
}
