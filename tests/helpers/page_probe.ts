/**
 * Probes of the report page for browser tests: colours of block-map cells (on the canvas and on
 * the screen), hovering a cell, the counts a task section shows, page problems, screenshots.
 * They go through the page's test hook, `globalThis.blockwiseReport` (lib/view/client/hook.ts).
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "puppeteer-core";
// For its `globalThis.blockwiseReport` declaration, which the page.evaluate callbacks use.
import type {} from "../../lib/view/client/hook.ts";
import { hexOf, type PageProblems } from "./chromium.ts";

/** Where screenshots go, for a reviewer to look at (not committed). */
export const SHOTS = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "test-screenshots",
);

export function shot(page: Page, name: string, fullPage = true): Promise<unknown> {
  fs.mkdirSync(SHOTS, { recursive: true });
  return page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage });
}

export function noProblems(problems: PageProblems, ignore: RegExp | null = null): void {
  const errors = problems.errors.filter((e) => ignore === null || !ignore.test(e));
  assert.deepEqual(errors, [], "no console errors or page errors");
  const external = problems.requests.filter((u) => !/^(file|data|blob):/.test(u));
  assert.deepEqual(external, [], "no network requests");
}

/** The cell's colour on the canvas (its centre pixel), as hex. */
export async function cellColor(
  page: Page,
  task: string,
  coords: readonly number[],
): Promise<string> {
  const rgb = await page.evaluate(
    (task: string, coords: readonly number[]) => {
      const r = globalThis.blockwiseReport!.cellRect(task, coords);
      if (r === null) return null;
      const canvas = document.querySelector<HTMLCanvasElement>(
        `canvas[data-map="${CSS.escape(task)}"]`,
      )!;
      const scale = canvas.width / canvas.getBoundingClientRect().width;
      const data = canvas.getContext("2d")!.getImageData(
        Math.floor((r.x + r.w / 2) * scale),
        Math.floor((r.y + r.h / 2) * scale),
        1,
        1,
      ).data;
      return [data[0]!, data[1]!, data[2]!];
    },
    task,
    coords,
  );
  assert.ok(rgb !== null, `cell ${coords} of ${task} is in the view`);
  return hexOf(rgb);
}

/** A cell's centre in viewport coordinates, scrolled into view. */
export async function cellPoint(page: Page, task: string, coords: readonly number[]) {
  const point = await page.evaluate(
    (task: string, coords: readonly number[]) => {
      const canvas = document.querySelector(`canvas[data-map="${CSS.escape(task)}"]`)!;
      canvas.scrollIntoView({ block: "center" });
      const r = globalThis.blockwiseReport!.cellRect(task, coords);
      const box = canvas.getBoundingClientRect();
      return r === null ? null : { x: box.left + r.x + r.w / 2, y: box.top + r.y + r.h / 2 };
    },
    task,
    coords,
  );
  assert.ok(point !== null, `cell ${coords} of ${task} is in the view`);
  return point;
}

export async function hover(page: Page, task: string, coords: readonly number[]): Promise<string> {
  const { x, y } = await cellPoint(page, task, coords);
  await page.mouse.move(x, y);
  return await page.$eval(
    `[data-tooltip="${task.replace(/"/g, '\\"')}"]`,
    (el) => (el as HTMLElement).hidden ? "" : el.textContent ?? "",
  );
}

/** The counts a task's section shows, by `data-count` key. */
export function counts(page: Page, task: string): Promise<Record<string, string>> {
  return page.evaluate((task: string) => {
    const section = document.querySelector(`section[data-task="${CSS.escape(task)}"]`)!;
    const out: Record<string, string> = {};
    for (const el of section.querySelectorAll("[data-count]")) {
      // The exact number when the text shows it formatted (1,000,000), else the text (97.8%).
      out[el.getAttribute("data-count")!] = el.getAttribute("data-value") ?? el.textContent ?? "";
    }
    return out;
  }, task);
}
