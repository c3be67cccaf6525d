/**
 * A headless Chromium for the page tests (puppeteer-core drives Debian's /usr/bin/chromium).
 * Without it the browser tests are skipped, unless BLOCKWISE_REQUIRE_BROWSER=1 (CI), where they
 * fail saying how to install it.
 */

import * as fs from "node:fs";
import process from "node:process";
import { inflateSync } from "node:zlib";
import { Buffer } from "node:buffer";
import puppeteer, { type Browser, type Page } from "puppeteer-core";

export const CHROMIUM = process.env["BLOCKWISE_CHROMIUM"] ?? "/usr/bin/chromium";
export const CHROMIUM_MISSING = "chromium is not installed: apt-get install chromium";

const present = fs.existsSync(CHROMIUM);
const required = process.env["BLOCKWISE_REQUIRE_BROWSER"] === "1";

/** Options for a browser test: skipped when Chromium is missing and not required. */
export const BROWSER_TEST: { skip?: string; timeout: number } = present || required
  ? { timeout: 120_000 }
  : { skip: CHROMIUM_MISSING, timeout: 120_000 };

export async function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(CHROMIUM_MISSING);
  return await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
    defaultViewport: { width: 1200, height: 900, deviceScaleFactor: 1 },
  });
}

/** What a page logged as an error, threw, or tried to fetch from the network. */
export interface PageProblems {
  readonly errors: string[];
  readonly requests: string[];
}

/** Record console errors, uncaught exceptions and failed requests of `page`. */
export function watchPage(page: Page): PageProblems {
  const problems: PageProblems = { errors: [], requests: [] };
  page.on("console", (m) => {
    if (m.type() === "error") problems.errors.push(`console.error: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.errors.push(`page error: ${String(e)}`));
  page.on("requestfailed", (r) => problems.errors.push(`request failed: ${r.url()}`));
  page.on("request", (r) => problems.requests.push(r.url()));
  return problems;
}

/** The RGB colour of one pixel of a PNG that is 1 × 1 (any filter then leaves it as is). */
export function onePixelPng(png: Uint8Array): [number, number, number] {
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  let at = 8;
  let colorType = -1;
  const idat: Uint8Array[] = [];
  while (at < png.length) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(...png.subarray(at + 4, at + 8));
    const data = png.subarray(at + 8, at + 8 + length);
    if (type === "IHDR") {
      if (view.getUint32(at + 8) !== 1 || view.getUint32(at + 12) !== 1 || data[8] !== 8) {
        throw new Error("not a 1 × 1 8-bit PNG");
      }
      colorType = data[9]!;
    } else if (type === "IDAT") idat.push(data);
    at += 12 + length;
  }
  if (colorType !== 2 && colorType !== 6) throw new Error(`PNG colour type ${colorType}`);
  const raw = inflateSync(Buffer.concat(idat));
  return [raw[1]!, raw[2]!, raw[3]!];
}

/** The colour the screen shows at viewport point (x, y), from a 1 × 1 screenshot. */
export async function screenPixel(
  page: Page,
  x: number,
  y: number,
): Promise<[number, number, number]> {
  // The clip is in page coordinates: the viewport's point plus the scroll offset.
  const [sx, sy] = await page.evaluate(() => [globalThis.scrollX, globalThis.scrollY]);
  const png = await page.screenshot({
    clip: { x: Math.floor(x) + sx!, y: Math.floor(y) + sy!, width: 1, height: 1 },
    captureBeyondViewport: false,
    type: "png",
  });
  return onePixelPng(png);
}

export function hexOf(rgb: readonly number[]): string {
  return `#${rgb.slice(0, 3).map((c) => c.toString(16).padStart(2, "0")).join("")}`;
}
