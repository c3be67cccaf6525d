/**
 * A reader frees the temporary blocks it reads once its own files are in place, one barrier
 * before its commit ends (docs/design/TEMPORARIES.md, Early release). When that barrier then
 * fails (a disk error, injected through BLOCKWISE_TEST_FAIL_AT), the reader's attempt fails
 * after its inputs may be gone: it must never run without them, and the next start adopts its
 * files (they are in place, and match its durable intent) without regenerating anything.
 *
 * The pipeline: b (temporary, one block) -> c (one block reading it). The first turn that
 * covers renames covers b's (c starts only once b's files are in place), the second covers c's:
 * `commit:renamed:2` fails c's commit after its renames.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun } from "./fixtures/tracking/harness.ts";
import { ran, runIn } from "./fixtures/outputs.ts";

const newDir = scratchDirs("temporaries-commit-failure");
const FAIL_C_AFTER_RENAMES = { BLOCKWISE_TEST_FAIL_AT: "commit:renamed:2" };

function pipeline(dir: string, maxRetries: number): string {
  const file = path.join(dir, "pair.mjs");
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
const DIR = ${JSON.stringify(dir)};
const step = (id, up) => ({
  id, ...(up ? { upstream: [up] } : {}), temporary: id === "b", maxRetries: ${maxRetries},
  totalRoi: { offset: [0], shape: [2] }, readRoi: { offset: [0], shape: [2] },
  writeRoi: { offset: [0], shape: [2] }, readWriteConflict: false,
  outputs: { o: { path: "out/" + id + "/{block_id}.txt" } },
  process(block, state, context) {
    fs.appendFileSync(DIR + "/ran.log", id + block.id + "\\n");
    let text = id;
    if (up) {
      const input = DIR + "/out/" + up + "/0.txt";
      if (!fs.existsSync(input)) throw new Error("missing input " + input);
      text += "|" + fs.readFileSync(input, "utf8");
    }
    fs.writeFileSync(context.outputs.o, text);
  },
});
export default { tasks: [step("b", null), step("c", "b")] };
`,
  );
  return file;
}

const exists = (dir: string, task: string) => fs.existsSync(path.join(dir, "out", task, "0.txt"));

/** The next run adopts c's block (its files are in place): nothing runs, nothing is rebuilt. */
async function adoptedNext(dir: string, file: string): Promise<void> {
  const next = await runIn(dir, file);
  assert.equal(next.code, 0, describeRun(next));
  assert.match(next.stderr, /Task "c": outputs reconciled: .*1 adopted/);
  assert.deepEqual(ran(dir), [], "c's intact files are adopted: b's deleted block is not needed");
  assert.equal(fs.readFileSync(path.join(dir, "out", "c", "0.txt"), "utf8"), "c|b");
  assert.equal(exists(dir, "b"), false);
}

describe("a reader whose commit fails after its files were in place", () => {
  it("fails without retries having freed its input; the next start adopts its files", async () => {
    const dir = newDir("no-retry");
    const file = pipeline(dir, 0);
    const failed = await runIn(dir, file, [], FAIL_C_AFTER_RENAMES);
    assert.equal(failed.code, 1, describeRun(failed));
    assert.match(failed.stderr, /injected failure at commit:renamed/);
    assert.deepEqual(ran(dir), ["b0", "c0"]);
    assert.equal(exists(dir, "b"), false, "c's renames freed b's block, although c then failed");
    await adoptedNext(dir, file);
  });

  it("retried, never runs without its input: it runs again holding it, or waits for the next run", async () => {
    const dir = newDir("retry");
    const file = pipeline(dir, 1);
    const first = await runIn(dir, file, [], FAIL_C_AFTER_RENAMES);
    assert.doesNotMatch(first.stderr, /missing input/, describeRun(first));
    if (first.code === 0) {
      // The retry came before the deletion: it held b's block again, and ran.
      assert.deepEqual(ran(dir), ["b0", "c0", "c0"]);
    } else {
      // The deletion came first: the retry is refused unrun, naming what it lacks.
      assert.equal(first.code, 1, describeRun(first));
      assert.deepEqual(ran(dir), ["b0", "c0"]);
      assert.match(
        first.stderr,
        /its commit failed after its files were in place, which freed b\/0 and the other temporary blocks it reads; run blockwise again: the next start adopts its files if they are intact, else regenerates b\/0 first/,
      );
      await adoptedNext(dir, file);
    }
    assert.equal(exists(dir, "b"), false);
    assert.equal(fs.readFileSync(path.join(dir, "out", "c", "0.txt"), "utf8"), "c|b");
  });
});
