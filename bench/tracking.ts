/**
 * Tracking-store benchmark (DESIGN.md §9):
 * (a) a fully resumed run of one million done blocks finishes in under one second: the CLI run
 *     spawned end to end, and the in-process part (TrackingSession.open + runParallel + close).
 *     The first run that marks them done is timed too (dispatch with tracking, through the CLI);
 * (b) `blockwise status` on the million-block store answers in under 200 ms (or, while there is
 *     no `status` command, reading the done chunk with fs and counting, said as such);
 * (c) dispatch of one million no-op blocks through 2 workers, in-process as bench/dispatch.ts
 *     does, with tracking off, with tracking, and with tracking + resource tracking: at least
 *     200,000 blocks/s with tracking and resource tracking, and the overhead against off.
 *
 *   npx bun bench/tracking.ts [--blocks N] [--repetitions N]
 *   npx deno run -A bench/tracking.ts [--blocks N] [--repetitions N]
 *
 * The CLI is spawned with the runtime running this script (`bun main.ts` or `deno run -A
 * main.ts`). Exits 1 when a budget fails.
 */

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { buildPipelineGraph, runParallel } from "../lib/execute/mod.ts";
import type { RunResult } from "../lib/run/run_types.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import type { PipelineConfig } from "../lib/pipeline/spec.ts";
import { runtimeName } from "../lib/runtime/mod.ts";
import { TrackingSession } from "../lib/tracking/mod.ts";

const RESUME_BUDGET_S = 1;
const STATUS_BUDGET_MS = 200;
const DISPATCH_BUDGET = 200_000;
const argBlocks = process.argv.indexOf("--blocks");
const blocks = argBlocks > 0 ? Number(process.argv[argBlocks + 1]) : 1_000_000;
const argReps = process.argv.indexOf("--repetitions");
const REPETITIONS = argReps > 0 ? Number(process.argv[argReps + 1]) : 3;
const repo = fileURLToPath(new URL("../", import.meta.url));
const main = path.join(repo, "main.ts");
const runtime = runtimeName();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-tracking-"));
let failed = false;
// Also when a step throws: the million-block stores are tens of megabytes.
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function verdict(ok: boolean): string {
  if (!ok) failed = true;
  return ok ? "PASS" : "FAIL";
}

/** The CLI under this runtime, run to its exit; wall seconds and output. */
function cli(args: readonly string[]): { seconds: number; code: number | null; stderr: string } {
  const command = runtime === "deno"
    ? { cmd: process.execPath, args: ["run", "-A", "--quiet", main, ...args] }
    : { cmd: process.execPath, args: [main, ...args] };
  const started = performance.now();
  const r = spawnSync(command.cmd, command.args, {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NO_COLOR: "1" },
  });
  const seconds = (performance.now() - started) / 1000;
  return { seconds, code: r.status, stderr: `${r.stderr ?? ""}${r.stdout ?? ""}` };
}

function mustSucceed(label: string, r: { code: number | null; stderr: string }): void {
  if (r.code !== 0) throw new Error(`${label} exited ${r.code}:\n${r.stderr.slice(-4000)}`);
}

const pipelineFile = path.join(dir, "million.mjs");
fs.writeFileSync(
  pipelineFile,
  `export default { tasks: [ { id: "noop", totalRoi: { offset: [0], shape: [${blocks}] },
     readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
     readWriteConflict: false, maxWorkers: 2, process() {} } ] };\n`,
);

interface InProcess {
  readonly seconds: number;
  readonly openSeconds: number;
  readonly runSeconds: number;
  readonly closeSeconds: number;
  readonly result: RunResult;
}

/** One run in this process, wired as lib/cli/run.ts wires it; tracking off when `tracking` is null. */
async function runInProcess(
  pipeline: PipelineConfig,
  tracking: { dir: string; resourceTracking: boolean } | null,
): Promise<InProcess> {
  const graph = buildPipelineGraph(pipeline);
  const t0 = performance.now();
  let session: TrackingSession | null = null;
  if (tracking !== null) {
    session = await TrackingSession.open(pipeline, graph.layouts, {
      trackingDir: tracking.dir,
      resourceTracking: tracking.resourceTracking,
      mmap: "auto",
    });
    await session.countDone();
  }
  const t1 = performance.now();
  const s = session;
  const result = await runParallel(
    pipeline,
    graph,
    s === null ? {} : {
      sink: s,
      precheck: (t) => s.precheck(t),
      alreadyDone: (t) => s.fullyDone(t),
      measure: (t) => s.measures(t),
    },
  );
  const t2 = performance.now();
  s?.close(result, 0);
  const t3 = performance.now();
  const done = result.tasks.reduce((n, t) => n + t.counters.completed, 0);
  const total = result.tasks.reduce((n, t) => n + t.counters.total, 0);
  if (done !== total) throw new Error(`only ${done} of ${total} blocks completed`);
  return {
    seconds: (t3 - t0) / 1000,
    openSeconds: (t1 - t0) / 1000,
    runSeconds: (t2 - t1) / 1000,
    closeSeconds: (t3 - t2) / 1000,
    result,
  };
}

console.log(
  `blockwise tracking benchmark (${runtime}, ${os.cpus().length} cores, ${fmt(blocks)} blocks)`,
);

// ---- (a) fully resumed run ------------------------------------------------------------------
const trackingDir = path.join(dir, "tracking");
const store = path.join(trackingDir, "noop");
const first = cli(["run", pipelineFile, "--tracking-dir", trackingDir, "--no-progress"]);
mustSucceed("the first run", first);
console.log(
  `  (a) first run, dispatch with tracking (CLI end to end):  ${fmt(blocks)} blocks in ${
    first.seconds.toFixed(3)
  } s = ${fmt(blocks / first.seconds)} blocks/s`,
);
const resumed: number[] = [];
for (let i = 0; i < REPETITIONS; i++) {
  const r = cli(["run", pipelineFile, "--tracking-dir", trackingDir, "--no-progress"]);
  mustSucceed("the resumed run", r);
  if (!r.stderr.includes(`(${blocks} skipped)`)) {
    throw new Error(`the resumed run did not skip every block:\n${r.stderr.slice(-2000)}`);
  }
  resumed.push(r.seconds);
}
const resumedS = median(resumed);
console.log(
  `  (a) fully resumed run (CLI process wall time):          ${
    resumedS.toFixed(3)
  } s (median of ${REPETITIONS}; first ${
    resumed[0]!.toFixed(3)
  } s)   budget < ${RESUME_BUDGET_S} s: ${verdict(resumedS < RESUME_BUDGET_S)}`,
);
const pipeline = await loadPipeline(pipelineFile);
const inProcess: InProcess[] = [];
for (let i = 0; i < REPETITIONS; i++) {
  inProcess.push(await runInProcess(pipeline, { dir: trackingDir, resourceTracking: false }));
}
inProcess.sort((a, b) => a.seconds - b.seconds);
const mid = inProcess[Math.floor(REPETITIONS / 2)]!;
if (mid.result.tasks[0]!.counters.skipped !== blocks) {
  throw new Error("the in-process resumed run did not skip every block");
}
console.log(
  `  (a) fully resumed, in process (open + runParallel + close): ${
    (mid.seconds * 1000).toFixed(1)
  } ms (open ${(mid.openSeconds * 1000).toFixed(1)} ms, run ${
    (mid.runSeconds * 1000).toFixed(1)
  } ms, close ${(mid.closeSeconds * 1000).toFixed(1)} ms; median of ${REPETITIONS})`,
);

// ---- (b) status -------------------------------------------------------------------------------
// `status` counts only once lib/cli/status.ts exists and the CLI knows the command.
const statusSource = path.join(repo, "lib", "cli", "status.ts");
const probe = fs.existsSync(statusSource) ? cli(["status", store, "--json"]) : null;
const statusWired = probe !== null && !/unknown command 'status'/.test(probe.stderr);
if (statusWired) {
  mustSucceed("blockwise status", probe!);
  const times: number[] = [];
  for (let i = 0; i < REPETITIONS; i++) {
    const r = cli(["status", store, "--json"]);
    mustSucceed("blockwise status", r);
    times.push(r.seconds * 1000);
  }
  const ms = median(times);
  console.log(
    `  (b) blockwise status <store> --json (CLI process wall time): ${
      ms.toFixed(1)
    } ms (median of ${REPETITIONS})   budget < ${STATUS_BUDGET_MS} ms: ${
      verdict(ms < STATUS_BUDGET_MS)
    }`,
  );
} else {
  const why = probe === null ? "no lib/cli/status.ts yet" : "the CLI has no status command yet";
  const times: number[] = [];
  let count = 0;
  for (let i = 0; i < REPETITIONS; i++) {
    const started = performance.now();
    const done = fs.readFileSync(path.join(store, "done", "c", "0"));
    count = 0;
    for (let c = 0; c < done.length; c++) count += done[c] === 1 ? 1 : 0;
    times.push(performance.now() - started);
  }
  if (count !== blocks) throw new Error(`the done chunk counts ${count} of ${blocks} blocks`);
  const ms = median(times);
  console.log(
    `  (b) ${why}: read the done chunk with fs and count instead: ${
      ms.toFixed(1)
    } ms (median of ${REPETITIONS})   budget < ${STATUS_BUDGET_MS} ms: ${
      verdict(ms < STATUS_BUDGET_MS)
    } (not the status command)`,
  );
}

// ---- (c) dispatch with and without tracking ---------------------------------------------------
type Mode = "off" | "tracking" | "tracking + resource tracking";
const modes: readonly Mode[] = ["off", "tracking", "tracking + resource tracking"];
const times = new Map<Mode, number[]>(modes.map((m) => [m, []]));
await runInProcess(pipeline, null); // warm-up: JIT and worker start-up paths
for (let i = 0; i < REPETITIONS; i++) {
  for (const mode of modes) {
    const fresh = path.join(dir, `dispatch-${i}-${mode.replace(/\W+/g, "-")}`);
    const r = await runInProcess(
      pipeline,
      mode === "off"
        ? null
        : { dir: fresh, resourceTracking: mode === "tracking + resource tracking" },
    );
    if (mode !== "off" && r.result.tasks[0]!.counters.skipped !== 0) {
      throw new Error(`${mode}: a fresh store skipped blocks`);
    }
    times.get(mode)!.push(r.seconds);
    fs.rmSync(fresh, { recursive: true, force: true });
  }
}
const off = median(times.get("off")!);
for (const mode of modes) {
  const s = median(times.get(mode)!);
  const rate = blocks / s;
  const change = (s / off - 1) * 100;
  const overhead = mode === "off"
    ? ""
    : `, overhead ${change >= 0 ? "+" : ""}${change.toFixed(1)}% vs off`;
  const budget = mode === "tracking + resource tracking"
    ? `   budget >= ${fmt(DISPATCH_BUDGET)}/s: ${verdict(rate >= DISPATCH_BUDGET)}`
    : "";
  console.log(
    `  (c) dispatch, 2 workers, ${mode.padEnd(28)} ${s.toFixed(3)} s = ${
      fmt(rate)
    } blocks/s (median of ${REPETITIONS}${overhead})${budget}`,
  );
}

if (failed) process.exitCode = 1;
