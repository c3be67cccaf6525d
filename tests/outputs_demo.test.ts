/**
 * `blockwise demo` declares its outputs (three Zarr arrays and a statistics file per label
 * block), so it runs with a tracking directory under --dir, commits every chunk through
 * staging, resumes without running anything, and rebuilds exactly a block whose file was
 * deleted. A block with several outputs that lost one is not reported as leaving unexpected
 * files behind.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";
import { manifestOf, treeOf } from "./fixtures/outputs.ts";

const newDir = scratchDirs("outputs-demo");

describe("the demo declares its outputs", () => {
  it("commits, resumes and rebuilds exactly a deleted block", { timeout: 120_000 }, async () => {
    const dir = newDir("demo");
    const run = await runCli(["demo", "--dir", dir]);
    assert.equal(run.code, 0, describeRun(run));
    for (const task of ["generate", "smooth", "label"]) {
      assert.match(
        run.stderr,
        new RegExp(`Task "${task}": outputs reconciled: 0 recorded and present, 64 never built`),
      );
      assert.equal(manifestOf(dir, task).filter((r) => r.t === "commit").length, 64, task);
    }
    const intent = manifestOf(dir, "label").find((r) =>
      r.t === "intent" && r.index.join() === "0,1,1"
    )!;
    assert.deepEqual(intent.files!.map((f) => [f[0], f[1]]).sort(), [["labels", "c/0/1/1"], [
      "stats",
      "5.json",
    ]]);
    const arrays = treeOf(path.join(dir, "demo.zarr"));
    assert.ok(
      !Object.keys(arrays).some((k) => k.includes(".blockwise-staging")),
      "no staging left",
    );

    const again = await runCli(["demo", "--dir", dir]);
    assert.equal(again.code, 0, describeRun(again));
    assert.match(again.stderr, /All 192 blocks completed \(192 skipped\)/);

    fs.rmSync(path.join(dir, "demo.zarr", "label_stats", "5.json"));
    const rebuilt = await runCli(["demo", "--dir", dir]);
    assert.equal(rebuilt.code, 0, describeRun(rebuilt));
    assert.match(
      rebuilt.stderr,
      /Task "label": outputs reconciled: 63 recorded and present, 1 recorded but missing \(rebuilt\)\n/,
    );
    assert.match(rebuilt.stderr, /All 192 blocks completed \(191 skipped\)/);
    assert.deepEqual(treeOf(path.join(dir, "demo.zarr")), arrays, "the same bytes as before");
  });
});
