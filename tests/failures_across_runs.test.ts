/**
 * Failures kept across runs: every failed attempt in the store's errors.jsonl, `status
 * --failed` and `status --json` naming each failed block's last error, and `quarantineAfter`
 * leaving a block alone (unrun, no attempt counted) until `reset --failed` or `--force`.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";
import { planBlocks, runLogged, trackingOf, writePipeline } from "./fixtures/explain/pipeline.ts";

const newDir = scratchDirs("failures");

interface ErrorLine {
  task: string;
  block: string;
  index: number[];
  attempt: number;
  run_id: string;
  at: string;
  message: string;
  stack: string[];
}

function errorLines(dir: string, task: string): ErrorLine[] {
  const file = path.join(trackingOf(dir), task, "errors.jsonl");
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as ErrorLine);
}

function failures(dir: string, task: string): number[] {
  const bytes = fs.readFileSync(path.join(trackingOf(dir), task, "failures", "c", "0"));
  return [...new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)];
}

describe("errors.jsonl and status --failed", () => {
  it("keeps every failed attempt with message, stack, block, attempt and run, across runs", async () => {
    const dir = newDir("log");
    writePipeline(dir);
    const env = { FAIL: "a2", RETRIES: "1" };
    const first = await runLogged(dir, env);
    assert.equal(first.result.code, 1, describeRun(first.result));
    const second = await runLogged(dir, env);
    assert.equal(second.result.code, 1, describeRun(second.result));
    const lines = errorLines(dir, "a");
    assert.equal(lines.length, 4, "two attempts in each of two runs");
    assert.deepEqual(lines.map((l) => [l.block, l.index, l.attempt]), [
      ["2", [2], 1],
      ["2", [2], 2],
      ["2", [2], 1],
      ["2", [2], 2],
    ]);
    assert.equal(new Set(lines.map((l) => l.run_id)).size, 2);
    assert.ok(lines.every((l) => l.message === "block a2 is broken"), JSON.stringify(lines[0]));
    assert.ok(lines[0]!.stack.some((s) => s.includes("pipeline.mjs")), lines[0]!.stack.join("\n"));
    assert.ok(!Number.isNaN(Date.parse(lines[0]!.at)));
    assert.deepEqual(errorLines(dir, "b"), [], "an orphaned block is no failed attempt");

    const text = await runCli(["status", trackingOf(dir), "--failed"]);
    assert.equal(text.code, 0, describeRun(text));
    assert.match(text.stdout, /failed blocks \(1\), each with its last error:/);
    assert.match(text.stdout, /a\/2 {2}index \(2\) {2}4 attempts {2}last at .* \(attempt 2, run /);
    assert.match(text.stdout, /^ {6}block a2 is broken$/m);
    const json = await runCli(["status", trackingOf(dir), "--json"]);
    const stores = JSON.parse(json.stdout).stores as {
      task: string;
      failed_blocks: { block: string; attempts: number; last_error: { message: string } }[];
      failed_blocks_total: number;
    }[];
    const a = stores.find((s) => s.task === "a")!;
    assert.equal(a.failed_blocks_total, 1);
    assert.deepEqual(
      a.failed_blocks.map((f) => [f.block, f.attempts, f.last_error.message]),
      [["2", 4, "block a2 is broken"]],
    );
    assert.deepEqual(stores.find((s) => s.task === "b")!.failed_blocks, []);
  });
});

describe("a failure's cause chain", () => {
  for (const mode of ["workers", "serial"]) {
    it(`is shown on the terminal, in errors.jsonl and by status --failed (${mode})`, async () => {
      const dir = newDir(`cause-${mode}`);
      const file = path.join(dir, "cause.mjs");
      fs.writeFileSync(
        file,
        `const roi = (shape) => ({ offset: [0], shape: [shape] });
export default { tasks: [{ id: "c", totalRoi: roi(2), readRoi: roi(2), writeRoi: roi(2), maxRetries: 0,
  process() {
    const root = new RangeError("chunk 3 is truncated");
    throw new Error("cannot read the block", { cause: new Error("zarr read failed", { cause: root }) });
  } }] };
`,
      );
      const tracking = trackingOf(dir);
      const extra = mode === "serial" ? ["--serial"] : [];
      const run = await runCli([
        "run",
        file,
        "--tracking-dir",
        tracking,
        "--no-progress",
        ...extra,
      ]);
      assert.equal(run.code, 1, describeRun(run));
      const chain =
        "cannot read the block; caused by Error: zarr read failed; caused by RangeError: chunk 3 is truncated";
      assert.ok(run.stdout.includes(chain) || run.stderr.includes(chain), describeRun(run));
      const [line] = errorLines(dir, "c");
      assert.equal(line?.message, chain);
      assert.ok(
        line!.stack.some((s) => s.startsWith("Caused by: Error: zarr read failed")),
      );
      const status = await runCli(["status", tracking, "--failed"]);
      assert.ok(status.stdout.includes(chain), status.stdout);
    });
  }
});

describe("quarantineAfter", () => {
  it("leaves a block with N failed attempts across runs alone until reset --failed or --force", async () => {
    const dir = newDir("quarantine");
    writePipeline(dir);
    const env = { FAIL: "a2", QA: "2" };
    for (let i = 1; i <= 2; i++) {
      const r = await runLogged(dir, env);
      assert.equal(r.result.code, 1, describeRun(r.result));
      assert.ok(r.ran.includes("a2"), `run ${i} tries a2`);
    }
    assert.equal(failures(dir, "a")[2], 2);
    const plan = await planBlocks(dir, env);
    assert.equal(plan.why["a2"], "quarantined (2 failed attempts)");
    assert.equal(plan.why["b2"], "blocked: reads quarantined a/2");
    // Third run: not run, reported as quarantined, no attempt counted, no error logged.
    const third = await runLogged(dir, { ...env, FAIL: "" });
    assert.equal(third.result.code, 1, describeRun(third.result));
    assert.deepEqual(third.ran, [], "a quarantined block is not run");
    assert.match(third.result.stderr, /Quarantined: it failed 2 attempts across runs/);
    assert.equal(failures(dir, "a")[2], 2, "no new attempt counted");
    assert.equal(errorLines(dir, "a").length, 2);
    // --force runs it (fixed now).
    const forced = await runLogged(dir, { ...env, FAIL: "" }, ["--force", "a:4:2"]);
    assert.equal(forced.result.code, 0, describeRun(forced.result));
    assert.deepEqual(forced.ran, ["a2", "b2"]);
  });

  it("reset --failed lifts the quarantine", async () => {
    const dir = newDir("reset");
    writePipeline(dir);
    const env = { FAIL: "b1", QA: "1" };
    assert.equal((await runLogged(dir, env)).result.code, 1);
    // quarantineAfter is a's; b is not quarantined and retries every run.
    const retry = await runLogged(dir, env);
    assert.deepEqual(retry.ran, ["b1"]);
    const quarantined = { FAIL: "a1", QA: "1" };
    const d2 = newDir("reset-a");
    writePipeline(d2);
    assert.equal((await runLogged(d2, quarantined)).result.code, 1);
    assert.deepEqual((await runLogged(d2, { QA: "1" })).ran, [], "quarantined after one");
    const reset = await runCli(["reset", path.join(trackingOf(d2), "a"), "--failed"]);
    assert.equal(reset.code, 0, describeRun(reset));
    const fixed = await runLogged(d2, { QA: "1" });
    assert.equal(fixed.result.code, 0, describeRun(fixed.result));
    assert.deepEqual(fixed.ran, ["a1", "b1"]);
  });

  it("refuses a quarantineAfter that is not an integer of at least 1, naming the task", async () => {
    const dir = newDir("invalid");
    writePipeline(dir);
    const r = await runLogged(dir, { QA: "0" });
    assert.equal(r.result.code, 2, describeRun(r.result));
    assert.match(r.result.stderr, /Task "a": field "quarantineAfter"/);
    assert.match(r.result.stderr, /must be an integer of at least 1; got 0/);
  });
});

describe("errors.jsonl after a kill mid-append", () => {
  it("ends a torn last line before the next record, losing only the torn one", async () => {
    const dir = newDir("torn");
    writePipeline(dir);
    assert.equal((await runLogged(dir, { FAIL: "a1" })).result.code, 1);
    fs.appendFileSync(path.join(trackingOf(dir), "a", "errors.jsonl"), '{"task":"a","blo');
    assert.equal((await runLogged(dir, { FAIL: "a1" })).result.code, 1);
    const text = fs.readFileSync(path.join(trackingOf(dir), "a", "errors.jsonl"), "utf8");
    const lines = text.trim().split("\n");
    assert.equal(lines.length, 3);
    assert.equal(JSON.parse(lines[2]!).message, "block a1 is broken");
    const status = await runCli(["status", path.join(trackingOf(dir), "a"), "--failed"]);
    assert.match(status.stdout, /a\/1 {2}index \(1\) {2}2 attempts/);
  });

  it("goes on when errors.jsonl cannot be appended to (a full disk), saying what is lost", async () => {
    const dir = newDir("unwritable");
    writePipeline(dir);
    assert.equal((await runLogged(dir, { FAIL: "a1" })).result.code, 1);
    // A folder where the file should be: every append fails, as on a full disk.
    const file = path.join(trackingOf(dir), "a", "errors.jsonl");
    fs.rmSync(file);
    fs.mkdirSync(file);
    const { result, ran } = await runLogged(dir, { FAIL: "a1", RETRIES: "1" });
    assert.equal(result.code, 1, describeRun(result));
    assert.doesNotMatch(result.stderr, /internal error/);
    const warnings = result.stderr.split("\n").filter((l) => l.includes("could not append"));
    assert.equal(
      warnings.length,
      1,
      `one warning for the file, not one per attempt:\n${result.stderr}`,
    );
    assert.match(
      warnings[0]!,
      /block 1 \(task "a"\) to .*errors\.jsonl: .*free space on that disk/,
    );
    assert.match(result.stdout + result.stderr, /block a1 is broken/);
    assert.ok(ran.length > 0, "the other blocks ran");
  });

  it("a run record that cannot be appended is a warning; every store still closes", async () => {
    const dir = newDir("runs-log");
    writePipeline(dir);
    assert.equal((await runLogged(dir)).result.code, 0);
    const log = path.join(trackingOf(dir), "a", "runs.jsonl");
    fs.rmSync(log);
    fs.mkdirSync(log);
    const { result } = await runLogged(dir, {}, ["--force", "a"]);
    assert.equal(result.code, 0, describeRun(result));
    assert.match(
      result.stderr,
      /warning: Cannot open the run log .*runs\.jsonl: .*this run's record is missing there/,
    );
    assert.doesNotMatch(result.stderr, /internal error/);
    const b = fs.readFileSync(path.join(trackingOf(dir), "b", "runs.jsonl"), "utf8");
    assert.equal(b.trim().split("\n").length, 2, "the other store got its record");
    // Nothing was left locked: the next run starts.
    fs.rmSync(log, { recursive: true });
    assert.equal((await runLogged(dir)).result.code, 0);
  });
});
