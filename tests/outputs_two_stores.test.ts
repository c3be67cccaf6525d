/**
 * Two runs with different tracking stores over the same output folder. While one runs, the
 * other is refused (exit 3, naming the first's store) and sweeps nothing of it; after it, a
 * second store's run that rewrote the outputs is noticed by the first store's next run, which
 * re-hashes the files written after they were recorded and rebuilds those blocks.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli, startCli } from "./fixtures/tracking/harness.ts";
import { waitUntil } from "./fixtures/parallel/harness.ts";

const newDir = scratchDirs("two-stores");

function pipeline(dir: string): string {
  const file = path.join(dir, "p.mjs");
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
const roi = (n) => ({ offset: [0], shape: [n] });
export default { tasks: [{ id: "t", totalRoi: roi(8), readRoi: roi(1), writeRoi: roi(1),
  readWriteConflict: false, maxWorkers: 2,
  outputs: { o: { path: "out/{block_id}.txt" } },
  async process(block, _s, run) {
    await new Promise((r) => setTimeout(r, Number(process.env.PAUSE ?? 0)));
    fs.writeFileSync(run.outputs.o, (process.env.WHO ?? "A") + block.id);
  } }] };
`,
  );
  return file;
}

function outputs(dir: string): string[] {
  return [...Array(8).keys()].map((i) =>
    fs.readFileSync(path.join(dir, "out", `${i}.txt`), "utf8")
  );
}

describe("two tracking stores over one output folder", () => {
  it("a run is refused while another store's run writes the same outputs; the first finishes", async () => {
    const dir = newDir("live");
    const file = pipeline(dir);
    const a = startCli(["run", file, "--tracking-dir", path.join(dir, "tA"), "--no-progress"], {
      env: { PAUSE: "150", WHO: "A" },
      cwd: dir,
    });
    const staging = path.join(dir, "out", ".blockwise-staging");
    await waitUntil(
      () => fs.existsSync(staging) && fs.readdirSync(staging).length > 0,
      "A's staging",
    );
    const b = await runCli(["run", file, "--tracking-dir", path.join(dir, "tB"), "--no-progress"], {
      env: { WHO: "B" },
      cwd: dir,
    });
    assert.equal(b.code, 3, describeRun(b));
    assert.match(
      b.stderr,
      new RegExp(
        `The outputs of task "t" in ${dir}/out are being written by another run \\(pid ${a.pid} on host .*\\) into tracking store ${dir}/tA/t, not ${dir}/tB/t`,
      ),
    );
    const first = await a.result;
    assert.equal(first.code, 0, describeRun(first));
    assert.deepEqual(outputs(dir), [...Array(8).keys()].map((i) => `A${i}`));
    assert.ok(!fs.existsSync(staging), "A's staging is gone with A; B left nothing");
  });

  it("outputs another store rewrote after they were recorded are rebuilt by the first store", async () => {
    const dir = newDir("after");
    const file = pipeline(dir);
    const run = (store: string, who: string) =>
      runCli(["run", file, "--tracking-dir", path.join(dir, store), "--no-progress"], {
        env: { WHO: who },
        cwd: dir,
      });
    assert.equal((await run("tA", "A")).code, 0);
    // Later than the records of A plus the clocks' slack: the rewrite is after them.
    await new Promise((r) => setTimeout(r, 2_200));
    assert.equal((await run("tB", "B")).code, 0);
    assert.deepEqual(outputs(dir), [...Array(8).keys()].map((i) => `B${i}`));
    const again = await run("tA", "A");
    assert.equal(again.code, 0, describeRun(again));
    assert.match(
      again.stdout + again.stderr,
      /Task "t": outputs reconciled: 0 recorded and present, 8 recorded but changed since \(rebuilt\)/,
    );
    assert.deepEqual(outputs(dir), [...Array(8).keys()].map((i) => `A${i}`));
    const verify = await runCli(["verify", path.join(dir, "tA")]);
    assert.equal(verify.code, 0, describeRun(verify));
  });
});
