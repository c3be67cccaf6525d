/**
 * `blockwise accept PIPELINE [--tracking-dir DIR] [--task ID]... [--roi OFFSET:SHAPE]`: take
 * the done blocks as made by the pipeline's current recipe (version, params, inputs) and the
 * current upstream content, without running them: for a cosmetic version bump or a parameter
 * change known not to change results. The blocks' content hashes are kept, so nothing
 * downstream turns stale. PATH is the pipeline file because the current recipe lives there.
 *
 * Every existing store of a task with provenance is locked (a store held by a run is refused,
 * exit 3, nothing changed) and opened as `run` opens it; each task accepted gets a
 * `{"kind":"accept", ...}` record in its runs.jsonl. Blocks that are not done are left as they
 * are (a run makes them).
 */

import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { randomUUID } from "node:crypto";
import { buildPipelineGraph } from "../execute/mod.ts";
import type { Roi } from "../geometry/mod.ts";
import { InputError } from "../errors.ts";
import { needsProvenance, ProvenanceModel } from "../outputs/provenance.ts";
import { loadPipeline } from "../pipeline/mod.ts";
import { acquireStoreLock, type StoreLock } from "../tracking/lock.ts";
import { appendRunRecord } from "../tracking/runs_log.ts";
import { resolveTrackingPath } from "../tracking/session.ts";
import { TrackingStore } from "../tracking/store.ts";
import { VERSION } from "../version.ts";
import { EXIT_OK } from "./exit_codes.ts";
import { LineWriter } from "./output.ts";
import { parseRoiArgument } from "./reset.ts";

export interface AcceptOptions {
  readonly trackingDir?: string;
  /** `--task ID`, repeatable: only these tasks (default: every task with provenance). */
  readonly task?: readonly string[];
  /** `--roi OFFSET:SHAPE`: only blocks whose write ROI meets the box. */
  readonly roi?: string;
  readonly json?: boolean;
}

export interface AcceptReport {
  readonly task: string;
  readonly store: string;
  /** Done blocks in scope that were stale and are now fresh. */
  readonly accepted: number;
  /** Done blocks in scope that were already fresh. */
  readonly fresh: number;
  /** Blocks in scope that are not done (left alone). */
  readonly not_done: number;
  /** Why the accepted blocks were stale, blocks per reason. */
  readonly stale: Readonly<Record<string, number>>;
}

export async function acceptCommand(file: string, options: AcceptOptions): Promise<number> {
  const pipeline = await loadPipeline(file);
  const graph = buildPipelineGraph(pipeline);
  const roi = options.roi === undefined ? null : parseRoiArgument(options.roi);
  const ids = pipeline.tasks.map((t) => t.id);
  for (const id of options.task ?? []) {
    if (!ids.includes(id)) {
      throw new InputError(
        `accept --task "${id}": the pipeline has no such task; tasks: ${ids.join(", ")}`,
      );
    }
  }
  const needs = needsProvenance(pipeline, graph);
  const chosen = (t: number) =>
    needs[t] === true && (options.task === undefined || options.task.includes(ids[t]!));
  if (roi !== null) {
    for (let t = 0; t < ids.length; t++) {
      if (chosen(t) && graph.layouts[t]!.dims !== roi.offset.length) {
        throw new InputError(
          `Invalid --roi "${options.roi}": it has ${roi.offset.length} axes but task "${
            ids[t]
          }" has ${graph.layouts[t]!.dims}; choose the task with --task, or give ${
            graph.layouts[t]!.dims
          } numbers on each side of ':'`,
        );
      }
    }
  }
  const trackingDir = options.trackingDir ?? null;
  const stores: (TrackingStore | null)[] = pipeline.tasks.map(() => null);
  const locks: StoreLock[] = [];
  const reports: AcceptReport[] = [];
  const runId = randomUUID();
  try {
    for (let t = 0; t < pipeline.tasks.length; t++) {
      const dir = resolveTrackingPath(pipeline, t, trackingDir);
      if (!needs[t] || dir === null || !fs.existsSync(path.join(dir, "zarr.json"))) continue;
      locks.push(acquireStoreLock(dir, { command: process.argv.slice(1).join(" ") }));
      stores[t] = await TrackingStore.open(dir, {
        taskId: ids[t]!,
        layout: graph.layouts[t]!,
        resourceTracking: false,
        provenance: true,
      });
    }
    const model = ProvenanceModel.open(pipeline, graph, stores, true);
    for (const t of graph.dag.order) {
      const store = stores[t] ?? null;
      if (store === null || !chosen(t)) continue;
      reports.push(acceptTask(model, store, t, roi));
      store.flush();
    }
    for (const r of reports) {
      const t = ids.indexOf(r.task);
      appendRunRecord(r.store, {
        kind: "accept",
        run_id: runId,
        task: r.task,
        at: new Date().toISOString(),
        roi: roi === null ? null : { offset: [...roi.offset], shape: [...roi.shape] },
        recipe: model.recipe(t),
        accepted: r.accepted,
        fresh: r.fresh,
        not_done: r.not_done,
        stale: r.stale,
        blockwise_version: VERSION,
        pipeline: pipeline.path,
      });
    }
  } finally {
    for (const s of stores) s?.close();
    for (const l of locks) l.release();
  }
  const out = new LineWriter();
  if (options.json === true) {
    await out.line(JSON.stringify({ pipeline: pipeline.path, tasks: reports }, null, 2));
  } else if (reports.length === 0) {
    await out.line(
      "Nothing to accept: no task with provenance (outputs, version, params or inputs) has a tracking store" +
        (trackingDir === null ? "; give --tracking-dir DIR as for run" : ` under ${trackingDir}`),
    );
  } else {
    for (const r of reports) {
      const why = Object.entries(r.stale).map(([text, n]) => `${n} ${text}`).join(", ");
      await out.line(
        `Task "${r.task}": accepted ${r.accepted} done block${r.accepted === 1 ? "" : "s"}${
          why === "" ? "" : ` (${why})`
        } as made by the current recipe; ${r.fresh} already fresh, ${r.not_done} not done (left to run)`,
      );
    }
  }
  await out.flush();
  return EXIT_OK;
}

function acceptTask(
  model: ProvenanceModel,
  store: TrackingStore,
  task: number,
  roi: Roi | null,
): AcceptReport {
  const layout = store.layout;
  const stale: Record<string, number> = {};
  let accepted = 0;
  let fresh = 0;
  let notDone = 0;
  for (let p = 0; p < layout.blockCount; p++) {
    if (roi !== null && !meets(layout.writeRoiOf(p), roi)) continue;
    const cell = layout.trackingCellOf(p);
    if (cell < 0) continue;
    if (store.done[cell] !== 1) {
      notDone++;
      continue;
    }
    const reason = model.staleReason(task, p);
    if (reason === null) {
      fresh++;
      continue;
    }
    stale[reason] = (stale[reason] ?? 0) + 1;
    model.accept(task, p);
    accepted++;
  }
  return { task: store.taskId, store: store.path, accepted, fresh, not_done: notDone, stale };
}

function meets(write: Roi, box: Roi): boolean {
  return box.offset.every((o, d) =>
    o < write.offset[d]! + write.shape[d]! && write.offset[d]! < o + box.shape[d]!
  );
}
