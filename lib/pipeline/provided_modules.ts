/**
 * The npm packages a pipeline file may import without installing them: `zarrita`,
 * `@zarrita/storage` (with its subpath entries) and `blockwise` (the helper module,
 * lib/helpers/). blockwise carries a copy of each (inside the compiled binary, or in its own
 * node_modules for a source run). A pipeline whose folder, or a folder above it, has a
 * node_modules providing the package gets that local install instead, as Node would resolve it.
 *
 * `provideModulesFor` is called before the pipeline module is imported, by the coordinator and
 * by every Web Worker; `moduleChoices` is what `plan` and `--version` report.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { isRecord } from "../errors.ts";
import { provideVirtualModules, type VirtualModule } from "../runtime/virtual_modules.ts";
import { VERSION } from "../version.ts";
import zarritaPackage from "../../node_modules/zarrita/package.json" with { type: "json" };
import storagePackage from "../../node_modules/@zarrita/storage/package.json" with {
  type: "json",
};
import numcodecsPackage from "../../node_modules/numcodecs/package.json" with { type: "json" };

type Namespace = Readonly<Record<string, unknown>>;

interface CarriedPackage {
  readonly name: string;
  readonly version: string;
  /**
   * Subpath ("." or "./fs") to blockwise's copy of that entry, imported only when a pipeline is
   * about to be (so that commands which load none, and `--version`, do not pay for it).
   */
  readonly entries: Readonly<Record<string, () => Promise<Namespace>>>;
}

const CARRIED: readonly CarriedPackage[] = [
  { name: "zarrita", version: zarritaPackage.version, entries: { ".": () => import("zarrita") } },
  {
    name: "@zarrita/storage",
    version: storagePackage.version,
    entries: {
      ".": () => import("@zarrita/storage"),
      "./fetch": () => import("@zarrita/storage/fetch"),
      "./fs": () => import("@zarrita/storage/fs"),
      "./ref": () => import("@zarrita/storage/ref"),
      "./zip": () => import("@zarrita/storage/zip"),
    },
  },
  { name: "blockwise", version: VERSION, entries: { ".": () => import("../helpers/mod.ts") } },
];

/** The packages and versions blockwise carries, for `--version`. */
export function carriedPackages(): { name: string; version: string }[] {
  return [
    ...CARRIED.map(({ name, version }) => ({ name, version })),
    { name: "numcodecs", version: numcodecsPackage.version },
  ];
}

/** The second line of `--version`: what a pipeline may import without installing it. */
export function carriedModulesLine(): string {
  const list = carriedPackages().map(({ name, version }) => `${name} ${version}`);
  return `modules for pipelines: ${list.join(", ")} (a pipeline's own node_modules wins)`;
}

/** Which copy of a carried package a pipeline gets. */
export interface ModuleChoice {
  readonly name: string;
  readonly version: string;
  /** "bundled": blockwise's copy; "local": the install at `folder`. */
  readonly source: "bundled" | "local";
  /** The local install's folder, or null for blockwise's copy. */
  readonly folder: string | null;
}

/** The copy of each carried package a pipeline at `pipelinePath` imports. */
export function moduleChoices(pipelinePath: string): ModuleChoice[] {
  return CARRIED.map((carried) => {
    const local = findLocalPackage(carried.name, path.dirname(pipelinePath));
    return local === null
      ? { name: carried.name, version: carried.version, source: "bundled", folder: null }
      : { name: carried.name, version: local.version, source: "local", folder: local.folder };
  });
}

/** One line per package, as `plan` prints them. */
export function describeModuleChoices(choices: readonly ModuleChoice[]): string[] {
  return choices.map((c) =>
    `${c.name} ${c.version} (${c.source === "bundled" ? "bundled" : `local: ${c.folder}`})`
  );
}

/**
 * Makes the carried packages importable by the pipeline at `pipelinePath`: a local install
 * where there is one, blockwise's copy (with every Zarr codec writable) everywhere else.
 */
export async function provideModulesFor(pipelinePath: string): Promise<ModuleChoice[]> {
  const { registerZarrCodecs } = await import("../zarr/codecs.ts");
  registerZarrCodecs();
  // Blosc through the system's libblosc where there is one (BLOCKWISE_LIBBLOSC chooses).
  const { registerNativeCodecs } = await import("../runtime/blosc_native.ts");
  await registerNativeCodecs();
  const choices = moduleChoices(pipelinePath);
  const modules: VirtualModule[] = [];
  for (const [i, carried] of CARRIED.entries()) {
    const choice = choices[i]!;
    for (const [subpath, load] of Object.entries(carried.entries)) {
      modules.push({
        specifier: subpath === "." ? carried.name : `${carried.name}/${subpath.slice(2)}`,
        bundled: await load(),
        localEntry: choice.folder === null ? null : packageEntry(choice.folder, subpath),
      });
    }
  }
  provideVirtualModules(modules);
  return choices;
}

/** Node's lookup of a package by name: node_modules/<name> in `from` or a folder above it. */
export function findLocalPackage(
  name: string,
  from: string,
): { folder: string; version: string } | null {
  for (let dir = path.resolve(from);; dir = path.dirname(dir)) {
    const folder = path.join(dir, "node_modules", name);
    const manifest = readManifest(folder);
    if (manifest !== null) {
      const version = manifest["version"];
      return { folder, version: typeof version === "string" ? version : "unknown version" };
    }
    if (path.dirname(dir) === dir) return null;
  }
}

/**
 * The file an ES module import of `subpath` of the package in `folder` loads: its `exports`
 * entry (conditions "deno", "import", "default", in that order), else `module`/`main`.
 */
export function packageEntry(folder: string, subpath: string): string | null {
  const manifest = readManifest(folder);
  if (manifest === null) return null;
  const exports = manifest["exports"];
  let target: unknown;
  if (typeof exports === "string" || isConditions(exports)) {
    target = subpath === "." ? exports : undefined;
  } else if (isRecord(exports)) {
    target = exports[subpath];
  } else if (subpath === ".") {
    target = manifest["module"] ?? manifest["main"] ?? "index.js";
  } else {
    target = subpath;
  }
  const file = pickCondition(target);
  return file === null ? null : path.join(folder, file);
}

function pickCondition(target: unknown): string | null {
  if (typeof target === "string") return target;
  if (!isRecord(target)) return null;
  for (const condition of ["deno", "import", "default"]) {
    if (condition in target) return pickCondition(target[condition]);
  }
  return null;
}

function isConditions(value: unknown): boolean {
  return isRecord(value) && Object.keys(value).every((key) => !key.startsWith("."));
}

function readManifest(folder: string): Record<string, unknown> | null {
  let text: string;
  try {
    text = fs.readFileSync(path.join(folder, "package.json"), "utf8");
  } catch {
    return null;
  }
  try {
    const value: unknown = JSON.parse(text);
    return isRecord(value) ? value : null;
  } catch {
    return null;
  }
}
