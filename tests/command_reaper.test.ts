/**
 * The run's command reaper (lib/runtime/command_reaper.ts): when blockwise goes away, the
 * groups it registered die, a group it was still starting dies by its token, and nothing else:
 * a group it ended is forgotten, and a process that keeps the token after a normal end (a
 * daemon a command left in a session of its own) is not hunted down.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { CommandReaper } from "../lib/runtime/command_reaper.ts";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { alive, until } from "./helpers/processes.ts";

const newDir = scratchDirs("reaper-");

/** A `sleep 60` in a session of its own (as a command is started), with `env`. */
function sleeper(env: Record<string, string>): number {
  const child = spawn("sleep", ["60"], { detached: true, stdio: "ignore", env });
  child.unref();
  return child.pid!;
}

describe("the command reaper", () => {
  it("kills the groups still registered when blockwise goes, and forgets the ended ones", async () => {
    const reaper = new CommandReaper();
    // A command that cleared its environment is found by its registration only.
    reaper.spawning();
    const registered = sleeper({ PATH: process.env.PATH ?? "" });
    reaper.started(registered);
    reaper.spawning();
    const ended = sleeper({ PATH: process.env.PATH ?? "" });
    reaper.started(ended);
    reaper.ended(ended);
    try {
      await reaper.close();
      await until(() => !alive(registered), 5_000, `registered group ${registered} still runs`);
      assert.ok(alive(ended), "a group blockwise had ended was killed again");
    } finally {
      for (const pid of [registered, ended]) if (alive(pid)) process.kill(pid, "SIGKILL");
    }
  });

  it("leaves a process with the run's token alone after a normal end", async () => {
    const reaper = new CommandReaper();
    reaper.spawning();
    const command = sleeper({ PATH: process.env.PATH ?? "" });
    reaper.started(command);
    // What a command left running in a session of its own carries the token.
    const daemon = sleeper({ ...reaper.environment, PATH: process.env.PATH ?? "" });
    try {
      await reaper.close();
      await until(() => !alive(command), 5_000, `command ${command} still runs`);
      assert.ok(alive(daemon), "a daemon was hunted down by its token after a normal end");
    } finally {
      for (const pid of [command, daemon]) if (alive(pid)) process.kill(pid, "SIGKILL");
    }
  });

  for (const runtime of ["bun", "deno"] as const) {
    it(`kills by its token a command blockwise died while starting (${runtime})`, {
      timeout: 30_000,
    }, async () => {
      const dir = newDir(`window-${runtime}`);
      const pidFile = path.join(dir, "pid");
      const script = path.join(dir, "die.ts");
      // Announce a spawn, start the command (its registration never comes), die by SIGKILL.
      fs.writeFileSync(
        script,
        `import { spawn } from "node:child_process";
import fs from "node:fs";
import process from "node:process";
import { commandReaper } from ${
          JSON.stringify(path.join(REPO_ROOT, "lib", "runtime", "command_reaper.ts"))
        };
commandReaper.spawning();
const child = spawn("sleep", ["60"], {
  detached: true, stdio: "ignore", env: { ...process.env, ...commandReaper.environment },
});
fs.writeFileSync(${JSON.stringify(pidFile)}, String(child.pid));
setTimeout(() => process.kill(process.pid, "SIGKILL"), 100);
`,
      );
      const bin = path.join(REPO_ROOT, "node_modules", ".bin", runtime);
      const child = spawn(bin, runtime === "bun" ? [script] : ["run", "-A", script], {
        stdio: "ignore",
      });
      await new Promise((resolve) => child.once("exit", resolve));
      const pid = Number(fs.readFileSync(pidFile, "utf8"));
      try {
        await until(() => !alive(pid), 10_000, `command ${pid} outlived blockwise`);
      } finally {
        if (alive(pid)) process.kill(pid, "SIGKILL");
      }
    });
  }
});
