/**
 * The output crash test: `blockwise run` SIGKILLed again and again while two tasks commit their
 * outputs (a: one file per block; b: a chunk of a Zarr array plus a folder of two files per
 * block, reading a's neighbours), at random moments (seeded) and at every step of the commit
 * via injected crash points (BLOCKWISE_TEST_CRASH_AT), then resumed. Every kill must land (the
 * run dies by SIGKILL, it did not finish first). After every kill, the ledger is checked against
 * the disk: a block marked done has every output, byte-identical to a clean run's, and every
 * committed manifest record matches the files' hashes. The finished outputs equal a clean run's.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { createHash } from "node:crypto";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import { ensureArray } from "../lib/zarr/mod.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import {
  type CliResult,
  delay,
  describeRun,
  prng,
  readUint8,
  REPO,
  startCli,
} from "./fixtures/tracking/harness.ts";
import { manifestOf, runIn, treeOf } from "./fixtures/outputs.ts";

const newDir = scratchDirs("outputs-crash");
const SEED = 0xc0ffee;
const BLOCKS = 400;
const KILLS = 56;
const POINTS = [
  "commit:staged",
  "commit:intent",
  "commit:rename",
  "commit:renamed",
  "commit:recorded",
  "commit:done",
] as const;
const ZARR_MODULE = JSON.stringify(path.join(REPO, "lib", "zarr", "mod.ts"));

const LAYOUTS: Readonly<Record<string, TaskLayout>> = {
  a: new TaskLayout({
    totalRoi: makeRoi([0], [BLOCKS]),
    readRoi: makeRoi([0], [1]),
    writeRoi: makeRoi([0], [1]),
    fit: "valid",
    readWriteConflict: false,
  }),
  b: new TaskLayout({
    totalRoi: makeRoi([-1], [BLOCKS + 2]),
    readRoi: makeRoi([-1], [3]),
    writeRoi: makeRoi([0], [1]),
    fit: "shrink",
    readWriteConflict: false,
  }),
};

function pipeline(dir: string): string {
  ensureArray(path.join(dir, "out.zarr", "b"), {
    shape: [BLOCKS],
    chunkShape: [1],
    dtype: "uint32",
    fillValue: 0,
  });
  const file = path.join(dir, "p.mjs");
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
import { openArrayMetadata, writeChunkRegion } from ${ZARR_MODULE};
const DIR = ${JSON.stringify(dir)};
const N = ${BLOCKS};
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
export default { tasks: [
  { id: "a", totalRoi: { offset: [0], shape: [N] }, readRoi: { offset: [0], shape: [1] },
    writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false, maxWorkers: 2,
    outputs: { o: { path: "out/a/{block_id}.txt" } },
    process(block, state, context) {
      sleep(Number(block.id) % 2);
      fs.writeFileSync(context.outputs.o, "a:" + block.id + ":" + "x".repeat(Number(block.id) % 37));
    } },
  { id: "b", upstream: ["a"], totalRoi: { offset: [-1], shape: [N + 2] },
    readRoi: { offset: [-1], shape: [3] }, writeRoi: { offset: [0], shape: [1] }, fit: "shrink",
    readWriteConflict: false, maxWorkers: 2,
    outputs: { arr: { zarr: "out.zarr/b" }, meta: { path: "out/b/{block_id}" } },
    process(block, state, context) {
      sleep(Number(block.id) % 2);
      const at = block.writeRoi.offset[0];
      let text = "";
      for (let j = Math.max(0, at - 1); j <= Math.min(N - 1, at + 1); j++) {
        text += fs.readFileSync(DIR + "/out/a/" + j + ".txt", "utf8") + "|";
      }
      const meta = openArrayMetadata(context.outputs.arr);
      writeChunkRegion(context.outputs.arr, meta, [at], [1], new Uint32Array([text.length * 1000 + at]));
      fs.mkdirSync(context.outputs.meta);
      fs.writeFileSync(context.outputs.meta + "/inputs.txt", text);
      fs.writeFileSync(context.outputs.meta + "/at.txt", String(at));
    } },
] };
`,
  );
  return file;
}

/** The files of one block, relative to the run folder. */
function blockFiles(task: string, p: number): string[] {
  const layout = LAYOUTS[task]!;
  const id = String(layout.blockIdOf(p));
  if (task === "a") return [`out/a/${id}.txt`];
  const at = layout.writeRoiOf(p).offset[0]!;
  return [`out.zarr/b/c/${at}`, `out/b/${id}/at.txt`, `out/b/${id}/inputs.txt`];
}

function outputTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const root of ["out", "out.zarr"]) {
    for (const [k, v] of Object.entries(treeOf(path.join(dir, root)))) out[`${root}/${k}`] = v;
  }
  return out;
}

/** Blocks marked done in the raw done arrays, per task. */
function doneBlocks(dir: string, task: string): number[] {
  const store = path.join(dir, "tracking", task);
  if (!fs.existsSync(path.join(store, "done", "zarr.json"))) return [];
  const done = readUint8(store, "done");
  const layout = LAYOUTS[task]!;
  const out: number[] = [];
  for (let p = 0; p < layout.blockCount; p++) {
    const v = done[layout.trackingCellOf(p)]!;
    assert.ok(v === 0 || v === 1, `${task} position ${p}: done byte ${v}`);
    if (v === 1) out.push(p);
  }
  return out;
}

/**
 * The ledger against the disk: a done block's files are the clean run's bytes, and a block whose
 * latest record is a commit has files with the intent's hashes. Returns the done count.
 */
function checkLedger(dir: string, clean: Record<string, string>, when: string): number {
  let count = 0;
  for (const task of ["a", "b"]) {
    for (const p of doneBlocks(dir, task)) {
      count++;
      for (const rel of blockFiles(task, p)) {
        const file = path.join(dir, rel);
        assert.ok(fs.existsSync(file), `${when}: ${task} block ${p} is done but ${rel} is missing`);
        assert.equal(
          fs.readFileSync(file, "latin1"),
          clean[rel],
          `${when}: ${task} block ${p} is done but ${rel} differs from a clean run`,
        );
      }
    }
    const latest = new Map<string, ReturnType<typeof manifestOf>[number]>();
    const intents = new Map<string, ReturnType<typeof manifestOf>[number]>();
    for (const r of manifestOf(dir, task)) {
      latest.set(r.index.join(), r);
      if (r.t === "intent") intents.set(r.index.join(), r);
    }
    const base = task === "a" ? { o: "out/a" } : { arr: "out.zarr/b", meta: "out/b" };
    for (const [key, r] of latest) {
      if (r.t !== "commit") continue;
      for (const [output, rel, size, sha] of intents.get(key)!.files!) {
        const file = path.join(dir, (base as Record<string, string>)[output]!, rel);
        const bytes = fs.readFileSync(file);
        assert.equal(bytes.length, size, `${when}: ${file} size`);
        assert.equal(createHash("sha256").update(bytes).digest("hex"), sha, `${when}: ${file}`);
      }
    }
  }
  return count;
}

function commitCount(dir: string): number {
  let n = 0;
  for (const task of ["a", "b"]) {
    const file = path.join(dir, "tracking", task, "manifest.jsonl");
    try {
      n += fs.readFileSync(file, "latin1").split(`"t":"commit"`).length - 1;
    } catch {
      // not made yet
    }
  }
  return n;
}

/** Start a run and SIGKILL it once `grow` more commit records are durable (plus a pause). */
async function killAtRandom(
  dir: string,
  file: string,
  grow: number,
  pause: number,
): Promise<CliResult> {
  const before = commitCount(dir);
  const running = startCli([
    "run",
    file,
    "--tracking-dir",
    path.join(dir, "tracking"),
    "--no-progress",
  ]);
  let exited = false;
  void running.result.then(() => (exited = true), () => (exited = true));
  while (!exited && commitCount(dir) < before + grow) await delay(2);
  if (!exited) {
    await delay(pause);
    running.child.kill("SIGKILL");
  }
  return await running.result;
}

describe("outputs survive SIGKILL at any moment", () => {
  it(`${KILLS} kills, every commit step hit, each resumed; the result equals a clean run`, {
    timeout: 180_000,
  }, async () => {
    const cleanDir = newDir("clean");
    const cleanRun = await runIn(cleanDir, pipeline(cleanDir));
    assert.equal(cleanRun.code, 0, describeRun(cleanRun));
    const clean = outputTree(cleanDir);
    assert.equal(
      Object.keys(clean).length,
      BLOCKS * 4 + 1,
      "a file per a block, three per b block",
    );
    const cleanContent = (task: string) =>
      new Map(
        manifestOf(cleanDir, task).filter((r) => r.t === "intent").map((
          r,
        ) => [r.index.join(), r.content]),
      );

    const random = prng(SEED);
    const queue: string[] = POINTS.flatMap((
      p,
    ) => [`${p}:1`, `${p}:${2 + Math.floor(random() * 3)}`]);
    const kills: string[] = [];
    let round = 0;
    while (kills.length < KILLS) {
      const dir = newDir(`round${round++}`);
      const file = pipeline(dir);
      // Kill while enough work is left that the kill lands before the run could finish.
      while (kills.length < KILLS && checkLedger(dir, clean, "before") < 2 * BLOCKS - 120) {
        const crashAt = queue.shift();
        let result: CliResult;
        if (crashAt !== undefined) {
          result = await runIn(dir, file, [], { BLOCKWISE_TEST_CRASH_AT: crashAt });
        } else {
          result = await killAtRandom(
            dir,
            file,
            1 + Math.floor(random() * 24),
            Math.floor(random() * 8),
          );
        }
        const what = `kill ${kills.length + 1} (${crashAt ?? "random"})`;
        assert.equal(result.signal, "SIGKILL", `${what} did not land: ${describeRun(result)}`);
        kills.push(crashAt ?? "random");
        checkLedger(dir, clean, `after ${what}`);
      }
      const resumed = await runIn(dir, file);
      assert.equal(resumed.code, 0, describeRun(resumed));
      assert.equal(checkLedger(dir, clean, "after the last resume"), 2 * BLOCKS);
      assert.deepEqual(outputTree(dir), clean, "byte-identical to a clean run, no staging left");
      for (const task of ["a", "b"]) {
        const mine = new Map<string, string | undefined>();
        for (const r of manifestOf(dir, task)) {
          if (r.t === "intent") mine.set(r.index.join(), r.content);
        }
        assert.deepEqual(mine, cleanContent(task), `${task}: every block's content hash`);
      }
    }
    for (const p of POINTS) assert.ok(kills.some((k) => k.startsWith(p)), `${p} was hit`);
    assert.ok(kills.length >= 50);
  });
});
