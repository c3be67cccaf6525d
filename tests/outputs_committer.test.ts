/**
 * The group committer on its own (lib/outputs/committer.ts): many blocks committed at once
 * through its pipelined barriers, a block whose rename fails, and the manifest's hand-built
 * lines (the same text as JSON.stringify).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { makeBlock } from "../lib/execute/block.ts";
import { BlockOutputs } from "../lib/outputs/block_outputs.ts";
import { OutputCommitter } from "../lib/outputs/committer.ts";
import {
  type ManifestRecord,
  ManifestWriter,
  readManifest,
  serializeRecord,
} from "../lib/outputs/manifest.ts";
import type { OutputPlan } from "../lib/outputs/output_plan.ts";

const newDir = scratchDirs("blockwise-committer-");

function setUp(blocks: number, runId: string) {
  const dir = newDir("commit");
  const layout = new TaskLayout({
    totalRoi: { offset: [0], shape: [blocks] },
    readRoi: { offset: [0], shape: [1] },
    writeRoi: { offset: [0], shape: [1] },
    fit: "valid",
    readWriteConflict: false,
  });
  const plans: OutputPlan[] = [{
    kind: "path",
    name: "o",
    base: path.join(dir, "out"),
    relative: "{block_id}.txt",
    written: "out/{block_id}.txt",
  }];
  const store = path.join(dir, "store");
  fs.mkdirSync(store);
  const manifest = new ManifestWriter(store);
  const staging = new BlockOutputs(plans, runId);
  const committer = new OutputCommitter(runId);
  /** Block `p` stages its file (which then vanishes, when asked) and is committed. */
  const stageAndCommit = (p: number, vanish = false, into = manifest): Promise<void> => {
    const block = makeBlock("t", layout, p, 1);
    const where = staging.prepare(block);
    fs.writeFileSync(where["o"]!, `block ${p}`);
    const commit = staging.collect(block, p);
    if (vanish) fs.rmSync(where["o"]!);
    return committer.commit({
      block,
      plans,
      commit,
      manifest: into,
      provenance: "f".repeat(64),
      recipe: 0,
      seconds: 0.001,
    });
  };
  return { dir, layout, store, manifest, committer, stageAndCommit };
}

describe("the output committer", () => {
  it("commits a thousand blocks: every file in place, intent before commit, done after both", async () => {
    const { layout, store, manifest, dir, committer, stageAndCommit } = setUp(1000, "run1");
    assert.equal(committer.barrierMs, 0, "a barrier duration before any barrier");
    const seenAtResolve: boolean[] = [];
    const commits: Promise<void>[] = [];
    for (let p = 0; p < layout.blockCount; p++) {
      commits.push(
        stageAndCommit(p).then(() => {
          // Sampled: once resolved, the block's commit record is in the manifest.
          if (p % 97 === 0) {
            seenAtResolve.push(readManifest(store).blocks.get(String(p))?.state === "committed");
          }
        }),
      );
      // Let the committer's pipeline turn while blocks keep arriving.
      if (p % 50 === 49) await new Promise((r) => setTimeout(r, 2));
    }
    await Promise.all(commits);
    await committer.drain();
    manifest.close();
    // What pacing reads of the disk: the median of the last barriers, each one timed.
    assert.ok(committer.barrierMs > 0, `barrier median ${committer.barrierMs} ms`);
    assert.ok(seenAtResolve.length > 5 && seenAtResolve.every((x) => x), "committed at resolve");
    const out = fs.readdirSync(path.join(dir, "out")).filter((n) => n.endsWith(".txt"));
    assert.equal(out.length, 1000);
    assert.equal(fs.readFileSync(path.join(dir, "out", "417.txt"), "utf8"), "block 417");
    const read = readManifest(store);
    assert.equal(read.unreadable, 0);
    assert.equal(read.blocks.size, 1000);
    assert.ok([...read.blocks.values()].every((b) => b.state === "committed"));
    const lines = fs.readFileSync(path.join(store, "manifest.jsonl"), "utf8").trim().split("\n");
    const intentAt = new Map<string, number>();
    lines.forEach((line, i) => {
      const r = JSON.parse(line) as ManifestRecord;
      if (r.t === "intent") intentAt.set(r.index.join(), i);
      else if (r.t === "commit") assert.ok(intentAt.get(r.index.join())! < i, `block ${r.index}`);
    });
  });

  it("fails only the block whose staged file vanished, with a drop record", async () => {
    const { layout, store, manifest, committer, stageAndCommit } = setUp(40, "run2");
    const outcomes = await Promise.allSettled(
      Array.from({ length: layout.blockCount }, (_, p) => stageAndCommit(p, p === 7)),
    );
    await committer.drain();
    manifest.close();
    const rejected = outcomes.flatMap((o, p) => o.status === "rejected" ? [p] : []);
    assert.deepEqual(rejected, [7]);
    const reason = (outcomes[7] as PromiseRejectedResult).reason as Error;
    assert.match(reason.message, /7-7\.txt/);
    const read = readManifest(store);
    assert.equal(read.blocks.get("7")?.state, "dropped");
    assert.equal(read.blocks.get("8")?.state, "committed");
  });
});

describe("a commit turn that fails", () => {
  /** Commit every block into `failing`; all must settle, rejected, within 3 s. */
  async function allRejected(blocks: number, runId: string, fail: (m: ManifestWriter) => void) {
    const { layout, store, committer, stageAndCommit } = setUp(blocks, runId);
    const failing = new ManifestWriter(store);
    fail(failing);
    const outcomes = Promise.allSettled(
      Array.from({ length: layout.blockCount }, (_, p) => stageAndCommit(p, false, failing)),
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    const settled = await Promise.race([
      outcomes,
      new Promise<null>((r) => (timer = setTimeout(() => r(null), 3_000))),
    ]);
    clearTimeout(timer);
    assert.ok(settled !== null, "some commits never settled after the turn failed");
    assert.ok(settled.every((o) => o.status === "rejected"), "a block was done without its turn");
    await committer.drain();
    failing.close();
    return settled.map((o) => ((o as PromiseRejectedResult).reason as Error).message);
  }

  it("a manifest that cannot be written (a full disk) fails every block, none left waiting", async () => {
    const messages = await allRejected(50, "run4", (m) => {
      m.write = () => {
        throw new Error("ENOSPC: no space left on device, write");
      };
    });
    assert.ok(messages.every((m) => /^commit failed: ENOSPC/.test(m)), messages[0]);
  });

  it("a barrier that fails fails every block in flight, none left waiting", async () => {
    // A manifest whose folder is gone: syncfs cannot reach it, and its fsync fails (as on a
    // disk that returns EIO), so every barrier that covers it throws.
    const messages = await allRejected(60, "run3", (m) => {
      Object.defineProperty(m, "path", { value: path.join(path.dirname(m.path), "gone", "x") });
      m.sync = () => Promise.reject(new Error("EIO: i/o error, fsync"));
    });
    assert.ok(messages.every((m) => /^commit failed: /.test(m)), messages[0]);
  });
});

describe("manifest lines", () => {
  it("are what JSON.stringify writes, for every kind of record", () => {
    const records: ManifestRecord[] = [
      {
        t: "intent",
        index: [1, 22, 333],
        block: "123456789012345678901234567890",
        files: [["o", 'a "quoted" é\\path\n.json', 4096, "ab".repeat(32)], ["z", "c/0/1", 0, ""]],
        content: "cd".repeat(32),
        provenance: "ef".repeat(32),
        recipe: 3,
        seconds: 1e-7,
        at: "2026-12-03T23:59:59.123Z",
      },
      {
        t: "intent",
        index: [0],
        block: "0",
        files: [],
        content: "",
        provenance: "",
        recipe: 0,
        seconds: 12345.678,
        at: "",
      },
      { t: "commit", index: [4, 5] },
      { t: "commit", index: [4, 5], adopted: true },
      { t: "drop", index: [9], why: 'commit failed: "x"' },
      { t: "tombstone", index: [2, 2], content: "00" },
      { t: "nondeterministic", index: [1], was: "a", now: "b" },
    ];
    for (const r of records) assert.equal(serializeRecord(r), JSON.stringify(r));
  });
});
