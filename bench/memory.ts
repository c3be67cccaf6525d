/**
 * Memory of a million-block run (DESIGN.md §9, issue "Ready for what comes next"): one million
 * blocks of a 3-D task with read/write conflicts (8 levels), 2 Web Workers, with a tracking
 * store and --resource-tracking, run through the CLI as a user would. Peak resident memory of
 * the whole process (main thread and workers, mapped tracking arrays included) is read from
 * /proc/<pid>/status (VmHWM) while it runs. Nothing forces a garbage collection.
 * Budget: under 150 MB resident.
 *
 *   npx bun bench/memory.ts [--blocks N]      npx deno run -A bench/memory.ts [--blocks N]
 *
 * The CLI runs under the runtime running this script. Exits 1 when the budget fails.
 */

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { runtimeName } from "../lib/runtime/mod.ts";
import { statusKb } from "./proc_status.ts";

const BUDGET_MB = 150;
const argBlocks = process.argv.indexOf("--blocks");
const blocks = argBlocks > 0 ? Number(process.argv[argBlocks + 1]) : 1_000_000;
const side = Math.round(Math.cbrt(blocks));
const repo = fileURLToPath(new URL("../", import.meta.url));
const runtime = runtimeName();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-memory-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));

const file = path.join(dir, "cube.ts");
fs.writeFileSync(
  file,
  `export default { tasks: [{
  id: "cube",
  totalRoi: { offset: [0, 0, 0], shape: [${side + 2}, ${side + 2}, ${side + 2}] },
  readRoi: { offset: [0, 0, 0], shape: [3, 3, 3] },
  writeRoi: { offset: [1, 1, 1], shape: [1, 1, 1] },
  readWriteConflict: true,
  maxWorkers: 2,
  process() {},
}] };
`,
);

async function measure(
  args: readonly string[],
): Promise<
  { peakMb: number; anonMb: number; fileMb: number; seconds: number; code: number | null }
> {
  const cmd = runtime === "deno"
    ? ["run", "-A", "--quiet", path.join(repo, "main.ts")]
    : [path.join(repo, "main.ts")];
  const started = performance.now();
  const child = spawn(process.execPath, [...cmd, ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (c: string) => (stderr = (stderr + c).slice(-4000)));
  let peak = 0;
  let anon = 0;
  let mapped = 0;
  const timer = setInterval(() => {
    const hwm = statusKb(child.pid!, "VmHWM");
    if (hwm > peak) {
      peak = hwm;
      anon = statusKb(child.pid!, "RssAnon");
      mapped = statusKb(child.pid!, "RssFile") + statusKb(child.pid!, "RssShmem");
    }
  }, 20);
  const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
  clearInterval(timer);
  if (code !== 0) throw new Error(`blockwise ${args.join(" ")} exited ${code}:\n${stderr}`);
  return {
    peakMb: peak / 1024,
    anonMb: anon / 1024,
    fileMb: mapped / 1024,
    seconds: (performance.now() - started) / 1000,
    code,
  };
}

console.log(
  `blockwise memory benchmark (${runtime}, ${os.cpus().length} cores, ${
    blocks.toLocaleString("en-US")
  } blocks of a 3-D task with conflicts, 2 workers)`,
);
const plain = await measure(["run", file, "--no-progress"]);
const line = (
  label: string,
  m: { peakMb: number; anonMb: number; fileMb: number; seconds: number },
) =>
  `  ${label.padEnd(40)} peak RSS ${m.peakMb.toFixed(1)} MB (anonymous ${
    m.anonMb.toFixed(1)
  }, files ${m.fileMb.toFixed(1)}; ${m.seconds.toFixed(2)} s)`;
console.log(line("no tracking:", plain));
const tracked = await measure([
  "run",
  file,
  "--no-progress",
  "--tracking-dir",
  path.join(dir, "tracking"),
  "--resource-tracking",
]);
const ok = tracked.peakMb < BUDGET_MB;
console.log(
  `${line("tracking + resource tracking:", tracked)}   budget < ${BUDGET_MB} MB: ${
    ok ? "PASS" : "FAIL"
  }`,
);
if (process.argv.includes("--variants")) {
  const t = await measure(["run", file, "--no-progress", "--tracking-dir", path.join(dir, "t2")]);
  console.log(line("tracking only:", t));
}
const mapped = (blocks * (1 + 4 + 4 + 4 + 8 + 8 + 8 + 4 + 8 + 8)) / 1024 / 1024;
console.log(
  `  (of which the mapped tracking arrays, once every block is touched: ${mapped.toFixed(1)} MB)`,
);
if (!ok) process.exitCode = 1;
