/**
 * What `blockwise report` inlines into its HTML file and what `blockwise serve` answers under
 * `/api/report` and `/api/frame`: one JSON document per target (a tracking dir or one store),
 * built by `buildReport` (report_build.ts) and drawn by the page (lib/view/client/).
 *
 * Scale: nothing here grows with the block count beyond the block map, and the map is a grid of
 * at most `MAX_MAP_CELLS` cells (each cell aggregates a box of blocks, `cell_shape` per axis), so
 * a page never loads more than that however large the store. Per-cell values travel as base64
 * byte arrays, quantised to one byte (metrics) or two (worker numbers): the page colours cells
 * by them and shows them on hover as approximate values; exact values are in the ledger.
 *
 * The keys are stable (fields may be added, none renamed).
 */

import type { StatusJson } from "./status_json.ts";

export const REPORT_FORMAT = "blockwise-report/1";

/** Where `blockwise report` writes without `-o`. */
export const DEFAULT_REPORT_FILE = "blockwise-report.html";

/** The most cells a block map has: 2^20 (a million-block grid is drawn block by block). */
export const MAX_MAP_CELLS = 1 << 20;

export interface ReportData {
  readonly format: typeof REPORT_FORMAT;
  /** When this document was made, ISO 8601. */
  readonly generated_at: string;
  /** Absolute path of the tracking dir or store the report is of. */
  readonly target: string;
  readonly blockwise_version: string;
  /**
   * "full", or "frame": a cheap refresh for a live page, whose tasks carry the state layer,
   * runs and failures but no metric layers (`metrics` empty, `workers` null), no
   * `distributions`, `slowest` or `timeline` (the page keeps those of the last full document).
   */
  readonly parts: "full" | "frame";
  /** What `blockwise status --json TARGET` prints, exactly. */
  readonly status: StatusJson;
  /** One per store of `status.stores`, in the same order. */
  readonly tasks: readonly TaskView[];
  /** Only from `run --serve`: what the run in flight knows and the ledger does not. */
  readonly live: LiveView | null;
  /** Only from `serve` and `run --serve`: where things are served (see `ServedLocation`). */
  readonly served: ServedLocation | null;
}

export interface ServedLocation {
  /**
   * The path every URL of the server starts with: "/" on loopback, `/<token>/` otherwise (the
   * token is a path prefix so that Zarr readers, which join relative paths, keep it).
   */
  readonly base_path: string;
}

export interface TaskView {
  readonly task: string;
  /** Absolute path of the store folder. */
  readonly path: string;
  /**
   * The store served as Zarr v3 by `serve`, relative to `served.base_path`:
   * `zarr/<encodeURIComponent(task)>/`.
   */
  readonly zarr_path: string;
  readonly layout: MapLayout;
  /** `runs.jsonl` records of kind "run", oldest first. */
  readonly runs: readonly RunView[];
  readonly map: BlockMap;
  /** Per resource array: empty without resource tracking. */
  readonly distributions: readonly Distribution[];
  /** The 20 blocks with the longest `wall_seconds`, slowest first (empty without tracking). */
  readonly slowest: readonly BlockDetail[];
  readonly timeline: Timeline | null;
  readonly failures: FailureView;
}

/** What the page needs to turn a block-grid coordinate into a block's ID and ROIs. */
export interface MapLayout {
  readonly block_grid_shape: readonly number[];
  /** daisy's grid index of block-grid coordinate `g` is `g + index_shift`. */
  readonly index_shift: readonly number[];
  /** Offset of block `g = 0`'s write ROI; block `g` writes at `offset + g * write_shape`. */
  readonly total_write_offset: readonly number[];
  readonly total_write_shape: readonly number[];
  readonly write_shape: readonly number[];
  /** Read ROI = write ROI grown by `context_begin` before and `context_end` after. */
  readonly context_begin: readonly number[];
  readonly context_end: readonly number[];
  /** "valid" | "overhang" | "shrink": a shrunk last block is cut at the total write ROI. */
  readonly fit: string;
}

export interface RunView {
  readonly run_id: string | null;
  readonly started_at: string | null;
  readonly ended_at: string | null;
  readonly seconds: number | null;
  readonly outcome: string | null;
  readonly exit_code: number | null;
  /** This task's blocks completed by that run, or null when the record does not say. */
  /** Blocks completed in the run, the skipped ones (found done, masked, checked) included. */
  readonly blocks_completed: number | null;
  readonly blocks_skipped: number | null;
  readonly blocks_failed: number | null;
  readonly host: string | null;
}

/**
 * The block grid downsampled to at most `MAX_MAP_CELLS` cells: cell `c` covers blocks
 * `c * cell_shape .. (c + 1) * cell_shape - 1` per axis (cut at the grid's end). `shape` is
 * `ceil(block_grid_shape / cell_shape)`; cells are in C order.
 */
export interface BlockMap {
  readonly cell_shape: readonly number[];
  readonly shape: readonly number[];
  readonly state: StateLayer;
  /**
   * One per resource array present (plus `failures`, always), in a fixed order. The GPU layers
   * (`gpu_util_pct`, `gpu_mem_bytes`) only when some block has that figure recorded (a number,
   * a byte count above 0): a store of a task without GPUs has none.
   */
  readonly metrics: readonly MetricLayer[];
  /** Worker numbers (`worker_id`), or null without resource tracking. */
  readonly workers: WorkerLayer | null;
}

/** Per-cell state codes. A cell of several blocks: failed if any failed, and so on. */
export const CELL_NEVER_RUN = 0;
export const CELL_DONE = 1;
export const CELL_FAILED = 2;
export const CELL_DELETED_TEMPORARY = 3;
/** Some blocks done, none failed: `done_fraction` says how many. */
export const CELL_PARTLY_DONE = 4;
/** A cell no block maps to (blocks without a tracking cell, only with a negative context). */
export const CELL_EMPTY = 255;

export interface StateLayer {
  /** base64 of one byte per cell: a `CELL_*` code. */
  readonly codes: string;
  /**
   * base64 of one byte per cell: `round(255 * done / blocks)`, or null when every cell is one
   * block (the code says it all).
   */
  readonly done_fraction: string | null;
}

export type MetricName =
  | "wall_seconds"
  | "cpu_seconds"
  | "peak_rss_bytes"
  | "io_read_bytes"
  | "io_write_bytes"
  | "gpu_util_pct"
  | "gpu_mem_bytes"
  | "failures"
  | "returned_at";

/**
 * "s" (seconds), "bytes", "count", "epoch_s" (a time, seconds since 1970), or "percent"
 * (0..100).
 */
export type MetricUnit = "s" | "bytes" | "count" | "epoch_s" | "percent";

export interface MetricLayer {
  readonly name: MetricName;
  readonly unit: MetricUnit;
  /** How a cell of several blocks aggregates its blocks' values. */
  readonly aggregate: "mean" | "max" | "sum";
  /**
   * base64 of one byte per cell: 0 = no value (never measured), `1 + k` for k in 0..254 maps to
   * `lo .. hi` on `scale` (linear: `lo + (hi - lo) * k / 254`; log: `lo * (hi / lo) ** (k / 254)`).
   */
  readonly values: string;
  readonly scale: "linear" | "log";
  readonly lo: number;
  readonly hi: number;
  /** Cells with a value. */
  readonly measured_cells: number;
}

export interface WorkerLayer {
  /** base64 of two bytes per cell (little-endian): the worker number, 65535 = none. */
  readonly values: string;
  /** The distinct worker numbers seen, ascending (at most 65534 of them are kept). */
  readonly workers: readonly number[];
}

/**
 * One resource array's distribution over the blocks measured; the GPU arrays' over the blocks
 * with that figure recorded, and only when there is one.
 */
export interface Distribution {
  readonly name: MetricName;
  readonly unit: MetricUnit;
  readonly count: number;
  readonly min: number;
  readonly q1: number;
  readonly median: number;
  readonly q3: number;
  readonly max: number;
  readonly mean: number;
  /** Histogram: `counts[i]` blocks in `[edges[i], edges[i + 1])` (last bin closed). */
  readonly histogram: { readonly edges: readonly number[]; readonly counts: readonly number[] };
}

export interface BlockDetail {
  /** C-order position in the block grid. */
  readonly position: number;
  /** Block-grid coordinate (counted from the total write ROI). */
  readonly coords: readonly number[];
  /** daisy's grid index (`coords + index_shift`), as `block.index` and errors.jsonl give it. */
  readonly index: readonly number[];
  /** daisy's block ID (a string when too large for a JSON number). */
  readonly id: number | string;
  readonly write_roi: { readonly offset: readonly number[]; readonly shape: readonly number[] };
  readonly read_roi: { readonly offset: readonly number[]; readonly shape: readonly number[] };
  readonly done: boolean;
  readonly failures: number;
  /** The resource arrays' exact values (null: not measured or no resource tracking). */
  readonly wall_seconds: number | null;
  readonly cpu_seconds: number | null;
  readonly peak_rss_bytes: number | null;
  readonly io_read_bytes: number | null;
  readonly io_write_bytes: number | null;
  /** Device utilisation (mean over the block) and the process's peak device memory. */
  readonly gpu_util_pct: number | null;
  readonly gpu_mem_bytes: number | null;
  readonly worker_id: number | null;
  /** Seconds since 1970 (scheduler clock). */
  readonly sent_at: number | null;
  readonly returned_at: number | null;
}

/**
 * Blocks over time, each from the time it ran: `returned_at - wall_seconds` to `returned_at`
 * (never before `sent_at`; `sent_at`..`returned_at` also holds the time a block waited in its
 * worker's window). Each block's last measured attempt: a failed block's failed one.
 * Times are seconds after `t0` (epoch seconds).
 */
export interface Timeline {
  readonly t0: number;
  readonly t1: number;
  /** Worker numbers, one lane each, ascending. */
  readonly workers: readonly number[];
  /** Blocks as bars, sampled evenly to at most `MAX_TIMELINE_BARS` when there are more. */
  readonly bars: readonly TimelineBar[];
  /**
   * Blocks timed (all of them, bars may be a sample): those measured (a wall time), and those
   * with a GPU figure but no wall time (a command task's), drawn from `sent_at` to `returned_at`.
   */
  readonly blocks: number;
  /** `[t, blocks done by t]` (failed blocks are not counted), at most 401 points. */
  readonly completed: readonly (readonly [number, number])[];
  /**
   * `[t, blocks running around t]`: the mean number running over each of 400 bins (the time the
   * blocks ran in the bin over its width), `t` its middle.
   */
  readonly running: readonly (readonly [number, number])[];
  /** The GPU figures of the bars, or null when no block of the task has one recorded. */
  readonly gpu: TimelineGpu | null;
}

export interface TimelineGpu {
  /** Per bar (same order as `bars`): its block's `gpu_util_pct`, null when not recorded. */
  readonly util_pct: readonly (number | null)[];
  /** Per bar: its block's `gpu_mem_bytes`, null when not recorded (0). */
  readonly mem_bytes: readonly (number | null)[];
  /**
   * Per worker (same order as `workers`): its device utilisation, the mean over every block
   * (not only the bars) with a figure weighted by the time the block ran; null without one.
   */
  readonly worker_util_pct: readonly (number | null)[];
}

export const MAX_TIMELINE_BARS = 4000;

/** `[lane (index into workers), start, end, position]`. */
export type TimelineBar = readonly [number, number, number, number];

export interface FailureView {
  /** Blocks not done with failed attempts. */
  readonly total: number;
  /**
   * Failed blocks the groups count: all of them up to 100,000, the first 100,000 beyond (in a
   * frame, the first 1,000: those `status --json` lists).
   */
  readonly grouped: number;
  /** Identical last-error messages grouped, most blocks first. */
  readonly groups: readonly FailureGroup[];
  /** The failed blocks in grid order with their last error, at most `MAX_FAILED_LISTED`. */
  readonly blocks: readonly FailedBlockView[];
}

export const MAX_FAILED_LISTED = 2000;

export interface FailureGroup {
  /** The last error's message ("no error recorded" when errors.jsonl has none). */
  readonly message: string;
  readonly count: number;
  /** The first few block IDs with that message. */
  readonly blocks: readonly (number | string)[];
}

export interface FailedBlockView {
  readonly position: number;
  readonly coords: readonly number[];
  readonly index: readonly number[];
  readonly id: number | string;
  readonly attempts: number;
  readonly message: string | null;
  readonly stack: readonly string[];
  readonly at: string | null;
}

/** What `run --serve` adds: the run in flight. */
export interface LiveView {
  readonly run_id: string;
  readonly started_at: string;
  /** Seconds since the run started. */
  readonly elapsed: number;
  /** Per task, the counters of `--events` progress lines. */
  readonly tasks: readonly LiveTask[];
  /** Blocks running now, at most 500 (longest running first). */
  readonly running: readonly RunningBlock[];
  readonly running_total: number;
  /** Remote workers submitted and not yet connected, per task (0 for local tasks). */
  readonly queued_workers: number;
  readonly connected_workers: number;
  /** The run is over (the page stops polling). */
  readonly finished: boolean;
  /**
   * Tasks whose map, counts and failed blocks this document took from the live map the run
   * keeps (lib/view/live_map.ts) rather than from a pass over their stores: every task with a
   * store but a temporary one, until the run has finished.
   */
  readonly live_maps: readonly string[];
}

export interface LiveTask {
  readonly task: string;
  readonly total: number;
  readonly done: number;
  readonly running: number;
  readonly failed: number;
  readonly orphaned: number;
  readonly skipped: number;
  readonly pending: number;
}

export interface RunningBlock {
  readonly task: string;
  readonly id: number | string;
  readonly index: readonly number[];
  readonly worker: string;
  /** Seconds it has been running. */
  readonly seconds: number;
}
