/**
 * `plan --tracking-dir` says why each block would run, and `run` then runs exactly what it
 * said: a changed parameter (stale: params.threshold, and upstream may change downstream, of
 * which only the blocks whose upstream content changed rerun), nothing changed, a deleted
 * output (output missing, for that block only), a version bump, --force; plan writes nothing.
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
  snapshotTree,
  trackingOf,
  writePipeline,
} from "./fixtures/explain/pipeline.ts";

const newDir = scratchDirs("plan-explain");
const ALL = ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"];

async function built(label: string): Promise<string> {
  const dir = newDir(label);
  writePipeline(dir);
  const first = await runLogged(dir);
  assert.equal(first.result.code, 0, describeRun(first.result));
  assert.deepEqual(first.ran, ALL);
  return dir;
}

describe("plan explains against the tracking stores", () => {
  it("before any run every block is new, and plan creates no store", async () => {
    const dir = newDir("new");
    writePipeline(dir);
    const plan = await planBlocks(dir);
    assert.equal(plan.result.code, 0, describeRun(plan.result));
    assert.deepEqual(Object.values(plan.why), new Array(8).fill("new"));
    assert.equal(fs.existsSync(trackingOf(dir)), false, "plan must not create the stores");
  });

  it("changing nothing: every block done, and a run runs nothing", async () => {
    const dir = await built("same");
    const plan = await planBlocks(dir);
    assert.deepEqual(Object.values(plan.why), new Array(8).fill("done"));
    assert.deepEqual(plan.runs, []);
    const again = await runLogged(dir);
    assert.equal(again.result.code, 0, describeRun(again.result));
    assert.deepEqual(again.ran, []);
  });

  it("a changed param: that task's blocks stale: params.threshold, downstream upstream may change; run reruns those whose upstream content changed", async () => {
    const dir = await built("params");
    const env = { T: "7" };
    const plan = await planBlocks(dir, env);
    for (const id of ["a0", "a1", "a2", "a3"]) {
      assert.equal(plan.why[id], "stale: params.threshold", id);
    }
    for (const id of ["b0", "b1", "b2", "b3"]) assert.equal(plan.why[id], "upstream may change");
    const summary = await cli(dir, "plan", ["--json"], env);
    const tasks = JSON.parse(summary.stdout).tasks as {
      task: string;
      explain: { runs: number; reasons: { reason: string; text: string; blocks: number }[] };
    }[];
    assert.deepEqual(tasks.map((t) => [t.task, t.explain.runs, t.explain.reasons]), [
      ["a", 4, [{ reason: "stale", text: "stale: params.threshold", blocks: 4 }]],
      ["b", 4, [{ reason: "upstream_may_change", text: "upstream may change", blocks: 4 }]],
    ]);
    const rerun = await runLogged(dir, env);
    assert.equal(rerun.result.code, 0, describeRun(rerun.result));
    // Only a1's bytes depend on the threshold: early cutoff keeps b0, b2, b3.
    assert.deepEqual(rerun.ran, ["a0", "a1", "a2", "a3", "b1"]);
    assert.ok(rerun.ran.every((b) => plan.runs.includes(b)), "run ran a block plan did not name");
    const after = await planBlocks(dir, env);
    assert.deepEqual(Object.values(after.why), new Array(8).fill("done"));
  });

  it("a deleted output: plan says output missing for exactly that block first, and run reruns only it", async () => {
    const dir = await built("missing");
    fs.rmSync(path.join(dir, "out", "b", "2.txt"));
    const plan = await planBlocks(dir);
    assert.deepEqual(
      plan.why,
      Object.fromEntries(ALL.map((b) => [b, b === "b2" ? "output missing" : "done"])),
    );
    const rerun = await runLogged(dir);
    assert.equal(rerun.result.code, 0, describeRun(rerun.result));
    assert.deepEqual(rerun.ran, ["b2"]);
    assert.ok(fs.existsSync(path.join(dir, "out", "b", "2.txt")));
  });

  it("a version bump names the versions; --force names the forced blocks", async () => {
    const dir = await built("version");
    const bumped = await planBlocks(dir, { VA: "2" });
    assert.equal(bumped.why["a0"], "stale: version 1 -> 2");
    const forced = await planBlocks(dir, {}, ["--force", "b:2:2"]);
    assert.deepEqual(
      forced.why,
      Object.fromEntries(ALL.map((b) => [b, b === "b1" ? "forced" : "done"])),
    );
    const bad = await cli(dir, "plan", ["--force", "nosuch"]);
    assert.equal(bad.code, 2, describeRun(bad));
    assert.match(bad.stderr, /--force "nosuch": there is no task "nosuch"/);
    const outside = await cli(dir, "plan", ["--force", "b:500:2"]);
    assert.equal(outside.code, 2, describeRun(outside));
    assert.match(outside.stderr, /--force "b:500:2": the box intersects no block of task "b"/);
  });

  it("plan reads the stores without the lock and writes nothing, even with a crash's leftovers", async () => {
    const dir = await built("readonly");
    // Leftovers a killed run leaves: a staging folder and a torn manifest line.
    const staging = path.join(dir, "out", "a", ".blockwise-staging", "run-x", "a", "0");
    fs.mkdirSync(staging, { recursive: true });
    fs.writeFileSync(path.join(staging, "junk"), "x");
    fs.appendFileSync(path.join(trackingOf(dir), "a", "manifest.jsonl"), '{"t":"comm');
    fs.rmSync(path.join(dir, "out", "a", "3.txt"));
    const before = { ...snapshotTree(trackingOf(dir)), ...snapshotTree(path.join(dir, "out")) };
    const plan = await planBlocks(dir);
    assert.equal(plan.result.code, 0, describeRun(plan.result));
    assert.equal(plan.why["a3"], "output missing");
    assert.equal(plan.why["b3"], "upstream may change");
    const text = await cli(dir, "plan", []);
    assert.match(text.stdout, /A run would process 2 blocks/);
    const after = { ...snapshotTree(trackingOf(dir)), ...snapshotTree(path.join(dir, "out")) };
    assert.deepEqual(after, before, "plan changed files");
  });
});

describe("plan explains temporaries", () => {
  it("a deleted temporary block a stale reader needs: regenerate (temporary, read by c/N)", async () => {
    const dir = newDir("temporary");
    const file = path.join(dir, "chain.mjs");
    fs.writeFileSync(
      file,
      `import fs from "node:fs";
const step = (id, up, extra) => ({
  id, ...(up ? { upstream: [up] } : {}), totalRoi: { offset: [0], shape: [4] },
  readRoi: { offset: [0], shape: [2] }, writeRoi: { offset: [0], shape: [2] },
  readWriteConflict: false, outputs: { o: { path: ${
        JSON.stringify(dir)
      } + "/out/" + id + "/{block_id}.txt" } },
  process(block, state, context) { fs.writeFileSync(context.outputs.o, id + block.id); },
  ...extra,
});
export default { tasks: [
  step("a", null, {}), step("b", "a", { temporary: true }),
  step("c", "b", { version: process.env.VC ?? "1" }),
] };
`,
    );
    const tracking = path.join(dir, "tracking");
    const run = await runCli(["run", file, "--tracking-dir", tracking, "--no-progress"]);
    assert.equal(run.code, 0, describeRun(run));
    assert.deepEqual(fs.readdirSync(path.join(dir, "out", "b")), [], "b's outputs are freed");
    const plan = await runCli(["plan", file, "--tracking-dir", tracking, "--blocks"], {
      env: { VC: "2" },
    });
    assert.equal(plan.code, 0, describeRun(plan));
    const why = plan.stdout.trim().split("\n").map((l) =>
      `${l.split(" ")[0]} ${l.slice(l.indexOf("  (") + 2)}`
    );
    assert.deepEqual(why, [
      "a/0 (done)",
      "a/1 (done)",
      "b/0 (regenerate (temporary, read by c/0))",
      "b/1 (regenerate (temporary, read by c/1))",
      "c/0 (stale: version 1 -> 2)",
      "c/1 (stale: version 1 -> 2)",
    ]);
  });
});
