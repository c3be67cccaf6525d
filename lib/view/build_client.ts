/**
 * Writes lib/view/client_bundle.ts: the report page's browser code (lib/view/client/main.ts and
 * what it imports, with the parts of ECharts it registers) bundled by `bun build` into one
 * minified IIFE, and its CSS, as string constants. The compiled binary and Deno then carry the
 * page without a bundler or any text import. Run it after every change of lib/view/client/:
 * `bun lib/view/build_client.ts` (tests/view_page.test.ts fails while the two differ).
 */

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { STYLE } from "./client/style.ts";

const VIEW_DIR = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.join(VIEW_DIR, "..", "..");
export const CLIENT_DIR = path.join(VIEW_DIR, "client");
export const CLIENT_ENTRY = path.join(CLIENT_DIR, "main.ts");
export const BUNDLE_FILE = path.join(VIEW_DIR, "client_bundle.ts");
/** The pinned Bun of package.json: another version may minify differently. */
export const BUN = path.join(ROOT, "node_modules", ".bin", "bun");

export function echartsVersion(): string {
  const file = path.join(ROOT, "node_modules", "echarts", "package.json");
  const pkg: unknown = JSON.parse(fs.readFileSync(file, "utf8"));
  const version = typeof pkg === "object" && pkg !== null && "version" in pkg ? pkg.version : null;
  if (typeof version !== "string") throw new Error(`no version in ${file}`);
  return version;
}

/**
 * The files the bundle is made from: the client's sources, the data contract it reads and the
 * scheduler's block-ID function it bundles.
 */
export function clientSources(): string[] {
  const files = fs.readdirSync(CLIENT_DIR)
    .filter((f) => f.endsWith(".ts"))
    .sort()
    .map((f) => path.join(CLIENT_DIR, f));
  return [
    ...files,
    path.join(VIEW_DIR, "report_data.ts"),
    path.join(VIEW_DIR, "..", "blocks", "block_id.ts"),
  ];
}

/** SHA-256 over the client's sources and the ECharts version: changes whenever they do. */
export function clientSourcesSha256(): string {
  const hash = createHash("sha256");
  hash.update(`echarts ${echartsVersion()}\n`);
  for (const file of clientSources()) {
    hash.update(`${path.relative(ROOT, file).split(path.sep).join("/")}\0`);
    hash.update(fs.readFileSync(file));
    hash.update("\0");
  }
  return hash.digest("hex");
}

/** `bun build` of the client: one minified IIFE for browsers. */
export function bundleClientScript(): string {
  const r = spawnSync(
    BUN,
    ["build", CLIENT_ENTRY, "--target", "browser", "--format", "iife", "--minify"],
    { cwd: ROOT, encoding: "utf8", maxBuffer: 64 << 20 },
  );
  if (r.error) throw new Error(`cannot run ${BUN}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`bun build of ${CLIENT_ENTRY} failed:\n${r.stderr}`);
  return r.stdout.trim();
}

/** The generated module's text. */
export function clientBundleModule(script: string = bundleClientScript()): string {
  const version = echartsVersion();
  return `// Generated from lib/view/client/ by \`bun lib/view/build_client.ts\`: do not edit; change
// the client and run the script again. The script includes Apache ECharts ${version}
// (Apache License 2.0), tree-shaken. Left out of deno fmt and lint (deno.json): one minified line.

/** SHA-256 of the client's sources and the ECharts version this was built from. */
export const CLIENT_BUNDLE_SOURCES_SHA256 =
  ${JSON.stringify(clientSourcesSha256())};

/** The report page's CSS. */
export const CLIENT_STYLE: string =
  ${JSON.stringify(STYLE.trim() + "\n")};

/** The report page's script (${script.length} characters). */
export const CLIENT_SCRIPT: string =
  ${JSON.stringify(script)};
`;
}

if (import.meta.main) {
  const text = clientBundleModule();
  fs.writeFileSync(BUNDLE_FILE, text);
  console.log(`wrote ${BUNDLE_FILE} (${text.length} characters)`);
}
