/**
 * `blockwise accept` (done blocks taken as made by the current recipe, without running them,
 * under the lock, logged in runs.jsonl) and `blockwise verify` (re-hash against the manifest;
 * `--against` another store block by block).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli, startCli } from "./fixtures/tracking/harness.ts";
import {
  cli,
  planBlocks,
  runLogged,
  snapshotTree,
  trackingOf,
  writePipeline,
} from "./fixtures/explain/pipeline.ts";

const newDir = scratchDirs("accept-verify");

async function built(label: string, env: Record<string, string> = {}): Promise<string> {
  const dir = newDir(label);
  writePipeline(dir);
  const r = await runLogged(dir, env);
  assert.equal(r.result.code, 0, describeRun(r.result));
  return dir;
}

function runRecords(dir: string, task: string): Record<string, unknown>[] {
  return fs.readFileSync(path.join(trackingOf(dir), task, "runs.jsonl"), "utf8").trim()
    .split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("blockwise accept", () => {
  it("after a cosmetic version bump: plan says done, and a run runs nothing", async () => {
    const dir = await built("bump");
    const env = { VA: "1.0.1" };
    assert.equal((await planBlocks(dir, env)).why["a0"], "stale: version 1 -> 1.0.1");
    const r = await cli(dir, "accept", [], env);
    assert.equal(r.code, 0, describeRun(r));
    assert.match(r.stdout, /Task "a": accepted 4 done blocks \(4 stale: version 1 -> 1\.0\.1\)/);
    assert.match(r.stdout, /Task "b": accepted 0 done blocks .* 4 already fresh/);
    const plan = await planBlocks(dir, env);
    assert.deepEqual(new Set(Object.values(plan.why)), new Set(["done"]));
    const again = await runLogged(dir, env);
    assert.equal(again.result.code, 0, describeRun(again.result));
    assert.deepEqual(again.ran, []);
    const record = runRecords(dir, "a").find((r) => r["kind"] === "accept")!;
    assert.equal(record["accepted"], 4);
    assert.deepEqual((record["recipe"] as { version: string }).version, "1.0.1");
    assert.ok(
      !fs.existsSync(path.join(trackingOf(dir), "a", "blockwise.lock")),
      "the lock is released",
    );
  });

  it("is refused, changing nothing, while another run holds a store (exit 3)", async () => {
    const dir = await built("locked");
    const lock = path.join(trackingOf(dir), "b", "blockwise.lock");
    // pid 1 on this host: a live holder.
    fs.writeFileSync(
      lock,
      JSON.stringify({ pid: 1, host: os.hostname(), started_at: "x", command: "other run" }),
    );
    const before = snapshotTree(trackingOf(dir));
    const r = await cli(dir, "accept", [], { VA: "2" });
    assert.equal(r.code, 3, describeRun(r));
    assert.match(r.stderr, /still running/);
    assert.deepEqual(snapshotTree(trackingOf(dir)), before);
  });

  it("--roi accepts only the blocks it meets; --task only that task", async () => {
    const dir = await built("roi");
    const env = { T: "9" };
    const r = await cli(dir, "accept", ["--roi", "2:2", "--task", "a"], env);
    assert.equal(r.code, 0, describeRun(r));
    const plan = await planBlocks(dir, env);
    assert.equal(plan.why["a1"], "done");
    assert.equal(plan.why["a0"], "stale: params.threshold");
    assert.equal(plan.why["a2"], "stale: params.threshold");
    assert.equal(runRecords(dir, "b").at(-1)!["kind"], "run", "b was not accepted");
    const bad = await cli(dir, "accept", ["--task", "zz"]);
    assert.equal(bad.code, 2, describeRun(bad));
    assert.match(bad.stderr, /accept --task "zz": the pipeline has no such task; tasks: a, b/);
  });
});

describe("blockwise verify", () => {
  it("exit 0 when every output matches; exit 1 naming a modified and a deleted file", async () => {
    const dir = await built("verify");
    const ok = await runCli(["verify", trackingOf(dir)]);
    assert.equal(ok.code, 0, describeRun(ok));
    assert.match(ok.stdout, /task "a" .*: 4 blocks, 4 files \(\d+ B\) re-hashed: all match/);
    const modified = path.join(dir, "out", "a", "1.txt");
    const deleted = path.join(dir, "out", "b", "3.txt");
    // Same size, other bytes: only a re-hash finds it.
    fs.writeFileSync(modified, fs.readFileSync(modified, "utf8").replace("a", "z"));
    fs.rmSync(deleted);
    const before = snapshotTree(trackingOf(dir));
    const bad = await runCli(["verify", trackingOf(dir)]);
    assert.equal(bad.code, 1, describeRun(bad));
    assert.match(bad.stdout, /a\/1 {2}index \(1\) {2}modified: .*1\.txt \(SHA-256 /);
    assert.match(bad.stdout, /b\/3 {2}index \(3\) {2}missing: .*3\.txt/);
    assert.match(bad.stdout, /verify: 2 problems in 2 of 2 stores/);
    const json = await runCli(["verify", path.join(trackingOf(dir), "a"), "--json"]);
    assert.equal(json.code, 1);
    const report = JSON.parse(json.stdout) as {
      ok: boolean;
      stores: { problems: { block: string; problem: string; file: string }[] }[];
    };
    assert.equal(report.ok, false);
    assert.deepEqual(report.stores[0]!.problems.map((p) => [p.block, p.problem, p.file]), [
      ["1", "modified", modified],
    ]);
    assert.deepEqual(snapshotTree(trackingOf(dir)), before, "verify wrote into the store");
  });

  it("--against: equivalent stores exit 0; a block with other content exits 1, naming it", async () => {
    const one = await built("one");
    const two = await built("two");
    const same = await runCli(["verify", trackingOf(one), "--against", trackingOf(two)]);
    assert.equal(same.code, 0, describeRun(same));
    assert.match(same.stdout, /task "a": 4 blocks compared, equivalent/);
    const three = await built("three", { T: "5" });
    const other = await runCli(["verify", trackingOf(one), "--against", trackingOf(three)]);
    assert.equal(other.code, 1, describeRun(other));
    assert.match(other.stdout, /task "a": 4 blocks compared, 1 differ/);
    assert.match(other.stdout, /content differs at index: \(1\)/);
    const json = await runCli([
      "verify",
      trackingOf(one),
      "--against",
      trackingOf(three),
      "--json",
    ]);
    const cmp = JSON.parse(json.stdout) as {
      equivalent: boolean;
      comparisons: { task: string; mismatched: string[] }[];
    };
    assert.equal(cmp.equivalent, false);
    assert.deepEqual(cmp.comparisons.map((c) => [c.task, c.mismatched]), [["a", ["1"]], [
      "b",
      ["1"],
    ]]);
    // A store with fewer blocks done: only_in_store names them.
    const partial = newDir("partial");
    writePipeline(partial);
    const r = await runLogged(partial, { FAIL: "b0" });
    assert.equal(r.result.code, 1);
    const fewer = await runCli(["verify", trackingOf(one), "--against", trackingOf(partial)]);
    assert.equal(fewer.code, 1, describeRun(fewer));
    assert.match(fewer.stdout, /only in .*one.*tracking\/b at index: \(0\)/);
  });
});

describe("blockwise verify with nothing to verify", () => {
  it("says so per task and in the closing line (exit 0), never that outputs match", async () => {
    const dir = newDir("no-outputs");
    const roi = { offset: [0], shape: [4] };
    const block = { offset: [0], shape: [2] };
    fs.writeFileSync(
      path.join(dir, "pipeline.mjs"),
      `export default { tasks: [
  { id: "plain", totalRoi: ${JSON.stringify(roi)}, readRoi: ${JSON.stringify(block)},
    writeRoi: ${JSON.stringify(block)}, process() {} },
] };
`,
    );
    const run = await cli(dir, "run");
    assert.equal(run.code, 0, describeRun(run));
    const r = await runCli(["verify", trackingOf(dir)]);
    assert.equal(r.code, 0, describeRun(r));
    assert.doesNotMatch(r.stdout, /matches its manifest/);
    assert.match(r.stdout, /task "plain" .*: nothing to verify: no outputs recorded/);
    assert.match(r.stdout, /^verify: nothing to verify: no outputs recorded in the store/m);
    const json = JSON.parse((await runCli(["verify", trackingOf(dir), "--json"])).stdout) as {
      checked: number;
    };
    assert.equal(json.checked, 0);
  });
});

describe("read-only commands during a run", () => {
  it("verify and plan label the moment of a live run; nothing in flight is reported as damage", async () => {
    const dir = newDir("live");
    const file = path.join(dir, "live.mjs");
    fs.writeFileSync(
      file,
      `import fs from "node:fs";
const roi = (n) => ({ offset: [0], shape: [n] });
export default { tasks: [{ id: "t", totalRoi: roi(40), readRoi: roi(1), writeRoi: roi(1),
  readWriteConflict: false, maxWorkers: 2, version: "1",
  outputs: { o: { path: "out/{block_id}.txt" } },
  async process(block, _s, run) {
    await new Promise((r) => setTimeout(r, 40));
    fs.writeFileSync(run.outputs.o, String(block.id));
  } }] };
`,
    );
    const tracking = path.join(dir, "tracking");
    const running = startCli(["run", file, "--tracking-dir", tracking, "--no-progress"]);
    const store = path.join(tracking, "t");
    const problems: string[] = [];
    let labelled = 0;
    let planLabelled = 0;
    // Verify and plan over and over while blocks commit: never a problem, always the label.
    for (let round = 0; round < 200 && running.child.exitCode === null; round++) {
      if (!fs.existsSync(path.join(store, "blockwise.lock"))) {
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      const json = await runCli(["verify", store, "--json"]);
      if (running.child.exitCode !== null) break;
      const stores = (JSON.parse(json.stdout) as {
        stores: { problems: { problem: string }[]; live_run: string | null }[];
      }).stores;
      problems.push(...stores.flatMap((s) => s.problems.map((p) => p.problem)));
      if (stores[0]?.live_run?.startsWith(`pid ${running.child.pid} on host `)) labelled++;
      const plan = await runCli(["plan", file, "--tracking-dir", tracking]);
      if (
        /a run is writing .* now \(pid \d+ on host .*\): this is a moment of it/.test(plan.stdout)
      ) {
        planLabelled++;
      }
      if (labelled >= 3 && planLabelled >= 1) break;
    }
    const end = await running.result;
    assert.equal(end.code, 0, describeRun(end));
    assert.deepEqual(problems, [], "a live run's commits are not damage");
    assert.ok(labelled >= 1, "verify named the live run");
    assert.ok(planLabelled >= 1, "plan named the live run");
    const after = JSON.parse((await runCli(["verify", store, "--json"])).stdout) as {
      stores: { live_run: string | null; blocks: number }[];
    };
    assert.equal(after.stores[0]?.live_run, null);
    assert.equal(after.stores[0]?.blocks, 40);
  });
});
