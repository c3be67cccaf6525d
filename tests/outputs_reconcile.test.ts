/**
 * The start of every run with outputs: the sweep of staging leftovers and the reconciliation of
 * the manifest against the disk, one case each, as a user (or a crash) leaves them: a block
 * complete but unrecorded (adopted when its intent's hashes match, else rolled back and
 * rebuilt), a recorded output deleted by hand (exactly that block reruns), files no record names
 * (reported, left alone), a torn manifest line, and a done byte without a record. Each case
 * checks the summary line the run prints, the `--events` record and the blocks that ran.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, readUint8 } from "./fixtures/tracking/harness.ts";
import {
  filterManifest,
  manifestOf,
  names,
  ran,
  range,
  runIn,
  treeOf,
} from "./fixtures/outputs.ts";

const newDir = scratchDirs("outputs-reconcile");
// Each test spawns several runs: give it room on a loaded machine.
const SLOW = { timeout: 60_000 };

/** a (8 blocks) -> b (8 blocks, each reading its neighbours in a), both writing a file per block. */
function pipeline(dir: string): string {
  const file = path.join(dir, "p.mjs");
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
const DIR = ${JSON.stringify(dir)};
const step = (id, up) => ({
  id, ...(up ? { upstream: [up] } : {}),
  totalRoi: up ? { offset: [-1], shape: [18] } : { offset: [0], shape: [16] },
  readRoi: up ? { offset: [-1], shape: [4] } : { offset: [0], shape: [2] },
  writeRoi: { offset: [0], shape: [2] }, fit: "shrink", readWriteConflict: false, maxWorkers: 2,
  outputs: { o: { path: "out/" + id + "/{block_id}.txt" } },
  process(block, state, context) {
    fs.appendFileSync(DIR + "/ran.log", id + block.id + "\\n");
    let text = id + ":" + block.id;
    if (up) {
      for (let j = Math.max(0, Number(block.id) - 1); j <= Math.min(7, Number(block.id) + 1); j++) {
        text += "|" + fs.readFileSync(DIR + "/out/" + up + "/" + j + ".txt", "utf8");
      }
    }
    fs.writeFileSync(context.outputs.o, text);
  },
});
export default { tasks: [step("a", null), step("b", "a")] };
`,
  );
  return file;
}

async function built(
  label: string,
): Promise<{ dir: string; file: string; clean: Record<string, string> }> {
  const dir = newDir(label);
  const file = pipeline(dir);
  const first = await runIn(dir, file);
  assert.equal(first.code, 0, describeRun(first));
  return { dir, file, clean: treeOf(path.join(dir, "out")) };
}

interface Reconciled {
  task: string;
  recorded_and_present: number;
  adopted: number;
  recorded_not_present: number;
  rolled_back: number;
  never_built: number;
  unexpected: number;
  staging_removed: number;
  unreadable_lines: number;
}

function reconciledEvents(file: string): Reconciled[] {
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) =>
    JSON.parse(l) as { event?: string; type?: string } & Reconciled
  ).filter((e) => (e.event ?? e.type) === "outputs_reconciled");
}

describe("reconcile at the start of a run", () => {
  it(
    "deleting one output file by hand reruns exactly that block; the record is dropped",
    SLOW,
    async () => {
      const { dir, file, clean } = await built("deleted");
      fs.rmSync(path.join(dir, "out", "a", "5.txt"));
      const events = path.join(dir, "events.jsonl");
      const again = await runIn(dir, file, ["--events", events]);
      assert.equal(again.code, 0, describeRun(again));
      assert.match(
        again.stderr,
        /Task "a": outputs reconciled: 7 recorded and present, 1 recorded but missing \(rebuilt\)\n/,
      );
      assert.deepEqual(ran(dir), ["a5"], "b reads a5, but a5 came back with the same content");
      assert.deepEqual(treeOf(path.join(dir, "out")), clean);
      const drop = manifestOf(dir, "a").find((r) => r.t === "drop")!;
      assert.deepEqual(drop.index, [5]);
      assert.match(drop.why ?? "", /^output missing: .*5\.txt$/);
      const a = reconciledEvents(events).find((e) => e.task === "a")!;
      assert.equal(a.recorded_and_present, 7);
      assert.equal(a.recorded_not_present, 1);
      assert.equal(a.never_built, 0);
      const last = await runIn(dir, file);
      assert.deepEqual(ran(dir), [], describeRun(last));
    },
  );

  it(
    "a block complete on disk whose commit record is missing is adopted by re-hashing, not rerun",
    SLOW,
    async () => {
      const { dir, file, clean } = await built("adopt");
      // The crash windows: renamed into place, killed before the commit record; or done, and the
      // commit record (written after the renames' barrier, durable one barrier later) lost with
      // the page cache: the ledger here says done, as it would then.
      filterManifest(dir, "a", (r) => !(r.t === "commit" && r.index[0] === 3));
      const again = await runIn(dir, file);
      assert.equal(again.code, 0, describeRun(again));
      assert.match(
        again.stderr,
        /Task "a": outputs reconciled: 7 recorded and present, 1 adopted \(complete but unrecorded: a run stopped between rename and record\)\n/,
      );
      assert.deepEqual(ran(dir), []);
      assert.deepEqual(treeOf(path.join(dir, "out")), clean);
      const adopted = manifestOf(dir, "a").filter((r) => r.t === "commit" && r.adopted === true);
      assert.deepEqual(adopted.map((r) => r.index), [[3]]);
    },
  );

  it(
    "an unrecorded block whose bytes differ from its intent is rolled back and rebuilt",
    SLOW,
    async () => {
      const { dir, file, clean } = await built("rollback");
      filterManifest(dir, "a", (r) => !(r.t === "commit" && r.index[0] === 3));
      // Same size, other bytes: only the hash tells.
      fs.writeFileSync(path.join(dir, "out", "a", "3.txt"), "a:X");
      const again = await runIn(dir, file);
      assert.equal(again.code, 0, describeRun(again));
      assert.match(
        again.stderr,
        /Task "a": outputs reconciled: 7 recorded and present, 1 rolled back \(a commit cut short\)\n/,
      );
      assert.deepEqual(ran(dir), ["a3"]);
      assert.deepEqual(treeOf(path.join(dir, "out")), clean);
    },
  );

  it("staging leftovers of a killed run are removed before anything runs", SLOW, async () => {
    const { dir, file, clean } = await built("staging");
    const staged = path.join(dir, "out", "a", ".blockwise-staging", "dead-run", "a");
    // Staged blocks sit in lane folders (stagingLane); one is where an older version put it.
    const leftovers: [lane: string, block: string][] = [["3", "1"], ["a", "4"], ["a", "6"], [
      "",
      "5",
    ]];
    for (const [lane, block] of leftovers) {
      fs.mkdirSync(path.join(staged, "o", lane), { recursive: true });
      fs.writeFileSync(path.join(staged, "o", lane, `${block}-${block}.txt`), "half");
    }
    const again = await runIn(dir, file);
    assert.equal(again.code, 0, describeRun(again));
    assert.match(
      again.stderr,
      /Task "a": outputs reconciled: 8 recorded and present, 4 staging leftovers removed\n/,
    );
    assert.deepEqual(ran(dir), []);
    assert.deepEqual(treeOf(path.join(dir, "out")), clean, "the staging folder is gone");
  });

  it("files under the outputs that no record names are reported and left alone", SLOW, async () => {
    const { dir, file } = await built("unexpected");
    const stray = path.join(dir, "out", "b", "99.txt");
    fs.writeFileSync(stray, "from elsewhere");
    fs.writeFileSync(path.join(dir, "out", "b", "notes.md"), "not a block's name: not counted");
    const events = path.join(dir, "events.jsonl");
    const again = await runIn(dir, file, ["--events", events]);
    assert.equal(again.code, 0, describeRun(again));
    assert.ok(
      again.stderr.includes(
        `Task "b": outputs reconciled: 8 recorded and present, 1 unexpected file no record names (left alone, e.g. ${stray})\n`,
      ),
      describeRun(again),
    );
    assert.deepEqual(ran(dir), []);
    assert.equal(fs.readFileSync(stray, "utf8"), "from elsewhere");
    const b = reconciledEvents(events).find((e) => e.task === "b")!;
    assert.equal(b.unexpected, 1);
  });

  it(
    "garbage inside the manifest is told apart from a torn append, with its line",
    SLOW,
    async () => {
      const { dir, file } = await built("garbage");
      const manifest = path.join(dir, "tracking", "a", "manifest.jsonl");
      const lines = fs.readFileSync(manifest, "utf8").split("\n");
      lines.splice(2, 0, "#$%^ not json");
      fs.writeFileSync(manifest, lines.join("\n"));
      const again = await runIn(dir, file);
      assert.equal(again.code, 0, describeRun(again));
      assert.match(
        again.stderr,
        /1 unreadable manifest line ignored \(line 3 of manifest\.jsonl: not a record blockwise writes/,
      );
      assert.doesNotMatch(again.stderr, /torn manifest line/);
    },
  );

  it("a torn last manifest line is ignored and counted", SLOW, async () => {
    const { dir, file } = await built("torn");
    fs.appendFileSync(path.join(dir, "tracking", "a", "manifest.jsonl"), `{"t":"intent","ind`);
    const again = await runIn(dir, file);
    assert.equal(again.code, 0, describeRun(again));
    assert.match(
      again.stderr,
      /Task "a": outputs reconciled: 8 recorded and present, 1 torn manifest line\(s\) ignored\n/,
    );
    assert.deepEqual(ran(dir), []);
    // The next append started a fresh line: every later record parses.
    fs.rmSync(path.join(dir, "out", "a", "0.txt"));
    const third = await runIn(dir, file);
    assert.equal(third.code, 0, describeRun(third));
    assert.deepEqual(ran(dir), ["a0"]);
    const text = fs.readFileSync(path.join(dir, "tracking", "a", "manifest.jsonl"), "utf8");
    assert.equal(text.split("\n").filter((l) => l !== "").length, manifestOf(dir, "a").length + 1);
  });

  it(
    "a done byte without a durable record is not trusted: the block is rebuilt",
    SLOW,
    async () => {
      const { dir, file, clean } = await built("unrecorded-done");
      filterManifest(dir, "b", (r) => r.index[0] !== 6);
      fs.rmSync(path.join(dir, "out", "b", "6.txt"));
      assert.equal(
        readUint8(path.join(dir, "tracking", "b"), "done")[6],
        1,
        "the ledger says done",
      );
      const again = await runIn(dir, file);
      assert.equal(again.code, 0, describeRun(again));
      assert.match(
        again.stderr,
        /Task "b": outputs reconciled: 7 recorded and present, 1 never built\n/,
      );
      assert.deepEqual(ran(dir), ["b6"]);
      assert.deepEqual(treeOf(path.join(dir, "out")), clean);
    },
  );

  it(
    "every block of the cases above ends recorded once, the disk matching the ledger",
    SLOW,
    async () => {
      const { dir, file } = await built("ledger");
      fs.rmSync(path.join(dir, "out", "b", "2.txt"));
      filterManifest(dir, "a", (r) => !(r.t === "commit" && r.index[0] === 7));
      assert.equal((await runIn(dir, file)).code, 0);
      for (const task of ["a", "b"]) {
        // b's tracking grid has a cell more than its blocks (its read context): count the ones.
        const done = readUint8(path.join(dir, "tracking", task), "done");
        assert.equal(done.reduce((n, v) => n + v, 0), 8, task);
        for (const i of range(0, 8)) {
          assert.ok(fs.existsSync(path.join(dir, "out", task, `${i}.txt`)), `${task}${i}`);
        }
      }
      assert.deepEqual(ran(dir), names("b", [2]));
    },
  );
});
