/**
 * Hand-built `ReportData` documents for the report page's tests: every block's state is chosen
 * by the test, the layout is a real TaskLayout (so block IDs and ROIs are the scheduler's own),
 * and cells, layers, counts, failures and timelines are derived from the blocks consistently,
 * so a test can say which colour and which tooltip a given cell must show.
 */

import { mapLayout } from "../../lib/view/report_build.ts";
import { Buffer } from "node:buffer";
import { cantorNumber, type Fit, TaskLayout } from "../../lib/blocks/mod.ts";
import {
  CELL_DELETED_TEMPORARY,
  CELL_DONE,
  CELL_EMPTY,
  CELL_FAILED,
  CELL_NEVER_RUN,
  CELL_PARTLY_DONE,
  type Distribution,
  type MetricLayer,
  type MetricName,
  REPORT_FORMAT,
  type ReportData,
  type RunView,
  type TaskView,
} from "../../lib/view/report_data.ts";
import type { StatusJsonStore } from "../../lib/view/status_json.ts";
import { storedLayoutOf } from "../../lib/tracking/store_layout.ts";

export type BlockState = "done" | "failed" | "never" | "deleted";

export interface TaskSpec {
  readonly task: string;
  /** Blocks per axis; the layout is built to have exactly this grid. */
  readonly grid: readonly number[];
  readonly cellShape?: readonly number[];
  readonly writeShape?: readonly number[];
  readonly contextBegin?: readonly number[];
  readonly contextEnd?: readonly number[];
  readonly offset?: readonly number[];
  /** Shrink cuts the last block of each axis short by `cut`. */
  readonly fit?: Fit;
  readonly cut?: number;
  readonly state: (coords: readonly number[]) => BlockState;
  readonly tracking: boolean;
  readonly runs?: number;
  /** Error message of failed block `coords` (default: one of two messages). */
  readonly message?: (coords: readonly number[]) => string;
}

export const XSS_MESSAGE =
  "boom </script><script>window.__xss = 1</script> <img src=x onerror=alert(1)>";
export const T0 = 1_700_000_000;
const WORKERS = [1, 2, 5];

export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

export function layoutOf(spec: TaskSpec): TaskLayout {
  const dims = spec.grid.length;
  const w = spec.writeShape ?? spec.grid.map(() => 10);
  const cb = spec.contextBegin ?? spec.grid.map(() => 0);
  const ce = spec.contextEnd ?? spec.grid.map(() => 0);
  const offset = spec.offset ?? spec.grid.map(() => 0);
  const cut = spec.fit === "shrink" ? (spec.cut ?? 0) : 0;
  const totalWrite = spec.grid.map((g, d) => g * w[d]! - (g > 0 ? cut : 0));
  const layout = new TaskLayout({
    totalRoi: {
      offset: offset.map((o, d) => o - cb[d]!),
      shape: totalWrite.map((t, d) => t + cb[d]! + ce[d]!),
    },
    readRoi: { offset: cb.map((c) => -c), shape: w.map((x, d) => x + cb[d]! + ce[d]!) },
    writeRoi: { offset: new Array<number>(dims).fill(0), shape: w },
    fit: spec.fit ?? "valid",
    readWriteConflict: false,
  });
  if (JSON.stringify(layout.gridShape) !== JSON.stringify(spec.grid)) {
    throw new Error(`fixture layout has grid ${layout.gridShape}, not ${spec.grid}`);
  }
  return layout;
}

/** The report's layout of a task (the builder's own function). */
export const mapLayoutOf = mapLayout;

interface Block {
  readonly position: number;
  readonly coords: number[];
  readonly state: BlockState;
  readonly wall: number | null;
  readonly cpu: number | null;
  readonly rss: number | null;
  readonly read: number | null;
  readonly written: number | null;
  readonly failures: number;
  readonly worker: number | null;
  readonly sent: number | null;
  readonly returned: number | null;
}

function blocksOf(spec: TaskSpec, layout: TaskLayout): Block[] {
  const out: Block[] = [];
  for (let p = 0; p < layout.blockCount; p++) {
    const coords = layout.coordsOf(p);
    const state = spec.state(coords);
    const ran = state === "done" || state === "deleted";
    const wall = ran && spec.tracking ? 1 + (p % 7) * 0.5 + (p % 13 === 0 ? 40 : 0) : null;
    const sent = wall === null ? null : T0 + (p % 17) * 3 + Math.floor(p / 17) * 2;
    out.push({
      position: p,
      coords,
      state,
      wall,
      cpu: wall === null ? null : wall * 0.8,
      rss: wall === null ? null : 2 ** 20 * (1 + (p % 11) ** 3),
      read: wall === null ? null : 4096 * (1 + (p % 5)),
      written: wall === null ? null : 8192 * (1 + (p % 3)),
      failures: state === "failed" ? 1 + (p % 3) : 0,
      worker: wall === null ? null : WORKERS[p % WORKERS.length]!,
      sent,
      returned: sent === null || wall === null ? null : sent + wall,
    });
  }
  return out;
}

/** Quantise one value as the report does: 0 = none, 1 + k for k in 0..254 along lo..hi. */
export function quantise(v: number | null, lo: number, hi: number, log: boolean): number {
  if (v === null) return 0;
  if (hi <= lo) return 1;
  const t = log ? Math.log(v / lo) / Math.log(hi / lo) : (v - lo) / (hi - lo);
  return 1 + Math.round(254 * Math.min(1, Math.max(0, t)));
}

const METRICS: readonly [
  MetricName,
  MetricLayer["unit"],
  MetricLayer["aggregate"],
  (b: Block) => number | null,
][] = [
  ["wall_seconds", "s", "mean", (b) => b.wall],
  ["cpu_seconds", "s", "mean", (b) => b.cpu],
  ["peak_rss_bytes", "bytes", "max", (b) => b.rss],
  ["io_read_bytes", "bytes", "sum", (b) => b.read],
  ["io_write_bytes", "bytes", "sum", (b) => b.written],
  ["failures", "count", "sum", (b) => (b.failures > 0 ? b.failures : null)],
  ["returned_at", "epoch_s", "max", (b) => b.returned],
];

/** Per cell, its blocks. */
function cellsOf(blocks: readonly Block[], grid: readonly number[], cellShape: readonly number[]) {
  const shape = grid.map((g, d) => Math.ceil(g / cellShape[d]!));
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const cells: Block[][] = Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => []);
  for (const b of blocks) {
    let c = 0;
    for (let d = 0; d < grid.length; d++) {
      c += Math.floor(b.coords[d]! / cellShape[d]!) * strides[d]!;
    }
    cells[c]!.push(b);
  }
  return { shape, cells };
}

function aggregate(values: number[], how: MetricLayer["aggregate"]): number | null {
  if (values.length === 0) return null;
  if (how === "max") return Math.max(...values);
  const sum = values.reduce((a, b) => a + b, 0);
  return how === "sum" ? sum : sum / values.length;
}

export function cellCode(blocks: readonly Block[]): number {
  if (blocks.length === 0) return CELL_EMPTY;
  if (blocks.some((b) => b.state === "failed")) return CELL_FAILED;
  if (blocks.every((b) => b.state === "deleted")) return CELL_DELETED_TEMPORARY;
  const done = blocks.filter((b) => b.state === "done" || b.state === "deleted").length;
  if (done === blocks.length) return CELL_DONE;
  return done === 0 ? CELL_NEVER_RUN : CELL_PARTLY_DONE;
}

function distribution(name: MetricName, unit: MetricLayer["unit"], values: number[]): Distribution {
  const v = [...values].sort((a, b) => a - b);
  const q = (f: number) => v[Math.min(v.length - 1, Math.floor(f * (v.length - 1)))]!;
  const min = v[0]!;
  const max = v[v.length - 1]!;
  const bins = 12;
  const edges = Array.from({ length: bins + 1 }, (_, i) => min + ((max - min) * i) / bins);
  const counts = new Array<number>(bins).fill(0);
  for (const x of v) {
    counts[Math.min(bins - 1, Math.floor(((x - min) / (max - min || 1)) * bins))]!++;
  }
  return {
    name,
    unit,
    count: v.length,
    min,
    q1: q(0.25),
    median: q(0.5),
    q3: q(0.75),
    max,
    mean: v.reduce((a, b) => a + b, 0) / v.length,
    histogram: { edges, counts },
  };
}

function idOf(layout: TaskLayout, coords: readonly number[]): number {
  return cantorNumber(coords.map((c, d) => Math.max(0, c + layout.indexShift[d]!)));
}

export interface BuiltTask {
  readonly view: TaskView;
  readonly store: StatusJsonStore;
  readonly layout: TaskLayout;
}

export function buildTask(spec: TaskSpec): BuiltTask {
  const layout = layoutOf(spec);
  const blocks = blocksOf(spec, layout);
  const cellShape = spec.cellShape ?? spec.grid.map(() => 1);
  const { shape, cells } = cellsOf(blocks, spec.grid, cellShape);
  const single = cellShape.every((s) => s === 1);
  const codes = Uint8Array.from(cells, cellCode);
  const fractions = Uint8Array.from(
    cells,
    (bs) =>
      bs.length === 0 ? 0 : Math.round(
        (255 * bs.filter((b) => b.state === "done" || b.state === "deleted").length) / bs.length,
      ),
  );
  const metrics: MetricLayer[] = [];
  const distributions: Distribution[] = [];
  for (const [name, unit, how, get] of METRICS) {
    if (!spec.tracking && name !== "failures") continue;
    const perCell = cells.map((bs) =>
      aggregate(bs.map(get).filter((x): x is number => x !== null), how)
    );
    const present = perCell.filter((x): x is number => x !== null);
    const lo = present.length ? Math.min(...present) : 0;
    const hi = present.length ? Math.max(...present) : 0;
    const log = lo > 0 && hi / lo > 100;
    metrics.push({
      name,
      unit,
      aggregate: how,
      values: base64(Uint8Array.from(perCell, (x) => quantise(x, lo, hi, log))),
      scale: log ? "log" : "linear",
      lo,
      hi,
      measured_cells: present.length,
    });
    const all = blocks.map(get).filter((x): x is number => x !== null);
    if (spec.tracking && all.length > 0 && name !== "failures") {
      distributions.push(distribution(name, unit, all));
    }
  }
  const workers = spec.tracking
    ? {
      values: base64(
        new Uint8Array(
          Uint16Array.from(cells, (bs) => bs.find((b) => b.worker !== null)?.worker ?? 65535)
            .buffer,
        ),
      ),
      workers: WORKERS,
    }
    : null;
  const timed = blocks.filter((b) => b.wall !== null && b.sent !== null && b.returned !== null);
  const detail = (b: Block) => ({
    position: b.position,
    coords: b.coords,
    index: b.coords.map((c, d) => Math.max(0, c + layout.indexShift[d]!)),
    id: idOf(layout, b.coords),
    write_roi: layout.writeRoiOf(b.position),
    read_roi: layout.readRoiOf(b.position),
    done: b.state === "done" || b.state === "deleted",
    failures: b.failures,
    wall_seconds: b.wall,
    cpu_seconds: b.cpu,
    peak_rss_bytes: b.rss,
    io_read_bytes: b.read,
    io_write_bytes: b.written,
    gpu_util_pct: null,
    gpu_mem_bytes: null,
    worker_id: b.worker,
    sent_at: b.sent,
    returned_at: b.returned,
  });
  const slowest = [...timed].sort((a, b) => b.wall! - a.wall! || a.position - b.position).slice(
    0,
    20,
  )
    .map(detail);
  const t1 = timed.length ? Math.max(...timed.map((b) => b.returned!)) : T0;
  const timeline = timed.length === 0 ? null : {
    t0: T0,
    t1,
    workers: WORKERS,
    bars: timed.map((b) =>
      [WORKERS.indexOf(b.worker!), b.sent! - T0, b.returned! - T0, b.position] as const
    ),
    blocks: timed.length,
    completed: Array.from({ length: 50 }, (_, i) => {
      const t = ((t1 - T0) * i) / 49;
      return [t, timed.filter((b) => b.returned! - T0 <= t).length] as const;
    }),
    running: Array.from({ length: 50 }, (_, i) => {
      const t = ((t1 - T0) * i) / 49;
      return [t, timed.filter((b) => b.sent! - T0 <= t && b.returned! - T0 > t).length] as const;
    }),
    gpu: null,
  };
  const failedBlocks = blocks.filter((b) => b.state === "failed");
  const messageOf = spec.message ??
    ((c: readonly number[]) => (c[0]! % 2 === 0 ? XSS_MESSAGE : "ValueError: no data in block"));
  const failed = failedBlocks.map((b) => ({
    position: b.position,
    coords: b.coords,
    index: b.coords.map((c, d) => Math.max(0, c + layout.indexShift[d]!)),
    id: idOf(layout, b.coords),
    attempts: b.failures,
    message: messageOf(b.coords),
    stack: ["Traceback (most recent call last):", '  File "task.py", line 3'],
    at: new Date((T0 + 500) * 1000).toISOString(),
  }));
  const groups = [...new Set(failed.map((f) => f.message))].map((message) => {
    const of = failed.filter((f) => f.message === message);
    return { message, count: of.length, blocks: of.slice(0, 5).map((f) => f.id) };
  }).sort((a, b) => b.count - a.count);
  const nRuns = spec.runs ?? 2;
  const runs: RunView[] = Array.from({ length: nRuns }, (_, i) => ({
    run_id: `run-${i + 1}`,
    started_at: new Date((T0 + i * 3600) * 1000).toISOString(),
    ended_at: new Date((T0 + i * 3600 + 600) * 1000).toISOString(),
    seconds: 600 + i,
    outcome: i === nRuns - 1 && failed.length > 0 ? "failed" : "complete",
    exit_code: i === nRuns - 1 && failed.length > 0 ? 1 : 0,
    blocks_completed: Math.round(timed.length / nRuns) + i,
    blocks_skipped: i,
    blocks_failed: i === nRuns - 1 ? failed.length : 0,
    host: "node-1",
  }));
  const done = blocks.filter((b) => b.state === "done" || b.state === "deleted").length;
  const deleted = blocks.filter((b) => b.state === "deleted").length;
  const n = blocks.length;
  const path = `/data/run/${spec.task}`;
  const view: TaskView = {
    task: spec.task,
    path,
    zarr_path: `zarr/${encodeURIComponent(spec.task)}/`,
    layout: mapLayoutOf(layout),
    runs,
    map: {
      cell_shape: cellShape,
      shape,
      state: { codes: base64(codes), done_fraction: single ? null : base64(fractions) },
      metrics,
      workers,
    },
    distributions,
    slowest,
    timeline,
    failures: { total: failed.length, grouped: failed.length, groups, blocks: failed },
  };
  const store: StatusJsonStore = {
    path,
    task: spec.task,
    task_hash: "0".repeat(64),
    format: "blockwise-tracking/1",
    grid_shape: [...layout.trackingShape],
    block_grid_shape: [...layout.gridShape],
    layout: storedLayoutOf(layout),
    blocks: n,
    untracked_blocks: 0,
    done,
    failed: failed.length,
    pending: n - done - failed.length,
    percent_done: n === 0 ? 0 : Math.round((10000 * done) / n) / 100,
    failed_attempts: failed.reduce((a, f) => a + f.attempts, 0),
    runs: nRuns,
    torn_lines: 0,
    last_run: null,
    lock: null,
    lock_unreadable: null,
    missing_chunks: [],
    resource_tracking: spec.tracking,
    resources: spec.tracking
      ? {
        blocks_measured: timed.length,
        wall_seconds_total: timed.reduce((a, b) => a + b.wall!, 0),
        wall_seconds_mean: timed.length
          ? timed.reduce((a, b) => a + b.wall!, 0) / timed.length
          : null,
        cpu_seconds_total: timed.reduce((a, b) => a + b.cpu!, 0),
        peak_rss_bytes_max: timed.length ? Math.max(...timed.map((b) => b.rss!)) : null,
        io_read_bytes_total: timed.reduce((a, b) => a + b.read!, 0),
        io_write_bytes_total: timed.reduce((a, b) => a + b.written!, 0),
        first_sent_at: timed.length ? new Date(T0 * 1000).toISOString() : null,
        last_returned_at: timed.length ? new Date(t1 * 1000).toISOString() : null,
      }
      : null,
    outputs: deleted > 0
      ? {
        present_blocks: done - deleted,
        present_bytes: (done - deleted) * 1000,
        deleted_blocks: deleted,
        deleted_bytes: deleted * 1000,
        reset_blocks: 0,
        temporary: true,
        nondeterministic: false,
      }
      : null,
    io: "fs",
    failed_blocks: failed.map((f) => ({
      block: String(f.id),
      index: f.index,
      attempts: f.attempts,
      last_error: {
        message: f.message,
        stack: f.stack,
        attempt: f.attempts,
        run_id: "run-1",
        at: f.at,
      },
    })),
    failed_blocks_total: failed.length,
  };
  return { view, store, layout };
}

export function reportOf(
  tasks: readonly BuiltTask[],
  extra: Partial<Pick<ReportData, "live" | "served" | "parts" | "target">> = {},
): ReportData {
  return {
    format: REPORT_FORMAT,
    generated_at: new Date((T0 + 4000) * 1000).toISOString(),
    target: extra.target ?? "/data/run/tracking",
    blockwise_version: "0.1.0-test",
    parts: extra.parts ?? "full",
    status: { stores: tasks.map((t) => t.store), errors: [] },
    tasks: tasks.map((t) => t.view),
    live: extra.live ?? null,
    served: extra.served ?? null,
  };
}

// ---- the fixtures the page tests draw ----------------------------------------------------------

function stateFrom(cells: Partial<Record<BlockState, readonly (readonly number[])[]>>) {
  const keyed = new Map<string, BlockState>();
  for (
    const [state, list] of Object.entries(cells) as [BlockState, readonly (readonly number[])[]][]
  ) {
    for (const c of list) keyed.set(c.join(","), state);
  }
  return (coords: readonly number[]): BlockState => keyed.get(coords.join(",")) ?? "done";
}

/** 12 × 9 blocks, one per cell, with context (index shift 1) and a shrunk last block. */
export const GRID2D_CELLS = {
  failed: [[2, 3], [7, 1]],
  never: [[0, 0], [11, 8], [5, 6]],
  deleted: [[5, 5], [6, 5]],
  done: [[1, 1], [4, 2], [11, 0]],
} as const;

export const GRID2D: TaskSpec = {
  task: "segment",
  grid: [12, 9],
  writeShape: [64, 64],
  contextBegin: [70, 70],
  contextEnd: [6, 6],
  offset: [100, 200],
  fit: "shrink",
  cut: 10,
  state: stateFrom({
    failed: GRID2D_CELLS.failed,
    never: GRID2D_CELLS.never,
    deleted: GRID2D_CELLS.deleted,
  }),
  tracking: true,
  runs: 3,
};

export const GRID3D_CELLS = {
  failed: [[1, 2, 3]],
  never: [[3, 4, 5], [0, 0, 0], [2, 2, 2]],
  done: [[1, 1, 1], [3, 4, 4]],
} as const;

/** 4 × 5 × 6 blocks, one per cell. */
export const GRID3D: TaskSpec = {
  task: "agglomerate/3d",
  grid: [4, 5, 6],
  writeShape: [8, 16, 16],
  state: stateFrom({ failed: GRID3D_CELLS.failed, never: GRID3D_CELLS.never }),
  tracking: true,
  runs: 1,
  message: () => "RuntimeError: out of memory",
};

/** 23 × 17 blocks in 2 × 2 cells (12 × 9 cells, the last row and column half full). */
export const AGGREGATED: TaskSpec = {
  task: "downsample",
  grid: [23, 17],
  cellShape: [2, 2],
  state: (c) =>
    c[0] === 4 && c[1] === 4
      ? "failed"
      : c[0]! >= 20 || (c[0] === 0 && c[1] === 0)
      ? "never"
      : "done",
  tracking: true,
  runs: 2,
};

/** 40 blocks on one axis, no resource tracking. */
export const LINE1D: TaskSpec = {
  task: "line",
  grid: [40],
  state: (c) => (c[0] === 7 ? "failed" : c[0]! >= 30 ? "never" : "done"),
  tracking: false,
  runs: 1,
};

/** 3 × 4 × 5 × 6 blocks, never run (no runs). */
export const GRID4D: TaskSpec = {
  task: "four",
  grid: [3, 4, 5, 6],
  state: () => "never",
  tracking: false,
  runs: 0,
};

/** No blocks at all. */
export const ZERO: TaskSpec = {
  task: "nothing",
  grid: [0, 5],
  state: () => "never",
  tracking: false,
  runs: 0,
};

/**
 * A 1024 × 1024 map (2^20 cells) with every layer: random states and values, 64 workers. Built
 * from typed arrays directly: the per-block builder would take seconds.
 */
export function largeReport(side = 1024): ReportData {
  const base = buildTask({ ...GRID3D, task: "large", tracking: true });
  const n = side * side;
  let seed = 12345;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  const codes = new Uint8Array(n);
  let done = 0;
  let failed = 0;
  for (let i = 0; i < n; i++) {
    const r = rand();
    codes[i] = r < 0.8 ? CELL_DONE : r < 0.82 ? CELL_FAILED : CELL_NEVER_RUN;
    if (codes[i] === CELL_DONE) done++;
    else if (codes[i] === CELL_FAILED) failed++;
  }
  const layer = (): string => {
    const bytes = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      bytes[i] = codes[i] === CELL_DONE ? 1 + Math.floor(rand() * 255) : 0;
    }
    return base64(bytes);
  };
  const workerNumbers = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    workerNumbers[i] = codes[i] === CELL_DONE ? Math.floor(rand() * 64) : 65535;
  }
  const metrics = base.view.map.metrics.map((m) => ({
    ...m,
    values: layer(),
    measured_cells: done,
  }));
  const layout = mapLayoutOf(
    layoutOf({ task: "large", grid: [side, side], state: () => "done", tracking: true }),
  );
  const view: TaskView = {
    ...base.view,
    layout,
    map: {
      cell_shape: [1, 1],
      shape: [side, side],
      state: { codes: base64(codes), done_fraction: null },
      metrics,
      workers: {
        values: base64(new Uint8Array(workerNumbers.buffer)),
        workers: Array.from({ length: 64 }, (_, i) => i),
      },
    },
    failures: { total: 0, grouped: 0, groups: [], blocks: [] },
  };
  const store: StatusJsonStore = {
    ...base.store,
    task: "large",
    block_grid_shape: [side, side],
    blocks: n,
    done,
    failed,
    pending: n - done - failed,
    percent_done: Math.round((10000 * done) / n) / 100,
    failed_blocks: [],
    failed_blocks_total: failed,
  };
  return reportOf([{ view, store, layout: base.layout }], { target: "/data/large" });
}
