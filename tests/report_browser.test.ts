/**
 * What a user sees, in a real Chromium, of real runs (issue 30's browser tests):
 * - `report.html` of a run with failures, from file://: the counts equal `status --json`, the
 *   map pixel of a failed block has the failure colour and of a done block the done colour,
 *   the slowest block listed is the one whose process slept longest; no console error;
 * - the report of a million-block store (inlined compressed) opens with the same counts;
 * - `blockwise serve` during a run: the done count on the page rises and ends at the total;
 * - `run --serve`: the live panel lists running blocks, then says the run finished;
 * - the report of a GPU task's store (scripted GPU figures, issue 49): the two GPU layers with
 *   their colours and hover values, their distributions, the per-worker utilisation track with
 *   its hover text, the slowest blocks' figures; a run without GPU figures offers no GPU layer.
 * Screenshots of each page go to test-screenshots/.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Browser, Page } from "puppeteer-core";
import { cantorNumber } from "../lib/blocks/mod.ts";
import { makeSyntheticStore } from "../bench/report_stores.ts";
import { BROWSER_TEST, hexOf, launchChromium, watchPage } from "./helpers/chromium.ts";
import { cellColor, counts, hover, noProblems, shot } from "./helpers/page_probe.ts";
import { gpuBlocks, NO_UTIL, writeGpuStore } from "./helpers/gpu_store.ts";
import { viridis } from "../lib/view/client/colors.ts";
import { pythonMissing } from "./fixtures/python_peer.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const BUN = path.join(REPO, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO, "main.ts");
const root = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-report-browser-"));
let browser: Browser | null = null;
const children: ChildProcess[] = [];
after(async () => {
  for (const c of children) c.kill("SIGKILL");
  await browser?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const DONE = "#2e9e44";
const FAILED = "#d62728";

function pipeline(blocks: [number, number], sleepMs: string): string {
  return `
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default { tasks: [{
  id: "grid",
  totalRoi: { offset: [0, 0], shape: [${blocks[0] * 10}, ${blocks[1] * 10}] },
  readRoi: { offset: [0, 0], shape: [10, 10] },
  writeRoi: { offset: [0, 0], shape: [10, 10] },
  readWriteConflict: false,
  maxWorkers: 2,
  maxRetries: 0,
  async process(block) {
    const [i, j] = block.index;
    if (i === 2 && j === 3) throw new Error("bad block 2,3");
    await sleep(${sleepMs});
  },
}] };
`;
}

function folderWith(name: string, text: string): string {
  const dir = path.join(root, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, "pipeline.mjs"), text);
  return dir;
}

function cli(args: readonly string[], cwd: string) {
  const r = spawnSync(BUN, [MAIN, ...args], { cwd, encoding: "utf8", timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function page(url: string): Promise<{ page: Page; problems: ReturnType<typeof watchPage> }> {
  browser ??= await launchChromium();
  const p = await browser.newPage();
  const problems = watchPage(p);
  await p.goto(url);
  await p.waitForFunction(() => globalThis.blockwiseReport?.ready === true, { timeout: 60_000 });
  return { page: p, problems };
}

/** Start `bun main.ts ...args` and wait for its stdout or stderr to show an http:// URL. */
async function startWithUrl(args: readonly string[], cwd: string, pattern: RegExp) {
  const child = spawn(BUN, [MAIN, ...args], { cwd, env: { ...process.env, NO_COLOR: "1" } });
  children.push(child);
  let said = "";
  child.stdout!.on("data", (c: Buffer) => (said += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (said += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const url = said.match(pattern)?.[1];
    if (url !== undefined) return { child, url, exited, said: () => said };
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no URL: ${said}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function doneShown(p: Page): Promise<number> {
  return Number((await counts(p, "grid"))["done"]);
}

describe("reports and dashboards of real runs, in Chromium", () => {
  it("report.html from file:// shows what status --json says", BROWSER_TEST, async () => {
    // Block (1,1) sleeps longest; (2,3) fails.
    const dir = folderWith("report", pipeline([6, 5], "i === 1 && j === 1 ? 400 : 5"));
    assert.equal(
      cli(["run", "pipeline.mjs", "--tracking-dir", "trk", "--resource-tracking"], dir).code,
      1,
    );
    const made = cli(["report", "trk", "-o", "report.html"], dir);
    assert.equal(made.code, 0, made.stderr);
    const status = JSON.parse(cli(["status", "trk", "--json"], dir).stdout);
    const store = status.stores[0];
    const { page: p, problems } = await page(pathToFileURL(path.join(dir, "report.html")).href);
    const shown = await counts(p, "grid");
    for (const key of ["blocks", "done", "failed", "pending"]) {
      assert.equal(Number(shown[key]), store[key], `${key} shown ${shown[key]}`);
    }
    assert.equal(await cellColor(p, "grid", [2, 3]), FAILED);
    assert.equal(await cellColor(p, "grid", [0, 0]), DONE);
    // No GPU figures in this run's ledger: no GPU layer, distribution or track.
    const layers = await p.evaluate(() => globalThis.blockwiseReport!.layers("grid"));
    assert.ok(layers.includes("wall_seconds") && !layers.some((l) => l.startsWith("gpu_")));
    assert.equal(await p.$('[data-chart^="distribution:gpu_"]'), null);
    assert.equal(
      await p.$eval('[data-chart="gpu-track"]', (el) => (el as HTMLElement).hidden),
      true,
    );
    const slowest = await p.$eval(
      'section[data-task="grid"] [data-slowest-rank="1"]',
      (row) => Array.from(row.querySelectorAll("td"), (td) => td.textContent ?? ""),
    );
    assert.equal(slowest[1], String(cantorNumber([1, 1])), slowest.join(" | "));
    assert.equal(slowest[2], "(1, 1)", slowest.join(" | "));
    // The failure's stack, with the user's frame and without blockwise's own (issue 48).
    const stack = await p.$eval(
      'section[data-task="grid"] [data-first-traceback] pre',
      (el) => el.textContent ?? "",
    );
    assert.match(stack, /^Error: bad block 2,3\n\s+at .*pipeline\.mjs:\d+:\d+/);
    assert.ok(!stack.includes("block_worker"), stack);
    await shot(p, "report-real-run");
    noProblems(problems);
    await p.close();
  });

  // Issue 48 item 1: the report showed a failed Python block's message only; it shows the
  // traceback, line for line, its `~~~^^^` markers under the expression they point at.
  it(
    "report.html shows the first failed Python block's traceback, markers aligned",
    { ...BROWSER_TEST, skip: BROWSER_TEST.skip || (pythonMissing() ?? false) },
    async () => {
      const dir = folderWith(
        "python",
        `export default { tasks: [{
  id: "grid",
  totalRoi: { offset: [0], shape: [4] },
  readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] },
  readWriteConflict: false,
  maxRetries: 0,
  python: { module: "task.py" },
}] };
`,
      );
      fs.writeFileSync(
        path.join(dir, "task.py"),
        "def process(block):\n    vol = [0] * 10\n" +
          "    if block.index[0] == 2:\n        vol[0] = vol[block.index[0] + 100] + 1\n",
      );
      const ran = cli(["run", "pipeline.mjs", "--tracking-dir", "trk", "--no-progress"], dir);
      assert.equal(ran.code, 1, ran.stderr);
      const made = cli(["report", "trk", "-o", "report.html"], dir);
      assert.equal(made.code, 0, made.stderr);
      const { page: p, problems } = await page(pathToFileURL(path.join(dir, "report.html")).href);
      const box = 'section[data-task="grid"] [data-first-traceback] pre';
      const text = await p.$eval(box, (el) => el.textContent ?? "");
      assert.match(text, /Traceback \(most recent call last\):/);
      assert.match(
        text,
        /task\.py", line 4, in process\n {4}vol\[0\] = vol\[block\.index\[0\] \+ 100\] \+ 1\n/,
      );
      const lines = text.split("\n");
      const at = lines.findIndex((l) => l.includes("vol[block.index[0] + 100]"));
      const marks = lines[at + 1] ?? "";
      assert.match(marks, /^ +~+\^+/, text);
      // The first marker stands under the "v" of the second "vol", in pixels too.
      const column = lines[at]!.lastIndexOf("vol[");
      assert.equal(marks.search(/[~^]/), column, text);
      const xs = await p.$eval(
        box,
        (el, at: number, column: number) => {
          const node = el.firstChild!;
          const s = node.textContent!;
          let start = 0;
          for (let k = 0; k < at; k++) start = s.indexOf("\n", start) + 1;
          const next = s.indexOf("\n", start) + 1;
          const x = (i: number) => {
            const r = document.createRange();
            r.setStart(node, i);
            r.setEnd(node, i + 1);
            return r.getBoundingClientRect().left;
          };
          return [x(start + column), x(next + column)];
        },
        at,
        column,
      );
      assert.ok(Math.abs(xs[0]! - xs[1]!) < 0.5, `columns at ${xs[0]} and ${xs[1]} px`);
      await p.$eval(box, (el) => el.scrollIntoView());
      await shot(p, "report-python-traceback", false);
      noProblems(problems);
      await p.close();
    },
  );

  it("a million-block report opens with the counts status gives", BROWSER_TEST, async () => {
    const dir = path.join(root, "million");
    fs.mkdirSync(dir);
    const made = await makeSyntheticStore(dir, "grid", [100, 100, 100], true);
    const out = path.join(root, "million.html");
    const r = cli(["report", dir, "-o", out], root);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(fs.statSync(out).size < 15e6, `${fs.statSync(out).size} bytes`);
    const { page: p, problems } = await page(pathToFileURL(out).href);
    const shown = await counts(p, "grid");
    assert.equal(Number(shown["blocks"]), made.blocks);
    assert.equal(Number(shown["failed"]), made.failed);
    await shot(p, "report-million-blocks", false);
    noProblems(problems);
    await p.close();
  });

  it(
    "a GPU task's report: GPU layers, distributions and the utilisation track",
    BROWSER_TEST,
    async () => {
      const dir = path.join(root, "gpu");
      await writeGpuStore(path.join(dir, "trk", "predict"));
      const blocks = gpuBlocks();
      const made = cli(["report", "trk", "-o", "report.html"], dir);
      assert.equal(made.code, 0, made.stderr);
      const { page: p, problems } = await page(pathToFileURL(path.join(dir, "report.html")).href);
      const task = "predict";
      // The Resources part: status's GPU figures.
      const shown = await counts(p, task);
      const utils = blocks.filter((b) => !Number.isNaN(b.util)).map((b) => b.util);
      const utilMean = utils.reduce((a, b) => a + b, 0) / utils.length;
      assert.equal(shown["gpu_util_mean"], `${Number(utilMean.toFixed(1))}%`);
      assert.equal(Number(shown["gpu_mem_max"]), 4 * 2 ** 31 + 11);
      const layers = await p.evaluate(() => globalThis.blockwiseReport!.layers("predict"));
      assert.deepEqual(layers.filter((l) => l.startsWith("gpu_")), [
        "gpu_util_pct",
        "gpu_mem_bytes",
      ]);
      const options = await p.$$eval(
        'select[data-layer-select="predict"] option',
        (els) => els.map((e) => e.textContent),
      );
      assert.ok(
        options.includes("GPU utilisation %") && options.includes("GPU memory"),
        `${options}`,
      );
      // Utilisation 20..80 %: block (1, 1) (80 %) at the top of the ramp, (0, 0) (20 %) at the
      // bottom, (2, 2) (none recorded) in the no-value grey.
      await p.select('select[data-layer-select="predict"]', "gpu_util_pct");
      const coordsOf = (position: number) => [Math.floor(position / 3), position % 3];
      assert.equal(blocks[4]!.util, 80);
      assert.equal(await cellColor(p, task, coordsOf(4)), hexOf(viridis(1)));
      assert.equal(await cellColor(p, task, [0, 0]), hexOf(viridis(0)));
      assert.equal(await cellColor(p, task, coordsOf(NO_UTIL)), "#f0f0f0");
      const legend = await p.$eval(
        'section[data-task="predict"] .map-legend',
        (el) => el.textContent,
      );
      assert.match(legend ?? "", /GPU utilisation %20%.*80%.*linear scale · 11 cells measured/);
      assert.equal(blocks[2]!.util, 50);
      const tip = await hover(p, task, coordsOf(2));
      assert.match(tip, /GPU utilisation %≈ 50%/);
      // Block (0, 0) has the least memory, the layer's low end: shown as it is.
      assert.match(await hover(p, task, [0, 0]), /GPU utilisation %≈ 20%GPU memory≈ 2\.00 GiB/);
      assert.match(await hover(p, task, coordsOf(NO_UTIL)), /GPU utilisation %no value/);
      await p.$eval('section[data-task="predict"] .map-legend', (el) => el.scrollIntoView());
      await shot(p, "report-gpu-util-layer", false);
      await p.select('select[data-layer-select="predict"]', "gpu_mem_bytes");
      assert.equal(await cellColor(p, task, coordsOf(11)), hexOf(viridis(1)), "4 GiB + 11 B");
      assert.equal(await cellColor(p, task, coordsOf(10)), "#f0f0f0", "no memory figure");
      // Their distributions, with the blocks counted.
      for (const name of ["gpu_util_pct", "gpu_mem_bytes"]) {
        assert.ok(await p.$(`[data-chart="distribution:${name}"]`), `${name}'s distribution`);
      }
      // The slowest blocks carry the exact figures.
      const header = await p.$$eval(
        'section[data-task="predict"] [data-slowest-rank="1"]',
        (rows) =>
          Array.from(rows[0]!.closest("table")!.querySelectorAll("th"), (th) => th.textContent),
      );
      assert.deepEqual(header.slice(7, 9), ["GPU", "GPU memory"]);
      // The track: one lane per worker, its time-weighted utilisation in the note.
      const note = await p.$eval(
        'section[data-task="predict"] [data-gpu-track]',
        (el) => el.textContent,
      );
      for (const w of [0, 1]) {
        const of = blocks.filter((b) => b.worker === w && !Number.isNaN(b.util));
        const mean = of.reduce((a, b) => a + b.util * b.wall, 0) /
          of.reduce((a, b) => a + b.wall, 0);
        assert.ok(note?.includes(`worker ${w} ${Number(mean.toFixed(1))}%`), `${note} (${mean})`);
      }
      const track = 'section[data-task="predict"] [data-chart="gpu-track"]';
      assert.equal(await p.$eval(track, (el) => (el as HTMLElement).hidden), false);
      // Hover block 0 (worker 0, the first 0.5 s of about 5.1 s, 20 %): its figures.
      const box = await p.$eval(track, (el) => {
        el.scrollIntoView({ block: "center" });
        const r = el.getBoundingClientRect();
        return { x: r.left, y: r.top, w: r.width, h: r.height };
      });
      const plot = { left: 88, right: 20, top: 16, bottom: 64 };
      const laneHeight = (box.h - plot.top - plot.bottom) / 2;
      const span = blocks.reduce((a, b) => Math.max(a, b.start + b.wall + 0.01), 0) -
        blocks[0]!.start;
      await p.mouse.move(
        box.x + plot.left + ((0.25 / span) * (box.w - plot.left - plot.right)),
        box.y + plot.top + laneHeight * 1.6, // lane 0 is the lower one, its bar rises from below
      );
      await p.waitForFunction(
        (sel: string) => /GPU utilisation 20%/.test(document.querySelector(sel)?.textContent ?? ""),
        { timeout: 5_000 },
        track,
      );
      const hoverText = await p.$eval(track, (el) => el.textContent ?? "");
      assert.match(hoverText, /worker 0/);
      assert.match(hoverText, /GPU memory 2\.00 GiB \(2,147,483,648 B\)/);
      await shot(p, "report-gpu-track", false);
      await p.$eval(
        'section[data-task="predict"] [data-part="distributions"]',
        (el) => el.scrollIntoView(),
      );
      await shot(p, "report-gpu-distributions", false);
      await shot(p, "report-gpu");
      noProblems(problems);
      await p.close();
    },
  );

  it("serve during a run: the done count rises and ends at the total", BROWSER_TEST, async () => {
    const dir = folderWith("serve", pipeline([20, 10], "40"));
    const run = spawn(
      BUN,
      [MAIN, "run", "pipeline.mjs", "--tracking-dir", "trk", "--no-progress"],
      {
        cwd: dir,
        stdio: "ignore",
      },
    );
    children.push(run);
    const runExited = new Promise<number | null>((resolve) =>
      run.on("exit", (code) => resolve(code))
    );
    const store = path.join(dir, "trk", "grid", "zarr.json");
    while (!fs.existsSync(store)) await new Promise((r) => setTimeout(r, 20));
    const served = await startWithUrl(
      ["serve", "trk", "--listen", "127.0.0.1:0"],
      dir,
      /at (http:\/\/\S+)/,
    );
    const { page: p, problems } = await page(served.url);
    const seen: number[] = [await doneShown(p)];
    const deadline = Date.now() + 60_000;
    while (seen.at(-1) !== 199 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      const n = await doneShown(p);
      if (n !== seen.at(-1)) seen.push(n);
    }
    assert.equal(await runExited, 1, "the run ends with its failed block");
    assert.equal(seen.at(-1), 199, `done counts shown: ${seen}`);
    assert.ok(seen.length >= 3 && seen[0]! < 150, `done counts shown: ${seen}`);
    for (let k = 1; k < seen.length; k++) assert.ok(seen[k]! > seen[k - 1]!);
    await shot(p, "serve-during-run");
    assert.deepEqual(problems.errors, []);
    assert.deepEqual(problems.requests.filter((u) => !u.startsWith(served.url)), []);
    await p.close();
    // process.kill, not child.kill: under Deno the latter reports the signal, not the exit code.
    process.kill(served.child.pid!, "SIGTERM");
    assert.equal(await served.exited, 0);
  });

  it("run --serve: running blocks in the live panel, then finished", BROWSER_TEST, async () => {
    const dir = folderWith("run-serve", pipeline([20, 10], "40"));
    const run = await startWithUrl(
      ["run", "pipeline.mjs", "--tracking-dir", "trk", "--serve", "127.0.0.1:0", "--no-progress"],
      dir,
      /Dashboard of this run: (http:\/\/\S+)/,
    );
    const { page: p, problems } = await page(run.url);
    await p.waitForFunction(
      () => /grid:w\d/.test(document.querySelector("[data-live]")?.textContent ?? ""),
      { timeout: 30_000 },
    );
    await shot(p, "run-serve-live");
    assert.equal(await run.exited, 1, run.said());
    await p.waitForFunction(
      () => /finished/i.test(document.querySelector("[data-live]")?.textContent ?? ""),
      { timeout: 10_000 },
    );
    assert.equal(await doneShown(p), 199);
    assert.equal(await p.$eval("[data-live]", (el) => el.getAttribute("data-live")), "finished");
    assert.deepEqual(problems.errors, []);
    assert.deepEqual(problems.requests.filter((u) => !u.startsWith(run.url)), []);
    await p.close();
  });
});
