/**
 * The README's two commands from a fresh clone: `npm start` (scripts/start.sh: install when
 * needed, build when stale, run the demo) and `npm test` (.ci/test: install when needed, say which
 * optional system packages are missing). The scripts run in a scratch copy of the repository whose
 * `npm`, `./compile.sh` and `./blockwise` are stand-ins that record their calls.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import process from "node:process";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const repo = path.resolve(import.meta.dirname!, "..");
const newDir = scratchDirs("setup-");

/** Write an executable shell script that appends its name and arguments to `calls.log`. */
function standIn(file: string, name: string, extra = ""): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(
    file,
    `#!/usr/bin/env bash\necho "${name} $*" >> "$CALLS"\n${extra}`,
    { mode: 0o755 },
  );
}

interface Clone {
  readonly root: string;
  readonly bin: string;
  readonly calls: string;
}

/** A copy of scripts/ and package.json with stand-in npm, compile.sh and blockwise. */
function fakeClone(label: string): Clone {
  const root = newDir(label);
  fs.cpSync(path.join(repo, "scripts"), path.join(root, "scripts"), { recursive: true });
  fs.copyFileSync(path.join(repo, "package.json"), path.join(root, "package.json"));
  fs.copyFileSync(path.join(repo, "package-lock.json"), path.join(root, "package-lock.json"));
  for (const d of ["lib", "workers", "python/blockwise"]) {
    fs.mkdirSync(path.join(root, d), { recursive: true });
  }
  fs.writeFileSync(path.join(root, "main.ts"), "");
  const bin = path.join(root, "fake-bin");
  // The stand-in npm ci makes what a real one makes: node_modules with bun, deno and the marker.
  standIn(
    path.join(bin, "npm"),
    "npm",
    "mkdir -p node_modules/.bin && touch node_modules/.bin/bun node_modules/.bin/deno && chmod +x node_modules/.bin/* && touch node_modules/.package-lock.json\n",
  );
  standIn(
    path.join(root, "compile.sh"),
    "compile.sh",
    'printf "#!/usr/bin/env bash\\necho \\"blockwise \\$*\\" >> \\"\\$CALLS\\"\\necho demo ran\\n" > blockwise && chmod +x blockwise\n',
  );
  return { root, bin, calls: path.join(root, "calls.log") };
}

function runScript(
  clone: Clone,
  script: string,
  args: string[] = [],
  env: Record<string, string> = {},
) {
  const r = spawnSync("bash", [path.join(clone.root, script), ...args], {
    cwd: clone.root,
    encoding: "utf8",
    env: {
      ...process.env,
      PATH: `${clone.bin}:${process.env["PATH"]}`,
      CALLS: clone.calls,
      ...env,
    },
  });
  const calls = fs.existsSync(clone.calls)
    ? fs.readFileSync(clone.calls, "utf8").trim().split("\n")
    : [];
  fs.rmSync(clone.calls, { force: true });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, calls };
}

/** Make `file` look modified `seconds` from now (git checkouts and edits move mtimes). */
function touchAt(file: string, seconds: number): void {
  const t = new Date(Date.now() + seconds * 1000);
  fs.utimesSync(file, t, t);
}

describe("npm start and npm test from a fresh clone", () => {
  it("npm start installs, builds and runs the demo once; a second start only runs the demo", () => {
    const clone = fakeClone("start");
    const first = runScript(clone, "scripts/start.sh");
    assert.equal(first.status, 0, first.stderr);
    assert.deepEqual(first.calls, [
      "npm ci --no-audit --no-fund",
      "compile.sh ",
      "blockwise demo",
    ]);
    assert.match(first.stdout, /demo ran/);
    assert.match(first.stdout, /Next: \.\/blockwise status blockwise-demo\/tracking/);

    const second = runScript(clone, "scripts/start.sh", ["--dir", "elsewhere"]);
    assert.equal(second.status, 0, second.stderr);
    assert.deepEqual(second.calls, ["blockwise demo --dir elsewhere"]);
    assert.match(second.stdout, /Next: \.\/blockwise status elsewhere\/tracking/);
  });

  it("a changed lockfile reinstalls, and a source newer than ./blockwise rebuilds it", () => {
    const clone = fakeClone("stale");
    assert.equal(runScript(clone, "scripts/start.sh").status, 0);
    touchAt(path.join(clone.root, "package-lock.json"), 5);
    touchAt(path.join(clone.root, "main.ts"), 5);
    const again = runScript(clone, "scripts/start.sh");
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(again.calls, [
      "npm ci --no-audit --no-fund",
      "compile.sh ",
      "blockwise demo",
    ]);
    assert.match(again.stderr, /main\.ts is newer than it/);
  });

  it("a failed install stops npm start with npm's error, before building", () => {
    const clone = fakeClone("fail");
    standIn(path.join(clone.bin, "npm"), "npm", 'echo "npm ERR! network" >&2; exit 1\n');
    const r = runScript(clone, "scripts/start.sh");
    assert.notEqual(r.status, 0);
    assert.deepEqual(r.calls, ["npm ci --no-audit --no-fund"]);
    assert.match(r.stderr, /npm ERR! network/);
  });

  it("npm test says which optional system packages are missing and the apt-get line", () => {
    const r = spawnSync("bash", [path.join(repo, "scripts/test_prerequisites.sh")], {
      encoding: "utf8",
      env: { ...process.env, BLOCKWISE_CHROMIUM: "/nonexistent/chromium" },
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /missing {2}chromium: the report and dashboard tests/);
    assert.match(r.stdout, /to run those too: sudo apt-get install chromium/);
  });
});
