/**
 * Dispatch throughput: one million no-op blocks (1-D, no conflicts) through 2 Web Workers,
 * beside a one-message-per-block baseline run through the same pool in the same process, and a
 * 3-D case with read/write conflicts (8 levels). Budget (DESIGN.md §9): at least 250,000 blocks
 * per second on a 2-core machine without tracking.
 *
 *   bun bench/dispatch.ts [--blocks N]        deno run -A bench/dispatch.ts
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { buildPipelineGraph, runParallel } from "../lib/execute/mod.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import { runtimeName } from "../lib/runtime/mod.ts";

const BUDGET = 250_000;
const argBlocks = process.argv.indexOf("--blocks");
const blocks = argBlocks > 0 ? Number(process.argv[argBlocks + 1]) : 1_000_000;
const side = Math.round(Math.cbrt(blocks));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-dispatch-"));

function pipelineFile(name: string, task: string): string {
  const file = path.join(dir, `${name}.ts`);
  fs.writeFileSync(file, `export default { tasks: [ ${task} ] };\n`);
  return file;
}

const flat = pipelineFile(
  "flat",
  `{ id: "noop", totalRoi: { offset: [0], shape: [${blocks}] }, readRoi: { offset: [0], shape: [1] },
     writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false, maxWorkers: 2, process() {} }`,
);
const cube = pipelineFile(
  "cube",
  `{ id: "noop3d", totalRoi: { offset: [0, 0, 0], shape: [${side + 2}, ${side + 2}, ${side + 2}] },
     readRoi: { offset: [0, 0, 0], shape: [3, 3, 3] }, writeRoi: { offset: [1, 1, 1], shape: [1, 1, 1] },
     readWriteConflict: true, maxWorkers: 2, process() {} }`,
);

interface Figure {
  readonly label: string;
  readonly blocks: number;
  readonly seconds: number;
}

async function measure(label: string, file: string, maxInFlight?: number): Promise<Figure> {
  const pipeline = await loadPipeline(file);
  const graph = buildPipelineGraph(pipeline);
  const started = performance.now();
  const result = await runParallel(
    pipeline,
    graph,
    maxInFlight === undefined ? {} : { maxInFlight },
  );
  const seconds = (performance.now() - started) / 1000;
  const done = result.tasks.reduce((n, t) => n + t.counters.completed, 0);
  const total = result.tasks.reduce((n, t) => n + t.counters.total, 0);
  if (done !== total) throw new Error(`${label}: only ${done} of ${total} blocks completed`);
  return { label, blocks: total, seconds };
}

const rate = (f: Figure) => f.blocks / f.seconds;
const fmt = (n: number) => Math.round(n).toLocaleString("en-US");

console.log(`blockwise dispatch benchmark (${runtimeName()}, ${os.cpus().length} cores)`);
const baselineBlocks = Math.min(blocks, 50_000);
const baselineFile = pipelineFile(
  "baseline",
  `{ id: "noop", totalRoi: { offset: [0], shape: [${baselineBlocks}] }, readRoi: { offset: [0], shape: [1] },
     writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false, maxWorkers: 2, process() {} }`,
);
const runs: Figure[] = [];
for (let i = 0; i < 3; i++) runs.push(await measure("batched", flat));
runs.sort((a, b) => a.seconds - b.seconds);
const batched = runs[1]!;
const baseline = await measure("one message per block", baselineFile, 1);
const conflicts = await measure("3-D with conflicts", cube);

console.log(
  `  1-D no-op, 2 workers, batched:     ${fmt(batched.blocks)} blocks in ${
    batched.seconds.toFixed(3)
  } s = ${fmt(rate(batched))} blocks/s (median of 3)   budget >= ${fmt(BUDGET)}/s: ${
    rate(batched) >= BUDGET ? "PASS" : "FAIL"
  }`,
);
console.log(
  `  1-D no-op, one message per block:  ${fmt(baseline.blocks)} blocks in ${
    baseline.seconds.toFixed(3)
  } s = ${fmt(rate(baseline))} blocks/s   (batched is ${
    (rate(batched) / rate(baseline)).toFixed(1)
  }x faster)`,
);
console.log(
  `  3-D no-op with conflicts (8 levels): ${fmt(conflicts.blocks)} blocks in ${
    conflicts.seconds.toFixed(3)
  } s = ${fmt(rate(conflicts))} blocks/s`,
);
fs.rmSync(dir, { recursive: true, force: true });
if (rate(batched) < BUDGET) process.exitCode = 1;
