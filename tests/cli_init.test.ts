/**
 * `blockwise init`: a starter pipeline that runs as it is (JavaScript, or Python with a module),
 * shows every task field, and never overwrites a file.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { JS_PIPELINE, PYTHON_PIPELINE } from "../lib/cli/init_templates.ts";
import { TASK_FIELDS } from "../lib/pipeline/validate.ts";
import { pythonMissing } from "./fixtures/python_peer.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("init");
const noPython = pythonMissing();

describe("blockwise init", () => {
  it("writes a JavaScript pipeline that runs as it is, and a .gitignore", async () => {
    const dir = path.join(newDir("js"), "starter");
    const init = await runCli(["init", dir]);
    assert.equal(init.code, 0, describeRun(init));
    assert.match(init.stdout, /Wrote .*pipeline\.mjs, .*\.gitignore\nNext:/);
    assert.deepEqual(fs.readdirSync(dir).sort(), [".gitignore", "pipeline.mjs"]);
    assert.match(fs.readFileSync(path.join(dir, ".gitignore"), "utf8"), /^tracking\/$/m);
    const run = await runCli(
      ["run", "pipeline.mjs", "--tracking-dir", "tracking", "--no-progress"],
      {
        cwd: dir,
      },
    );
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(fs.readdirSync(path.join(dir, "out")).length, 16);
    const summary = JSON.parse(fs.readFileSync(path.join(dir, "out", "0,0.json"), "utf8"));
    assert.deepEqual([summary.index, summary.voxels, summary.threshold], [[0, 0], 4096, 0.5]);
  });

  it(
    "--python writes a pipeline and its module that run as they are",
    noPython === null ? {} : { skip: noPython },
    async () => {
      const dir = newDir("python");
      assert.equal((await runCli(["init", dir, "--python"])).code, 0);
      assert.deepEqual(fs.readdirSync(dir).sort(), [".gitignore", "pipeline.mjs", "task.py"]);
      const run = await runCli([
        "run",
        "pipeline.mjs",
        "--tracking-dir",
        "tracking",
        "--no-progress",
      ], {
        cwd: dir,
      });
      assert.equal(run.code, 0, describeRun(run));
      assert.equal(fs.readdirSync(path.join(dir, "out")).length, 16);
    },
  );

  it("shows every task field, in one starter or the other", () => {
    for (const field of TASK_FIELDS) {
      const shown = new RegExp(`\\b${field}\\b`);
      assert.ok(shown.test(JS_PIPELINE) || shown.test(PYTHON_PIPELINE), `${field} is not shown`);
    }
  });

  it("--python in a folder with a .gitignore appends the lines it lacks, or leaves it, and says which", async () => {
    const dir = newDir("git");
    const ignore = path.join(dir, ".gitignore");
    fs.writeFileSync(ignore, "node_modules\n/tracking\n");
    const init = await runCli(["init", dir, "--python"]);
    assert.equal(init.code, 0, describeRun(init));
    assert.deepEqual(fs.readdirSync(dir).sort(), [".gitignore", "pipeline.mjs", "task.py"]);
    assert.match(init.stdout, /Wrote .*pipeline\.mjs, .*task\.py\n/);
    assert.match(
      init.stdout,
      /Appended out\/, \.blockwise-staging\/ to the existing .*\.gitignore\n/,
    );
    const text = fs.readFileSync(ignore, "utf8");
    assert.ok(text.startsWith("node_modules\n/tracking\n"), text);
    assert.deepEqual(text.split("\n").filter((l) => l === "tracking/" || l === "out/"), ["out/"]);
    for (const name of ["pipeline.mjs", "task.py"]) fs.rmSync(path.join(dir, name));
    const again = await runCli(["init", dir]);
    assert.equal(again.code, 0, describeRun(again));
    assert.match(again.stdout, /Left the existing .*\.gitignore as it is \(it already ignores/);
    assert.equal(fs.readFileSync(ignore, "utf8"), text);
  });

  it("in the current folder: no `cd .` among the next steps", async () => {
    const dir = newDir("here");
    const init = await runCli(["init"], { cwd: dir });
    assert.equal(init.code, 0, describeRun(init));
    assert.doesNotMatch(init.stdout, /cd \./);
    assert.match(init.stdout, /Next:\n {2}blockwise plan pipeline\.mjs\n/);
  });

  it("never overwrites a file: exit 2 naming it, nothing written", async () => {
    const dir = newDir("taken");
    fs.writeFileSync(path.join(dir, "pipeline.mjs"), "// mine\n");
    const init = await runCli(["init", dir]);
    assert.equal(init.code, 2, describeRun(init));
    assert.match(
      init.stderr,
      /Not writing a starter pipeline into .*: pipeline\.mjs already exists there, and init never overwrites a file/,
    );
    assert.equal(fs.readFileSync(path.join(dir, "pipeline.mjs"), "utf8"), "// mine\n");
    assert.deepEqual(fs.readdirSync(dir), ["pipeline.mjs"]);
  });
});
