/**
 * Scripting without npm installs, as a user meets it: the compiled binary copied into an empty
 * folder with examples/compressed_zarr (a pipeline importing zarrita, @zarrita/storage and
 * blockwise; a blosc-compressed input; an empty zstd-compressed declared output), run with a
 * PATH that holds no node, npm, bun or deno, killed with SIGKILL, resumed, and its output
 * compared with a reference computed here. The same example runs from the sources under Bun and
 * Deno, and a local install next to a pipeline wins over blockwise's copy.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import * as zarr from "zarrita";
import { openArray } from "../lib/helpers/mod.ts";
import { findLocalPackage } from "../lib/pipeline/provided_modules.ts";
import { REPO_ROOT, waitUntil } from "./fixtures/parallel/harness.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("standalone");
const EXAMPLE = path.join(REPO_ROOT, "examples", "compressed_zarr");
const SLOW = { timeout: 240_000 };
const BIN = path.join(REPO_ROOT, "node_modules", ".bin");

/** The example's input values: (31 i + 17 j) mod 1000 on 20 x 30. */
function raw(i: number, j: number): number {
  return i < 0 || j < 0 || i >= 20 || j >= 30 ? 0 : (i * 31 + j * 17) % 1000;
}

/** The 3x3 mean (rounded down, 0 outside) the example computes, by a loop of its own. */
function reference(): number[] {
  const out: number[] = [];
  for (let i = 0; i < 20; i++) {
    for (let j = 0; j < 30; j++) {
      let sum = 0;
      for (let di = -1; di <= 1; di++) for (let dj = -1; dj <= 1; dj++) sum += raw(i + di, j + dj);
      out.push(Math.floor(sum / 9));
    }
  }
  return out;
}

/** A copy of the example in a fresh folder with nothing else in it (and no node_modules above). */
function exampleCopy(label: string): string {
  const dir = newDir(label);
  fs.cpSync(EXAMPLE, dir, { recursive: true });
  assert.equal(findLocalPackage("zarrita", dir), null, `a node_modules above ${dir} has zarrita`);
  return dir;
}

async function outputValues(dir: string): Promise<number[]> {
  const { data } = await zarr.get(await openArray(path.join(dir, "out.zarr")));
  return Array.from(data as Uint16Array);
}

function zstdChunks(dir: string): number {
  const root = path.join(dir, "out.zarr", "c");
  let count = 0;
  for (const row of fs.existsSync(root) ? fs.readdirSync(root) : []) {
    for (const column of fs.readdirSync(path.join(root, row))) {
      const bytes = fs.readFileSync(path.join(root, row, column));
      assert.deepEqual([...bytes.subarray(0, 4)], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
      count++;
    }
  }
  return count;
}

let built: string | null = null;

/** Builds ./blockwise from these sources (once per test file). */
function compiledBinary(): string {
  if (built !== null) return built;
  const r = spawnSync("bash", [path.join(REPO_ROOT, "compile.sh")], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 180_000,
  });
  assert.equal(r.status, 0, `compile.sh failed: ${r.stderr}`);
  built = path.join(REPO_ROOT, "blockwise");
  return built;
}

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runIn(dir: string, argv: readonly string[], env: Record<string, string>): Exit {
  const r = spawnSync(argv[0]!, argv.slice(1), {
    cwd: dir,
    env,
    encoding: "utf8",
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("a pipeline next to nothing but the compiled binary", () => {
  it(
    "reads blosc, writes zstd through a declared output, resumes after SIGKILL",
    SLOW,
    async () => {
      const dir = exampleCopy("binary");
      fs.copyFileSync(compiledBinary(), path.join(dir, "blockwise"));
      fs.chmodSync(path.join(dir, "blockwise"), 0o755);
      const emptyPath = newDir("path");
      const env = { PATH: emptyPath, HOME: dir };
      for (const tool of ["node", "npm", "bun", "deno"]) {
        assert.ok(!fs.existsSync(path.join(emptyPath, tool)));
      }

      const plan = runIn(dir, ["./blockwise", "plan", "pipeline.mjs"], env);
      assert.equal(plan.code, 0, plan.stderr);
      assert.match(
        plan.stdout,
        /Modules: zarrita \d+\.\d+\.\d+ \(bundled\), @zarrita\/storage \d+\.\d+\.\d+ \(bundled\), blockwise \S+ \(bundled\)/,
      );

      // A slow first run, killed once a block's chunk is committed.
      const first = spawn("./blockwise", ["run", "pipeline.mjs", "--tracking-dir", "tracking"], {
        cwd: dir,
        env: { ...env, SMOOTH_PAUSE_MS: "700" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let firstErr = "";
      first.stderr.on("data", (chunk: Buffer) => (firstErr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) =>
        first.on("exit", (code) => resolve(code))
      );
      await waitUntil(
        () => zstdChunks(dir) >= 1,
        "the first committed chunk of out.zarr",
        60_000,
      ).catch((error) => assert.fail(`${error}; the run printed: ${firstErr}`));
      // The lock names the holder's command as it can be retyped, not Bun's /$bunfs/ path.
      const status = runIn(dir, ["./blockwise", "status", "tracking/smooth"], env);
      assert.match(
        status.stdout,
        new RegExp(
          `held by pid ${first.pid} .*: ${dir}/blockwise run pipeline\\.mjs --tracking-dir tracking`,
        ),
      );
      assert.doesNotMatch(status.stdout, /\$bunfs/);
      // The ledger marks a block done just after its commit; blocks take 700 ms, so 300 ms
      // later the first blocks are marked and the next ones still run.
      await new Promise((resolve) => setTimeout(resolve, 300));
      first.kill("SIGKILL");
      await exited;
      const committed = zstdChunks(dir);
      assert.ok(committed < 6, `the run finished all ${committed} blocks before the kill`);

      const second = runIn(dir, [
        "./blockwise",
        "run",
        "pipeline.mjs",
        "--tracking-dir",
        "tracking",
        "--no-progress",
      ], env);
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stdout + second.stderr, /resumed, [1-5]\/6 blocks already done/);
      // The compressed chunks of the killed run were committed, hashed and are adopted as they are.
      assert.match(
        second.stdout + second.stderr,
        /Task "smooth": outputs reconciled: [1-5] recorded and present/,
      );
      assert.equal(zstdChunks(dir), 6);
      assert.deepEqual(await outputValues(dir), reference());

      const verify = runIn(dir, ["./blockwise", "verify", "tracking"], env);
      assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    },
  );
});

describe("remote workers of the bare binary", () => {
  it("load zarrita and blockwise the same way (launch: a command)", SLOW, async () => {
    const dir = exampleCopy("remote");
    fs.copyFileSync(compiledBinary(), path.join(dir, "blockwise"));
    fs.chmodSync(path.join(dir, "blockwise"), 0o755);
    fs.writeFileSync(
      path.join(dir, "remote.mjs"),
      `import local from "./pipeline.mjs";
export default {
  tasks: local.tasks.map((task) => ({ ...task, launch: { kind: "command", argv: ["{worker}"] } })),
};
`,
    );
    const env = { PATH: newDir("remote-path"), HOME: dir };
    const r = runIn(dir, [
      "./blockwise",
      "run",
      "remote.mjs",
      "--tracking-dir",
      "t",
      "--no-progress",
    ], env);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout + r.stderr, /remote worker logs/);
    assert.deepEqual(await outputValues(dir), reference());
  });
});

describe("the same pipeline from the sources", () => {
  for (
    const [runtime, argv] of [
      ["Bun", [path.join(BIN, "bun"), path.join(REPO_ROOT, "main.ts")]],
      ["Deno", [path.join(BIN, "deno"), "run", "-A", path.join(REPO_ROOT, "main.ts")]],
    ] as const
  ) {
    it(`runs under ${runtime} with blockwise's copies of the modules`, SLOW, async () => {
      const dir = exampleCopy(runtime);
      const env = { PATH: process.env["PATH"] ?? "", HOME: dir };
      const r = runIn(
        dir,
        [...argv, "run", "pipeline.mjs", "--tracking-dir", "t", "--no-progress"],
        env,
      );
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(await outputValues(dir), reference());
    });

    it(`under ${runtime}, a local install next to the pipeline wins`, SLOW, () => {
      const dir = newDir(`local-${runtime}`);
      const modules = path.join(dir, "node_modules");
      for (
        const name of [
          "zarrita",
          "@zarrita/storage",
          "numcodecs",
          "fflate",
          "unzipit",
          "reference-spec-reader",
        ]
      ) {
        fs.cpSync(path.join(REPO_ROOT, "node_modules", name), path.join(modules, name), {
          recursive: true,
        });
      }
      // The local copy announces itself when it is evaluated.
      const entry = path.join(modules, "zarrita", "dist", "src", "index.js");
      fs.appendFileSync(entry, "\nglobalThis.localZarrita = (globalThis.localZarrita ?? 0) + 1;\n");
      const manifest = path.join(modules, "zarrita", "package.json");
      const json = JSON.parse(fs.readFileSync(manifest, "utf8")) as Record<string, unknown>;
      fs.writeFileSync(manifest, JSON.stringify({ ...json, version: "0.7.5-local" }));
      fs.writeFileSync(
        path.join(dir, "pipeline.mjs"),
        `import * as zarr from "zarrita";
import { openArray } from "blockwise";
const local = () => globalThis.localZarrita === 1 && typeof zarr.open === "function";
if (!local()) throw new Error("the pipeline did not get the local zarrita");
export default { tasks: [{ id: "t", totalRoi: { offset: [0], shape: [4] }, readRoi: { offset: [0], shape: [2] },
  writeRoi: { offset: [0], shape: [2] }, maxWorkers: 2,
  process() { if (!local() || typeof openArray !== "function") throw new Error("the worker did not get it"); } }] };
`,
      );
      const env = { PATH: process.env["PATH"] ?? "", HOME: dir };
      const run = runIn(dir, [...argv, "run", "pipeline.mjs", "--no-progress"], env);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout + run.stderr, /All 2 blocks completed/);
      const plan = runIn(dir, [...argv, "plan", "pipeline.mjs"], env);
      assert.match(
        plan.stdout,
        new RegExp(
          `Modules: zarrita 0\\.7\\.5-local \\(local: ${modules}/zarrita\\), @zarrita/storage \\S+ \\(local: ${modules}/@zarrita/storage\\), blockwise \\S+ \\(bundled\\)`,
        ),
      );
    });
  }
});

describe("the guide's Scripting without npm", () => {
  const readme = fs.readFileSync(path.join(REPO_ROOT, "docs", "guide", "javascript.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Scripting without npm"));
  const blocks = [...section.matchAll(/```(\w*)\n([\s\S]*?)```/g)].slice(0, 3);

  it("shows examples/compressed_zarr/pipeline.mjs exactly", () => {
    const example = fs.readFileSync(path.join(EXAMPLE, "pipeline.mjs"), "utf8");
    assert.equal(blocks[0]?.[1], "js");
    assert.equal(blocks[0]?.[2], example);
  });

  it("shows the Modules line plan prints for it", () => {
    const dir = exampleCopy("readme");
    const r = runIn(dir, [
      path.join(BIN, "bun"),
      path.join(REPO_ROOT, "main.ts"),
      "plan",
      "pipeline.mjs",
    ], {
      PATH: process.env["PATH"] ?? "",
      HOME: dir,
    });
    assert.equal(r.code, 0, r.stderr);
    const shown = blocks[2]?.[2]?.trim();
    assert.equal(shown, r.stdout.trim().split("\n").at(-1));
  });
});

describe("Deno's import-map shims (lib/import_map/)", () => {
  const shims: Record<string, [string, () => Promise<object>]> = {
    "zarrita": ["zarrita.ts", () => import("zarrita")],
    "@zarrita/storage": ["zarrita_storage.ts", () => import("@zarrita/storage")],
    "@zarrita/storage/fetch": ["zarrita_storage_fetch.ts", () => import("@zarrita/storage/fetch")],
    "@zarrita/storage/fs": ["zarrita_storage_fs.ts", () => import("@zarrita/storage/fs")],
    "@zarrita/storage/ref": ["zarrita_storage_ref.ts", () => import("@zarrita/storage/ref")],
    "@zarrita/storage/zip": ["zarrita_storage_zip.ts", () => import("@zarrita/storage/zip")],
    "blockwise": ["blockwise.ts", () => import("../lib/helpers/mod.ts")],
  };

  it("cover every specifier deno.json maps", () => {
    const config = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "deno.json"), "utf8")) as {
      imports: Record<string, string>;
    };
    assert.deepEqual(Object.keys(config.imports).sort(), Object.keys(shims).sort());
    for (const [specifier, [file]] of Object.entries(shims)) {
      assert.equal(config.imports[specifier], `./lib/import_map/${file}`);
    }
  });

  for (const [specifier, [file, real]] of Object.entries(shims)) {
    it(`export exactly the names of ${specifier}`, async () => {
      const shim = await import(`../lib/import_map/${file}`) as object;
      assert.deepEqual(Object.keys(shim).sort(), Object.keys(await real()).sort());
    });
  }
});
