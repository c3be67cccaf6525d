/**
 * Dependency-graph benchmark (DESIGN.md §9): "enumerating the blocks and dependencies of a
 * million-block task with conflicts (8 levels) takes under one second (daisy 2.x: about 7 s)".
 *
 * Uses daisy's own `bench_dependency_graph.py` configurations (reference §10): 3-D `valid` tasks,
 * read ROI = write ROI grown by `context` on each side. Each repetition builds the TaskLayout and
 * DependencyGraph, then visits every block in enumeration order and materialises what daisy's
 * `enumerate_all_dependencies()` does: block ID, read ROI, write ROI and its upstream list.
 * The budgeted variant collects the upstream blocks (their positions, the graph's block handles)
 * with `forEachUpstream` into one reused array; the second variant builds daisy's block-ID-sorted
 * list with `upstreamOf` (a fresh array of refs per block, sorted by computed block ID).
 *
 * Also times a scheduler drain of the 970,299-block conflict task (acquire everything ready,
 * succeed it, until finished): the graph work of a fully resumed run.
 *
 * Runtime-neutral: `npx bun bench/graph.ts` or `npx deno run -A bench/graph.ts`.
 */

import process from "node:process";
import { type BlockId, TaskLayout } from "../lib/blocks/mod.ts";
import { buildDag, DependencyGraph } from "../lib/graph/mod.ts";
import { Scheduler } from "../lib/schedule/mod.ts";

const BUDGET_MS = 1000;
const REPETITIONS = 3;
const RSS_SAMPLE_MASK = 0xffff;

interface GraphCase {
  readonly name: string;
  readonly total: number;
  readonly write: number;
  readonly context: number;
  readonly conflict: boolean;
  /** daisy 2.x (Rust) build + enumerate time in seconds, reference §10. */
  readonly daisySeconds: number;
}

const CASES: readonly GraphCase[] = [
  {
    name: "1000^3 / 10^3, context 2, conflict",
    total: 1000,
    write: 10,
    context: 2,
    conflict: true,
    daisySeconds: 7.11,
  },
  {
    name: "500^3 / 5^3, context 1, conflict",
    total: 500,
    write: 5,
    context: 1,
    conflict: true,
    daisySeconds: 7.19,
  },
  {
    name: "1000^3 / 10^3, no context/conflict",
    total: 1000,
    write: 10,
    context: 0,
    conflict: false,
    daisySeconds: 1.96,
  },
];

interface RunResult {
  readonly blocks: number;
  readonly upstreamEntries: number;
  /** Folded from every computed value so that no work can be optimised away. */
  readonly checksum: number;
}

interface Measurement {
  readonly medianMs: number;
  readonly allMs: readonly number[];
  readonly result: RunResult;
  readonly peakRss: number;
  /** RSS when timing started (after the warm-up), including what earlier work left behind. */
  readonly startRss: number;
}

let peakRss = 0;

function sampleRss(): void {
  const rss = process.memoryUsage().rss;
  if (rss > peakRss) peakRss = rss;
}

function buildGraph(c: GraphCase): { layout: TaskLayout; graph: DependencyGraph } {
  const dims = 3;
  const layout = new TaskLayout({
    totalRoi: {
      offset: new Array<number>(dims).fill(0),
      shape: new Array<number>(dims).fill(c.total),
    },
    readRoi: {
      offset: new Array<number>(dims).fill(0),
      shape: new Array<number>(dims).fill(c.write + 2 * c.context),
    },
    writeRoi: {
      offset: new Array<number>(dims).fill(c.context),
      shape: new Array<number>(dims).fill(c.write),
    },
    fit: "valid",
    readWriteConflict: c.conflict,
  });
  const graph = new DependencyGraph(buildDag([{ id: "bench", upstream: [] }]), [layout]);
  return { layout, graph };
}

function idBits(id: BlockId): number {
  return typeof id === "number" ? id % 1021 : Number(id % 1021n);
}

/** Build + enumerate with `forEachUpstream` into a reused array (the budgeted figure). */
function enumerateFast(c: GraphCase): RunResult {
  const { layout, graph } = buildGraph(c);
  const upstream: number[] = [];
  let n = 0;
  const collect = (_task: number, position: number): void => {
    upstream[n++] = position;
  };
  let blocks = 0;
  let entries = 0;
  let checksum = 0;
  for (const position of layout.allPositions()) {
    const id = layout.blockIdOf(position);
    const read = layout.readRoiOf(position);
    const write = layout.writeRoiOf(position);
    n = 0;
    graph.forEachUpstream(0, position, collect);
    entries += n;
    checksum += idBits(id) + read.offset[0]! + write.shape[2]! + (n > 0 ? upstream[n - 1]! : 0);
    if ((++blocks & RSS_SAMPLE_MASK) === 0) sampleRss();
  }
  return { blocks, upstreamEntries: entries, checksum };
}

/** The same with the block-ID-sorted `upstreamOf` list (a fresh array per block). */
function enumerateSorted(c: GraphCase): RunResult {
  const { layout, graph } = buildGraph(c);
  let blocks = 0;
  let entries = 0;
  let checksum = 0;
  for (const position of layout.allPositions()) {
    const id = layout.blockIdOf(position);
    const read = layout.readRoiOf(position);
    const write = layout.writeRoiOf(position);
    const upstream = graph.upstreamOf(0, position);
    entries += upstream.length;
    const last = upstream[upstream.length - 1];
    checksum += idBits(id) + read.offset[0]! + write.shape[2]! +
      (last === undefined ? 0 : last.position);
    if ((++blocks & RSS_SAMPLE_MASK) === 0) sampleRss();
  }
  return { blocks, upstreamEntries: entries, checksum };
}

/** Scheduler drain: acquire every ready block, succeed it, until the task is finished. */
function drainScheduler(c: GraphCase): RunResult {
  const { graph } = buildGraph(c);
  const scheduler = new Scheduler(graph, [{ maxRetries: 0 }]);
  const batch: number[] = [];
  let blocks = 0;
  let checksum = 0;
  while (!scheduler.isFinished()) {
    batch.length = 0;
    for (let p = scheduler.acquire(0); p >= 0; p = scheduler.acquire(0)) batch.push(p);
    if (batch.length === 0) throw new Error(`Scheduler stalled after ${blocks} blocks`);
    for (const p of batch) {
      scheduler.succeed(0, p);
      checksum += p % 1021;
      if ((++blocks & RSS_SAMPLE_MASK) === 0) sampleRss();
    }
  }
  scheduler.assertBalanced();
  const snapshot = scheduler.snapshot(0);
  if (snapshot.phase !== "done" || snapshot.completed !== snapshot.total) {
    throw new Error(`Scheduler drain ended unbalanced: ${JSON.stringify(snapshot)}`);
  }
  return { blocks, upstreamEntries: 0, checksum };
}

function measure(run: () => RunResult): Measurement {
  run(); // warm-up
  const startRss = process.memoryUsage().rss;
  const times: number[] = [];
  let result: RunResult | undefined;
  peakRss = 0;
  sampleRss();
  for (let i = 0; i < REPETITIONS; i++) {
    const start = performance.now();
    const r = run();
    times.push(performance.now() - start);
    sampleRss();
    if (result !== undefined && (r.blocks !== result.blocks || r.checksum !== result.checksum)) {
      throw new Error("Repetitions disagree: the benchmark is not deterministic");
    }
    result = r;
  }
  const sorted = [...times].sort((a, b) => a - b);
  return {
    medianMs: sorted[Math.floor(sorted.length / 2)]!,
    allMs: times,
    result: result!,
    peakRss,
    startRss,
  };
}

const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(0)} MB`;
const int = (n: number): string => n.toLocaleString("en-US");

/** `daisy` is daisy 2.x's time for the same work, when daisy's benchmarks measured it. */
function report(label: string, levels: number, m: Measurement, daisy: string): void {
  const rate = m.result.blocks / (m.medianMs / 1000);
  const maxRss = process.resourceUsage().maxRSS * 1024; // kilobytes
  const pass = m.medianMs < BUDGET_MS ? "PASS" : "FAIL";
  console.log(
    `  ${label.padEnd(20)} ${int(m.result.blocks).padStart(9)} blocks ${
      String(levels).padStart(2)
    } levels ${m.medianMs.toFixed(1).padStart(7)} ms ${
      int(Math.round(rate)).padStart(10)
    } blocks/s  budget < ${BUDGET_MS} ms (${daisy}) ${pass}`,
  );
  console.log(
    `  ${"".padEnd(20)} runs ${m.allMs.map((t) => t.toFixed(1)).join(", ")} ms; peak rss ${
      mb(m.peakRss)
    } (${mb(m.startRss)} at start); maxRSS ${mb(maxRss)}`,
  );
}

function main(): void {
  const v = process.versions;
  const runtime = v.bun !== undefined
    ? `bun ${v.bun}`
    : v.deno !== undefined
    ? `deno ${v.deno}`
    : `node ${v.node}`;
  console.log(
    `bench/graph.ts on ${runtime}: median of ${REPETITIONS} runs after 1 warm-up, each building the layout and graph`,
  );
  console.log(
    "peak rss: process.memoryUsage().rss sampled every 65,536 blocks during the timed runs;" +
      " maxRSS: process.resourceUsage().maxRSS, the process peak so far",
  );
  let failures = 0;
  for (const c of CASES) {
    const { layout } = buildGraph(c);
    console.log(`\n${c.name}`);
    const fast = measure(() => enumerateFast(c));
    const sorted = measure(() => enumerateSorted(c));
    if (fast.result.blocks !== layout.blockCount) {
      throw new Error(`Enumerated ${fast.result.blocks} blocks, layout has ${layout.blockCount}`);
    }
    if (sorted.result.blocks !== layout.blockCount) {
      throw new Error(`Sorted variant enumerated ${sorted.result.blocks} blocks`);
    }
    if (fast.result.upstreamEntries !== sorted.result.upstreamEntries) {
      throw new Error(
        `Upstream entries differ: forEachUpstream ${fast.result.upstreamEntries}, upstreamOf ${sorted.result.upstreamEntries}`,
      );
    }
    const daisy = `daisy 2.x: ${c.daisySeconds} s`;
    report("forEachUpstream", layout.levelCount, fast, daisy);
    report("upstreamOf (sorted)", layout.levelCount, sorted, daisy);
    console.log(
      `  self-check: ${int(fast.result.blocks)} blocks = layout.blockCount, ${
        int(fast.result.upstreamEntries)
      } upstream entries in both variants`,
    );
    if (fast.medianMs >= BUDGET_MS) failures++;
  }

  const drainCase = CASES[0]!;
  const { layout } = buildGraph(drainCase);
  console.log(`\nScheduler drain: ${drainCase.name} (the graph work of a fully resumed run)`);
  const drain = measure(() => drainScheduler(drainCase));
  if (drain.result.blocks !== layout.blockCount) {
    throw new Error(`Drain succeeded ${drain.result.blocks} blocks, expected ${layout.blockCount}`);
  }
  report("acquire + succeed", layout.levelCount, drain, "daisy 2.x: not measured");
  if (drain.medianMs >= BUDGET_MS) failures++;

  console.log(failures === 0 ? "\nall budgets met" : `\n${failures} budget(s) missed`);
  if (failures > 0) process.exitCode = 1;
}

main();
