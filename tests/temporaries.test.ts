/**
 * Temporary intermediates through the CLI, on the seed's example mapped onto blocks: a -> b ->
 * c -> d -> {e, f}, with b, c and d temporary and every reader reading its upstream blocks with
 * a context of one voxel (so each block reads three upstream blocks). Checked on the files left
 * on disk, the blocks that ran (a log each block appends to) and the manifests.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { type CliResult, describeRun, runCli } from "./fixtures/tracking/harness.ts";
import { filterManifest, manifestOf as manifest, ran, runIn as run } from "./fixtures/outputs.ts";
import { all as ALL, chain, endState, files, onDisk, TASKS } from "./fixtures/temporaries.ts";

const newDir = scratchDirs("temporaries");

/** A rerun runs nothing, and finds every block of `task` deleted (none present, none rebuilt). */
async function assertRerunDeletedOnly(dir: string, file: string, task: string): Promise<void> {
  const again = await run(dir, file);
  assert.equal(again.code, 0, describeRun(again));
  assert.deepEqual(ran(dir), [], "nothing runs, although every temporary output is gone");
  assert.match(
    again.stderr,
    new RegExp(`Task "${task}": outputs reconciled: 0 recorded and present, 8 deleted temporaries`),
  );
}

describe("temporary intermediates", () => {
  it("free b, c and d block by block; e and f complete; a rerun runs nothing", async () => {
    const dir = newDir("chain");
    const file = chain(dir);
    const first = await run(dir, file);
    assert.equal(first.code, 0, describeRun(first));
    assert.deepEqual(ran(dir), TASKS.flatMap((t) => ALL(t)).sort());
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
    for (const t of ["b", "c", "d"]) {
      const tombstones = manifest(dir, t).filter((r) => r.t === "tombstone");
      assert.equal(tombstones.length, 8, `${t}: one tombstone per block`);
      assert.ok(
        tombstones.every((r) => /^[0-9a-f]{64}$/.test(r.content ?? "")),
        "they keep the hash",
      );
    }
    assert.match(first.stderr, /temporary: 8 deleted \(\d+ B\), 0 live \(0 B\), peak \d+ B live/);
    const status = await runCli(["status", path.join(dir, "tracking")]);
    assert.equal(status.code, 0, describeRun(status));
    assert.match(
      status.stdout,
      /task "b"[^]*?outputs +temporary: 8 deleted \([\d.]+ k?B\), 0 live \(0 B\)/i,
    );
    assert.match(status.stdout, /task "e"[^]*?outputs +8 blocks on disk \([\d.]+ k?B\)/i);
    const json = await runCli(["status", path.join(dir, "tracking"), "--json"]);
    const stores = JSON.parse(json.stdout).stores as { task: string; outputs: unknown }[];
    const b = stores.find((r) => r.task === "b")!.outputs as Record<string, unknown>;
    assert.equal(b["deleted_blocks"], 8);
    assert.equal(b["present_blocks"], 0);
    assert.equal(b["temporary"], true);
    assert.ok((b["deleted_bytes"] as number) > 0);
    await assertRerunDeletedOnly(dir, file, "b");
  });

  it("a forced reader regenerates exactly the temporary blocks it reads, recursively, and frees them again", async () => {
    const dir = newDir("force");
    const file = chain(dir);
    const first = await run(dir, file);
    assert.equal(first.code, 0, describeRun(first));
    const e2 = fs.readFileSync(path.join(dir, "out", "e", "2.txt"), "utf8");
    const forced = await run(dir, file, ["--force", "e:4:2"]);
    assert.equal(forced.code, 0, describeRun(forced));
    // e2 (write [4, 6)) reads d1..d3, which read c0..c4, which read b0..b5.
    assert.deepEqual(
      ran(dir),
      [
        ...["b0", "b1", "b2", "b3", "b4", "b5"],
        ...["c0", "c1", "c2", "c3", "c4"],
        ...["d1", "d2", "d3"],
        "e2",
      ].sort(),
    );
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
    assert.match(forced.stderr, /temporary: 8 deleted .*; 6 regenerated/);
    // Deleted again, the regenerated blocks are counted once: the same bytes as before.
    const deleted = (r: CliResult) => r.stderr.match(/temporary: 8 deleted \(([^)]+)\)/)![1];
    assert.equal(deleted(forced), deleted(first));
    // Rebuilt from regenerated inputs, it is what it was.
    assert.equal(fs.readFileSync(path.join(dir, "out", "e", "2.txt"), "utf8"), e2);
    assert.doesNotMatch(forced.stderr, /non-deterministic/);
  });

  it("--keep-temp keeps them; the next start frees the ones whose readers are all done, running nothing", async () => {
    const dir = newDir("keep");
    const file = chain(dir);
    const kept = await run(dir, file, ["--keep-temp"]);
    assert.equal(kept.code, 0, describeRun(kept));
    assert.deepEqual(onDisk(dir), { a: 8, b: 8, c: 8, d: 8, e: 8, f: 8 });
    const status = await runCli(["status", path.join(dir, "tracking", "c")]);
    assert.match(status.stdout, /outputs +temporary: 0 deleted \(0 B\), 8 live \([\d.]+ k?B\)/i);
    const next = await run(dir, file);
    assert.equal(next.code, 0, describeRun(next));
    assert.deepEqual(ran(dir), []);
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
  });

  it("a failed reader keeps its inputs; once it succeeds they go", async () => {
    const dir = newDir("failed");
    const first = await run(dir, chain(dir, { failing: "e3" }));
    assert.equal(first.code, 1, describeRun(first));
    // e3 (write [6, 8)) reads d2, d3, d4: they stay; d blocks f and the other e blocks read
    // go; c and b are free since every d block committed.
    assert.deepEqual(files(dir, "d"), ["2.txt", "3.txt", "4.txt"]);
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 3, e: 7, f: 8 });
    const fixed = await run(dir, chain(dir));
    assert.equal(fixed.code, 0, describeRun(fixed));
    assert.deepEqual(ran(dir), ["e3"], "only the failed block runs: its inputs were kept");
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
  });

  it("an orphaned reader keeps its inputs; once it runs they go", async () => {
    const dir = newDir("orphaned");
    const first = await run(dir, chain(dir, { failing: "d3" }));
    assert.equal(first.code, 1, describeRun(first));
    // d3 (write [6, 8), read [5, 9)) fails: e2..e4 and f2..f4, which read it, are orphaned and
    // never run. Their other inputs d1, d2, d4, d5 stay, and so do d3's own inputs c2..c4;
    // every other temporary block was read by all its readers and is gone.
    assert.deepEqual(files(dir, "d"), ["1.txt", "2.txt", "4.txt", "5.txt"]);
    assert.deepEqual(files(dir, "c"), ["2.txt", "3.txt", "4.txt"]);
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 3, d: 4, e: 5, f: 5 });
    const fixed = await run(dir, chain(dir));
    assert.equal(fixed.code, 0, describeRun(fixed));
    assert.deepEqual(
      ran(dir),
      ["d3", "e2", "e3", "e4", "f2", "f3", "f4"],
      "only the failed and the orphaned blocks run: every input was kept",
    );
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
  });

  it("a grown volume regenerates only the deleted blocks that the blocks to run read", async () => {
    const dir = newDir("grown");
    assert.equal((await run(dir, chain(dir))).code, 0);
    const grown = await run(dir, chain(dir, { voxels: 20 }));
    assert.equal(grown.code, 0, describeRun(grown));
    // New: index 8 and 9 of every task; b7..f7 now read a new block, so they run too, and
    // everything downstream of them may change: c6; d5, d6; e4..e6 and f4..f6. What they read
    // that was deleted is regenerated, recursively: d3, d4; c2..c5; b1..b6. Nothing else runs.
    const span = (task: string, from: number) => ALL(task, 10).slice(from);
    assert.deepEqual(
      ran(dir),
      [
        ...span("a", 8),
        ...span("b", 1),
        ...span("c", 2),
        ...span("d", 3),
        ...span("e", 4),
        ...span("f", 4),
      ].sort(),
    );
    assert.deepEqual(onDisk(dir), { a: 10, b: 0, c: 0, d: 0, e: 10, f: 10 });
    const clean = newDir("grown-clean");
    assert.equal((await run(clean, chain(clean, { voxels: 20 }))).code, 0);
    assert.deepEqual(endState(dir), endState(clean), "what a clean run of the grown volume makes");
    const again = await run(dir, chain(dir, { voxels: 20 }));
    assert.deepEqual(ran(dir), [], describeRun(again));
  });

  it("a regenerated block with other content is reported, and its readers run again", async () => {
    const dir = newDir("nondeterministic");
    assert.equal((await run(dir, chain(dir, { nondeterministic: "d" }))).code, 0);
    const forced = await run(dir, chain(dir, { nondeterministic: "d" }), ["--force", "e:4:2"]);
    // d1..d3 come back with other content: every e and f block reading them is stale. e2 (the
    // forced one) reads only those and runs; the others read d0 or d4, which stayed deleted, so
    // they fail unrun, naming the input, and nothing is run on a missing input.
    assert.equal(forced.code, 1, describeRun(forced));
    assert.match(forced.stderr, /warning: Task "d": block \d+ was regenerated with other content/);
    assert.match(forced.stderr, /became stale in this run .* reads d\/\d+, which was deleted/);
    assert.doesNotMatch(forced.stderr, /missing input/);
    const stale = ran(dir).filter((b) => /^[ef]/.test(b));
    // f2 runs too when it is checked before e2's commit frees d1..d3 again, else it is refused.
    assert.ok(stale.includes("e2") && stale.every((b) => b === "e2" || b === "f2"), `${stale}`);
    // The next run regenerates the deleted inputs of the refused blocks first, and completes.
    const next = await run(dir, chain(dir, { nondeterministic: "d" }));
    assert.equal(next.code, 0, describeRun(next));
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
    const last = await run(dir, chain(dir, { nondeterministic: "d" }));
    assert.equal(last.code, 0, describeRun(last));
  });
  it("a temporary block whose files are gone is deleted, never rebuilt: a lost tombstone, a file removed by hand", async () => {
    const dir = newDir("gone");
    const file = chain(dir);
    assert.equal((await run(dir, file)).code, 0);
    // Tombstones are written without waiting for the disk: a power cut may keep the removal
    // of the files and lose them. The commit records then name files that are gone.
    filterManifest(dir, "c", (r) => r.t !== "tombstone");
    await assertRerunDeletedOnly(dir, file, "c");
    assert.equal(manifest(dir, "c").filter((r) => r.t === "tombstone").length, 8, "written again");
    // A live temporary file removed by hand: the block counts as deleted (not missing), and a
    // reader that still has to run gets it regenerated first.
    const kept = newDir("gone-by-hand");
    const keptFile = chain(kept, { failing: "e3" });
    assert.equal((await run(kept, keptFile)).code, 1);
    assert.deepEqual(files(kept, "d"), ["2.txt", "3.txt", "4.txt"]);
    fs.rmSync(path.join(kept, "out", "d", "3.txt"));
    const fixed = await run(kept, chain(kept));
    assert.equal(fixed.code, 0, describeRun(fixed));
    assert.doesNotMatch(fixed.stderr, /recorded but missing/);
    // d3 comes back (from c2..c4, from b1..b5): e3 needs it; nothing else runs.
    assert.deepEqual(
      ran(kept),
      ["b1", "b2", "b3", "b4", "b5", "c2", "c3", "c4", "d3", "e3"],
    );
    assert.deepEqual(onDisk(kept), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
  });
});
