/**
 * Under Bun, `run` starts itself again in place with mimalloc told to keep freed memory for a
 * second (lib/runtime/allocator.ts), so Web Workers do not fault their blocks' arrays in afresh
 * every block. Checked from inside a block: the process's initial environment
 * (/proc/self/environ, which the restart replaced) holds the setting, the same process runs the
 * blocks, the programs it starts (command blocks) do not inherit the variable, nothing is
 * printed about it (the run's output starts as before), and a user's own MIMALLOC_PURGE_DELAY
 * is kept and no restart happens.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runArgs, runCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("allocator-restart");
const linux = process.platform === "linux";

/** A JavaScript task that records what its process started with, and a command task. */
function pipeline(dir: string): string {
  const file = path.join(dir, "pipeline.mjs");
  const seen = path.join(dir, "seen.json");
  const command = path.join(dir, "command.txt");
  fs.writeFileSync(
    file,
    `import * as fs from "node:fs";
const one = { offset: [0], shape: [1] };
export default { tasks: [
  { id: "js", totalRoi: one, readRoi: one, writeRoi: one, process: () => {
    const initial = fs.readFileSync("/proc/self/environ", "utf8").split("\\0")
      .filter((line) => line.startsWith("MIMALLOC_PURGE_DELAY="));
    fs.writeFileSync(${JSON.stringify(seen)}, JSON.stringify({
      initial, now: process.env.MIMALLOC_PURGE_DELAY ?? null, pid: process.pid,
    }));
  } },
  { id: "cmd", totalRoi: one, readRoi: one, writeRoi: one,
    command: ["sh", "-c", "echo \${MIMALLOC_PURGE_DELAY:-unset} > ${command}"] },
] };
`,
  );
  return file;
}

interface Seen {
  readonly initial: string[];
  readonly now: string | null;
}

const read = (dir: string) => ({
  seen: JSON.parse(fs.readFileSync(path.join(dir, "seen.json"), "utf8")) as Seen,
  command: fs.readFileSync(path.join(dir, "command.txt"), "utf8").trim(),
});

const QUIET = /mimalloc|MIMALLOC/;

describe("the allocator of run's own process (Bun)", () => {
  it(
    "restarts run in place with MIMALLOC_PURGE_DELAY=1000, quietly, and passes it to no program it starts",
    {
      skip: linux ? false : "Linux only (/proc/self/environ)",
    },
    async () => {
      const dir = newDir("default");
      const r = await runCli(runArgs(pipeline(dir), null), { cwd: dir });
      assert.equal(r.code, 0, describeRun(r));
      const { seen, command } = read(dir);
      assert.deepEqual(seen.initial, ["MIMALLOC_PURGE_DELAY=1000"], describeRun(r));
      assert.equal(
        seen.now,
        null,
        "the restarted process takes the variable out of its environment",
      );
      assert.equal(command, "unset", "a command block does not inherit it");
      assert.doesNotMatch(r.stderr + r.stdout, QUIET);
    },
  );

  it("keeps a user's own MIMALLOC_PURGE_DELAY and does not restart", {
    skip: linux ? false : "Linux only (/proc/self/environ)",
  }, async () => {
    const dir = newDir("user");
    const r = await runCli(runArgs(pipeline(dir), null), {
      cwd: dir,
      env: { MIMALLOC_PURGE_DELAY: "10" },
    });
    assert.equal(r.code, 0, describeRun(r));
    const { seen, command } = read(dir);
    assert.deepEqual(seen.initial, ["MIMALLOC_PURGE_DELAY=10"]);
    assert.equal(seen.now, "10");
    assert.equal(command, "10", "the user's variable reaches their commands as they set it");
    assert.doesNotMatch(r.stderr + r.stdout, QUIET);
  });
});
