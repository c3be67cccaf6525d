/**
 * What a run prints when a Python task goes wrong before or outside its blocks, through the CLI:
 * the first failure's traceback (Python) or stack (JavaScript) under `--no-progress` too; an
 * interpreter that exits at once (a shim printing "command not found", status 127) is named
 * with its stderr once, and the task abandoned after a few such starts instead of a dozen
 * restarts; a syntax error in the module is refused by `plan` at its file, line and column, and
 * a run says the module failed to import, with the traceback once.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { pythonMissing } from "./fixtures/python_peer.ts";
import { describeRun, runArgs, runCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("pyfail");
const missing = pythonMissing();
const SLOW = { timeout: 120_000, ...(missing === null ? {} : { skip: missing }) };

/** Write the pipeline (`tasks` is the array's source) and the Python module beside it. */
function write(dir: string, tasks: string, python: string): string {
  fs.writeFileSync(path.join(dir, "task.py"), python);
  const file = path.join(dir, "pipeline.mjs");
  fs.writeFileSync(file, `export default { tasks: [${tasks}] };\n`);
  return file;
}

/** A task of `n` one-voxel blocks in 1-D, without conflicts. */
function line(id: string, n: number, extra: string): string {
  return `{
    id: ${JSON.stringify(id)},
    totalRoi: { offset: [0], shape: [${n}] }, readRoi: { offset: [0], shape: [1] },
    writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false,
    ${extra}
  }`;
}

describe("Python failures on the console", () => {
  it(
    "show the first failure's traceback and stack with --no-progress (Python and JS)",
    SLOW,
    async () => {
      const dir = newDir("no-progress");
      const file = write(
        dir,
        line("py", 3, `maxRetries: 0, python: { module: "task.py" }`) + "," +
          line(
            "js",
            3,
            `maxRetries: 0, process(block) {
              if (block.index[0] === 1) throw new RangeError("bad js block " + block.id);
            }`,
          ),
        `def process(block):\n    if block.index[0] == 2:\n        raise ValueError("bad block %d" % block.id)\n`,
      );
      const r = await runCli(runArgs(file, path.join(dir, "tracking")), { cwd: dir });
      assert.equal(r.code, 1, describeRun(r));
      assert.match(r.stderr, /✗ py\/2 \(2\) failed after 1 attempt: ValueError: bad block 2/);
      assert.match(r.stderr, /Traceback \(most recent call last\):/, r.stderr);
      assert.match(r.stderr, /task\.py", line 3, in process/, r.stderr);
      assert.match(r.stderr, /✗ js\/1 \(1\) failed after 1 attempt: bad js block 1/);
      assert.match(r.stderr, /at process \(.*pipeline\.mjs:\d+:\d+\)/, r.stderr);
      assert.doesNotMatch(r.stderr, /block_worker/, "blockwise's own frames are left out");
    },
  );
});

describe("A Python interpreter that exits at once", () => {
  it(
    "print its output once and abandon the task after a few starts, saying what to fix",
    SLOW,
    async () => {
      const dir = newDir("shim");
      const shim = path.join(dir, "python3.12");
      fs.writeFileSync(
        shim,
        `#!/bin/sh\necho "pyenv: python3.12: command not found" >&2\necho "  3.12.1" >&2\nexit 127\n`,
      );
      fs.chmodSync(shim, 0o755);
      const file = write(
        dir,
        line("t", 4, `python: { module: "task.py", interpreter: ${JSON.stringify(shim)} }`),
        `def process(block):\n    pass\n`,
      );
      const tracking = path.join(dir, "tracking");
      const r = await runCli(runArgs(file, tracking), { cwd: dir });
      assert.equal(r.code, 1, describeRun(r));
      const lines = r.stderr.split("\n");
      // Its output, under the first failure, once.
      assert.equal(
        lines.filter((l) => l === "    pyenv: python3.12: command not found").length,
        1,
        r.stderr,
      );
      assert.match(r.stderr, /worker \d+ could not start: ".*python3\.12" exited with status 127/);
      const restarts = lines.filter((l) => l.includes("was terminated")).length;
      assert.ok(restarts >= 2 && restarts <= 3, `${restarts} workers started:\n${r.stderr}`);
      assert.match(r.stderr, /not restarted: its starts fail the same way every time/);
      assert.match(
        r.stderr,
        /Task "t" abandoned: its workers exit before they connect: ".*python3\.12" exited with status 127 before it connected; its output begins: pyenv: python3\.12: command not found \/ 3\.12\.1; check the task's python\.interpreter/,
      );
      const logs = fs.readdirSync(path.join(tracking, ".workers")).filter((n) =>
        !n.startsWith("blockwise-client-")
      ).flatMap((run) => fs.readdirSync(path.join(tracking, ".workers", run)));
      assert.equal(logs.length, restarts, logs.join(", "));
    },
  );
});

describe("A Python syntax error", () => {
  const SOURCE = `import os\n\ndef process(block):\n    return 1 +\n`;

  it("is refused by plan at its file, line and column", SLOW, async () => {
    const dir = newDir("syntax-plan");
    const file = write(dir, line("t", 2, `python: { module: "task.py" }`), SOURCE);
    const r = await runCli(["plan", file], { cwd: dir });
    assert.equal(r.code, 2, describeRun(r));
    assert.match(
      r.stderr,
      /Task "t": the Python module does not compile: .*task\.py:4:\d+: SyntaxError: invalid syntax\n {4}return 1 \+\n {4}\s*\^/,
    );
    assert.ok(!fs.existsSync(path.join(dir, "__pycache__")), "no .pyc written");
    const fine = write(
      dir,
      line("t", 2, `python: { module: "task.py" }`),
      "def process(b):\n    pass\n",
    );
    assert.equal((await runCli(["plan", fine], { cwd: dir })).code, 0);
  });

  it("fails the run as a module that failed to import, its traceback once", SLOW, async () => {
    const dir = newDir("syntax-run");
    const file = write(dir, line("t", 2, `python: { module: "task.py" }`), SOURCE);
    const r = await runCli(runArgs(file, path.join(dir, "tracking")), { cwd: dir });
    assert.equal(r.code, 1, describeRun(r));
    assert.match(r.stderr, /Task "t": the module failed to import in worker \d+: SyntaxError/);
    assert.equal(
      r.stderr.split("\n").filter((l) => l === "    SyntaxError: invalid syntax").length,
      1,
      r.stderr,
    );
    assert.match(r.stderr, /task\.py", line 4/);
    assert.match(r.stderr, /Task "t" abandoned: the module failed to import: SyntaxError/);
    assert.doesNotMatch(r.stderr, /setup failed/);
  });
});
