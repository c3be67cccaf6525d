/**
 * `buildReport`: the document a report inlines and `serve` answers (report_data.ts), from the
 * stores of a tracking dir or one store, read as `status` reads them: no lock, no mmap, plain
 * fs reads window by window, so it runs beside a live run and its memory does not grow with
 * the store (the block map is at most `MAX_MAP_CELLS` cells).
 *
 * A frame of a store the calling process holds (`run --serve`) is made from its live map
 * instead (`BuildOptions.held`, live_map.ts): no pass over the store, and the same document.
 */

import { isRecord, StoreError } from "../errors.ts";
import { readRunRecords } from "../tracking/runs_log.ts";
import { readStoreMetadata, type StoreMetadata } from "../tracking/store_metadata.ts";
import { versionLine } from "../version.ts";
import type { TaskLayout } from "../blocks/mod.ts";
import { BlockStats } from "./block_stats.ts";
import { failuresView, MAX_FAILED_GROUPED } from "./failures_view.ts";
import type { LiveStoreMap } from "./live_map.ts";
import { buildBlockMap } from "./map_build.ts";
import {
  type LiveView,
  type MapLayout,
  MAX_MAP_CELLS,
  REPORT_FORMAT,
  type ReportData,
  type RunView,
  type ServedLocation,
  type TaskView,
} from "./report_data.ts";
import {
  type FailedList,
  JSON_FAILED_LIMIT,
  statusJsonOf,
  type StatusJsonStore,
} from "./status_json.ts";
import { failedBlocks } from "../outputs/errors_log.ts";
import { findStores } from "../tracking/find_stores.ts";
import { inspectStores, numberOrNull as num, stringOrNull as str } from "../tracking/inspect.ts";
import * as path from "node:path";

export interface BuildOptions {
  /** "full" (default) or "frame" (the state layer only; see `ReportData.parts`). */
  readonly parts?: "full" | "frame";
  readonly live?: LiveView | null;
  readonly served?: ServedLocation | null;
  /** Cells of the block map at most (default `MAX_MAP_CELLS`). */
  readonly maxCells?: number;
  /** The clock, for `generated_at` (tests). */
  readonly now?: () => Date;
  /**
   * The live map of a store (by absolute path) held by this process, or null: a frame of it is
   * made from the map (brought up to date first) instead of a pass over the store.
   */
  readonly held?: ((storeDir: string) => LiveStoreMap | null) | null;
}

/** Throws InputError / StoreError as `status` does for a target that is not a store. */
export function buildReport(target: string, options: BuildOptions = {}): ReportData {
  const parts = options.parts ?? "full";
  const paths = findStores(target);
  const live = parts === "frame" ? liveMaps(paths, options) : new Map<string, LiveStoreMap>();
  const { inspections, failures } = inspectStores(
    paths,
    null,
    (dir) => live.get(dir)?.counts() ?? null,
  );
  // Read once: a full document groups up to 100,000 failed blocks, status lists the first 1,000.
  const failed = inspections.map((i) =>
    live.get(i.report.path)?.failedList(JSON_FAILED_LIMIT) ??
      failedBlocks(i.report.path, parts === "full" ? MAX_FAILED_GROUPED : JSON_FAILED_LIMIT)
  );
  const status = statusJsonOf(inspections, failures, JSON_FAILED_LIMIT, failed);
  const tasks = status.stores.map((store, k) =>
    taskView(
      store,
      readStoreMetadata(store.path),
      parts,
      options.maxCells ?? MAX_MAP_CELLS,
      failed[k]!,
      live.get(store.path) ?? null,
    )
  );
  return {
    format: REPORT_FORMAT,
    generated_at: (options.now?.() ?? new Date()).toISOString(),
    target: path.resolve(target),
    blockwise_version: versionLine(),
    parts,
    status,
    tasks,
    live: options.live ?? null,
    served: options.served ?? null,
  };
}

/**
 * The live maps `options.held` gives for `paths`, brought up to the ledger. A store whose map
 * cannot be (closed, or a StoreError in its first pass) is read as any other store, which then
 * reports what is wrong with it.
 */
function liveMaps(paths: readonly string[], options: BuildOptions): Map<string, LiveStoreMap> {
  const live = new Map<string, LiveStoreMap>();
  const held = options.held;
  if (!held) return live;
  const cells = options.maxCells ?? MAX_MAP_CELLS;
  for (const dir of paths) {
    const map = held(dir);
    if (map === null || map.maxCells !== cells) continue;
    try {
      if (map.refresh()) live.set(map.path, map);
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
    }
  }
  return live;
}

function epochSeconds(iso: string | null | undefined): number {
  return iso === null || iso === undefined ? Number.NaN : Date.parse(iso) / 1000;
}

function taskView(
  store: StatusJsonStore,
  meta: StoreMetadata,
  parts: "full" | "frame",
  maxCells: number,
  failed: FailedList,
  live: LiveStoreMap | null,
): TaskView {
  const layout = meta.layout;
  const full = parts === "full";
  // The resource report's times are ISO strings cut to the millisecond: widened by one.
  const t0 = epochSeconds(store.resources?.first_sent_at) - 0.001;
  const t1 = epochSeconds(store.resources?.last_returned_at) + 0.001;
  const stats = full && meta.resourceTracking ? new BlockStats(layout.blockCount, t0, t1) : null;
  const map = live?.blockMap() ?? buildBlockMap(meta, { maxCells, full, stats });
  const failures = failuresView(layout, failed);
  return {
    task: store.task,
    path: store.path,
    zarr_path: `zarr/${encodeURIComponent(store.task)}/`,
    layout: mapLayout(layout),
    runs: runViews(store.path),
    map,
    distributions: stats?.distributions() ?? [],
    slowest: stats?.slowest(layout) ?? [],
    timeline: stats?.timeline() ?? null,
    failures,
  };
}

/** What the page needs of a task's layout to name a block and its ROIs. */
export function mapLayout(layout: TaskLayout): MapLayout {
  return {
    block_grid_shape: [...layout.gridShape],
    index_shift: [...layout.indexShift],
    total_write_offset: [...layout.totalWriteRoi.offset],
    total_write_shape: [...layout.totalWriteRoi.shape],
    write_shape: [...layout.writeRoi.shape],
    context_begin: [...layout.contextBegin],
    context_end: [...layout.contextEnd],
    fit: layout.fit,
  };
}

function runViews(storeDir: string): RunView[] {
  return readRunRecords(storeDir).records
    .filter((r) => r["kind"] === "run")
    .map((r) => {
      const blocks = isRecord(r["blocks"]) ? r["blocks"] : {};
      return {
        run_id: str(r["run_id"]),
        started_at: str(r["started_at"]),
        ended_at: str(r["ended_at"]),
        seconds: num(r["seconds"]),
        outcome: str(r["outcome"]),
        exit_code: num(r["exit_code"]),
        blocks_completed: num(blocks["completed"]),
        blocks_skipped: num(blocks["skipped"]),
        blocks_failed: num(blocks["failed"]),
        host: str(r["host"]),
      };
    });
}
