/**
 * The report page's entry (bundled by lib/view/build_client.ts into lib/view/client_bundle.ts):
 * a static report carries its data in `<script type="application/json" id="blockwise-data">`;
 * without it the page is live and fetches the data from the server it came from.
 */

import type { ReportData } from "../report_data.ts";
import { ReportApp } from "./app.ts";
import { h } from "./dom.ts";
import { LivePoller } from "./live_poll.ts";

/** The inlined data: plain JSON, or gzip-compressed JSON in base64 (a large report). */
async function inlineData(): Promise<ReportData | null> {
  const plain = document.getElementById("blockwise-data");
  if (plain !== null) return JSON.parse(plain.textContent ?? "") as ReportData;
  const packed = document.getElementById("blockwise-data-gz");
  if (packed === null) return null;
  const bytes = Uint8Array.from(atob((packed.textContent ?? "").trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text()) as ReportData;
}

async function start(): Promise<void> {
  const mount = document.getElementById("blockwise-app") ?? document.body.appendChild(h("main"));
  const app = new ReportApp(mount);
  globalThis.blockwiseReport = app.hook;
  let data: ReportData | null;
  try {
    data = await inlineData();
  } catch (error) {
    mount.appendChild(h("p", { class: "warning" }, `The report's data is unreadable: ${error}`));
    throw error;
  }
  if (data === null) {
    new LivePoller(app).start();
    return;
  }
  app.render(data);
  // Charts draw on the next frame: ready once that frame is out.
  requestAnimationFrame(() => app.markReady());
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", () => void start());
} else void start();
