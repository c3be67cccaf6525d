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
