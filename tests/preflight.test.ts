/**
 * What `run` checks before any block runs: a command's program exists, a Python module defines
 * the functions its task names. Each is one refusal (exit 2) with "did you mean", instead of a
 * failure per block and attempt.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { topLevelNames } from "../lib/pipeline/preflight.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("preflight");

function pipeline(dir: string, task: string): string {
  const file = path.join(dir, "p.mjs");
  fs.writeFileSync(
    file,
    `const roi = (n) => ({ offset: [0], shape: [n] });
export default { tasks: [{ id: "t", totalRoi: roi(8), readRoi: roi(2), writeRoi: roi(2), ${task} }] };
`,
  );
  return file;
}

describe("a command whose program is not there", () => {
  it("is refused before any block runs, with the closest program on PATH", async () => {
    const dir = newDir("program");
    const file = pipeline(dir, `command: ["pythn3", "-c", "pass"]`);
    for (const extra of [[], ["--serial"]]) {
      const r = await runCli(["run", file, "--no-progress", ...extra]);
      assert.equal(r.code, 2, describeRun(r));
      assert.match(
        r.stderr,
        /Task "t": the program "pythn3" of its command was not found on PATH\. Did you mean "python3"\? Install it, or give its full path in command\[0\]/,
      );
      assert.doesNotMatch(r.stderr, /failed after/);
    }
  });

  it("a path that does not exist is named with the folder it is relative to", async () => {
    const dir = newDir("program-path");
    const file = pipeline(dir, `command: ["./convert.sh"]`);
    const r = await runCli(["run", file, "--no-progress"], { cwd: dir });
    assert.equal(r.code, 2, describeRun(r));
    assert.match(
      r.stderr,
      /the program "\.\/convert\.sh" of its command does not exist or is not executable/,
    );
  });

  it("a program with a placeholder is left to each block", async () => {
    const dir = newDir("program-placeholder");
    const file = pipeline(dir, `command: ["true{task_id}"]`);
    const r = await runCli(["run", file, "--no-progress"]);
    assert.equal(r.code, 1, "the blocks ran and failed: the name is known per block only");
  });
});

describe("a Python module without the function its task names", () => {
  it("is refused before any worker starts, with did-you-mean", async () => {
    const dir = newDir("python");
    fs.writeFileSync(path.join(dir, "task.py"), "def process(block):\n    pass\n");
    const file = pipeline(dir, `python: { module: "task.py", process: "proces" }`);
    const r = await runCli(["run", file, "--no-progress"]);
    assert.equal(r.code, 2, describeRun(r));
    assert.match(
      r.stderr,
      /Task "t": the Python module task\.py defines no "proces" \(python\.process\)\. Did you mean "process"\? Define def proces\(\.\.\.\) there, or name the right function in python\.process/,
    );
  });
});

describe("topLevelNames", () => {
  it("reads defs, classes, assignments and imports at the top level only", () => {
    const names = topLevelNames(
      [
        "import numpy as np, os",
        "from scipy.ndimage import (gaussian_filter,",
        "    label as lbl)",
        "import a.b.c",
        "def process(block):",
        "    inner = 1",
        "async def setup():",
        "    pass",
        "class Model: pass",
        "THRESHOLD: float = 0.5",
        "count = 0",
        "x == 1",
      ].join("\n"),
    );
    assert.deepEqual(
      [...names!].sort(),
      [
        "Model",
        "THRESHOLD",
        "a",
        "count",
        "gaussian_filter",
        "lbl",
        "np",
        "os",
        "process",
        "setup",
      ],
    );
  });

  it("gives up (null) where a module may bind names unseen", () => {
    assert.equal(topLevelNames("from helpers import *\n"), null);
    assert.equal(topLevelNames("def __getattr__(name):\n    return 1\n"), null);
  });
});
