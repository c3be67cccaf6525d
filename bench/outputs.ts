/**
 * Declared outputs (issue "Block outputs that are never half-written"), through the CLI with
 * `--tracking-dir`, as a user runs it:
 * (a) 100,000 blocks each writing one 4 KiB file through the full commit (stage, hash in the
 *     worker, group fsync, intent, rename, commit record, done): blocks per second of the whole
 *     process (budget: at least 10,000/s on 2 cores), and of the run alone (start to end, from
 *     `--events`); beside it, the same file work without blockwise (two processes creating,
 *     reading back and hashing the files), timed just before each repetition, since a shared
 *     machine's disk varies severalfold from minute to minute;
 * (b) the resume of those 100,000 blocks, with reconciliation (every record against the disk,
 *     the scan for unexpected files): the process's wall time (budget: under 3 s);
 * (c) 1,000,000 done blocks without outputs of a task with `version` and `params`, whose
 *     provenance is checked block by block at dispatch: the full resume's wall time (budget:
 *     under 1 s), beside the same task without provenance.
 *
 *   npx bun bench/outputs.ts [--blocks N] [--resume-blocks N] [--repetitions N]
 *   npx deno run -A bench/outputs.ts ...
 *
 * Exits 1 when a budget fails.
 */

import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { runtimeName } from "../lib/runtime/mod.ts";

const THROUGHPUT_BUDGET = 10_000;
const RECONCILE_BUDGET_S = 3;
const RESUME_BUDGET_S = 1;
const BYTES = 4096;
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const blocks = arg("--blocks", 100_000);
const resumeBlocks = arg("--resume-blocks", 1_000_000);
const repetitions = arg("--repetitions", 5);
const repo = fileURLToPath(new URL("../", import.meta.url));
const main = path.join(repo, "main.ts");
const runtime = runtimeName();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-outputs-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
let failed = false;

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const range = (xs: readonly number[], digits: number) =>
  `${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)}`;

function verdict(ok: boolean): string {
  if (!ok) failed = true;
  return ok ? "PASS" : "FAIL";
}

interface Cli {
  readonly seconds: number;
  readonly stderr: string;
}

/** The CLI under this runtime, run to its exit; throws unless it exits 0. */
function cli(args: readonly string[]): Cli {
  const command = runtime === "deno" ? ["run", "-A", "--quiet", main, ...args] : [main, ...args];
  const started = performance.now();
  const r = spawnSync(process.execPath, command, {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NO_COLOR: "1" },
  });
  const seconds = (performance.now() - started) / 1000;
  const stderr = `${r.stderr ?? ""}${r.stdout ?? ""}`;
  if (r.status !== 0) {
    throw new Error(`blockwise ${args.join(" ")} exited ${r.status}:\n${stderr.slice(-4000)}`);
  }
  return { seconds, stderr };
}

/** The run's own wall time (`run_end` of `--events`): from its start to its end. */
function runSeconds(events: string): number {
  const lines = fs.readFileSync(events, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  return lines.find((e) => e.event === "run_end").seconds;
}

function writePipeline(name: string, text: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

console.log(
  `blockwise outputs benchmark (${runtime}, ${os.cpus().length} cores; ${
    fmt(blocks)
  } blocks with outputs, ${fmt(resumeBlocks)} with provenance)`,
);

// ---- (a) and (b): commit and reconcile ------------------------------------------------------
const outputsPipeline = (root: string) =>
  writePipeline(
    `outputs-${path.basename(root)}.mjs`,
    `import fs from "node:fs";
const PAYLOAD = new Uint8Array(${BYTES});
export default { tasks: [{
  id: "files", totalRoi: { offset: [0], shape: [${blocks}] }, readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false, maxWorkers: 2,
  outputs: { o: { path: ${JSON.stringify(path.join(root, "out"))} + "/{block_id}.bin" } },
  process(block, state, context) {
    new DataView(PAYLOAD.buffer).setFloat64(0, block.id);
    fs.writeFileSync(context.outputs.o, PAYLOAD);
  },
}] };
`,
  );

// The same file work without blockwise, in the same moment: two processes each creating half
// of the files, reading them back and hashing them (no staging, rename, sync or ledger). The
// disk of a shared machine varies severalfold from minute to minute; this says how fast it was.
const floorScript = writePipeline(
  "floor.mjs",
  `import fs from "node:fs";
import { createHash } from "node:crypto";
const [folder, from, count] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
fs.mkdirSync(folder, { recursive: true });
const payload = new Uint8Array(${BYTES});
const buffer = new Uint8Array(1 << 20);
for (let i = from; i < from + count; i++) {
  const file = folder + "/" + i + ".bin";
  new DataView(payload.buffer).setFloat64(0, i);
  fs.writeFileSync(file, payload);
  const fd = fs.openSync(file, "r");
  const n = fs.readSync(fd, buffer, 0, buffer.length, 0);
  fs.closeSync(fd);
  createHash("sha256").update(buffer.subarray(0, n)).digest("hex");
}
`,
);

async function floorSeconds(root: string): Promise<number> {
  const half = Math.ceil(blocks / 2);
  const started = performance.now();
  await Promise.all([0, 1].map((k) =>
    new Promise<void>((resolve, reject) => {
      const args = [floorScript, path.join(root, `floor-${k}`), String(k * half), String(half)];
      const child = spawn(process.execPath, runtime === "deno" ? ["run", "-A", ...args] : args, {
        stdio: "inherit",
      });
      child.on(
        "exit",
        (code) => code === 0 ? resolve() : reject(new Error(`floor exited ${code}`)),
      );
    })
  ));
  const seconds = (performance.now() - started) / 1000;
  fs.rmSync(root, { recursive: true, force: true });
  settleDisk();
  return seconds;
}

/** Let the disk write back what removing the last repetition's files left, before timing more. */
function settleDisk(): void {
  spawnSync("sync");
}

const commits: { total: number; run: number }[] = [];
const reconciles: number[] = [];
const floors: number[] = [];
for (let i = 0; i < repetitions; i++) {
  const root = path.join(dir, `commit-${i}`);
  fs.mkdirSync(root);
  floors.push(await floorSeconds(path.join(dir, `floor-${i}`)));
  const file = outputsPipeline(root);
  const tracking = path.join(root, "tracking");
  const events = path.join(root, "events.jsonl");
  const first = cli(["run", file, "--tracking-dir", tracking, "--no-progress", "--events", events]);
  const written = fs.readdirSync(path.join(root, "out")).length;
  if (written !== blocks) throw new Error(`the first run left ${written} of ${blocks} files`);
  commits.push({ total: first.seconds, run: runSeconds(events) });
  const again = cli(["run", file, "--tracking-dir", tracking, "--no-progress"]);
  if (
    !again.stderr.includes(`outputs reconciled: ${blocks} recorded and present`) ||
    !again.stderr.includes(`(${blocks} skipped)`)
  ) {
    throw new Error(`the resumed run did not find every block in place:\n${again.stderr}`);
  }
  reconciles.push(again.seconds);
  fs.rmSync(root, { recursive: true, force: true });
  settleDisk();
}
const floorRates = floors.map((s) => blocks / s);
const shares = commits.map((c, i) => floors[i]! / c.total);
const rates = commits.map((c) => blocks / c.total);
const runRates = commits.map((c) => blocks / c.run);
console.log(
  `  (a) ${fmt(blocks)} blocks x 4 KiB through the full commit (CLI process): ${
    fmt(median(rates))
  } blocks/s (range ${fmt(Math.min(...rates))}-${
    fmt(Math.max(...rates))
  } over ${repetitions}; the run alone ${
    fmt(median(runRates))
  }/s; the same file work without blockwise ${fmt(median(floorRates))}/s (range ${
    fmt(Math.min(...floorRates))
  }-${fmt(Math.max(...floorRates))}), blockwise at ${
    Math.round(100 * median(shares))
  }% of it)   budget >= ${fmt(THROUGHPUT_BUDGET)}/s: ${
    verdict(median(rates) >= THROUGHPUT_BUDGET)
  }`,
);
console.log(
  `  (b) resume of the ${fmt(blocks)} blocks with reconciliation (CLI process): ${
    median(reconciles).toFixed(2)
  } s (range ${range(reconciles, 2)} s)   budget < ${RECONCILE_BUDGET_S} s: ${
    verdict(median(reconciles) < RECONCILE_BUDGET_S)
  }`,
);

// ---- (c) provenance checks on a million done blocks -----------------------------------------
const task = (recipe: string) =>
  `export default { tasks: [{ id: "noop", totalRoi: { offset: [0], shape: [${resumeBlocks}] },
  readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
  readWriteConflict: false, maxWorkers: 2, ${recipe} process() {} }] };\n`;
const variants = [
  { label: "version + params", text: task(`version: "2", params: { threshold: 0.5 },`) },
  { label: "no provenance", text: task("") },
];
const resumes = new Map<string, number[]>();
for (const [v, variant] of variants.entries()) {
  const file = writePipeline(`resume-${v}.mjs`, variant.text);
  const tracking = path.join(dir, `resume-${v}`);
  cli(["run", file, "--tracking-dir", tracking, "--no-progress"]);
  const times: number[] = [];
  for (let i = 0; i < repetitions; i++) {
    const r = cli(["run", file, "--tracking-dir", tracking, "--no-progress"]);
    if (!r.stderr.includes(`(${resumeBlocks} skipped)`)) {
      throw new Error(`the resumed run did not skip every block:\n${r.stderr.slice(-2000)}`);
    }
    times.push(r.seconds);
  }
  resumes.set(variant.label, times);
  fs.rmSync(tracking, { recursive: true, force: true });
}
const withProvenance = resumes.get("version + params")!;
const without = resumes.get("no provenance")!;
console.log(
  `  (c) full resume of ${fmt(resumeBlocks)} done blocks, version + params (CLI process): ${
    median(withProvenance).toFixed(3)
  } s (range ${range(withProvenance, 3)} s; without provenance ${
    median(without).toFixed(3)
  } s)   budget < ${RESUME_BUDGET_S} s: ${verdict(median(withProvenance) < RESUME_BUDGET_S)}`,
);

if (failed) process.exitCode = 1;
