/**
 * Seeing a run (issue 30 item 4): the report and the dashboard at scale, each figure printed
 * beside its budget.
 *
 * (a) `blockwise report` of a 1,000,000-block store (100^3 blocks) with resource tracking,
 *     through the CLI as a user runs it: under 3 s and under 15 MB of HTML; and where the time
 *     goes (reading and aggregating the store, rendering the page).
 * (b) A new frame of a live run's map (`/api/frame`: status, the state layer, failures), the
 *     server's time per frame: under 200 ms for the million-block store read whole (as `serve`
 *     reads a store another process writes); the 10^8-block store read whole is printed beside
 *     it. And the frame `run --serve` makes of a 10^8-block store it holds, from the live map
 *     (lib/view/live_map.ts): the store opened as a run opens it, its first frame (one pass),
 *     then 10 frames each after 10,000 blocks committed, 100 failed blocks of the earlier runs
 *     retried with success and 100 new failures (errors.jsonl appended), as the run loop and
 *     its observers write them: under 200 ms (median), with the load average beside it.
 * (c) `blockwise serve` of a 100,000,000-block store (10,000 x 10,000 blocks, no resource
 *     tracking): first paint under 2 s, from the navigation in Chromium to the page drawn
 *     (`window.blockwiseReport.ready`); the server's time for the first document is printed.
 *     Skipped (said so) when /usr/bin/chromium is missing.
 * (d) `run --serve` with the dashboard open in Chromium: the run's extra CPU over the same run
 *     without `--serve` (user + system seconds from /usr/bin/time, median of 3 pairs,
 *     interleaved), as a share of one core over the run's wall time: under 5 %.
 *
 *   npx bun bench/report.ts [--skip-huge]
 *
 * The stores are made directly with the store code (bench/report_stores.ts). Exits 1 when a
 * budget is missed.
 */

import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { runtimeName } from "../lib/runtime/mod.ts";
import { buildReport } from "../lib/view/report_build.ts";
import { LiveStoreMap } from "../lib/view/live_map.ts";
import { errorsLogObserver } from "../lib/outputs/errors_log.ts";
import { TrackingStore } from "../lib/tracking/store.ts";
import { readStoreMetadata } from "../lib/tracking/store_metadata.ts";
import { positionOfIndex } from "../lib/tracking/grid_index.ts";
import { renderReportPage } from "../lib/view/page.ts";
import { makeSyntheticStore } from "./report_stores.ts";

const REPORT_BUDGET_S = 3;
const REPORT_BUDGET_MB = 15;
const FRAME_BUDGET_MS = 200;
const FIRST_PAINT_BUDGET_S = 2;
const SERVE_OVERHEAD_BUDGET_PCT = 5;

const repo = fileURLToPath(new URL("../", import.meta.url));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-report-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
let failed = false;

function row(what: string, figure: string, budget: string, ok: boolean | null): void {
  if (ok === false) failed = true;
  const verdict = ok === null ? "" : ok ? "PASS" : "FAIL";
  console.log(`  ${what.padEnd(52)} ${figure.padStart(12)}  ${budget.padEnd(10)} ${verdict}`);
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function timeMs(action: () => unknown, rounds: number): number {
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    action();
    times.push(performance.now() - t);
  }
  return median(times);
}

const self = [process.execPath, ...(runtimeName() === "deno" ? ["run", "-A"] : [])];
console.log(
  `bench/report.ts on ${runtimeName()}, load average ${
    os.loadavg().map((l) => l.toFixed(2)).join(" ")
  }, ${os.cpus().length} cores`,
);

// (a) The report of a million-block store.
const million = path.join(dir, "million");
fs.mkdirSync(million);
const made = await makeSyntheticStore(million, "segment", [100, 100, 100], true);
console.log(
  `\n(a) blockwise report, ${made.blocks.toLocaleString("en")} blocks with resource tracking`,
);
{
  const out = path.join(dir, "report.html");
  const times: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    const r = spawnSync(self[0]!, [
      ...self.slice(1),
      path.join(repo, "main.ts"),
      "report",
      million,
      "-o",
      out,
    ], {
      encoding: "utf8",
    });
    times.push((performance.now() - t) / 1000);
    if (r.status !== 0) {
      console.log(r.stdout, r.stderr);
      failed = true;
    }
  }
  const seconds = median(times);
  const mb = fs.statSync(out).size / 1e6;
  row(
    "report, CLI wall time (median of 3)",
    `${seconds.toFixed(2)} s`,
    `< ${REPORT_BUDGET_S} s`,
    seconds < REPORT_BUDGET_S,
  );
  row(
    "report, HTML size",
    `${mb.toFixed(1)} MB`,
    `< ${REPORT_BUDGET_MB} MB`,
    mb < REPORT_BUDGET_MB,
  );
  let data = buildReport(million);
  const build = timeMs(() => (data = buildReport(million)), 3);
  const render = timeMs(() => renderReportPage(data), 3);
  row("  of which reading and aggregating the store", `${build.toFixed(0)} ms`, "", null);
  row("  of which rendering the page (JSON, compression)", `${render.toFixed(0)} ms`, "", null);
}

// The 10^8-block store of (b) and (c).
const skipHuge = process.argv.includes("--skip-huge");
const huge = path.join(dir, "huge");
let hugeMadeIn = 0;
if (!skipHuge) {
  fs.mkdirSync(huge);
  const t = performance.now();
  await makeSyntheticStore(huge, "cells", [10_000, 10_000], false);
  hugeMadeIn = (performance.now() - t) / 1000;
}

// (b) Frames of a live run's map.
console.log("\n(b) a new frame of the map (/api/frame), server time");
{
  const frame = timeMs(() => buildReport(million, { parts: "frame" }), 5);
  row(
    "frame of the 1,000,000-block store (median of 5)",
    `${frame.toFixed(0)} ms`,
    `< ${FRAME_BUDGET_MS} ms`,
    frame < FRAME_BUDGET_MS,
  );
  if (!skipHuge) {
    const whole = timeMs(() => buildReport(huge, { parts: "frame" }), 3);
    row(
      "frame of 10^8 blocks read whole (median of 3)",
      `${whole.toFixed(0)} ms`,
      "",
      null,
    );
    await liveFrames(huge);
  }
}

/**
 * Frames of the 10^8-block store as `run --serve` makes them while a run holds it (see (b) in
 * the module comment).
 */
async function liveFrames(target: string): Promise<void> {
  const storeDir = path.join(target, "cells");
  const layout = readStoreMetadata(storeDir).layout;
  const store = await TrackingStore.open(storeDir, {
    taskId: "cells",
    layout,
    resourceTracking: false,
  });
  try {
    const map = new LiveStoreMap(store);
    const held = (d: string) => (d === map.path ? map : null);
    const frame = () => buildReport(target, { parts: "frame", held });
    const first = timeMs(frame, 1);
    const errors = errorsLogObserver({ storeOf: () => storeDir, runId: "bench-live" });
    // The never-run slab (the last 2 % of rows), committed in grid order from its start.
    let next = layout.blockCount - Math.max(1, Math.floor(layout.gridShape[0]! / 50)) *
        layout.gridShape[1]!;
    const times: number[] = [];
    let last = frame();
    for (let round = 0; round < 10; round++) {
      const retried = last.status.stores[0]!.failed_blocks.slice(0, 100);
      for (const b of retried) {
        const position = positionOfIndex(layout, b.index);
        store.markDone(layout.trackingCellOf(position));
        map.touch(b.index);
      }
      for (let i = 0; i < 10_000; i++, next++) {
        const cell = layout.trackingCellOf(next);
        const index = layout.gridIndexOf(next);
        if (i % 100 === 50) {
          store.addFailure(cell);
          errors.blockFailed!({
            taskId: "cells",
            blockId: layout.blockIdOf(next),
            index,
            attempt: 1,
            message: "ValueError: segmentation produced no objects",
            stack: "ValueError: segmentation produced no objects\n    at process (pipeline.py:12)",
            permanent: false,
          });
        } else {
          store.markDone(cell);
        }
        map.touch(index);
      }
      const t = performance.now();
      last = frame();
      times.push(performance.now() - t);
    }
    const ms = median(times);
    row("run --serve, 10^8 blocks: first frame (one pass)", `${first.toFixed(0)} ms`, "", null);
    row(
      "run --serve, 10^8 blocks: live frame (median of 10)",
      `${ms.toFixed(0)} ms`,
      `< ${FRAME_BUDGET_MS} ms`,
      ms < FRAME_BUDGET_MS,
    );
    console.log(
      `    load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}; each frame after ` +
        `10,000 commits, 100 retries and 100 failures; slowest ${Math.max(...times).toFixed(0)} ms`,
    );
  } finally {
    store.close();
  }
}

// (c) serve of a 10^8-block store.
if (!skipHuge) {
  console.log(
    `\n(c) blockwise serve, ${(1e8).toLocaleString("en")} blocks (made in ${
      hugeMadeIn.toFixed(1)
    } s)`,
  );
  const full = timeMs(() => buildReport(huge), 1);
  row("server time of the first document (/api/report)", `${full.toFixed(0)} ms`, "", null);
  const paint = await firstPaint(huge);
  if (paint === null) {
    console.log(
      "  first paint: skipped, /usr/bin/chromium is not installed (apt-get install chromium)",
    );
  } else {
    row(
      "first paint in Chromium (navigation to drawn)",
      `${paint.toFixed(2)} s`,
      `< ${FIRST_PAINT_BUDGET_S} s`,
      paint < FIRST_PAINT_BUDGET_S,
    );
  }
}

// (d) The cost of run --serve with a page open.
if (fs.existsSync("/usr/bin/chromium") && fs.existsSync("/usr/bin/time")) {
  console.log("\n(d) run --serve with the dashboard open: 2,000 blocks of 10 ms, 2 workers");
  const overhead: number[] = [];
  for (let round = 0; round < 3; round++) {
    const plain = await timedRun(false);
    const served = await timedRun(true);
    overhead.push((100 * (served.cpu - plain.cpu)) / served.wall);
  }
  const pct = median(overhead);
  row(
    "extra CPU of --serve, share of one core",
    `${pct.toFixed(1)} %`,
    `< ${SERVE_OVERHEAD_BUDGET_PCT} %`,
    pct < SERVE_OVERHEAD_BUDGET_PCT,
  );
} else {
  console.log("\n(d) run --serve: skipped, /usr/bin/chromium or /usr/bin/time is missing");
}

/** One run of 2,000 10-ms blocks; with `serve`, a Chromium page watches it. */
async function timedRun(serve: boolean): Promise<{ wall: number; cpu: number }> {
  const runDir = fs.mkdtempSync(path.join(dir, "run-"));
  fs.writeFileSync(
    path.join(runDir, "p.mjs"),
    `const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default { tasks: [{ id: "t", totalRoi: { offset: [0, 0], shape: [400, 500] },
  readRoi: { offset: [0, 0], shape: [10, 10] }, writeRoi: { offset: [0, 0], shape: [10, 10] },
  readWriteConflict: false, maxWorkers: 2, async process() { await sleep(10); } }] };
`,
  );
  const args = [
    ...self,
    path.join(repo, "main.ts"),
    "run",
    "p.mjs",
    "--tracking-dir",
    "trk",
    "--no-progress",
  ];
  if (serve) args.push("--serve", "127.0.0.1:0");
  const child = spawn("/usr/bin/time", ["-f", "TIME %e %U %S", ...args], {
    cwd: runDir,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  let browser: { close(): Promise<void> } | null = null;
  child.stderr!.on("data", async (chunk: Buffer) => {
    stderr += chunk.toString();
    const url = stderr.match(/Dashboard of this run: (http:\/\/\S+)/)?.[1];
    if (serve && url !== undefined && browser === null) {
      const { default: puppeteer } = await import("puppeteer-core");
      const b = await puppeteer.launch({
        executablePath: "/usr/bin/chromium",
        args: ["--no-sandbox", "--headless=new"],
      });
      browser = b;
      await (await b.newPage()).goto(url).catch(() => {});
    }
  });
  await exited;
  await (browser as { close(): Promise<void> } | null)?.close();
  const m = stderr.match(/TIME ([\d.]+) ([\d.]+) ([\d.]+)/);
  if (m === null) throw new Error(`no timing from /usr/bin/time: ${stderr}`);
  return { wall: Number(m[1]), cpu: Number(m[2]) + Number(m[3]) };
}

/** Seconds from navigating to `serve`'s page to the page drawn, or null without Chromium. */
async function firstPaint(target: string): Promise<number | null> {
  if (!fs.existsSync("/usr/bin/chromium")) return null;
  const { default: puppeteer } = await import("puppeteer-core");
  const server = spawn(self[0]!, [
    ...self.slice(1),
    path.join(repo, "main.ts"),
    "serve",
    target,
    "--listen",
    "127.0.0.1:0",
  ], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let said = "";
      server.stdout!.on("data", (chunk: Buffer) => {
        said += chunk.toString();
        const m = said.match(/http:\/\/\S+/);
        if (m) resolve(m[0]);
      });
      server.on("exit", (code) => reject(new Error(`serve exited with ${code}: ${said}`)));
    });
    const browser = await puppeteer.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--no-sandbox", "--headless=new"],
    });
    try {
      const page = await browser.newPage();
      const t = performance.now();
      await page.goto(url);
      await page.waitForFunction(
        () =>
          (globalThis as { blockwiseReport?: { ready: boolean } }).blockwiseReport?.ready === true,
        { timeout: 60_000, polling: 20 },
      );
      return (performance.now() - t) / 1000;
    } finally {
      await browser.close();
    }
  } finally {
    server.kill("SIGTERM");
  }
}

console.log(failed ? "\nSome budgets were missed." : "\nEvery budget met.");
process.exit(failed ? 1 : 0);
