/**
 * Command blocks run in a process group tied to the run (lib/runtime/command_group.ts): output
 * arrives in whole lines, a stop or timeout kills the command's grandchildren too, a command
 * that exits leaves nothing behind, and a blockwise process killed with SIGKILL (under Bun and
 * under Deno) takes its running commands with it, even one it started the instant before.
 * Also the task field `cwd`.
 */

import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { alive, until } from "./helpers/processes.ts";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { CommandFailure, LineBuffer, runCommandBlock } from "../lib/execute/command_block.ts";
import { findProgram } from "../lib/runtime/command_group.ts";
import type { Block } from "../lib/pipeline/spec.ts";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";

const newDir = scratchDirs("group-");

const block: Block = {
  taskId: "t",
  id: 7,
  index: [7],
  readRoi: { offset: [70], shape: [10] },
  writeRoi: { offset: [70], shape: [10] },
  attempt: 1,
};

/** The pids a command wrote to `file`, one per line, once there are `count`. */
async function pidsIn(file: string, count: number): Promise<number[]> {
  let pids: number[] = [];
  await until(
    () => {
      if (!fs.existsSync(file)) return false;
      pids = fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map(Number);
      return pids.length >= count;
    },
    20_000,
    `${file} did not get ${count} pids`,
  );
  return pids;
}

describe("LineBuffer", () => {
  it("passes whole lines only and keeps a partial line until its newline or the end", () => {
    const lines = new LineBuffer();
    assert.equal(lines.push("one\ntw"), "one\n");
    assert.equal(lines.push("o"), "");
    assert.equal(lines.push("\nthree\nfo"), "two\nthree\n");
    assert.equal(lines.end(), "fo\n");
    assert.equal(lines.end(), "");
  });
});

describe("runCommandBlock", () => {
  it("hands output on in whole lines, so concurrent commands never share a line", async () => {
    const chunks: string[] = [];
    const script = (name: string) =>
      `printf '${name} starts '; sleep 0.2; echo '${name} ends'; printf '${name} last'`;
    await Promise.all(["a", "b"].map((name) =>
      runCommandBlock(["sh", "-c", script(name)], block, {
        onStdout: (text) => chunks.push(text),
        onStderr: () => {},
      })
    ));
    for (const chunk of chunks) assert.ok(chunk.endsWith("\n"), JSON.stringify(chunks));
    const lines = chunks.join("").split("\n").filter((l) => l !== "").sort();
    assert.deepEqual(lines, ["a last", "a starts a ends", "b last", "b starts b ends"]);
  });

  it("puts the last lines of stderr after the status line of the failure", async () => {
    await assert.rejects(
      runCommandBlock(["sh", "-c", "echo first >&2; echo second >&2; exit 4"], block, {
        onStderr: () => {},
      }),
      (error: unknown) => {
        assert.ok(error instanceof CommandFailure);
        const [status, ...rest] = error.message.split("\n");
        assert.match(status!, /^Command \["sh","-c",.*\] exited with status 4$/);
        assert.deepEqual(rest, ["last lines of its stderr:", "first", "second"]);
        return true;
      },
    );
  });

  it("kills the whole group when stopped: the command and what it started", async () => {
    const dir = newDir("abort");
    const pidFile = path.join(dir, "pids");
    const abort = new AbortController();
    const run = runCommandBlock(
      ["sh", "-c", `echo $$ > ${pidFile}; sleep 60 & echo $! >> ${pidFile}; wait`],
      block,
      { signal: abort.signal },
    );
    const pids = await pidsIn(pidFile, 2);
    abort.abort();
    await assert.rejects(
      run,
      (e: unknown) => e instanceof CommandFailure && e.signal === "SIGKILL",
    );
    await until(() => !pids.some(alive), 5_000, `processes ${pids.join(", ")} still run`);
  });

  it("ends a command's leftover background processes when the command exits", async () => {
    const dir = newDir("leftover");
    const pidFile = path.join(dir, "pids");
    // The leftover `sleep` keeps the output pipes open: the block must end anyway.
    await runCommandBlock(["sh", "-c", `sleep 60 & echo $! > ${pidFile}`], block);
    const [leftover] = await pidsIn(pidFile, 1);
    await until(() => !alive(leftover!), 5_000, `leftover process ${leftover} still runs`);
  });

  it("settles on the exit status when a process outside the group keeps the pipes open", {
    timeout: 30_000,
  }, async () => {
    const dir = newDir("daemon");
    const pidFile = path.join(dir, "pids");
    // `setsid` leaves the group, so the group kill misses it, and it holds stdout and stderr:
    // the pipes never report their end while it runs. The exit status decides after a grace.
    const started = Date.now();
    await assert.rejects(
      runCommandBlock(["sh", "-c", `setsid sleep 20 & echo $! > ${pidFile}; exit 3`], block, {
        onStdout: () => {},
        onStderr: () => {},
      }),
      (error: unknown) => error instanceof CommandFailure && error.exitCode === 3,
    );
    const waited = Date.now() - started;
    const [daemon] = await pidsIn(pidFile, 1);
    process.kill(daemon!, "SIGKILL");
    assert.ok(waited < 15_000, `settled after ${waited} ms, not within the grace period`);
  });

  it("runs in the task's cwd and refuses a cwd that does not exist", async () => {
    const dir = newDir("cwd");
    let out = "";
    await runCommandBlock(["pwd"], block, { cwd: dir, onStdout: (t) => (out += t) });
    assert.equal(fs.realpathSync(out.trim()), fs.realpathSync(dir));
    const missing = path.join(dir, "nope");
    await assert.rejects(runCommandBlock(["pwd"], block, { cwd: missing }), (e: unknown) => {
      assert.ok(e instanceof CommandFailure);
      assert.ok(e.message.includes(`"${missing}"`), e.message);
      assert.ok(e.message.includes("cwd"), e.message);
      return true;
    });
  });

  it("names a program that is not on PATH, and the fix", async () => {
    await assert.rejects(runCommandBlock(["blockwise-no-such-program-x7"], block), (e: unknown) => {
      assert.ok(e instanceof CommandFailure);
      assert.match(e.message, /could not be started: "blockwise-no-such-program-x7" was not found/);
      assert.match(e.message, /PATH/);
      return true;
    });
  });
});

describe("findProgram", () => {
  it("looks bare names up on PATH and paths relative to the folder", () => {
    const dir = newDir("find");
    const tool = path.join(dir, "tool.sh");
    fs.writeFileSync(tool, "#!/bin/sh\n", { mode: 0o755 });
    fs.writeFileSync(path.join(dir, "plain.txt"), "", { mode: 0o644 });
    assert.equal(findProgram("tool.sh", `/nonexistent${path.delimiter}${dir}`, "/"), tool);
    assert.equal(findProgram("./tool.sh", "", dir), tool);
    assert.equal(findProgram("tool.sh", "/usr/bin", "/"), null);
    assert.equal(findProgram("./plain.txt", "", dir), null);
    assert.equal(findProgram("sh", process.env.PATH, "/") !== null, true);
  });
});

const RUNTIMES = {
  bun: [path.join(REPO_ROOT, "node_modules", ".bin", "bun"), path.join(REPO_ROOT, "main.ts")],
  deno: [
    path.join(REPO_ROOT, "node_modules", ".bin", "deno"),
    "run",
    "-A",
    path.join(REPO_ROOT, "main.ts"),
  ],
} as const;

describe("a blockwise process killed with SIGKILL", () => {
  for (const [runtime, launcher] of Object.entries(RUNTIMES)) {
    it(`takes its running commands with it (${runtime})`, { timeout: 60_000 }, async () => {
      const dir = newDir(`sigkill-${runtime}`);
      fs.mkdirSync(path.join(dir, "work"));
      // Two blocks at once, each a shell that starts a grandchild with an empty environment
      // (as `apptainer exec --cleanenv` does: only the group registration can find it);
      // relative paths use cwd.
      fs.writeFileSync(
        path.join(dir, "pipeline.mjs"),
        `export default { tasks: [{
  id: "hang",
  totalRoi: { offset: [0], shape: [2] },
  readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] },
  maxWorkers: 2,
  cwd: "work",
  command: ["sh", "-c", "echo $$ > {block_id}.pid; env -i /bin/sleep 60 & echo $! >> {block_id}.pid; wait"],
}] };
`,
      );
      const [program, ...args] = launcher;
      const child = spawn(program, [...args, "run", "pipeline.mjs", "--no-progress"], {
        cwd: dir,
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.setEncoding("utf8");
      child.stderr.on("data", (c: string) => (stderr += c));
      const exited = new Promise((resolve) => child.on("close", resolve));
      try {
        const pids = [
          ...await pidsIn(path.join(dir, "work", "0.pid"), 2),
          ...await pidsIn(path.join(dir, "work", "1.pid"), 2),
        ];
        assert.ok(pids.every(alive), stderr);
        child.kill("SIGKILL");
        await exited;
        await until(
          () => !pids.some(alive),
          10_000,
          `commands ${pids.join(", ")} outlived blockwise`,
        );
      } finally {
        child.kill("SIGKILL");
      }
    });
  }
});

describe("a process killed with SIGKILL right after starting a command", () => {
  for (const [runtime, launcher] of Object.entries(RUNTIMES)) {
    // No turn of the event loop between the spawn and the SIGKILL: the reaper's lines must
    // already be in its pipe (Bun's node:child_process wrote them a turn later: lost).
    it(`takes the command with it (${runtime})`, { timeout: 30_000 }, async () => {
      const dir = newDir(`instant-${runtime}`);
      const pidFile = path.join(dir, "pid");
      const script = path.join(dir, "die.ts");
      const lib = (file: string) => JSON.stringify(path.join(REPO_ROOT, "lib", "runtime", file));
      // `env -i`: only the registration finds the command, not the token.
      fs.writeFileSync(
        script,
        `import fs from "node:fs";
import process from "node:process";
import { findProgram, startCommandGroup } from ${lib("command_group.ts")};
const group = startCommandGroup([findProgram("env", process.env.PATH, "/"), "-i", "/bin/sleep", "60"], {
  env: [process.env], cwd: null, onStdout: () => {}, onStderr: () => {},
});
fs.writeFileSync(${JSON.stringify(pidFile)}, String(group.pid));
process.kill(process.pid, "SIGKILL");
`,
      );
      const [program, ...args] = launcher;
      const child = spawn(program, [...args.slice(0, -1), script], { stdio: "ignore" });
      await new Promise((resolve) => child.once("exit", resolve));
      const [pid] = await pidsIn(pidFile, 1);
      try {
        await until(() => !alive(pid!), 10_000, `command ${pid} outlived its starter`);
      } finally {
        if (alive(pid!)) process.kill(pid!, "SIGKILL");
      }
    });
  }
});
