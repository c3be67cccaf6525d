/**
 * A grown volume with outputs: extending `totalRoi` migrates each store in place, and the
 * provenance arrays, `manifest.jsonl` and `recipes.jsonl` come along, so the next run builds
 * only the new blocks (and the old ones whose upstream content changed because they now read a
 * new block), both through `run` and through `blockwise migrate`.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, readUint32, runCli } from "./fixtures/tracking/harness.ts";
import { manifestOf, names, ran, range, runIn, treeOf } from "./fixtures/outputs.ts";

const newDir = scratchDirs("outputs-migrate");
// Each test spawns several runs: give it room on a loaded machine.
const SLOW = { timeout: 60_000 };

/** a -> b over `blocks` blocks of 2; b reads its neighbours in a. */
function chain(dir: string, blocks: number): string {
  const file = path.join(dir, "chain.mjs");
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
const DIR = ${JSON.stringify(dir)};
const N = ${blocks};
const step = (id, up) => ({
  id, ...(up ? { upstream: [up] } : {}), version: "1", params: { scale: 2 },
  totalRoi: up ? { offset: [-1], shape: [2 * N + 2] } : { offset: [0], shape: [2 * N] },
  readRoi: up ? { offset: [-1], shape: [4] } : { offset: [0], shape: [2] },
  writeRoi: { offset: [0], shape: [2] }, fit: "shrink", readWriteConflict: false, maxWorkers: 2,
  outputs: { o: { path: "out/" + id + "/{block_id}.txt" } },
  process(block, state, context) {
    fs.appendFileSync(DIR + "/ran.log", id + block.id + "\\n");
    const i = Number(block.id);
    let text = id + ":" + i * context.params.scale;
    if (up) {
      for (let j = Math.max(0, i - 1); j <= Math.min(N - 1, i + 1); j++) {
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

/** What a grown run must build: a's new blocks, b's new blocks and b7, which now reads a8. */
const GROWN = [...names("a", range(8, 12)), ...names("b", range(7, 12))].sort();

async function grownFrom(
  label: string,
): Promise<{ dir: string; before: Record<string, string[]> }> {
  const dir = newDir(label);
  const first = await runIn(dir, chain(dir, 8));
  assert.equal(first.code, 0, describeRun(first));
  const before: Record<string, string[]> = {};
  for (const t of ["a", "b"]) {
    before[t] = fs.readFileSync(path.join(dir, "tracking", t, "manifest.jsonl"), "utf8").split("\n")
      .filter((l) => l !== "");
  }
  return { dir, before };
}

async function checkGrown(dir: string, before: Record<string, string[]>): Promise<void> {
  const clean = newDir("clean");
  assert.equal((await runIn(clean, chain(clean, 12))).code, 0);
  assert.deepEqual(treeOf(path.join(dir, "out")), treeOf(path.join(clean, "out")));
  for (const t of ["a", "b"]) {
    const after = fs.readFileSync(path.join(dir, "tracking", t, "manifest.jsonl"), "utf8")
      .split("\n").filter((l) => l !== "");
    assert.deepEqual(after.slice(0, before[t]!.length), before[t], `${t}: the manifest came along`);
    assert.equal(
      manifestOf(dir, t).filter((r) => r.t === "commit").length,
      before[t]!.filter((l) => l.includes(`"t":"commit"`)).length + (t === "a" ? 4 : 5),
    );
    // Every block of the grown store records recipe line 0: the same recipe as before.
    const recipe = readUint32(path.join(dir, "tracking", t), "recipe");
    const used = new Set(Array.from(recipe).filter((r) => r !== 2 ** 32 - 1));
    assert.deepEqual([...used], [0], `${t}: recipe cells`);
    assert.equal(
      fs.readFileSync(path.join(dir, "tracking", t, "recipes.jsonl"), "utf8").trim().split("\n")
        .length,
      1,
    );
  }
  const again = await runIn(dir, chain(dir, 12));
  assert.deepEqual(ran(dir), [], describeRun(again));
}

describe("migration of a grown volume with outputs", () => {
  it(
    "run after extending totalRoi builds only the new blocks and those reading them",
    SLOW,
    async () => {
      const { dir, before } = await grownFrom("run");
      const grown = await runIn(dir, chain(dir, 12));
      assert.equal(grown.code, 0, describeRun(grown));
      assert.deepEqual(ran(dir), GROWN);
      assert.match(
        grown.stderr,
        /Task "a": outputs reconciled: 8 recorded and present, 4 never built/,
      );
      await checkGrown(dir, before);
    },
  );

  it(
    "blockwise migrate, then run: the same, the provenance arrays and manifest carried",
    SLOW,
    async () => {
      const { dir, before } = await grownFrom("migrate");
      const file = chain(dir, 12);
      for (const task of ["a", "b"]) {
        const m = await runCli([
          "migrate",
          path.join(dir, "tracking", task),
          "--pipeline",
          file,
          "--task",
          task,
        ]);
        assert.equal(m.code, 0, describeRun(m));
        for (const name of ["content_hash", "recipe", "upstream_digest", "outputs_state"]) {
          assert.ok(
            fs.existsSync(path.join(dir, "tracking", task, name, "zarr.json")),
            `${task}: ${name} migrated`,
          );
        }
      }
      const grown = await runIn(dir, file);
      assert.equal(grown.code, 0, describeRun(grown));
      assert.deepEqual(ran(dir), GROWN);
      await checkGrown(dir, before);
    },
  );
});
