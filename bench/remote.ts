/**
 * Remote dispatch throughput: one million no-op blocks (1-D, no conflicts) through 2 remote
 * workers over loopback TCP: `blockwise worker` processes started by the command launcher
 * (argv ["{worker}"]), authenticated, fed batches of blocks in frames. Also a 3-D case with
 * read/write conflicts, and the same 1-D case through 2 local Web Workers for comparison.
 * Budget (issue 13): at least 200,000 blocks per second without tracking.
 *
 *   bun bench/remote.ts [--blocks N]        deno run -A bench/remote.ts
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { buildPipelineGraph, localExecutorFactory, runParallel } from "../lib/execute/mod.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import { RemoteWorkers } from "../lib/remote/remote_workers.ts";
import { runtimeName } from "../lib/runtime/mod.ts";

const BUDGET = 200_000;
const argBlocks = process.argv.indexOf("--blocks");
const blocks = argBlocks > 0 ? Number(process.argv[argBlocks + 1]) : 1_000_000;
const side = Math.round(Math.cbrt(blocks));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-remote-"));
const REMOTE = `launch: { kind: "command", argv: ["{worker}"] },`;

function pipelineFile(name: string, task: string): string {
  const file = path.join(dir, `${name}.ts`);
  fs.writeFileSync(file, `export default { tasks: [ ${task} ] };\n`);
  return file;
}

const flat = (launch: string) =>
  `{ id: "noop", totalRoi: { offset: [0], shape: [${blocks}] }, readRoi: { offset: [0], shape: [1] },
     writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false, maxWorkers: 2, ${launch}
     process() {} }`;
const remoteFlat = pipelineFile("remote_flat", flat(REMOTE));
const localFlat = pipelineFile("local_flat", flat(""));
const remoteCube = pipelineFile(
  "remote_cube",
  `{ id: "noop3d", totalRoi: { offset: [0, 0, 0], shape: [${side + 2}, ${side + 2}, ${side + 2}] },
     readRoi: { offset: [0, 0, 0], shape: [3, 3, 3] }, writeRoi: { offset: [1, 1, 1], shape: [1, 1, 1] },
     readWriteConflict: true, maxWorkers: 2, ${REMOTE} process() {} }`,
);

interface Figure {
  readonly blocks: number;
  readonly seconds: number;
}

/** One run; the clock includes starting the workers (a process each) and their handshakes. */
async function measure(label: string, file: string): Promise<Figure> {
  const pipeline = await loadPipeline(file);
  const graph = buildPipelineGraph(pipeline);
  const notices: string[] = [];
  const started = performance.now();
  const remote = await RemoteWorkers.open({
    pipeline,
    logDir: path.join(dir, "logs"),
    runId: "bench",
    log: (m) => notices.push(m),
  });
  const result = await runParallel(pipeline, graph, {
    ...(remote === null ? {} : { executorFactory: remote.factory(localExecutorFactory) }),
    observer: { notice: (m) => notices.push(m) },
  });
  const seconds = (performance.now() - started) / 1000;
  await remote?.close();
  const done = result.tasks.reduce((n, t) => n + t.counters.completed, 0);
  const total = result.tasks.reduce((n, t) => n + t.counters.total, 0);
  if (done !== total) {
    throw new Error(`${label}: only ${done} of ${total} blocks completed:\n${notices.join("\n")}`);
  }
  return { blocks: total, seconds };
}

async function median(label: string, file: string, runs: number): Promise<Figure> {
  const figures: Figure[] = [];
  for (let i = 0; i < runs; i++) figures.push(await measure(label, file));
  figures.sort((a, b) => a.seconds - b.seconds);
  return figures[Math.floor(runs / 2)]!;
}

const rate = (f: Figure) => f.blocks / f.seconds;
const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const line = (f: Figure) =>
  `${fmt(f.blocks)} blocks in ${f.seconds.toFixed(3)} s = ${fmt(rate(f))} blocks/s`;

console.log(`blockwise remote dispatch benchmark (${runtimeName()}, ${os.cpus().length} cores)`);
const remote = await median("remote 1-D", remoteFlat, 3);
const local = await median("local 1-D", localFlat, 1);
const cube = await median("remote 3-D", remoteCube, 1);
const ok = rate(remote) >= BUDGET;
console.log(
  `  1-D no-op, 2 remote workers over loopback TCP: ${line(remote)} (median of 3)   budget >= ${
    fmt(BUDGET)
  }/s: ${ok ? "PASS" : "FAIL"}`,
);
console.log(
  `  1-D no-op, 2 local Web Workers (comparison):   ${line(local)}   (remote is ${
    (rate(remote) / rate(local)).toFixed(2)
  }x of local)`,
);
console.log(`  3-D no-op with conflicts, 2 remote workers:    ${line(cube)}`);
fs.rmSync(dir, { recursive: true, force: true });
if (!ok) process.exitCode = 1;
