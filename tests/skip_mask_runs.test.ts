/**
 * Skip masks in real runs (seed 000, "Skip masks"): masked blocks are skipped and release their
 * downstream blocks, are never recorded in the tracking store, and a later run without the mask
 * runs exactly them; the store keeps its hash; a mask of the wrong shape is refused before
 * anything runs.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { encodeNpy } from "../lib/masks/mod.ts";
import {
  clearLog,
  describeRun,
  keysOf,
  readChunk,
  readLog,
  removeDir,
  runArgs,
  runCli,
  tempDir,
  writePipeline,
} from "./fixtures/tracking/harness.ts";

const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const FIXTURES = path.join(REPO, "tests", "fixtures", "masks");

/** Two tasks over a 4×6 grid of 10×10 blocks; `b` reads exactly one `a` block. */
function twoTasks(dir: string, log: string): string {
  return writePipeline(
    dir,
    "pipeline",
    log,
    `const roi = (o, s) => ({ offset: o, shape: s });
export default { tasks: [
  { id: "a", totalRoi: roi([0, 0], [40, 60]), readRoi: roi([0, 0], [10, 10]),
    writeRoi: roi([0, 0], [10, 10]), readWriteConflict: false, maxWorkers: 2,
    process(block) { logBlock(block); } },
  { id: "b", upstream: ["a"], totalRoi: roi([0, 0], [40, 60]), readRoi: roi([0, 0], [10, 10]),
    writeRoi: roi([0, 0], [10, 10]), readWriteConflict: false,
    process(block) { logBlock(block); } },
] };
`,
  );
}

function writeMask(file: string, shape: number[], skipped: (i: number) => boolean): number {
  const cells = shape.reduce((x, y) => x * y, 1);
  const data = new Uint8Array(cells);
  let n = 0;
  for (let i = 0; i < cells; i++) if (skipped(i)) (data[i] = 1, n++);
  fs.writeFileSync(file, encodeNpy({ data, shape, dtype: "uint8" }));
  return n;
}

describe("skip masks in runs", () => {
  it("skips masked blocks, releases their downstream blocks, and never records them", async () => {
    const dir = tempDir("blockwise-mask-run-");
    const log = path.join(dir, "log");
    const pipeline = twoTasks(dir, log);
    const mask = path.join(dir, "a_mask.npy");
    const skipped = writeMask(mask, [4, 6], (i) => i % 3 === 0);
    const tracking = path.join(dir, "tracking");

    const first = await runCli(runArgs(pipeline, tracking, ["--skip-mask", `a=${mask}`]));
    assert.equal(first.code, 0, describeRun(first));
    assert.equal(keysOf(readLog(log), "a").length, 24 - skipped);
    // Downstream blocks of masked blocks were released and ran.
    assert.equal(keysOf(readLog(log), "b").length, 24);
    assert.match(first.stderr, new RegExp(`skips ${skipped} of 24 blocks`));
    const done = readChunk(path.join(tracking, "a"), "done");
    for (let i = 0; i < 24; i++) assert.equal(done[i], i % 3 === 0 ? 0 : 1, `cell ${i}`);
    const hash = JSON.parse(fs.readFileSync(path.join(tracking, "a", "zarr.json"), "utf8"))
      .attributes.blockwise.task_hash;
    const status = await runCli(["status", path.join(tracking, "a"), "--json"]);
    assert.equal(status.code, 0, describeRun(status));
    assert.deepEqual(JSON.parse(status.stdout).stores[0].last_run.skip_mask, {
      source: mask,
      skipped,
    });

    clearLog(log);
    const second = await runCli(runArgs(pipeline, tracking));
    assert.equal(second.code, 0, describeRun(second));
    const ran = readLog(log).filter((b) => b.task === "a");
    assert.equal(ran.length, skipped, "only the previously masked blocks run");
    for (const b of ran) assert.equal((b.index[0]! * 6 + b.index[1]!) % 3, 0);
    assert.equal(keysOf(readLog(log), "b").length, 0, "b was done already");
    assert.equal(
      JSON.parse(fs.readFileSync(path.join(tracking, "a", "zarr.json"), "utf8")).attributes
        .blockwise.task_hash,
      hash,
      "a masked run keeps the store's hash",
    );
    removeDir(dir);
  });

  it("a narrower mask later runs exactly the blocks it no longer masks; done stays done", async () => {
    const dir = tempDir("blockwise-mask-narrow-");
    const log = path.join(dir, "log");
    const pipeline = twoTasks(dir, log);
    const wide = path.join(dir, "wide.npy");
    const narrow = path.join(dir, "narrow.npy");
    writeMask(wide, [4, 6], (i) => i < 12);
    writeMask(narrow, [4, 6], (i) => i < 6);
    const tracking = path.join(dir, "tracking");
    const first = await runCli(runArgs(pipeline, tracking, ["--skip-mask", `a=${wide}`]));
    assert.equal(first.code, 0, describeRun(first));
    clearLog(log);
    const second = await runCli(runArgs(pipeline, tracking, ["--skip-mask", `a=${narrow}`]));
    assert.equal(second.code, 0, describeRun(second));
    const ran = readLog(log).filter((b) => b.task === "a").map((b) => b.index[0]! * 6 + b.index[1]!)
      .sort((x, y) => x - y);
    assert.deepEqual(ran, [6, 7, 8, 9, 10, 11]);
    removeDir(dir);
  });

  it("the task's skipMask field works, and the flag wins over it", async () => {
    const dir = tempDir("blockwise-mask-field-");
    const log = path.join(dir, "log");
    writeMask(path.join(dir, "field.npy"), [1, 4], (i) => i === 0);
    const everything = path.join(dir, "all.npy");
    writeMask(everything, [1, 4], () => true);
    const pipeline = writePipeline(
      dir,
      "masked",
      log,
      `export default { tasks: [ { id: "t", totalRoi: { offset: [0, 0], shape: [10, 40] },
  readRoi: { offset: [0, 0], shape: [10, 10] }, writeRoi: { offset: [0, 0], shape: [10, 10] },
  skipMask: "field.npy", process(block) { logBlock(block); } } ] };
`,
    );
    const own = await runCli(runArgs(pipeline, null));
    assert.equal(own.code, 0, describeRun(own));
    assert.equal(readLog(log).length, 3);
    clearLog(log);
    const flag = await runCli(runArgs(pipeline, null, ["--skip-mask", `t=${everything}`]));
    assert.equal(flag.code, 0, describeRun(flag));
    assert.equal(readLog(log).length, 0);
    assert.match(flag.stderr, /4 skipped/);
    removeDir(dir);
  });

  it("refuses a mask of the wrong shape before anything runs (exit 2), naming both shapes", async () => {
    const dir = tempDir("blockwise-mask-shape-");
    const log = path.join(dir, "log");
    const pipeline = twoTasks(dir, log);
    const tissue = path.join(FIXTURES, "tissue.npy");
    const r = await runCli(runArgs(pipeline, path.join(dir, "tracking"), [
      "--skip-mask",
      `a=${tissue}`,
    ]));
    assert.equal(r.code, 2, describeRun(r));
    assert.match(r.stderr, /\(64, 96, 128\)/);
    assert.match(r.stderr, /\(4, 6\)/);
    assert.equal(readLog(log).length, 0);
    assert.equal(fs.existsSync(path.join(dir, "tracking")), false, "no store was created");
    const unknown = await runCli(runArgs(pipeline, null, ["--skip-mask", `nope=${tissue}`]));
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /"nope"/);
    removeDir(dir);
  });

  it("plan shows how many blocks the mask skips", async () => {
    const dir = tempDir("blockwise-mask-plan-");
    const pipeline = twoTasks(dir, path.join(dir, "log"));
    const mask = path.join(dir, "m.npy");
    writeMask(mask, [4, 6], (i) => i < 5);
    const r = await runCli(["plan", pipeline, "--json", "--skip-mask", `a=${mask}`]);
    assert.equal(r.code, 0, describeRun(r));
    const plan = JSON.parse(r.stdout) as { tasks: { task: string; skip_mask: unknown }[] };
    assert.deepEqual(plan.tasks.find((t) => t.task === "a")!.skip_mask, {
      source: mask,
      skipped: 5,
    });
    assert.equal(plan.tasks.find((t) => t.task === "b")!.skip_mask, null);
    removeDir(dir);
  });
});
