/**
 * House rules about the code's shape, checked on the sources themselves: no file in lib/ over
 * 450 lines, no import cycle among lib/ and workers/, every import in lib/ pointing down the
 * layers (LAYERS), and a run loop that never names an executor kind (executors come from a
 * factory; see lib/execute/executor.ts).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";

const MAX_LINES = 450;

/**
 * lib/'s folders (and its two top-level files) from the bottom up: a module may import its own
 * layer and the layers below it, never one above. The order of docs/design/ARCHITECTURE.md
 * (geometry, blocks, graph, schedule, pipeline, execute, ..., cli), with the folders it does
 * not name put where their imports place them. lib/run, a run's vocabulary (its result, block
 * failures and reports, the sink that keeps them: pure data), sits just above the blocks and
 * counters it names and below tracking, outputs and execute, which all speak it.
 */
const LAYERS: readonly (readonly string[])[] = [
  ["errors.ts", "geometry"],
  ["blocks"],
  ["graph"],
  ["schedule"],
  ["run"],
  ["zarr"],
  ["runtime"],
  ["version.ts", "helpers"],
  ["import_map"],
  ["pipeline"],
  ["masks", "demo"],
  ["tracking"],
  ["outputs"],
  ["execute"],
  ["remote"],
  ["report", "view", "daisy"],
  ["cli"],
];

/** The layer of a repository-relative path under lib/ (its folder, or the file at lib/'s top). */
function layerOf(rel: string): number {
  const unit = rel.split("/")[1]!;
  const layer = LAYERS.findIndex((names) => names.includes(unit));
  if (layer < 0) throw new Error(`${rel}: lib/${unit} is in no layer of LAYERS`);
  return layer;
}

/** `from -> to` for every static import in lib/ that points to a higher layer. */
function upwardImports(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const up: string[] = [];
  for (const [from, imports] of graph) {
    if (!from.startsWith("lib/")) continue;
    for (const to of imports) {
      if (to.startsWith("lib/") && layerOf(to) > layerOf(from)) up.push(`${from} -> ${to}`);
    }
  }
  return up.sort();
}

/** An executor class named, or an executor's class tested (`executor instanceof ...`). */
const NAMES_AN_EXECUTOR_KIND =
  /\b(?:WorkerExecutor|CommandExecutor|StreamExecutor)\b|\binstanceof\s+\w*Executor\b|\b(?:e|executor|\w*Executor)\s+instanceof\b/;

/** Repository-relative paths of the .ts files under `dir`, sorted. */
function tsFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const entry of fs.readdirSync(path.join(REPO_ROOT, rel), { withFileTypes: true })) {
      const child = path.posix.join(rel, entry.name);
      if (entry.isDirectory()) walk(child);
      else if (entry.isFile() && entry.name.endsWith(".ts")) out.push(child);
    }
  };
  walk(dir);
  return out.sort();
}

function read(rel: string): string {
  return fs.readFileSync(path.join(REPO_ROOT, rel), "utf8");
}

function lineCount(text: string): number {
  const lines = text.split("\n");
  return text.endsWith("\n") ? lines.length - 1 : lines.length;
}

/**
 * The relative modules a file imports or re-exports statically (`import ... from "./x.ts"`,
 * `import "./x.ts"`, `export ... from "./x.ts"`), type-only imports included, resolved to
 * repository-relative paths. Dynamic `import()` is left out: it cannot form a load-time cycle.
 */
function staticImports(rel: string, text: string): string[] {
  const found = new Set<string>();
  const pattern =
    /^\s*(?:(?:import|export)\b[^;'"]*?\bfrom\s*|import\s*)["'](\.{1,2}\/[^"']+)["']/gm;
  for (const match of text.matchAll(pattern)) {
    found.add(path.posix.normalize(path.posix.join(path.posix.dirname(rel), match[1]!)));
  }
  return [...found].sort();
}

/** Every cycle's first appearance in a depth-first walk, as a path that ends where it starts. */
function findCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "closed">();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      const s = state.get(next);
      if (s === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (s === undefined) visit(next);
    }
    stack.pop();
    state.set(node, "closed");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return cycles;
}

describe("layout", () => {
  it(`no file in lib/ is over ${MAX_LINES} lines`, () => {
    const long = tsFiles("lib")
      .map((f) => ({ f, n: lineCount(read(f)) }))
      .filter(({ n }) => n > MAX_LINES)
      .map(({ f, n }) => `${f} (${n} lines)`);
    assert.deepEqual(long, [], `split these modules:\n  ${long.join("\n  ")}`);
  });

  it("no import cycle among lib/ and workers/", () => {
    const graph = new Map<string, string[]>();
    for (const f of [...tsFiles("lib"), ...tsFiles("workers")]) {
      graph.set(f, staticImports(f, read(f)));
    }
    assert.ok(graph.size > 50, `found only ${graph.size} modules under lib/ and workers/`);
    const cycles = findCycles(graph).map((c) => c.join(" -> "));
    assert.deepEqual(cycles, [], `break these import cycles:\n  ${cycles.join("\n  ")}`);
  });

  it("every import in lib/ points down the layers (or sideways within one)", () => {
    const graph = new Map<string, string[]>();
    for (const f of tsFiles("lib")) graph.set(f, staticImports(f, read(f)));
    const up = upwardImports(graph);
    assert.deepEqual(
      up,
      [],
      `these imports point up the layers (LAYERS, bottom first: ${
        LAYERS.map((l) => l.join(" ")).join(" < ")
      }); move what they need down:\n  ${up.join("\n  ")}`,
    );
  });

  it("the run loop names no executor class and never asks an executor what it is", () => {
    const loop = [
      "parallel_runner.ts",
      "executor_pool.ts",
      "dispatch.ts",
      "result_intake.ts",
      "block_source.ts",
      "completion.ts",
    ].map((f) => `lib/execute/${f}`);
    const named: string[] = [];
    for (const f of loop) {
      read(f).split("\n").forEach((line, i) => {
        if (NAMES_AN_EXECUTOR_KIND.test(line)) named.push(`${f}:${i + 1}: ${line.trim()}`);
      });
    }
    assert.deepEqual(
      named,
      [],
      `the run loop must only use the Executor interface:\n  ${named.join("\n  ")}`,
    );
  });
});

describe("layout checks themselves", () => {
  it("the layer rule catches an import up the layers, not one down or sideways", () => {
    const graph = new Map([
      ["lib/pipeline/x.ts", ["lib/remote/launch_template.ts", "lib/blocks/mod.ts"]],
      ["lib/execute/y.ts", ["lib/execute/z.ts", "lib/tracking/done_scan.ts", "lib/errors.ts"]],
      ["lib/report/r.ts", ["lib/view/v.ts"]],
    ]);
    assert.deepEqual(upwardImports(graph), [
      "lib/pipeline/x.ts -> lib/remote/launch_template.ts",
    ]);
    assert.throws(() => layerOf("lib/nowhere/a.ts"), /lib\/nowhere is in no layer/);
  });

  it("staticImports finds imports, type imports, side-effect imports and re-exports, not dynamic ones", () => {
    const text = [
      'import { a } from "./a.ts";',
      'import type { B } from "../b/b.ts";',
      'import "./side.ts";',
      'export * from "./re.ts";',
      'export { c } from "./c.ts";',
      "import {",
      "  d,",
      '} from "./d.ts";',
      'import fs from "node:fs";',
      'const lazy = await import("./lazy.ts");',
      'export const TEMPLATE = "./not_a_module.ts";',
      '// import { e } from "./commented.ts";',
    ].join("\n");
    assert.deepEqual(staticImports("lib/x/mod.ts", text), [
      "lib/b/b.ts",
      "lib/x/a.ts",
      "lib/x/c.ts",
      "lib/x/d.ts",
      "lib/x/re.ts",
      "lib/x/side.ts",
    ]);
  });

  it("the executor-kind rule catches class names and instanceof tests, not other instanceof", () => {
    for (
      const bad of [
        "if (executor instanceof WorkerExecutor) {",
        "const c = new CommandExecutor(spec, config);",
        "import type { StreamExecutor } from './stream_executor.ts';",
        "for (const e of task.executors) if (e instanceof Remote) n++;",
        "return x instanceof LocalExecutor;",
      ]
    ) {
      assert.ok(NAMES_AN_EXECUTOR_KIND.test(bad), bad);
    }
    for (
      const fine of [
        "if (answer instanceof Promise) {",
        "readonly executors = new Set<Executor>();",
      ]
    ) {
      assert.ok(!NAMES_AN_EXECUTOR_KIND.test(fine), fine);
    }
  });

  it("findCycles names a cycle and ignores a diamond", () => {
    const diamond = new Map([["a", ["b", "c"]], ["b", ["d"]], ["c", ["d"]], ["d", []]]);
    assert.deepEqual(findCycles(diamond), []);
    const cyclic = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["d"]]]);
    assert.deepEqual(findCycles(cyclic), [["a", "b", "c", "a"], ["d", "d"]]);
  });
});
