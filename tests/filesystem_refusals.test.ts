/**
 * A file system that refuses (read-only, a file where a folder should be) is a sentence naming
 * the path and the fix, with exit 2 or 3, never an internal error (exit 70). The read-only cases
 * mount a small tmpfs read-only, which needs root; elsewhere they are skipped, saying why.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { EXIT_STORE_REFUSED, fileSystemFailure } from "../lib/cli/exit_codes.ts";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("fs-refusals");
const BUN = path.join(REPO_ROOT, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO_ROOT, "main.ts");

function blockwise(args: readonly string[], cwd: string): { code: number | null; err: string } {
  const r = spawnSync(BUN, [MAIN, ...args], { cwd, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, err: r.stderr };
}

const PIPELINE = `import fs from "node:fs";
const roi = (n) => ({ offset: [0], shape: [n] });
export default { tasks: [{ id: "t", totalRoi: roi(4), readRoi: roi(2), writeRoi: roi(2),
  ...(process.env.OUT ? { outputs: { o: { path: "out/{block_id}.txt" } } } : {}),
  process(block, _s, run) { if (run.outputs.o) fs.writeFileSync(run.outputs.o, "x"); } }] };
`;

describe("fileSystemFailure", () => {
  it("turns a file system refusal with a path into a sentence and exit 3", () => {
    const error = Object.assign(new Error("EROFS: read-only file system, rm '/data/x.new'"), {
      code: "EROFS",
      syscall: "rm",
      path: "/data/x.new",
    });
    assert.deepEqual(fileSystemFailure(error), {
      message:
        "Cannot rm /data/x.new: the file system holding /data/x.new is read-only (EROFS). Choose a folder on a writable file system",
      code: EXIT_STORE_REFUSED,
    });
    const files = Object.assign(new Error("EMFILE"), {
      code: "EMFILE",
      syscall: "open",
      path: "/a",
    });
    assert.match(
      fileSystemFailure(files)!.message,
      /too many open files \(EMFILE\)\. Raise the limit \(ulimit -n\)/,
    );
  });

  it("leaves bugs alone: no code, or no path", () => {
    assert.equal(fileSystemFailure(new TypeError("x is undefined")), null);
    assert.equal(fileSystemFailure(Object.assign(new Error("e"), { code: "EROFS" })), null);
    assert.equal(
      fileSystemFailure(Object.assign(new Error("e"), { code: "ERR_X", path: "/a" })),
      null,
    );
  });
});

describe("demo --dir naming a file", () => {
  it("exits 2 naming the path and the fix", () => {
    const dir = newDir("demo-file");
    const file = path.join(dir, "taken");
    fs.writeFileSync(file, "");
    const r = blockwise(["demo", "--dir", file], dir);
    assert.equal(r.code, 2, r.err);
    assert.match(
      r.err,
      new RegExp(`Cannot use ${file} as the demo folder \\(--dir\\): .*is a file`),
    );
    assert.doesNotMatch(r.err, /internal error/);
  });
});

/** A fresh tmpfs at a new folder, or why there cannot be one here. */
function mountTmpfs(): string | { skip: string } {
  const point = newDir("mount");
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", point], {
    encoding: "utf8",
  });
  if (r.status !== 0) {
    return {
      skip: `cannot mount a tmpfs here (${(r.stderr ?? "").trim() || r.error}); needs root`,
    };
  }
  after(() => {
    spawnSync("umount", [point]);
  });
  return point;
}

function remountReadOnly(point: string): void {
  const r = spawnSync("mount", ["-o", "remount,ro", point], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
}

describe("a read-only file system", () => {
  const root = process.getuid?.() === 0 ? mountTmpfs() : { skip: "needs root to mount a tmpfs" };
  const skip = typeof root === "string" ? {} : root;

  it("run and reset on an existing store: exit 3 naming the store and read-only", skip, () => {
    const point = root as string;
    fs.writeFileSync(path.join(point, "p.mjs"), PIPELINE);
    assert.equal(
      blockwise(["run", "p.mjs", "--tracking-dir", "t", "--no-progress"], point).code,
      0,
    );
    fs.mkdirSync(path.join(point, "out"));
    remountReadOnly(point);
    const store = path.join(point, "t", "t");
    const run = blockwise(["run", "p.mjs", "--tracking-dir", "t", "--no-progress"], point);
    assert.equal(run.code, 3, run.err);
    assert.match(
      run.err,
      new RegExp(
        `Cannot take the write lock of the tracking store ${store}: the file system holding ${store} is read-only \\(EROFS\\)`,
      ),
    );
    const reset = blockwise(["reset", store, "--yes"], point);
    assert.equal(reset.code, 3, reset.err);
    assert.match(reset.err, /read-only \(EROFS\)/);
    const demo = blockwise(["demo", "--dir", path.join(point, "demo")], point);
    assert.equal(demo.code, 2, demo.err);
    assert.match(demo.err, /as the demo folder \(--dir\): the file system holding .* is read-only/);
    // Declared outputs on the read-only file system, the store elsewhere: refused before any block.
    const elsewhere = newDir("rw-tracking");
    const outputs = spawnSync(BUN, [
      MAIN,
      "run",
      "p.mjs",
      "--tracking-dir",
      elsewhere,
      "--no-progress",
    ], {
      cwd: point,
      encoding: "utf8",
      env: { ...process.env, OUT: "1" },
    });
    assert.equal(outputs.status, 3, outputs.stderr);
    assert.match(
      outputs.stderr,
      new RegExp(
        `Cannot write output "o" of task "t" in ${point}/out: the file system holding .* is read-only`,
      ),
    );
    assert.doesNotMatch(run.err + reset.err + demo.err + outputs.stderr, /internal error/);
  });
});
