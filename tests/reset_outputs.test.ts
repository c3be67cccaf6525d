/**
 * `blockwise reset` of a task with outputs: the reset blocks run again (reconciliation used to
 * adopt them back from the manifest: "resumed, 16/16 blocks already done"), and status, plan and
 * the run's start tell the same story, calling them reset.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";
import { planBlocks, runLogged, trackingOf, writePipeline } from "./fixtures/explain/pipeline.ts";

const newDir = scratchDirs("reset-outputs");

async function statusOf(store: string): Promise<{ done: number; pending: number; reset: number }> {
  const r = await runCli(["status", store, "--json"]);
  assert.equal(r.code, 0, describeRun(r));
  const s = (JSON.parse(r.stdout) as {
    stores: { done: number; pending: number; outputs: { reset_blocks: number } | null }[];
  }).stores[0]!;
  return { done: s.done, pending: s.pending, reset: s.outputs?.reset_blocks ?? 0 };
}

describe("reset of a task with outputs", () => {
  it("runs the reset blocks again, and status, plan and the run's start agree", async () => {
    const dir = newDir("all");
    writePipeline(dir);
    assert.equal((await runLogged(dir)).result.code, 0);
    const store = path.join(trackingOf(dir), "a");
    const reset = await runCli(["reset", store, "--yes"]);
    assert.equal(reset.code, 0, describeRun(reset));

    assert.deepEqual(await statusOf(store), { done: 0, pending: 4, reset: 4 });
    const human = await runCli(["status", store]);
    assert.match(
      human.stdout,
      /reset {6}4 blocks reset by blockwise reset: the next run rebuilds them/,
    );
    const plan = await planBlocks(dir);
    for (const id of [0, 1, 2, 3]) assert.equal(plan.why[`a${id}`], "reset (blockwise reset)");
    assert.deepEqual(plan.runs.filter((b) => b.startsWith("a")).sort(), ["a0", "a1", "a2", "a3"]);

    const run = await runLogged(dir);
    assert.equal(run.result.code, 0, describeRun(run.result));
    const said = run.result.stdout + run.result.stderr;
    assert.doesNotMatch(said, /Task "a": resumed/);
    assert.match(
      said,
      /Task "a": outputs reconciled: 0 recorded and present, 4 reset \(run again\)/,
    );
    assert.doesNotMatch(said, /unexpected/, "the reset blocks' old files are their own");
    assert.deepEqual(run.ran.filter((b) => b.startsWith("a")), ["a0", "a1", "a2", "a3"]);
    assert.deepEqual(await statusOf(store), { done: 4, pending: 0, reset: 0 });
    assert.deepEqual((await planBlocks(dir)).runs, []);
  });

  it("--roi resets only the blocks in the box; a reset cut short leaves them to run", async () => {
    const dir = newDir("roi");
    writePipeline(dir);
    assert.equal((await runLogged(dir)).result.code, 0);
    const store = path.join(trackingOf(dir), "a");
    assert.equal((await runCli(["reset", store, "--roi", "2:2", "--yes"])).code, 0);
    assert.deepEqual(await statusOf(store), { done: 3, pending: 1, reset: 1 });
    const manifest = fs.readFileSync(path.join(store, "manifest.jsonl"), "utf8").trim().split("\n");
    assert.deepEqual(JSON.parse(manifest.at(-1)!), {
      t: "drop",
      index: [1],
      why: "reset by blockwise reset",
    });
    // As if the reset had been killed after its drop record, before clearing the done mark:
    // the block still runs again (the drop record decides, not the done byte).
    fs.writeFileSync(path.join(store, "done", "c", "0"), Uint8Array.of(1, 1, 1, 1));
    const run = await runLogged(dir);
    assert.equal(run.result.code, 0, describeRun(run.result));
    assert.deepEqual(run.ran.filter((b) => b.startsWith("a")), ["a1"]);
  });
});
