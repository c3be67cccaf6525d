/**
 * Huge grids (issue 12 item 4): start-up time and memory must follow the frontier, not the
 * block count. Through the CLI, as a user runs it, with no-op blocks and 2 workers:
 *
 * (a) first run of a 1e9-block grid, 3-D (total 1002^3, write 1^3, read 3^3) and 1-D: time to
 *     the first line on stderr and peak RSS over the first ~10 s; then SIGINT, which must end
 *     the run with exit 130 and the store's lock released;
 * (b) resume of a 1e8-block store (400 x 500 x 500 blocks) with every block done but a handful,
 *     the store written directly with the store code: under 10 s and under 500 MB peak RSS,
 *     running exactly the pending blocks;
 * (c) `status` and `status --json` on that store: under 2 s each.
 *
 *   npx bun bench/huge.ts [--skip-first-run] [--first-run-seconds S]
 *   npx deno run -A bench/huge.ts [...]
 *
 * Peak RSS is VmHWM of the blockwise process (main thread and workers, mapped files included),
 * read from /proc. Exits 1 when a budget or a check fails.
 */

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { buildPipelineGraph } from "../lib/execute/mod.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import { runtimeName } from "../lib/runtime/mod.ts";
import { forEachBlockRun } from "../lib/tracking/block_runs.ts";
import { inspectStore } from "../lib/tracking/inspect.ts";
import { TrackingStore } from "../lib/tracking/store.ts";
import { statusKb } from "./proc_status.ts";

const RESUME_BUDGET_S = 10;
const RESUME_BUDGET_MB = 500;
const STATUS_BUDGET_S = 2;
const FIRST_OUTPUT_BUDGET_S = 1;
const PENDING = 10;

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const firstRunSeconds = Number(arg("--first-run-seconds") ?? 10);
const repo = fileURLToPath(new URL("../", import.meta.url));
const runtime = runtimeName();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-huge-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
let failed = false;

function pipelineFile(name: string, total: readonly number[]): string {
  const file = path.join(dir, `${name}.ts`);
  const zeros = total.map(() => 0);
  fs.writeFileSync(
    file,
    `export default { tasks: [{
  id: "${name}",
  totalRoi: { offset: ${JSON.stringify(zeros)}, shape: ${JSON.stringify(total)} },
  readRoi: { offset: ${JSON.stringify(zeros)}, shape: ${JSON.stringify(total.map(() => 3))} },
  writeRoi: { offset: ${JSON.stringify(total.map(() => 1))}, shape: ${
      JSON.stringify(total.map(() => 1))
    } },
  readWriteConflict: true,
  maxWorkers: 2,
  process() {},
}] };
`,
  );
  return file;
}

interface Measured {
  readonly code: number | null;
  readonly seconds: number;
  readonly firstOutputS: number | null;
  readonly peakMb: number;
  readonly stdoutBytes: number;
  readonly stderr: string;
  /** Seconds from the signal to the exit, when one was sent. */
  readonly stopS: number | null;
}

/** Run the CLI; with `interruptAfterS`, send SIGINT then (and SIGKILL 120 s later). */
async function measure(args: readonly string[], interruptAfterS?: number): Promise<Measured> {
  const cmd = runtime === "deno"
    ? ["run", "-A", "--quiet", path.join(repo, "main.ts")]
    : [path.join(repo, "main.ts")];
  const started = performance.now();
  const child = spawn(process.execPath, [...cmd, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  let stdoutBytes = 0;
  let firstOutput: number | null = null;
  const seen = () => (firstOutput ??= (performance.now() - started) / 1000);
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (c: string) => {
    seen();
    stderr = (stderr + c).slice(-6000);
  });
  child.stdout.on("data", (c: Uint8Array) => (stdoutBytes += c.byteLength));
  let peak = 0;
  const timer = setInterval(() => {
    peak = Math.max(peak, statusKb(child.pid!, "VmHWM"));
  }, 20);
  let signalled: number | null = null;
  const timers: ReturnType<typeof setTimeout>[] = [];
  if (interruptAfterS !== undefined) {
    timers.push(setTimeout(() => {
      peak = Math.max(peak, statusKb(child.pid!, "VmHWM"));
      signalled = performance.now();
      // process.kill, not child.kill: Deno's child.kill then reports the signal, not the code.
      process.kill(child.pid!, "SIGINT");
    }, interruptAfterS * 1000));
    timers.push(setTimeout(() => child.kill("SIGKILL"), (interruptAfterS + 120) * 1000));
  }
  const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
  clearInterval(timer);
  for (const t of timers) clearTimeout(t);
  const ended = performance.now();
  return {
    code,
    seconds: (ended - started) / 1000,
    firstOutputS: firstOutput,
    peakMb: peak / 1024,
    stdoutBytes,
    stderr,
    stopS: signalled === null ? null : (ended - signalled) / 1000,
  };
}

function verdict(ok: boolean): string {
  if (!ok) failed = true;
  return ok ? "PASS" : "FAIL";
}

function row(label: string, figure: string, budget: string, ok: boolean | null): void {
  console.log(
    `  ${label.padEnd(34)} ${figure.padStart(12)}   ${budget.padEnd(12)} ${
      ok === null ? "" : verdict(ok)
    }`,
  );
}

const s = (x: number | null) => (x === null ? "none" : `${x.toFixed(2)} s`);
const mb = (x: number) => `${x.toFixed(0)} MB`;

console.log(
  `blockwise huge-grid benchmark (${runtime}, ${os.cpus().length} cores, no-op blocks, 2 workers)`,
);
console.log(`  ${"".padEnd(34)} ${"figure".padStart(12)}   budget`);

// (a) First run of a 1e9-block grid, interrupted.
if (!process.argv.includes("--skip-first-run")) {
  for (
    const [name, total, label] of [
      ["giga", [1002, 1002, 1002], "3-D"],
      ["line", [1_000_000_002], "1-D"],
    ] as const
  ) {
    const file = pipelineFile(name, total);
    const tracking = path.join(dir, `tracking-${name}`);
    const m = await measure(
      ["run", file, "--tracking-dir", tracking, "--progress-interval", "1"],
      firstRunSeconds,
    );
    console.log(
      `(a) first run, 1,000,000,000 blocks (${label}), SIGINT after ${firstRunSeconds} s`,
    );
    row(
      "time to first output",
      s(m.firstOutputS),
      `< ${FIRST_OUTPUT_BUDGET_S} s`,
      (m.firstOutputS ?? Infinity) < FIRST_OUTPUT_BUDGET_S,
    );
    row(`peak RSS over ${firstRunSeconds} s`, mb(m.peakMb), "", null);
    row("exit code after SIGINT", String(m.code), "130", m.code === 130);
    row("SIGINT to exit", s(m.stopS), "", null);
    const lock = fs.existsSync(path.join(tracking, name, "blockwise.lock"));
    row("lock released", lock ? "no" : "yes", "yes", !lock);
    if (m.code !== 130) console.log(m.stderr);
    fs.rmSync(tracking, { recursive: true, force: true });
  }
}

// (b) Resume of a 1e8-block store with every block done but PENDING.
{
  const file = pipelineFile("cube", [402, 502, 502]);
  const tracking = path.join(dir, "tracking-cube");
  const storeDir = path.join(tracking, "cube");
  const t0 = performance.now();
  const pipeline = await loadPipeline(file);
  const layout = buildPipelineGraph(pipeline).layouts[0]!;
  (await TrackingStore.open(storeDir, { taskId: "cube", layout, resourceTracking: false }))
    .close();
  const done = new Uint8Array(layout.trackingCellCount);
  forEachBlockRun(layout, (_p, cell, length) => done.fill(1, cell, cell + length));
  for (let i = 0; i < PENDING; i++) {
    // Shifted by i so that the pending blocks fall on different levels.
    const position = Math.floor(((i + 0.5) * layout.blockCount) / PENDING) + i;
    done[layout.trackingCellOf(position)] = 0;
  }
  fs.writeFileSync(path.join(storeDir, "done", "c", "0", "0", "0"), done);
  console.log(
    `(b) resume, ${layout.blockCount.toLocaleString("en-US")} blocks (${
      layout.gridShape.join(" x ")
    }), ${PENDING} pending; store written in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  const m = await measure(["run", file, "--tracking-dir", tracking, "--progress-interval", "1"]);
  row(
    "time to first output",
    s(m.firstOutputS),
    `< ${FIRST_OUTPUT_BUDGET_S} s`,
    (m.firstOutputS ?? Infinity) < FIRST_OUTPUT_BUDGET_S,
  );
  row(
    "resume, start to exit",
    s(m.seconds),
    `< ${RESUME_BUDGET_S} s`,
    m.code === 0 && m.seconds < RESUME_BUDGET_S,
  );
  row("peak RSS", mb(m.peakMb), `< ${RESUME_BUDGET_MB} MB`, m.peakMb < RESUME_BUDGET_MB);
  if (m.code !== 0) console.log(`  exit ${m.code}:\n${m.stderr}`);
  const report = inspectStore(storeDir);
  row(
    "blocks done after the resume",
    report.done.toLocaleString("en-US"),
    "all",
    report.done === layout.blockCount,
  );

  // (c) status on it.
  const st = await measure(["status", storeDir]);
  row(
    "status",
    s(st.seconds),
    `< ${STATUS_BUDGET_S} s`,
    st.code === 0 && st.seconds < STATUS_BUDGET_S,
  );
  row("status peak RSS", mb(st.peakMb), "", null);
  const js = await measure(["status", storeDir, "--json"]);
  row(
    "status --json",
    s(js.seconds),
    `< ${STATUS_BUDGET_S} s`,
    js.code === 0 && js.seconds < STATUS_BUDGET_S,
  );
  row("status --json peak RSS", mb(js.peakMb), "", null);
  const map = await measure(["status", storeDir, "--map"]);
  row("status --map", s(map.seconds), "", map.code === 0 ? null : false);
  row("status --map peak RSS", mb(map.peakMb), "", null);
}

if (failed) process.exitCode = 1;
