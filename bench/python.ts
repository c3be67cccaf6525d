/**
 * Python workers: 100,000 no-op blocks through 2 persistent Python workers (budget: at least
 * 20,000 blocks per second, worker start-up included), the same count in 3-D with read/write
 * conflicts, and numpy blocks (import numpy, sum a 64^3 array) as a Python task beside the same
 * work as a `command` task (`python3 -c ...`, one interpreter per block): the Python task must
 * be at least 20x faster per block. The command side runs a sample of the blocks (one
 * interpreter start per block takes about a second here) and is compared per block.
 *
 *   bun bench/python.ts [--blocks N] [--numpy-blocks N] [--command-blocks N]
 *   deno run -A bench/python.ts
 */

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import {
  buildPipelineGraph,
  type ExecutorFactory,
  localExecutorFactory,
  runParallel,
} from "../lib/execute/mod.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import { RemoteWorkers } from "../lib/remote/remote_workers.ts";
import { runtimeName } from "../lib/runtime/mod.ts";

const RATE_BUDGET = 20_000;
const SPEEDUP_BUDGET = 20;

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const blocks = arg("--blocks", 100_000);
const numpyBlocks = arg("--numpy-blocks", 1_000);
const commandBlocks = arg("--command-blocks", 30);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-python-"));

const NUMPY_WORK = "import numpy; numpy.ones((64, 64, 64)).sum()";

function pipelineFile(name: string, task: string): string {
  const file = path.join(dir, `${name}.mjs`);
  fs.writeFileSync(file, `export default { tasks: [ ${task} ] };\n`);
  return file;
}

fs.writeFileSync(
  path.join(dir, "tasks.py"),
  `def noop(block):
    pass

def numpy_sum(block):
    ${NUMPY_WORK}
`,
);

const line = (n: number, run: string) =>
  `{ id: "t", totalRoi: { offset: [0], shape: [${n}] }, readRoi: { offset: [0], shape: [1] },
     writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false, maxWorkers: 2, ${run} }`;

interface Figure {
  readonly blocks: number;
  readonly seconds: number;
  /** Blocks per second from the first completed block on (worker start-up left out). */
  readonly steady: number;
}

async function measure(file: string): Promise<Figure> {
  const pipeline = await loadPipeline(file);
  const remote = await RemoteWorkers.open({
    pipeline,
    logDir: path.join(dir, "logs"),
    runId: "bench",
    log: (m) => console.error(m),
    pythonClientDir: path.join(dir, "client"),
  });
  const factory: ExecutorFactory = remote?.factory(localExecutorFactory) ?? localExecutorFactory;
  const started = performance.now();
  let first: { at: number; done: number } | null = null;
  try {
    const result = await runParallel(pipeline, buildPipelineGraph(pipeline), {
      executorFactory: factory,
      observer: {
        progress: (tasks) => {
          const done = tasks.reduce((n, t) => n + t.counters.completed, 0);
          if (first === null && done > 0) first = { at: performance.now(), done };
        },
      },
    });
    const ended = performance.now();
    const seconds = (ended - started) / 1000;
    const done = result.tasks.reduce((n, t) => n + t.counters.completed, 0);
    const total = result.tasks.reduce((n, t) => n + t.counters.total, 0);
    if (done !== total) throw new Error(`only ${done} of ${total} blocks completed`);
    const from: { at: number; done: number } = first ?? { at: started, done: 0 };
    return { blocks: total, seconds, steady: (total - from.done) / ((ended - from.at) / 1000) };
  } finally {
    await remote?.close();
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const rate = (f: Figure) => f.blocks / f.seconds;
const verdict = (ok: boolean) => (ok ? "ok" : "OVER BUDGET");
const version = spawnSync("python3", ["--version"], { encoding: "utf8" }).stdout.trim();

console.log(
  `blockwise Python worker benchmark (${runtimeName()}, ${version}, ${os.cpus().length} cores)`,
);
try {
  const side = Math.round(Math.cbrt(blocks));
  const flat = await measure(
    pipelineFile("flat", line(blocks, `python: { module: "tasks.py", process: "noop" }`)),
  );
  const cube = await measure(pipelineFile(
    "cube",
    `{ id: "t", totalRoi: { offset: [0, 0, 0], shape: [${side + 2}, ${side + 2}, ${side + 2}] },
       readRoi: { offset: [0, 0, 0], shape: [3, 3, 3] }, writeRoi: { offset: [1, 1, 1], shape: [1, 1, 1] },
       maxWorkers: 2, python: { module: "tasks.py", process: "noop" } }`,
  ));
  console.log(
    `no-op blocks, 2 workers     ${fmt(rate(flat))} blocks/s (${fmt(flat.blocks)} in ${
      flat.seconds.toFixed(2)
    } s, start-up included)   budget >= ${fmt(RATE_BUDGET)}   ${
      verdict(rate(flat) >= RATE_BUDGET)
    }`,
  );
  console.log(`  after start-up             ${fmt(flat.steady)} blocks/s`);
  console.log(
    `3-D with conflicts          ${fmt(rate(cube))} blocks/s (${fmt(cube.blocks)} in ${
      cube.seconds.toFixed(2)
    } s, 8 levels)`,
  );
  const numpy = spawnSync("python3", ["-c", "import numpy"], { encoding: "utf8" });
  if (numpy.status !== 0) {
    console.log(
      "numpy blocks                skipped: python3 cannot import numpy (apt install python3-numpy)",
    );
  } else {
    const py = await measure(
      pipelineFile(
        "numpy",
        line(numpyBlocks, `python: { module: "tasks.py", process: "numpy_sum" }`),
      ),
    );
    const cmd = await measure(pipelineFile(
      "command",
      line(commandBlocks, `command: ["python3", "-c", ${JSON.stringify(NUMPY_WORK)}]`),
    ));
    const perPython = py.seconds / py.blocks;
    const perCommand = cmd.seconds / cmd.blocks;
    const speedup = perCommand / perPython;
    console.log(
      `numpy blocks, python task   ${(perPython * 1000).toFixed(2)} ms/block (${
        fmt(py.blocks)
      } in ${py.seconds.toFixed(2)} s, start-up included)`,
    );
    console.log(
      `numpy blocks, command task  ${(perCommand * 1000).toFixed(1)} ms/block (${
        fmt(cmd.blocks)
      } in ${cmd.seconds.toFixed(2)} s)`,
    );
    console.log(
      `speed-up                    ${speedup.toFixed(0)}x   budget >= ${SPEEDUP_BUDGET}x   ${
        verdict(speedup >= SPEEDUP_BUDGET)
      }`,
    );
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
