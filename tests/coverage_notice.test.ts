/**
 * A total ROI that the write blocks do not divide loses its far edge with daisy's default
 * `fit: "valid"`: `plan` and the run's first lines say how much no block writes and which fit
 * covers it (issue 48, item 4); a dividing one, or fit "shrink", prints nothing of the kind.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("coverage");

const NOTICE =
  'warning: Task "t": fit "valid" leaves 41 % of the total write ROI (250×250) unwritten: 58 of 250 on axis 0, 58 of 250 on axis 1, at the far end, where the write blocks (64×64) do not divide it; fit "shrink" (crops the last blocks) or "overhang" (keeps them whole, past the end) covers it, or make the total write ROI a multiple of the write ROI';

function pipeline(dir: string, shape: number, fit = ""): string {
  const file = path.join(dir, "p.mjs");
  fs.writeFileSync(
    file,
    `export default { tasks: [{ id: "t", totalRoi: { offset: [0, 0], shape: [${shape}, ${shape}] },
  readRoi: { offset: [0, 0], shape: [64, 64] }, writeRoi: { offset: [0, 0], shape: [64, 64] },
  ${fit} process() {} }] };\n`,
  );
  return file;
}

describe("what no block writes of the total ROI", () => {
  it("plan and run say it for 250x250 in 64x64 blocks with fit valid", async () => {
    const dir = newDir("valid");
    const file = pipeline(dir, 250);
    const plan = await runCli(["plan", file], { cwd: dir });
    assert.equal(plan.code, 0, describeRun(plan));
    assert.ok(plan.stdout.includes(NOTICE), plan.stdout);
    const json = await runCli(["plan", file, "--json"], { cwd: dir });
    const tasks = (JSON.parse(json.stdout) as { tasks: { warnings: string[] }[] }).tasks;
    assert.deepEqual(tasks[0]!.warnings, [NOTICE.slice("warning: ".length)]);
    const run = await runCli(["run", file, "--no-progress"], { cwd: dir });
    assert.equal(run.code, 0, describeRun(run));
    const lines = run.stderr.split("\n");
    const at = lines.indexOf(NOTICE);
    assert.ok(at >= 0, run.stderr);
    // Among the first lines, before any block's result or the summary.
    assert.ok(at < lines.findIndex((l) => /All 9 blocks completed/.test(l)), run.stderr);
  });

  it("says nothing when the blocks divide it, or with fit shrink", async () => {
    for (const [shape, fit] of [[256, ""], [250, 'fit: "shrink",'], [250, 'fit: "overhang",']]) {
      const dir = newDir("covered");
      const file = pipeline(dir, shape as number, fit as string);
      const plan = await runCli(["plan", file], { cwd: dir });
      assert.equal(plan.code, 0, describeRun(plan));
      assert.doesNotMatch(plan.stdout, /unwritten|warning/, `${shape} ${fit}`);
      const run = await runCli(["run", file, "--no-progress"], { cwd: dir });
      assert.equal(run.code, 0, describeRun(run));
      assert.doesNotMatch(run.stderr, /unwritten|warning/, `${shape} ${fit}`);
      assert.match(run.stderr, /All 16 blocks completed/);
    }
  });
});
