/**
 * The report's document (lib/view/report_build.ts) from stores written by a real run
 * (`bun main.ts run ... --resource-tracking` in a child process): its status part is exactly
 * `status --json`; the block map marks the failed and done blocks where they are; the slowest
 * block is the one that slept longest; failures are grouped by message; the timeline and the
 * distributions count the blocks measured; a frame carries the same states without metrics;
 * a map downsampled to a few cells aggregates exactly what its blocks say. A store with scripted
 * GPU figures (written as the scheduler writes them) has the two GPU layers, distributions, the
 * timeline's figures and the slowest blocks' with the exact values; one without has none. Also
 * `blockwise report` itself: the file written and its refusals.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { buildReport } from "../lib/view/report_build.ts";
import { cellShapeFor } from "../lib/view/map_build.ts";
import { lastErrorsOf } from "../lib/outputs/errors_log.ts";
import { distribution } from "../lib/view/block_stats.ts";
import { userStack } from "../lib/view/stack_frames.ts";
import { type GpuBlock, gpuBlocks, writeGpuStore } from "./helpers/gpu_store.ts";
import { buildFakeNvml, fakeNvmlUnavailable, scriptedNvml } from "./fixtures/nvml/fake_nvml.ts";
import {
  CELL_DONE,
  CELL_FAILED,
  CELL_NEVER_RUN,
  CELL_PARTLY_DONE,
  type ReportData,
  type TaskView,
} from "../lib/view/report_data.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const BUN = path.join(REPO, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO, "main.ts");
const root = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-report-"));
after(() => fs.rmSync(root, { recursive: true, force: true }));

function cli(args: readonly string[], cwd = root, env: Record<string, string> = {}) {
  const r = spawnSync(BUN, [MAIN, ...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1", ...env },
    timeout: 120_000,
  });
  if (r.error !== undefined) throw r.error;
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// 6 x 5 blocks of 10 x 10: blocks (2,3) and (4,1) fail, (1,1) sleeps longest, the last row
// never runs (a skip mask would make it skipped, so it is cut out of the grid by a second task
// instead: here every block of row 5 is simply not reached because its task fails first).
const PIPELINE = `
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default { tasks: [{
  id: "grid",
  totalRoi: { offset: [0, 0], shape: [60, 50] },
  readRoi: { offset: [0, 0], shape: [10, 10] },
  writeRoi: { offset: [0, 0], shape: [10, 10] },
  readWriteConflict: false,
  maxWorkers: 2,
  maxRetries: 1,
  async process(block) {
    const [i, j] = block.index;
    if (i === 2 && j === 3) throw new Error("bad block 2,3");
    if (i === 4 && j === 1) throw new Error("disk full");
    await sleep(i === 1 && j === 1 ? 400 : 5);
  },
}] };
`;

let trk = "";
let full: ReportData;
let task: TaskView;
const positionOf = (i: number, j: number) => i * 5 + j;
const codesOf = (t: TaskView) => new Uint8Array(Buffer.from(t.map.state.codes, "base64"));

before(() => {
  const dir = path.join(root, "run");
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, "pipeline.mjs"), PIPELINE);
  trk = path.join(dir, "trk");
  const r = cli([
    "run",
    "pipeline.mjs",
    "--tracking-dir",
    trk,
    "--resource-tracking",
    "--no-progress",
  ], dir);
  assert.equal(r.code, 1, r.stderr);
  full = buildReport(trk);
  task = full.tasks[0]!;
});

describe("the report's document", () => {
  it("carries exactly what status --json prints", () => {
    const status = cli(["status", trk, "--json"]);
    assert.equal(status.code, 0, status.stderr);
    assert.deepEqual(JSON.parse(JSON.stringify(full.status)), JSON.parse(status.stdout));
    assert.equal(full.format, "blockwise-report/1");
    assert.equal(full.parts, "full");
    assert.equal(full.target, trk);
  });

  it("draws each block in its cell: failed, done", () => {
    assert.deepEqual(task.map.cell_shape, [1, 1]);
    assert.deepEqual(task.map.shape, [6, 5]);
    assert.equal(task.map.state.done_fraction, null);
    const codes = codesOf(task);
    assert.equal(codes[positionOf(2, 3)], CELL_FAILED);
    assert.equal(codes[positionOf(4, 1)], CELL_FAILED);
    assert.equal(codes[positionOf(0, 0)], CELL_DONE);
    assert.equal(codes.filter((c) => c === CELL_DONE).length, 28);
  });

  it("lists the block that slept longest as the slowest, with its ROIs", () => {
    const slow = task.slowest[0]!;
    assert.deepEqual(slow.index, [1, 1]);
    assert.deepEqual(slow.write_roi, { offset: [10, 10], shape: [10, 10] });
    assert.ok(slow.wall_seconds! >= 0.39, String(slow.wall_seconds));
    assert.equal(task.slowest.length, 20);
    for (let k = 1; k < task.slowest.length; k++) {
      assert.ok(task.slowest[k - 1]!.wall_seconds! >= task.slowest[k]!.wall_seconds!);
    }
  });

  it("groups the failures by message, each block with its last error", () => {
    assert.equal(task.failures.total, 2);
    assert.deepEqual(task.failures.groups.map((g) => [g.message, g.count]).sort(), [
      ["bad block 2,3", 1],
      ["disk full", 1],
    ]);
    const bad = task.failures.blocks.find((b) => b.message === "bad block 2,3")!;
    assert.deepEqual(bad.index, [2, 3]);
    assert.equal(bad.position, positionOf(2, 3));
    assert.equal(bad.attempts, 2);
  });

  // Issue 48 item 11: blockwise's own frames (minified `/$bunfs/root/workers/block_worker.js`
  // frames in the binary, lib/ and workers/ from source) are dropped, the user's kept.
  it("keeps the user's stack frames of a failure and drops blockwise's own", () => {
    const bad = task.failures.blocks.find((b) => b.message === "bad block 2,3")!;
    const raw = lastErrorsOf(task.path, new Set(["2,3"])).get("2,3")!.stack;
    assert.ok(raw.some((l) => l.includes(path.join(REPO, "workers"))), raw.join("\n"));
    assert.equal(bad.stack[0], "Error: bad block 2,3");
    assert.ok(bad.stack.some((l) => /pipeline\.mjs:\d+/.test(l)), bad.stack.join("\n"));
    for (const line of bad.stack) {
      assert.ok(!line.includes(path.join(REPO, "workers")), line);
      assert.ok(!line.includes(path.join(REPO, "lib")), line);
    }
  });

  it("counts the measured blocks in the timeline and the distributions", () => {
    const timeline = task.timeline!;
    // Failed attempts are measured too: 30 bars, 28 of them done.
    assert.equal(timeline.blocks, 30);
    assert.equal(timeline.bars.length, 30);
    assert.ok(timeline.workers.length >= 1 && timeline.workers.length <= 2);
    assert.equal(timeline.completed.at(-1)![1], 28);
    assert.ok(timeline.running.some(([, n]) => n >= 1));
    for (const [lane, start, end] of timeline.bars) {
      assert.ok(lane < timeline.workers.length && start >= 0 && end >= start);
    }
    const wall = task.distributions.find((d) => d.name === "wall_seconds")!;
    assert.equal(wall.count, 30);
    assert.ok(wall.max >= 0.39 && wall.min <= wall.median && wall.median <= wall.max);
    assert.equal(wall.histogram.counts.reduce((a, b) => a + b, 0), 30);
    const names = task.map.metrics.map((m) => m.name);
    assert.deepEqual(names, [
      "wall_seconds",
      "cpu_seconds",
      "peak_rss_bytes",
      "io_read_bytes",
      "io_write_bytes",
      "returned_at",
      "failures",
    ]);
    assert.ok(task.map.workers !== null);
    // No GPU figures in this run's ledger (NaN and 0): no GPU layer, distribution or track.
    assert.deepEqual(task.distributions.map((d) => d.name), [
      "wall_seconds",
      "cpu_seconds",
      "peak_rss_bytes",
      "io_read_bytes",
      "io_write_bytes",
    ]);
    assert.equal(task.timeline!.gpu, null);
    assert.ok(task.slowest.every((b) => b.gpu_util_pct === null && b.gpu_mem_bytes === null));
  });

  it("quantises a metric so that the slowest block has the top value", () => {
    const wall = task.map.metrics.find((m) => m.name === "wall_seconds")!;
    const bytes = new Uint8Array(Buffer.from(wall.values, "base64"));
    assert.equal(bytes[positionOf(1, 1)], 255);
    assert.equal(wall.measured_cells, 30);
    const failures = task.map.metrics.find((m) => m.name === "failures")!;
    assert.equal(failures.hi, 2);
    assert.equal(new Uint8Array(Buffer.from(failures.values, "base64"))[positionOf(2, 3)], 255);
  });

  it("a frame has the same states and runs, and no metrics", () => {
    const frame = buildReport(trk, { parts: "frame" });
    assert.equal(frame.parts, "frame");
    const t = frame.tasks[0]!;
    assert.deepEqual(t.map.state, task.map.state);
    assert.deepEqual(t.map.metrics, []);
    assert.equal(t.map.workers, null);
    assert.equal(t.timeline, null);
    assert.deepEqual(t.runs, task.runs);
    assert.equal(t.runs.length, 1);
    assert.equal(t.runs[0]!.blocks_completed, 28);
  });

  it("a map of a few cells aggregates its blocks exactly", () => {
    const small = buildReport(trk, { maxCells: 6 }).tasks[0]!;
    assert.deepEqual(small.map.cell_shape, [3, 2]);
    assert.deepEqual(small.map.shape, [2, 3]);
    const codes = codesOf(small);
    const fraction = new Uint8Array(Buffer.from(small.map.state.done_fraction!, "base64"));
    const one = codesOf(task);
    for (let ci = 0; ci < 2; ci++) {
      for (let cj = 0; cj < 3; cj++) {
        let blocks = 0, done = 0, failed = 0;
        for (let i = ci * 3; i < Math.min(6, ci * 3 + 3); i++) {
          for (let j = cj * 2; j < Math.min(5, cj * 2 + 2); j++) {
            blocks++;
            if (one[positionOf(i, j)] === CELL_DONE) done++;
            if (one[positionOf(i, j)] === CELL_FAILED) failed++;
          }
        }
        const c = ci * 3 + cj;
        assert.equal(fraction[c], Math.round((255 * done) / blocks), `cell ${ci},${cj}`);
        const expected = failed > 0
          ? CELL_FAILED
          : done === blocks
          ? CELL_DONE
          : done === 0
          ? CELL_NEVER_RUN
          : CELL_PARTLY_DONE;
        assert.equal(codes[c], expected, `cell ${ci},${cj}`);
      }
    }
  });
});

// Issue 48 item 8: 2 workers with a window of several blocks each. `sent_at`..`returned_at`
// holds the time a block waited in its worker's window: drawn from it, the chart showed 4
// running and each bar twice its block. Drawn from the time each block ran, neither.
describe("the timeline of 2 workers", () => {
  const BLOCK_MS = 250;
  let timeline: TaskView["timeline"] = null;
  before(() => {
    const dir = path.join(root, "two-workers");
    fs.mkdirSync(dir);
    fs.writeFileSync(
      path.join(dir, "pipeline.mjs"),
      `
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default { tasks: [{
  id: "even",
  totalRoi: { offset: [0], shape: [100] },
  readRoi: { offset: [0], shape: [10] },
  writeRoi: { offset: [0], shape: [10] },
  readWriteConflict: false,
  maxWorkers: 2,
  async process() { await sleep(${BLOCK_MS}); },
}] };
`,
    );
    const r = cli(
      ["run", "pipeline.mjs", "--tracking-dir", "trk", "--resource-tracking", "--no-progress"],
      dir,
    );
    assert.equal(r.code, 0, r.stderr);
    timeline = buildReport(path.join(dir, "trk")).tasks[0]!.timeline;
  });

  it("never shows more blocks running than workers", () => {
    assert.equal(timeline!.blocks, 10);
    assert.equal(timeline!.workers.length, 2);
    const most = Math.max(...timeline!.running.map(([, n]) => n));
    assert.ok(most <= 2, `${most} running at once with 2 workers`);
    assert.equal(most, 2);
  });

  it("draws each bar as long as its block ran, one at a time per worker", () => {
    for (const [, start, end] of timeline!.bars) {
      const ms = (end - start) * 1000;
      assert.ok(ms >= BLOCK_MS - 5 && ms < BLOCK_MS + 60, `a bar of ${ms} ms`);
    }
    for (let lane = 0; lane < 2; lane++) {
      const bars = timeline!.bars.filter((b) => b[0] === lane).sort((a, b) => a[1] - b[1]);
      for (let k = 1; k < bars.length; k++) {
        assert.ok(bars[k]![1] >= bars[k - 1]![2] - 0.005, `worker ${lane}: overlapping bars`);
      }
    }
  });

  // Issue 48 item 11: a resumed run's row said "completed 10" without saying all were skipped.
  it("gives a resumed run's skipped blocks beside its completed ones", () => {
    const dir = path.join(root, "two-workers");
    const r = cli(["run", "pipeline.mjs", "--tracking-dir", "trk", "--no-progress"], dir);
    assert.equal(r.code, 0, r.stderr);
    const runs = buildReport(path.join(dir, "trk")).tasks[0]!.runs;
    assert.deepEqual(
      runs.map((run) => [run.blocks_completed, run.blocks_skipped, run.blocks_failed]),
      [[10, 0, 0], [10, 10, 0]],
    );
  });
});

// Issue 49 item 3: the GPU figures as map layers, distributions and a track per worker.
describe("a store with GPU figures", () => {
  let blocks: GpuBlock[] = [];
  let gpu: TaskView;
  const bytesOf = (t: TaskView, name: string) => {
    const layer = t.map.metrics.find((m) => m.name === name)!;
    return { layer, bytes: new Uint8Array(Buffer.from(layer.values, "base64")) };
  };
  const level = (v: number, lo: number, hi: number) => 1 + Math.round((254 * (v - lo)) / (hi - lo));
  const hasUtil = (b: GpuBlock) => !Number.isNaN(b.util);

  before(async () => {
    const dir = path.join(root, "gpu", "predict");
    blocks = await writeGpuStore(dir);
    gpu = buildReport(dir).tasks[0]!;
  });

  it("offers the two GPU layers, with each block's exact figure", () => {
    assert.deepEqual(task.map.metrics.map((m) => m.name).includes("gpu_util_pct"), false);
    assert.deepEqual(gpu.map.metrics.map((m) => m.name), [
      "wall_seconds",
      "cpu_seconds",
      "peak_rss_bytes",
      "io_read_bytes",
      "io_write_bytes",
      "gpu_util_pct",
      "gpu_mem_bytes",
      "returned_at",
      "failures",
    ]);
    const util = bytesOf(gpu, "gpu_util_pct");
    assert.deepEqual(
      { unit: util.layer.unit, aggregate: util.layer.aggregate, scale: util.layer.scale },
      { unit: "percent", aggregate: "mean", scale: "linear" },
    );
    assert.deepEqual([util.layer.lo, util.layer.hi, util.layer.measured_cells], [20, 80, 11]);
    assert.deepEqual(
      [...util.bytes],
      blocks.map((b) => (hasUtil(b) ? level(b.util, 20, 80) : 0)),
    );
    const mem = bytesOf(gpu, "gpu_mem_bytes");
    const mems = blocks.map((b) => b.mem).filter((m) => m > 0);
    const [lo, hi] = [Math.min(...mems), Math.max(...mems)];
    assert.deepEqual([mem.layer.lo, mem.layer.hi, mem.layer.measured_cells], [lo, hi, 10]);
    assert.equal(hi, 4 * 2 ** 31 + 11, "both words of the uint64");
    assert.deepEqual(
      { unit: mem.layer.unit, aggregate: mem.layer.aggregate, scale: mem.layer.scale },
      { unit: "bytes", aggregate: "max", scale: "linear" },
    );
    assert.deepEqual([...mem.bytes], blocks.map((b) => (b.mem > 0 ? level(b.mem, lo, hi) : 0)));
  });

  it("gives their distributions over the blocks with a figure", () => {
    const byName = new Map(gpu.distributions.map((d) => [d.name, d]));
    const util = byName.get("gpu_util_pct")!;
    const utils = blocks.filter(hasUtil).map((b) => b.util).sort((a, b) => a - b);
    assert.equal(util.unit, "percent");
    assert.deepEqual([util.count, util.min, util.median, util.max], [11, 20, utils[5], 80]);
    assert.equal(util.mean, utils.reduce((a, b) => a + b, 0) / 11);
    assert.equal(util.histogram.counts.reduce((a, b) => a + b, 0), 11);
    // 20, 35, 50, 65 and 80 fall in bins 0, 10, 20, 30 and 39 (the last bin is closed).
    const counts = util.histogram.counts;
    for (const [bin, value] of [[0, 20], [10, 35], [20, 50], [30, 65], [39, 80]] as const) {
      assert.equal(counts[bin], utils.filter((u) => u === value).length, `bin of ${value}%`);
    }
    const mem = byName.get("gpu_mem_bytes")!;
    assert.deepEqual([mem.unit, mem.count], ["bytes", 10]);
    assert.equal(mem.max, 4 * 2 ** 31 + 11);
    assert.equal(mem.histogram.counts.reduce((a, b) => a + b, 0), 10);
    assert.equal(byName.get("wall_seconds")!.count, 12);
  });

  it("gives the timeline each bar's figures and each worker's utilisation", () => {
    const t = gpu.timeline!;
    assert.deepEqual(t.workers, [0, 1]);
    assert.equal(t.bars.length, 12);
    const g = t.gpu!;
    t.bars.forEach(([lane, start, end, position], k) => {
      const b = blocks[position]!;
      assert.equal(t.workers[lane], b.worker);
      assert.ok(Math.abs(start - (b.start - t.t0)) < 1e-6 && Math.abs(end - start - b.wall) < 1e-6);
      assert.equal(g.util_pct[k], hasUtil(b) ? b.util : null, `bar of block ${position}`);
      assert.equal(g.mem_bytes[k], b.mem > 0 ? b.mem : null, `bar of block ${position}`);
    });
    for (const w of [0, 1]) {
      const of = blocks.filter((b) => b.worker === w && hasUtil(b));
      const mean = of.reduce((a, b) => a + b.util * b.wall, 0) /
        of.reduce((a, b) => a + b.wall, 0);
      assert.ok(Math.abs(g.worker_util_pct[w]! - mean) < 0.006, `worker ${w}: ${mean}`);
    }
  });

  it("lists the slowest blocks' exact figures", () => {
    assert.equal(gpu.slowest.length, 12);
    for (const d of gpu.slowest) {
      const b = blocks[d.position]!;
      assert.equal(d.gpu_util_pct, hasUtil(b) ? b.util : null);
      assert.equal(d.gpu_mem_bytes, b.mem > 0 ? b.mem : null);
    }
  });

  it("aggregates a cell of several blocks: mean utilisation, largest memory", () => {
    const small = buildReport(path.join(root, "gpu", "predict"), { maxCells: 4 }).tasks[0]!;
    const [c0, c1] = small.map.cell_shape;
    const [n0, n1] = small.map.shape;
    assert.ok(c0! * c1! > 1, `cells of ${small.map.cell_shape}`);
    const utilOf: (number | null)[] = [];
    const memOf: (number | null)[] = [];
    for (let i = 0; i < n0!; i++) {
      for (let j = 0; j < n1!; j++) {
        const of = blocks.filter((b) =>
          Math.floor(Math.floor(b.position / 3) / c0!) === i &&
          Math.floor((b.position % 3) / c1!) === j
        );
        const u = of.filter(hasUtil);
        utilOf.push(u.length ? u.reduce((a, b) => a + b.util, 0) / u.length : null);
        const m = of.filter((b) => b.mem > 0).map((b) => b.mem);
        memOf.push(m.length ? Math.max(...m) : null);
      }
    }
    for (const [name, values] of [["gpu_util_pct", utilOf], ["gpu_mem_bytes", memOf]] as const) {
      const { layer, bytes } = bytesOf(small, name);
      const present = values.filter((v): v is number => v !== null);
      const [lo, hi] = [Math.min(...present), Math.max(...present)];
      assert.deepEqual([layer.lo, layer.hi], [lo, hi], name);
      assert.deepEqual([...bytes], values.map((v) => (v === null ? 0 : level(v, lo, hi))), name);
    }
  });

  it("a store whose GPU arrays keep their fills has no GPU layer, distribution or track", async () => {
    const dir = path.join(root, "gpu-none", "predict");
    await writeGpuStore(dir, { gpu: false });
    const none = buildReport(dir).tasks[0]!;
    const names = none.map.metrics.map((m) => m.name);
    assert.ok(!names.includes("gpu_util_pct") && !names.includes("gpu_mem_bytes"), `${names}`);
    assert.ok(none.distributions.every((d) => !d.name.startsWith("gpu_")));
    assert.equal(none.distributions.length, 5);
    assert.equal(none.timeline!.gpu, null);
    assert.equal(none.timeline!.bars.length, gpuBlocks().length);
    assert.ok(none.slowest.every((b) => b.gpu_util_pct === null && b.gpu_mem_bytes === null));
  });
});

// The same from a real run: a gpu: 1 command task on two devices of the stand-in NVML
// (tests/fixtures/nvml), 37 % and 81 % busy, each block's process group holding its own bytes.
describe("the report of a run with GPU figures", () => {
  const noGcc = fakeNvmlUnavailable();
  const GCC = { timeout: 120_000, ...(noGcc === null ? {} : { skip: noGcc }) };
  const GIB4 = 4294967296;
  const UTIL = [37, 81];
  const BLOCKS = 6;

  it("draws each block's device utilisation and memory, each worker's track", GCC, () => {
    const dir = path.join(root, "gpu-run");
    fs.mkdirSync(dir);
    fs.mkdirSync(path.join(dir, "build"));
    const library = scriptedNvml(
      buildFakeNvml(path.join(dir, "build")),
      dir,
      [0, 1].map((d) => `device GPU-${d}aaa0000-0000-0000-0000-000000000000\n`).join("") +
        [0, 1].map((d) => `util ${d} ${UTIL[d]}:5\nmemory ${d} 17179869184 1000\n`).join("") +
        [0, 1].map((d) => `proc_file ${d} ${path.join(dir, `procs${d}.txt`)}\n`).join(""),
    );
    const sh = path.join(dir, "block.sh");
    fs.writeFileSync(
      sh,
      `bytes=$(( (BLOCKWISE_BLOCK_ID + 1) * ${GIB4} + 12345 ))
dev=$CUDA_VISIBLE_DEVICES
echo "$BLOCKWISE_BLOCK_ID $dev" >> ${dir}/blocks.log
sh -c 'printf "%s %s\\n" $$ '"$bytes"' > ${dir}/procs'"$dev"'.tmp; mv ${dir}/procs'"$dev"'.tmp ${dir}/procs'"$dev"'.txt; sleep 0.3'
`,
    );
    fs.writeFileSync(
      path.join(dir, "pipeline.mjs"),
      `export default { tasks: [{
  id: "predict",
  totalRoi: { offset: [0], shape: [${BLOCKS}] }, readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false,
  maxWorkers: 2, requires: { gpu: 1 }, command: ["sh", ${JSON.stringify(sh)}],
}] };\n`,
    );
    const r = cli(
      ["run", "pipeline.mjs", "--tracking-dir", "trk", "--resource-tracking", "--no-progress"]
        .concat(["--resources", "gpu=2"]),
      dir,
      { BLOCKWISE_NVML: library },
    );
    assert.equal(r.code, 0, r.stderr);
    const device = new Map(
      fs.readFileSync(path.join(dir, "blocks.log"), "utf8").trim().split("\n")
        .map((l) => l.split(" ").map(Number) as [number, number]),
    );
    assert.equal(new Set(device.values()).size, 2, "both devices ran blocks");
    const t = buildReport(path.join(dir, "trk")).tasks[0]!;
    const utilOf = (p: number) => UTIL[device.get(p)!]!;
    const memOf = (p: number) => (p + 1) * GIB4 + 12345;
    const layer = (name: string) => t.map.metrics.find((m) => m.name === name)!;
    const bytes = (name: string) => [...Buffer.from(layer(name).values, "base64")];
    const level = (v: number, lo: number, hi: number) =>
      1 + Math.round((254 * (v - lo)) / (hi - lo));
    const positions = Array.from({ length: BLOCKS }, (_, p) => p);
    assert.deepEqual([layer("gpu_util_pct").lo, layer("gpu_util_pct").hi], [37, 81]);
    assert.deepEqual(bytes("gpu_util_pct"), positions.map((p) => level(utilOf(p), 37, 81)));
    const [lo, hi] = [memOf(0), memOf(BLOCKS - 1)];
    assert.deepEqual([layer("gpu_mem_bytes").lo, layer("gpu_mem_bytes").hi], [lo, hi]);
    assert.deepEqual(bytes("gpu_mem_bytes"), positions.map((p) => level(memOf(p), lo, hi)));
    const dist = new Map(t.distributions.map((d) => [d.name, d]));
    assert.equal(dist.get("gpu_util_pct")!.count, BLOCKS);
    assert.equal(dist.get("gpu_mem_bytes")!.max, hi);
    // A command's blocks have no wall time: no slowest blocks, but GPU figures all the same,
    // and the timeline draws them from sent_at to returned_at. Each worker keeps its device:
    // its track is that device's utilisation, block by block.
    assert.deepEqual(t.slowest, []);
    const timeline = t.timeline!;
    assert.equal(timeline.blocks, BLOCKS);
    const gpu = timeline.gpu!;
    assert.equal(timeline.workers.length, 2);
    timeline.bars.forEach(([lane, , , position], k) => {
      assert.equal(gpu.util_pct[k], utilOf(position));
      assert.equal(gpu.mem_bytes[k], memOf(position));
      assert.equal(gpu.worker_util_pct[lane], utilOf(position), `worker of block ${position}`);
    });
  });
});

describe("userStack", () => {
  it("drops the compiled binary's own frames and keeps the user's, and a Python traceback whole", () => {
    assert.deepEqual(
      userStack([
        "Error: boom",
        "    at process (/home/u/pipeline.mjs:13:39)",
        "    at drain (/$bunfs/root/workers/block_worker.js:54:1986)",
        "    at <anonymous> (/$bunfs/root/workers/block_worker.js:54:3120)",
      ]),
      ["Error: boom", "    at process (/home/u/pipeline.mjs:13:39)"],
    );
    const python = [
      "Traceback (most recent call last):",
      '  File "/home/u/task.py", line 7, in process',
      "    out[i] = vol[i + 100]",
      "             ~~~^^^^^^^^^",
    ];
    assert.deepEqual(userStack(python), python);
  });
});

describe("cellShapeFor", () => {
  it("keeps a grid under the limit block by block", () => {
    assert.deepEqual(cellShapeFor([100, 100, 100], 1 << 20), [1, 1, 1]);
    assert.deepEqual(cellShapeFor([], 1 << 20), []);
  });

  it("coarsens a 10^8-block grid to at most the limit, the long axis first", () => {
    const shape = cellShapeFor([10_000, 10_000], 1 << 20);
    const cells = Math.ceil(10_000 / shape[0]!) * Math.ceil(10_000 / shape[1]!);
    assert.ok(cells <= 1 << 20 && cells > (1 << 20) / 4, `${shape} gives ${cells} cells`);
    assert.deepEqual(cellShapeFor([3, 10_000_000], 1 << 20), [1, 29]);
  });
});

describe("blockwise report", () => {
  it("writes one HTML file and says where", () => {
    const out = path.join(root, "r.html");
    const r = cli(["report", trk, "-o", out]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /^Wrote .*r\.html \([\d.]+ KB\): 1 task, 30 blocks\. Open file:\/\/.*r\.html in a browser\.\n$/,
    );
    assert.match(fs.readFileSync(out, "utf8"), /^<!doctype html>/i);
    assert.deepEqual(fs.readdirSync(root).filter((f) => f.startsWith("r.html")), ["r.html"]);
  });

  it("writes blockwise-report.html in the current folder by default", () => {
    const dir = path.join(root, "cwd");
    fs.mkdirSync(dir);
    assert.equal(cli(["report", trk], dir).code, 0);
    assert.ok(fs.existsSync(path.join(dir, "blockwise-report.html")));
  });

  it("refuses an output folder, a missing folder and a missing target (exit 2), writing nothing", () => {
    const folder = cli(["report", trk, "-o", root]);
    assert.equal(folder.code, 2);
    assert.match(
      folder.stderr,
      /Cannot write the report to .* \(-o\): it is a folder\. Name a file/,
    );
    const missing = cli(["report", trk, "-o", path.join(root, "nope", "r.html")]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /the folder .*nope does not exist\. Create it \(mkdir -p/);
    const target = cli(["report", path.join(root, "absent"), "-o", path.join(root, "x.html")]);
    assert.equal(target.code, 2);
    assert.match(target.stderr, /absent does not exist; expected a tracking store/);
    assert.ok(!fs.existsSync(path.join(root, "x.html")));
  });
});

describe("lastErrorsOf", () => {
  it("finds each wanted block's last record from the end, skipping torn and other lines", () => {
    const dir = path.join(root, "errors");
    fs.mkdirSync(dir);
    const line = (index: number[], message: string, attempt: number) =>
      JSON.stringify({
        task: "t",
        block: "0",
        index,
        attempt,
        run_id: "r",
        at: "2026-01-01T00:00:00.000Z",
        message,
        stack: [],
        permanent: false,
      });
    fs.writeFileSync(
      path.join(dir, "errors.jsonl"),
      [
        line([1, 2], "first", 1),
        line([3, 4], 'a message that says "index":[1,2]', 1),
        line([1, 2], "second", 2),
        '{"torn": tr',
        line([5, 6], "other", 1),
        "",
      ].join("\n"),
    );
    const last = lastErrorsOf(dir, new Set(["1,2", "3,4", "7,8"]));
    assert.deepEqual([...last.keys()].sort(), ["1,2", "3,4"]);
    assert.equal(last.get("1,2")!.message, "second");
    assert.equal(last.get("1,2")!.attempt, 2);
    assert.equal(last.get("3,4")!.message, 'a message that says "index":[1,2]');
    assert.equal(lastErrorsOf(path.join(root, "absent"), new Set(["1,2"])).size, 0);
  });
});

describe("distribution", () => {
  it("gives numpy's quantiles (linear interpolation), by selection, ignoring NaN", () => {
    let seed = 3;
    const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
    for (const n of [1, 2, 3, 10, 1001, 20_000]) {
      const values = new Float64Array(n + 5);
      for (let i = 0; i < n; i++) values[i] = Math.floor(random() * 50) / 7; // with duplicates
      values.fill(Number.NaN, n);
      const sorted = [...values.subarray(0, n)].sort((a, b) => a - b);
      const q = (p: number) => {
        const at = (n - 1) * p;
        const lo = Math.floor(at);
        const hi = Math.min(n - 1, lo + 1);
        return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
      };
      const d = distribution("wall_seconds", "s", values);
      assert.equal(d.count, n);
      assert.equal(d.min, sorted[0]);
      assert.equal(d.max, sorted[n - 1]);
      for (const [key, p] of [["q1", 0.25], ["median", 0.5], ["q3", 0.75]] as const) {
        assert.ok(Math.abs(d[key] - q(p)) < 1e-12, `n=${n} ${key}: ${d[key]} vs ${q(p)}`);
      }
      assert.equal(d.histogram.counts.reduce((a, b) => a + b, 0), n);
    }
    assert.equal(distribution("wall_seconds", "s", new Float64Array([Number.NaN])).count, 0);
  });
});
