/**
 * The HTML of `blockwise report` and of `blockwise serve`'s page: one self-contained document
 * (CSS, script and, for a report, the data inlined), which opens from file:// with no network.
 * The page's code is lib/view/client/, bundled into client_bundle.ts by build_client.ts.
 */

import { Buffer } from "node:buffer";
import { gzipSync } from "node:zlib";
import type { ReportData } from "./report_data.ts";
import { CLIENT_SCRIPT, CLIENT_STYLE } from "./client_bundle.ts";

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function baseName(target: string): string {
  const parts = target.split(/[\\/]+/).filter((p) => p !== "");
  return parts[parts.length - 1] ?? target;
}

/**
 * Text safe inside `<script>`: `</script` would end the element and `<!--` changes how the
 * parser looks for the end, so both lose their `<` to an escape (`<\/` and `<\!` mean the
 * same in JavaScript strings and regular expressions, where the bundle has them).
 */
function scriptText(js: string): string {
  return js.replace(/<(\/script|!--)/gi, "<\\$1");
}

/** JSON inside `<script type="application/json">`: every `<` as `\u003c`, still valid JSON. */
function jsonText(data: unknown): string {
  return JSON.stringify(data).replace(/</g, "\\u003c");
}

/**
 * Data larger than this is inlined gzip-compressed (base64 in `#blockwise-data-gz`; the page
 * inflates it with the browser's DecompressionStream): a million-block report's quantised
 * layers are mostly runs of equal bytes, and the file must stay a few MB to open quickly.
 */
const COMPRESS_ABOVE = 256 * 1024;

function dataScript(data: ReportData): string {
  const json = jsonText(data);
  if (json.length <= COMPRESS_ABOVE) {
    return `<script type="application/json" id="blockwise-data">${json}</script>\n`;
  }
  const gz = Buffer.from(gzipSync(Buffer.from(json, "utf8"), { level: 6 })).toString("base64");
  return `<script type="application/gzip" id="blockwise-data-gz">${gz}</script>\n`;
}

function document(title: string, data: ReportData | null): string {
  const inlined = data === null ? "" : dataScript(data);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${escapeHtml(title)}</title>
<style>
${CLIENT_STYLE.replace(/<\/style/gi, "<\\/style")}</style>
</head>
<body>
<main id="blockwise-app"><noscript>This report needs JavaScript.</noscript></main>
${inlined}<script>
${scriptText(CLIENT_SCRIPT)}
</script>
</body>
</html>
`;
}

/** The report of `data`, the data inlined. */
export function renderReportPage(data: ReportData): string {
  return document(`blockwise report: ${baseName(data.target)}`, data);
}

/**
 * The live page of `serve`: no data inlined; it fetches `api/report` and then `api/frame`,
 * relative to its own URL (so serve it at a path ending in "/").
 */
export function renderLivePage(title: string): string {
  return document(title, null);
}
