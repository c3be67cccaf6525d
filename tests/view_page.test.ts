/**
 * The report page (lib/view/page.ts and lib/view/client/): the committed bundle is what the
 * client's sources build to, the HTML is self-contained and cannot be broken out of by the
 * data, and in a real Chromium, opened from file://, it draws without a console error: block
 * map colours of known cells, layers, slices of a 3-D grid, aggregated cells, tooltips with
 * the scheduler's own block IDs and ROIs, the slowest-blocks link, edge cases (1-D, 4-D, no
 * blocks, no tracking, no stores), a live page polling a server, and a 2^20-cell map's load
 * time. Screenshots go to test-screenshots/.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import type { Browser, Page } from "puppeteer-core";
import { renderLivePage, renderReportPage } from "../lib/view/page.ts";
import {
  CLIENT_BUNDLE_SOURCES_SHA256,
  CLIENT_SCRIPT,
  CLIENT_STYLE,
} from "../lib/view/client_bundle.ts";
import { BUNDLE_FILE, clientBundleModule, clientSourcesSha256 } from "../lib/view/build_client.ts";
import type { LiveView, ReportData, TaskView } from "../lib/view/report_data.ts";
import { categoricalColor, viridis } from "../lib/view/client/colors.ts";
// For its `globalThis.blockwiseReport` declaration, which the page.evaluate callbacks use.
import type {} from "../lib/view/client/hook.ts";
import { cantorNumber } from "../lib/blocks/mod.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import {
  BROWSER_TEST,
  hexOf,
  launchChromium,
  type PageProblems,
  screenPixel,
  watchPage,
} from "./helpers/chromium.ts";
import { cellColor, cellPoint, counts, hover, noProblems, shot } from "./helpers/page_probe.ts";
import {
  AGGREGATED,
  buildTask,
  GRID2D,
  GRID2D_CELLS,
  GRID3D,
  GRID3D_CELLS,
  GRID4D,
  largeReport,
  LINE1D,
  reportOf,
  XSS_MESSAGE,
  ZERO,
} from "./helpers/report_fixture.ts";

const newDir = scratchDirs("view-page");

/** The colours the brief fixes for the state layer. */
const DONE = "#2e9e44";
const FAILED = "#d62728";
const NEVER_RUN = "#d9d9d9";
const DELETED = "#8fa7bf";

const grid2d = buildTask(GRID2D);
const grid3d = buildTask(GRID3D);
const aggregated = buildTask(AGGREGATED);
const MAIN = reportOf([grid2d, grid3d, aggregated]);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function roiText(roi: { offset: readonly number[]; shape: readonly number[] }): string {
  return roi.offset.map((o, d) => `[${o}, ${o + roi.shape[d]!})`).join(" × ");
}

describe("the report page's script bundle", () => {
  it("is fresh: lib/view/client_bundle.ts is what the client's sources build to", () => {
    const hint = "lib/view/client_bundle.ts is stale: run bun lib/view/build_client.ts";
    assert.equal(CLIENT_BUNDLE_SOURCES_SHA256, clientSourcesSha256(), hint);
    assert.ok(fs.readFileSync(BUNDLE_FILE, "utf8") === clientBundleModule(), hint);
  });

  it("is one tree-shaken script and a style sheet", () => {
    assert.ok(CLIENT_SCRIPT.length > 100_000, "ECharts is in");
    assert.ok(CLIENT_SCRIPT.length < 1_000_000, `${CLIENT_SCRIPT.length} characters: tree-shaken`);
    assert.match(CLIENT_STYLE, /image-rendering: pixelated/);
  });
});

describe("renderReportPage", () => {
  const html = renderReportPage(MAIN);

  it("is one HTML document titled after the target", () => {
    assert.ok(html.startsWith("<!doctype html>"));
    assert.match(html, /<meta charset="utf-8">/);
    assert.match(html, /<title>blockwise report: tracking<\/title>/);
  });

  it("inlines the data so that no message can end its script element", () => {
    assert.ok(JSON.stringify(MAIN).includes("</script>"), "the fixture holds </script>");
    // Two elements end: the data and the code; nothing inside either ends early.
    assert.equal(html.match(/<\/script/gi)?.length, 2);
    const start = html.indexOf('<script type="application/json" id="blockwise-data">');
    assert.ok(start > 0);
    const body = html.slice(html.indexOf(">", start) + 1, html.indexOf("</script>", start));
    assert.ok(!body.includes("<"));
    assert.deepEqual(JSON.parse(body), JSON.parse(JSON.stringify(MAIN)));
  });

  it("fetches nothing: no external src or href outside the data", () => {
    const start = html.indexOf('id="blockwise-data">');
    const withoutData = html.slice(0, start) + html.slice(html.indexOf("</script>", start));
    assert.doesNotMatch(withoutData, /\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?\/\//i);
    assert.doesNotMatch(withoutData, /@import|url\(\s*["']?https?:/i);
    // The one link is the favicon, inline (else browsers ask the server for /favicon.ico).
    assert.deepEqual(withoutData.match(/<link\b[^>]*>/gi), ['<link rel="icon" href="data:,">']);
  });

  it("escapes the title; the live page has no data inlined", () => {
    const live = renderLivePage("blockwise: </title><b>x");
    assert.match(live, /<title>blockwise: &#60;\/title&#62;&#60;b&#62;x<\/title>/);
    assert.ok(!live.includes('id="blockwise-data"'));
    assert.equal(live.match(/<\/script/gi)?.length, 1);
  });
});

// ---- in Chromium ---------------------------------------------------------------------------

let browser: Browser | null = null;
after(async () => {
  await browser?.close();
});

async function chromium(): Promise<Browser> {
  browser ??= await launchChromium();
  return browser;
}

function writePage(name: string, data: ReportData): string {
  const file = path.join(newDir(name), `${name}.html`);
  fs.writeFileSync(file, renderReportPage(data));
  return pathToFileURL(file).href;
}

async function open(url: string): Promise<{ page: Page; problems: PageProblems; ms: number }> {
  const page = await (await chromium()).newPage();
  const problems = watchPage(page);
  const t0 = performance.now();
  await page.goto(url);
  await page.waitForFunction(() => globalThis.blockwiseReport?.ready === true, { timeout: 30_000 });
  return { page, problems, ms: performance.now() - t0 };
}

function decodeLayer(view: TaskView, name: string): Uint8Array {
  const layer = view.map.metrics.find((m) => m.name === name);
  assert.ok(layer, `layer ${name}`);
  return new Uint8Array(Buffer.from(layer.values, "base64"));
}

describe("the report page in Chromium", () => {
  it("draws every task of a report from file:// without errors", BROWSER_TEST, async () => {
    const { page, problems } = await open(writePage("main", MAIN));
    await shot(page, "report-main");
    for (const t of [grid2d, grid3d, aggregated]) {
      const c = await counts(page, t.store.task);
      assert.equal(c["blocks"], String(t.store.blocks));
      assert.equal(c["done"], String(t.store.done));
      assert.equal(c["failed"], String(t.store.failed));
      assert.equal(c["pending"], String(t.store.pending));
    }
    assert.equal((await counts(page, "segment"))["deleted"], "2");
    // The hostile message is text: shown as written, never run.
    assert.equal(await page.evaluate(() => "__xss" in globalThis), false);
    const pres = await page.$$eval("pre.message", (els) => els.map((e) => e.textContent));
    assert.ok(pres.includes(XSS_MESSAGE));
    assert.deepEqual(
      await page.evaluate(() => globalThis.blockwiseReport!.colors),
      { done: DONE, failed: FAILED, never_run: NEVER_RUN, deleted_temporary: DELETED },
    );
    noProblems(problems);
    await page.close();
  });

  it("colours known cells of a 2-D map, on every layer", BROWSER_TEST, async () => {
    const { page, problems } = await open(writePage("layers", MAIN));
    const expect = async (coords: readonly number[], color: string) => {
      assert.equal(await cellColor(page, "segment", coords), color, `cell ${coords}`);
      const { x, y } = await cellPoint(page, "segment", coords);
      assert.equal(hexOf(await screenPixel(page, x, y)), color, `cell ${coords} on screen`);
    };
    for (const c of GRID2D_CELLS.failed) await expect(c, FAILED);
    for (const c of GRID2D_CELLS.never) await expect(c, NEVER_RUN);
    for (const c of GRID2D_CELLS.deleted) await expect(c, DELETED);
    for (const c of GRID2D_CELLS.done) await expect(c, DONE);
    await shot(page, "map-2d-state", false);

    assert.deepEqual(await page.evaluate(() => globalThis.blockwiseReport!.layers("segment")), [
      "state",
      "wall_seconds",
      "cpu_seconds",
      "peak_rss_bytes",
      "io_read_bytes",
      "io_write_bytes",
      "failures",
      "returned_at",
      "worker",
    ]);
    await page.evaluate(() => globalThis.blockwiseReport!.setLayer("segment", "wall_seconds"));
    const wall = decodeLayer(grid2d.view, "wall_seconds");
    for (const c of [[1, 1], [4, 2], [11, 0]]) {
      const byte = wall[c[0]! * 9 + c[1]!]!;
      assert.ok(byte > 0);
      assert.equal(await cellColor(page, "segment", c), hexOf(viridis((byte - 1) / 254)));
    }
    // Never run: no value, drawn in the "no value" grey, not in a palette colour.
    assert.equal(await cellColor(page, "segment", [0, 0]), "#f0f0f0");
    const legend = await page.$eval(
      'section[data-task="segment"] .map-legend',
      (el) => el.textContent ?? "",
    );
    assert.match(legend, /wall time.*1\.00 s.*44\.0 s/);
    await shot(page, "map-2d-wall-seconds", false);

    await page.evaluate(() => globalThis.blockwiseReport!.setLayer("segment", "worker"));
    const workerOf = (p: number) => [1, 2, 5][p % 3]!;
    for (const c of [[1, 1], [4, 2]]) {
      const p = c[0]! * 9 + c[1]!;
      assert.equal(
        await cellColor(page, "segment", c),
        categoricalColor([1, 2, 5].indexOf(workerOf(p))),
      );
    }
    // The menu switches layers too.
    await page.select('select[data-layer-select="segment"]', "state");
    assert.equal(await cellColor(page, "segment", [2, 3]), FAILED);
    noProblems(problems);
    await page.close();
  });

  it(
    "tooltips carry the block's ID, index, ROIs, values and last error",
    BROWSER_TEST,
    async () => {
      const { page, problems } = await open(writePage("tooltips", MAIN));
      const layout = grid2d.layout;
      for (const coords of [[2, 3], [11, 8], [0, 0]]) {
        const text = await hover(page, "segment", coords);
        const position = layout.positionOf(coords);
        const index = layout.gridIndexOf(position);
        assert.deepEqual(index, coords.map((c) => c + 1), "context 70 over write 64: shift 1");
        assert.ok(text.includes(`block ID${cantorNumber(index)}`), text);
        assert.ok(text.includes(`index(${index.join(", ")})`), text);
        assert.ok(text.includes(`write ROI${roiText(layout.writeRoiOf(position))}`), text);
        assert.ok(text.includes(`read ROI${roiText(layout.readRoiOf(position))}`), text);
      }
      // The shrunk last block is cut at the total write ROI.
      assert.equal(layout.writeRoiOf(layout.positionOf([11, 8])).shape.join(), "54,54");
      const failed = await hover(page, "segment", [2, 3]);
      assert.ok(failed.includes(XSS_MESSAGE), failed);
      assert.match(failed, /wall time/);
      assert.match(failed, /worker/);
      // A click pins it: moving away leaves it there.
      const at = await cellPoint(page, "segment", [2, 3]);
      await page.mouse.click(at.x, at.y);
      await page.mouse.move(5, 5);
      const pinned = await page.$eval('[data-tooltip="segment"]', (el) => ({
        hidden: (el as HTMLElement).hidden,
        pinned: el.classList.contains("pinned"),
        text: el.textContent,
      }));
      assert.deepEqual([pinned.hidden, pinned.pinned], [false, true]);
      assert.ok(pinned.text?.includes(`block ID${cantorNumber([3, 4])}`));
      await shot(page, "tooltip-pinned", false);
      await page.keyboard.press("Escape");
      noProblems(problems);
      await page.close();
    },
  );

  it("moves through the slices of a 3-D grid", BROWSER_TEST, async () => {
    const { page, problems } = await open(writePage("slices", MAIN));
    const task = "agglomerate/3d";
    const rect = (c: number[]) =>
      page.evaluate(
        (t: string, c: number[]) => globalThis.blockwiseReport!.cellRect(t, c),
        task,
        c,
      );
    const slider = (v: string) =>
      page.$eval(`input[data-slice-axis="0"]`, (el, v) => {
        (el as HTMLInputElement).value = v;
        el.dispatchEvent(new Event("input"));
      }, v);
    // Rows axis 1, columns axis 2, on the slice of the first failed block (1, 2, 3): index 1 of
    // axis 0 (issue 48 item 11: it opened on slice 0, where no block failed).
    assert.ok(await rect([1, 2, 3]) !== null);
    assert.equal(await rect([0, 2, 3]), null);
    assert.equal(await cellColor(page, task, GRID3D_CELLS.failed[0]), FAILED);
    // The slider moves axis 0 to 0, and back to 1.
    await slider("0");
    assert.ok(await rect([0, 2, 3]) !== null);
    assert.equal(await rect([1, 2, 3]), null);
    assert.equal(await cellColor(page, task, [0, 0, 0]), NEVER_RUN);
    await slider("1");
    assert.equal(await cellColor(page, task, GRID3D_CELLS.failed[0]), FAILED);
    const text = await hover(page, task, [1, 2, 3]);
    const position = grid3d.layout.positionOf([1, 2, 3]);
    assert.ok(text.includes(`block ID${cantorNumber([1, 2, 3])}`), text);
    assert.ok(text.includes(`write ROI${roiText(grid3d.layout.writeRoiOf(position))}`), text);
    assert.ok(text.includes("RuntimeError: out of memory"), text);
    await shot(page, "map-3d-slice-1", false);
    // Rows on axis 0, columns on axis 2, at index 4 of axis 1.
    await page.evaluate(
      (t: string) =>
        globalThis.blockwiseReport!.setView(t, { rowAxis: 0, colAxis: 2, slice: [0, 4, 0] }),
      task,
    );
    assert.equal(await rect([1, 2, 3]), null);
    assert.equal(await cellColor(page, task, [3, 4, 5]), NEVER_RUN);
    assert.equal(await cellColor(page, task, [3, 4, 4]), DONE);
    // A slowest block's row brings its slice into view and outlines its cell.
    const slowest = grid3d.view.slowest[0]!;
    await page.click(`section[data-task="agglomerate/3d"] tr[data-slowest-rank="1"]`);
    const r = await rect([...slowest.coords]);
    assert.ok(r !== null, "the slowest block's cell is shown");
    const outline = await page.evaluate(
      (t: string, r: { x: number; y: number; w: number; h: number }) => {
        const canvas = document.querySelector<HTMLCanvasElement>(
          `canvas[data-map="${CSS.escape(t)}"]`,
        )!;
        const d = canvas.getContext("2d")!.getImageData(r.x + 1, r.y + r.h / 2, 1, 1).data;
        return [d[0]!, d[1]!, d[2]!];
      },
      task,
      r,
    );
    assert.equal(hexOf(outline), "#111111");
    await sleep(800); // the smooth scroll to the map
    await shot(page, "map-3d-slowest", false);
    noProblems(problems);
    await page.close();
  });

  // Issue 48 items 1 and 11: the report showed a failure's message only, and each run's
  // completed blocks without saying how many of them were skipped.
  it(
    "shows the first failure's traceback as written, and each run's skipped blocks",
    BROWSER_TEST,
    async () => {
      const traceback = [
        "Traceback (most recent call last):",
        '  File "/home/u/task.py", line 7, in process',
        "    out[i] = vol[i + 100]",
        "             ~~~^^^^^^^^^",
        "IndexError: index 105 is out of bounds for axis 0 with size 100",
      ];
      const [first, ...rest] = grid2d.view.failures.blocks;
      const task: TaskView = {
        ...grid2d.view,
        failures: { ...grid2d.view.failures, blocks: [{ ...first!, stack: traceback }, ...rest] },
      };
      const { page, problems } = await open(
        writePage("traceback", reportOf([{ ...grid2d, view: task }])),
      );
      const box = `section[data-task="segment"] [data-first-traceback="${first!.id}"]`;
      const shown = await page.$eval(`${box} pre`, (el) => ({
        text: el.textContent,
        whiteSpace: getComputedStyle(el).whiteSpace,
      }));
      assert.equal(shown.text, traceback.join("\n"));
      assert.equal(shown.whiteSpace, "pre");
      // The markers stand under the expression they point at: the first "~" under the "v" of
      // "vol", both in column 13.
      const xs = await page.$eval(`${box} pre`, (el) => {
        const text = el.firstChild!;
        const s = text.textContent!;
        const x = (at: number) => {
          const r = document.createRange();
          r.setStart(text, at);
          r.setEnd(text, at + 1);
          return r.getBoundingClientRect().left;
        };
        return [x(s.indexOf("vol")), x(s.indexOf("~"))];
      });
      assert.ok(Math.abs(xs[0]! - xs[1]!) < 0.5, `columns at ${xs[0]} and ${xs[1]} px`);
      const runs = await page.$$eval(
        'section[data-task="segment"] tr[data-run]',
        (rows) => rows.map((r) => [...r.querySelectorAll("td")].map((td) => td.textContent)),
      );
      const headers = await page.$$eval(
        'section[data-task="segment"] tr[data-run]',
        (rows) =>
          [...rows[0]!.closest("table")!.querySelectorAll("th")].map((th) => th.textContent),
      );
      const col = headers.indexOf("skipped");
      assert.ok(col > headers.indexOf("completed"), headers.join(", "));
      assert.deepEqual(
        runs.map((r) => r[col]),
        task.runs.map((r) => String(r.blocks_skipped)),
      );
      await page.$eval(box, (el) => el.scrollIntoView());
      await shot(page, "report-first-traceback", false);
      noProblems(problems);
      await page.close();
    },
  );

  it("draws aggregated cells with their done fraction and block range", BROWSER_TEST, async () => {
    const { page, problems } = await open(writePage("aggregated", MAIN));
    const task = "downsample";
    assert.equal(await cellColor(page, task, [2, 2]), FAILED, "a failed block fails its cell");
    assert.equal(await cellColor(page, task, [10, 0]), NEVER_RUN);
    assert.equal(await cellColor(page, task, [5, 5]), DONE);
    const partly = await cellColor(page, task, [0, 0]);
    const green = (hex: string) => parseInt(hex.slice(3, 5), 16);
    const red = (hex: string) => parseInt(hex.slice(1, 3), 16);
    assert.ok(green(partly) < green(NEVER_RUN) && red(partly) > red(DONE), partly);
    assert.ok(partly !== DONE && partly !== NEVER_RUN);
    const text = await hover(page, task, [0, 0]);
    assert.ok(text.includes("blocks0–1 × 0–1 (4)"), text);
    assert.ok(text.includes("75% done"), text);
    // The last row holds one row of blocks (23 = 11 × 2 + 1).
    assert.ok((await hover(page, task, [11, 8])).includes("blocks22–22 × 16–16 (1)"));
    await shot(page, "map-aggregated", false);
    noProblems(problems);
    await page.close();
  });

  it("copes with 1-D and 4-D grids, no blocks, no tracking, no runs", BROWSER_TEST, async () => {
    const line = buildTask(LINE1D);
    const data = reportOf([line, buildTask(GRID4D), buildTask(ZERO)]);
    const { page, problems } = await open(writePage("edges", data));
    assert.equal(await cellColor(page, "line", [7]), FAILED);
    assert.equal(await cellColor(page, "line", [35]), NEVER_RUN);
    assert.equal(await cellColor(page, "line", [0]), DONE);
    assert.ok((await hover(page, "line", [7])).includes("ValueError: no data in block"));
    assert.deepEqual(await page.evaluate(() => globalThis.blockwiseReport!.layers("line")), [
      "state",
      "failures",
    ]);
    await page.evaluate(() =>
      globalThis.blockwiseReport!.setView("four", { rowAxis: 0, colAxis: 3, slice: [0, 3, 4, 0] })
    );
    assert.equal(await cellColor(page, "four", [2, 3, 4, 5]), NEVER_RUN);
    assert.equal(
      await page.evaluate(() => globalThis.blockwiseReport!.cellRect("nothing", [0, 0])),
      null,
    );
    const notes = await page.$eval('section[data-task="nothing"]', (el) => el.textContent ?? "");
    assert.match(notes, /No blocks\./);
    await shot(page, "report-edge-cases");
    noProblems(problems);
    await page.close();

    const empty = await open(
      writePage("empty", {
        ...reportOf([]),
        status: { stores: [], errors: [{ path: "/x", error: "<b>bad</b>" }] },
      }),
    );
    const box = await empty.page.$eval("[data-errors]", (el) => el.textContent ?? "");
    assert.match(box, /No tracking stores found/);
    assert.match(box, /<b>bad<\/b>/);
    await shot(empty.page, "report-empty-target");
    noProblems(empty.problems);
    await empty.page.close();
  });

  it("loads and draws a 2^20-cell map with every layer quickly", BROWSER_TEST, async () => {
    const url = writePage("large", largeReport());
    const { page, problems, ms } = await open(url);
    const inPage = await page.evaluate(() => globalThis.blockwiseReport!.readyMs);
    const firstDraw = await page.evaluate(() => globalThis.blockwiseReport!.drawMs("large"));
    const layerDraws: number[] = [];
    for (const layer of ["wall_seconds", "peak_rss_bytes", "worker", "state"]) {
      layerDraws.push(
        await page.evaluate((l: string) => {
          globalThis.blockwiseReport!.setLayer("large", l);
          return globalThis.blockwiseReport!.drawMs("large")!;
        }, layer),
      );
    }
    console.log(
      `2^20-cell report: ready ${ms.toFixed(0)} ms after navigation (in page ${
        inPage?.toFixed(0)
      } ms); map draw ${firstDraw?.toFixed(1)} ms; layer switches ${
        layerDraws.map((d) => d.toFixed(1)).join(", ")
      } ms`,
    );
    assert.ok(ms < 10_000, `ready in ${ms} ms`);
    assert.ok(await cellColor(page, "large", [1023, 1023]));
    await shot(page, "report-large", false);
    noProblems(problems);
    await page.close();
  });
});

/** A server of the live page under `/tok/`, whose answers the test steers. */
class LiveServer {
  mode: "ok" | "fail" | "finished" = "ok";
  fulls = 0;
  frames = 0;
  requests = 0;
  readonly base = reportOf([buildTask(GRID2D), buildTask(LINE1D)], {
    served: { base_path: "/tok/" },
  });
  private readonly server = http.createServer((req, res) => this.answer(req.url ?? "", res));

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/tok/`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections?.();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** The document at the current step: one more block of "segment" done per frame served. */
  doc(parts: "full" | "frame"): ReportData {
    const finished = this.mode === "finished";
    const step = this.frames;
    const stores = this.base.status.stores.map((s, i) =>
      i === 0 ? { ...s, done: s.done - 20 + step, pending: s.pending + 20 - step } : s
    );
    const live: LiveView = {
      run_id: "run-live",
      started_at: new Date(Date.now() - 60_000).toISOString(),
      elapsed: 60 + step,
      tasks: [{
        task: "segment",
        total: 108,
        done: 80 + step,
        running: 2,
        failed: 2,
        orphaned: 0,
        skipped: 0,
        pending: 24 - step,
      }],
      running: [{ task: "segment", id: 31, index: [3, 4], worker: "local-1", seconds: 3.5 }],
      running_total: 2,
      queued_workers: 1,
      connected_workers: 2,
      finished,
      live_maps: finished ? [] : ["segment"],
    };
    const tasks = parts === "full" ? this.base.tasks : this.base.tasks.map((t) => ({
      ...t,
      map: { ...t.map, metrics: [], workers: null },
      distributions: [],
      slowest: [],
      timeline: null,
    }));
    return { ...this.base, parts, status: { ...this.base.status, stores }, tasks, live };
  }

  private answer(url: string, res: http.ServerResponse): void {
    this.requests++;
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
      res.end(body);
    };
    if (url === "/tok/") return send(200, "text/html", renderLivePage("blockwise: live test"));
    if (url === "/tok/api/report") {
      if (this.mode === "fail") return send(503, "text/plain", "down");
      this.fulls++;
      return send(200, "application/json", JSON.stringify(this.doc("full")));
    }
    if (url === "/tok/api/frame") {
      if (this.mode === "fail") return send(503, "text/plain", "down");
      this.frames++;
      return send(200, "application/json", JSON.stringify(this.doc("frame")));
    }
    send(404, "text/plain", "not found");
  }
}

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("the live page in Chromium", () => {
  it(
    "polls frames, keeps the full document's layers, retries, stops when finished",
    BROWSER_TEST,
    async () => {
      const server = new LiveServer();
      const url = await server.start();
      try {
        const { page, problems } = await open(url);
        const badge = () => page.$eval("[data-live-badge]", (el) => el.textContent ?? "");
        assert.match(await badge(), /^live · updated \d\d:\d\d:\d\d$/);
        // The first paint is a frame (faster to build), the full document follows at once.
        await until("the full document after the first frame", () => server.fulls === 1);
        assert.equal(server.frames, 1);
        const d0 = server.base.status.stores[0]!.done - 20 + 1;
        await page.waitForFunction(
          (d: string) =>
            document.querySelector('section[data-task="segment"] [data-count="done"]')
              ?.getAttribute("data-value") === d,
          { timeout: 5_000 },
          String(d0),
        );
        // Frames update the counts; the full document's metric layers and charts stay.
        await page.waitForFunction(
          (d: string) =>
            document.querySelector('section[data-task="segment"] [data-count="done"]')
              ?.getAttribute("data-value") !== d,
          { timeout: 10_000 },
          String(d0),
        );
        assert.ok(Number((await counts(page, "segment"))["done"]) > d0);
        assert.ok(
          (await page.evaluate(() => globalThis.blockwiseReport!.layers("segment"))).includes(
            "wall_seconds",
          ),
        );
        assert.equal(
          await page.$$eval(
            'section[data-task="segment"] [data-chart^="distribution:"]',
            (e) => e.length,
          ),
          6,
        );
        assert.match(
          await page.$eval("section.live", (el) => el.textContent ?? ""),
          /Run in progress.*segment/s,
        );
        // The served ledger's URLs.
        assert.equal(
          await page.$eval(
            'section[data-task="segment"] input[data-served="zarr"]',
            (el) => (el as HTMLInputElement).value,
          ),
          `${url}zarr/segment/`,
        );
        assert.equal(
          await page.$eval(
            'section[data-task="segment"] input[data-served="neuroglancer"]',
            (el) => (el as HTMLInputElement).value,
          ),
          `zarr3://${url}zarr/segment/`,
        );
        // Picking a metric layer fetches the full document again (the last one is 2 s old).
        await sleep(2100);
        const fulls = server.fulls;
        await page.select('select[data-layer-select="segment"]', "wall_seconds");
        await until("a full fetch after picking a layer", () => server.fulls > fulls, 5000);
        await shot(page, "live-running");
        // The server goes away and comes back.
        server.mode = "fail";
        await page.waitForFunction(
          () =>
            document.querySelector("[data-live-badge]")?.textContent ===
              "connection lost, retrying",
          { timeout: 10_000 },
        );
        await shot(page, "live-connection-lost", false);
        server.mode = "ok";
        await page.waitForFunction(
          () =>
            document.querySelector("[data-live-badge]")?.textContent?.startsWith("live · updated"),
          { timeout: 10_000 },
        );
        // The run ends: one last full document, then no more requests.
        const fullsBefore = server.fulls;
        server.mode = "finished";
        await page.waitForFunction(
          () =>
            document.querySelector("[data-live-badge]")?.textContent?.startsWith(
              "finished · updated",
            ),
          { timeout: 10_000 },
        );
        assert.ok(server.fulls > fullsBefore, "a last full document");
        assert.equal(
          await page.$eval("section.live", (el) => el.getAttribute("data-live")),
          "finished",
        );
        const requests = server.requests;
        await sleep(2500);
        assert.equal(server.requests, requests, "polling stopped");
        await shot(page, "live-finished");
        // 503s are logged by Chromium itself as failed loads: expected here.
        const errors = problems.errors.filter((e) => !/Failed to load resource|503/.test(e));
        assert.deepEqual(errors, []);
        assert.deepEqual(problems.requests.filter((u) => !u.startsWith(url)), []);
        await page.close();
      } finally {
        await server.close();
      }
    },
  );
});
