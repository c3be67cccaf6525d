/**
 * Damaged side files of a store never cause a silent full rebuild: an unparsable recipes.jsonl
 * or outputs.json is refused (exit 3) naming the file and the fix, before anything runs; random
 * bytes in upstream_digest, which parse as digests, are reported by a warning naming the array
 * when no upstream block can have changed since the blocks were made.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";
import {
  cli,
  planBlocks,
  runLogged,
  trackingOf,
  writePipeline,
} from "./fixtures/explain/pipeline.ts";

const newDir = scratchDirs("damaged-side");

async function builtPipeline(label: string): Promise<string> {
  const dir = newDir(label);
  writePipeline(dir);
  const first = await runLogged(dir);
  assert.equal(first.result.code, 0, describeRun(first.result));
  return dir;
}

/** Random bytes over every cell of a store's upstream_digest (its one chunk). */
function scramble(dir: string, task: string): string {
  const folder = path.join(trackingOf(dir), task, "upstream_digest", "c");
  const chunk = path.join(folder, fs.readdirSync(folder)[0]!);
  const size = fs.statSync(chunk).size;
  fs.writeFileSync(chunk, Uint8Array.from({ length: size }, (_, i) => (i * 151 + 7) % 251));
  return path.join(trackingOf(dir), task, "upstream_digest");
}

describe("recipes.jsonl that does not parse", () => {
  it("is refused by plan and run (exit 3) with the line and the fix; nothing runs", async () => {
    const dir = await builtPipeline("recipes");
    const file = path.join(trackingOf(dir), "a", "recipes.jsonl");
    fs.writeFileSync(file, "garbage that is no recipe\n");
    for (const command of ["plan", "run"]) {
      const r = await cli(dir, command);
      assert.equal(r.code, 3, describeRun(r));
      assert.ok(
        r.stderr.includes(`${file} line 1 is not a recipe ("garbage that is no recipe")`),
        r.stderr,
      );
      assert.match(r.stderr, /replace that line with \{\} .* and run blockwise accept/);
    }
    assert.deepEqual((await runLogged(dir)).ran, [], "nothing was rebuilt");
  });
});

describe("outputs.json that does not parse", () => {
  it("makes verify refuse the store naming the file, instead of an unknown output per file", async () => {
    const dir = await builtPipeline("outputs-json");
    const file = path.join(trackingOf(dir), "a", "outputs.json");
    fs.writeFileSync(file, "{ not json");
    const r = await runCli(["verify", path.join(trackingOf(dir), "a")]);
    assert.equal(r.code, 3, describeRun(r));
    assert.match(
      r.stderr + r.stdout,
      new RegExp(`${file} is damaged \\(not JSON: .*\\).*Run the pipeline once`),
    );
    assert.doesNotMatch(r.stdout, /unknown output/);
    // A run rewrites it from the pipeline file, and verify is happy again.
    assert.equal((await runLogged(dir)).result.code, 0);
    assert.equal((await runCli(["verify", trackingOf(dir)])).code, 0);
  });
});

describe("random bytes in upstream_digest", () => {
  it("plan and run warn, naming the array, when no upstream block changed since", async () => {
    const dir = await builtPipeline("digest");
    const array = scramble(dir, "b");
    const plan = await cli(dir, "plan");
    assert.equal(plan.code, 0, describeRun(plan));
    assert.ok(
      plan.stdout.includes(
        `Task "b": 4 done blocks do not match their upstream blocks' content, although no upstream block was made since this task's last run: ${array} is probably damaged`,
      ),
      plan.stdout,
    );
    const run = await runLogged(dir);
    assert.equal(run.result.code, 0, describeRun(run.result));
    assert.ok(
      run.result.stderr.includes(`warning: Task "b": done blocks do not match`) &&
        run.result.stderr.includes(array),
      run.result.stderr,
    );
  });

  it("is no warning when an upstream block was made since: that is a real change", async () => {
    const dir = await builtPipeline("digest-real");
    // Block 1 of a depends on the threshold: a run of a alone rebuilds it with other content.
    const changed = await runLogged(dir, { T: "2" }, ["--tasks", "a"]);
    assert.equal(changed.result.code, 0, describeRun(changed.result));
    const plan = await planBlocks(dir, { T: "2" });
    assert.equal(plan.result.code, 0);
    assert.equal(plan.why["b1"], "stale: upstream content changed");
    const text = await cli(dir, "plan", [], { T: "2" });
    assert.doesNotMatch(text.stdout + text.stderr, /probably damaged/);
  });
});
