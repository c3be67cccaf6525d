/**
 * Per-block provenance through the CLI on a chain a -> b -> c (8 blocks each; b and c read their
 * upstream neighbours): a changed version or params reruns exactly the task and the downstream
 * blocks whose upstream content changed; the same content stops the cascade (early cutoff);
 * non-semantic fields never make anything stale; declared inputs are fingerprinted by mtime or
 * by content, and for a Zarr input only by the chunks under a block's read ROI; --force reruns
 * the blocks it names.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { ensureArray } from "../lib/zarr/mod.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun } from "./fixtures/tracking/harness.ts";
import { names, ran, range, runIn, treeOf } from "./fixtures/outputs.ts";

const newDir = scratchDirs("outputs-provenance");
// Each test spawns several runs: give it room on a loaded machine.
const SLOW = { timeout: 60_000 };
const ALL = [...names("a", range(0, 8)), ...names("b", range(0, 8)), ...names("c", range(0, 8))]
  .sort();

interface Options {
  /** Fields added to task a (version, params, inputs, maxWorkers ...). */
  readonly a?: Record<string, unknown>;
  readonly b?: Record<string, unknown>;
}

/**
 * The chain. a's block i writes "a:i", plus ":" + params.k for i < 4 (so k changes a0..a3's
 * content only; other params change none). b and c append the texts of the upstream blocks
 * they read (their neighbours i-1..i+1).
 */
function chain(dir: string, options: Options = {}): string {
  const file = path.join(dir, "chain.mjs");
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
const DIR = ${JSON.stringify(dir)};
const OPTIONS = ${JSON.stringify(options)};
const step = (id, up) => ({
  id, ...(up ? { upstream: [up] } : {}),
  totalRoi: up ? { offset: [-1], shape: [18] } : { offset: [0], shape: [16] },
  readRoi: up ? { offset: [-1], shape: [4] } : { offset: [0], shape: [2] },
  writeRoi: { offset: [0], shape: [2] }, fit: "shrink", readWriteConflict: false, maxWorkers: 2,
  outputs: { o: { path: "out/" + id + "/{block_id}.txt" } },
  ...(OPTIONS[id] ?? {}),
  process(block, state, context) {
    fs.appendFileSync(DIR + "/ran.log", id + block.id + "\\n");
    const i = Number(block.id);
    let text = id + ":" + i;
    if (!up && i < 4 && context.params.k !== undefined) text += ":" + context.params.k;
    if (up) {
      for (let j = Math.max(0, i - 1); j <= Math.min(7, i + 1); j++) {
        text += "|" + fs.readFileSync(DIR + "/out/" + up + "/" + j + ".txt", "utf8");
      }
    }
    fs.writeFileSync(context.outputs.o, text);
  },
});
export default { tasks: [step("a", null), step("b", "a"), step("c", "b")] };
`,
  );
  return file;
}

/** Build the chain with `first`, then run it with `second`; returns the blocks the second ran. */
async function rerun(label: string, first: Options, second: Options): Promise<string[]> {
  const dir = newDir(label);
  const one = await runIn(dir, chain(dir, first));
  assert.equal(one.code, 0, describeRun(one));
  assert.deepEqual(ran(dir), ALL);
  const two = await runIn(dir, chain(dir, second));
  assert.equal(two.code, 0, describeRun(two));
  const blocks = ran(dir);
  // Whatever ran, the outputs are those a clean run with `second` makes.
  const clean = newDir(`${label}-clean`);
  assert.equal((await runIn(clean, chain(clean, second))).code, 0);
  assert.deepEqual(treeOf(path.join(dir, "out")), treeOf(path.join(clean, "out")));
  const three = await runIn(dir, chain(dir, second));
  assert.deepEqual(ran(dir), [], `changing nothing reruns nothing\n${describeRun(three)}`);
  return blocks;
}

describe("provenance", () => {
  it("a version bump reruns the task; the same content leaves downstream alone", SLOW, async () => {
    const blocks = await rerun("version", { a: { version: "1" } }, { a: { version: "2" } });
    assert.deepEqual(blocks, names("a", range(0, 8)).sort());
  });

  it(
    "a params change reruns that task and exactly the downstream blocks whose upstream content changed",
    SLOW,
    async () => {
      const blocks = await rerun("params", { a: { params: { k: 1 } } }, {
        a: { params: { k: 2 } },
      });
      // a0..a3 change; b0..b4 read one of them; c0..c5 read a changed b block.
      assert.deepEqual(
        blocks,
        [...names("a", range(0, 8)), ...names("b", range(0, 5)), ...names("c", range(0, 6))].sort(),
      );
    },
  );

  it(
    "early cutoff: a params change that does not change the content reruns only that task",
    SLOW,
    async () => {
      const blocks = await rerun(
        "cutoff",
        { a: { params: { k: 1, note: "x" } } },
        { a: { params: { note: "y", k: 1 } } },
      );
      assert.deepEqual(blocks, names("a", range(0, 8)).sort());
    },
  );

  it("params of a downstream task rerun it and what reads it, never upstream", SLOW, async () => {
    const blocks = await rerun("params-b", { b: { params: { m: 1 } } }, {
      b: { params: { m: 2 } },
    });
    assert.deepEqual(blocks, names("b", range(0, 8)).sort(), "b's content ignores m: c stays");
  });

  it("params in another key order are the same params", SLOW, async () => {
    const blocks = await rerun(
      "order",
      { a: { params: { k: 1, nested: { x: 1, y: [1, 2] } } } },
      { a: { params: { nested: { y: [1, 2], x: 1 }, k: 1 } } },
    );
    assert.deepEqual(blocks, []);
  });

  it("non-semantic fields never make anything stale", SLOW, async () => {
    const blocks = await rerun(
      "non-semantic",
      { a: { version: "1", params: { k: 1 } } },
      {
        a: {
          version: "1",
          params: { k: 1 },
          maxWorkers: 1,
          maxRetries: 5,
          timeout: 300,
          maxWorkerRestarts: 3,
          requires: { cpu: 1 },
        },
        b: { maxWorkers: 1, readWriteConflict: true },
      },
    );
    assert.deepEqual(blocks, []);
  });

  it("an input file fingerprinted by mtime: touching it reruns its readers", SLOW, async () => {
    const dir = newDir("input-mtime");
    const input = path.join(dir, "model.txt");
    fs.writeFileSync(input, "weights");
    const file = chain(dir, { a: { inputs: [{ path: "model.txt" }] } });
    assert.equal((await runIn(dir, file)).code, 0);
    assert.equal((await runIn(dir, file)).code, 0);
    assert.deepEqual(ran(dir), []);
    const later = new Date(Date.now() + 60_000);
    fs.utimesSync(input, later, later);
    const touched = await runIn(dir, file);
    assert.equal(touched.code, 0, describeRun(touched));
    assert.deepEqual(ran(dir), names("a", range(0, 8)).sort(), "same content: b and c stay");
  });

  it(
    "an input file compared by content: touching it reruns nothing, changing it reruns its readers",
    SLOW,
    async () => {
      const dir = newDir("input-content");
      const input = path.join(dir, "model.txt");
      fs.writeFileSync(input, "weights");
      const file = chain(dir, { a: { inputs: [{ path: "model.txt", compare: "content" }] } });
      assert.equal((await runIn(dir, file)).code, 0);
      const later = new Date(Date.now() + 60_000);
      fs.utimesSync(input, later, later);
      const touched = await runIn(dir, file);
      assert.equal(touched.code, 0, describeRun(touched));
      assert.deepEqual(ran(dir), []);
      fs.writeFileSync(input, "weights 2");
      const changed = await runIn(dir, file);
      assert.equal(changed.code, 0, describeRun(changed));
      assert.deepEqual(ran(dir), names("a", range(0, 8)).sort());
    },
  );

  it(
    "a Zarr input: rewriting one chunk reruns only the blocks whose read ROI covers it",
    SLOW,
    async () => {
      const dir = newDir("input-zarr");
      const raw = path.join(dir, "raw.zarr");
      ensureArray(raw, { shape: [16], chunkShape: [2], dtype: "uint8", fillValue: 0 });
      for (const c of range(0, 8)) {
        fs.mkdirSync(path.join(raw, "c"), { recursive: true });
        fs.writeFileSync(path.join(raw, "c", String(c)), new Uint8Array([c, c]));
      }
      const file = chain(dir, { a: { inputs: [{ zarr: "raw.zarr" }] } });
      assert.equal((await runIn(dir, file)).code, 0);
      const later = new Date(Date.now() + 60_000);
      fs.utimesSync(path.join(raw, "c", "5"), later, later);
      const again = await runIn(dir, file);
      assert.equal(again.code, 0, describeRun(again));
      assert.deepEqual(ran(dir), ["a5"]);
    },
  );

  it(
    "--force TASK:OFFSET:SHAPE reruns exactly those blocks, and a downstream block only when their content changed",
    SLOW,
    async () => {
      const dir = newDir("force");
      const file = chain(dir);
      assert.equal((await runIn(dir, file)).code, 0);
      const forced = await runIn(dir, file, ["--force", "a:4:4"]);
      assert.equal(forced.code, 0, describeRun(forced));
      assert.deepEqual(ran(dir), ["a2", "a3"]);
      const whole = await runIn(dir, file, ["--force", "b"]);
      assert.equal(whole.code, 0, describeRun(whole));
      assert.deepEqual(ran(dir), names("b", range(0, 8)).sort());
    },
  );
});
