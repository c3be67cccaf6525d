/**
 * Command blocks in a process group tied to the run. Each command starts in a process group of
 * its own (`detached: true`: a new session, so a Ctrl-C on the terminal reaches blockwise only,
 * which then decides what to stop), led by a small `/bin/sh` watchdog:
 *
 * - the watchdog keeps a pipe from blockwise on its stdin; a background reader waits for EOF on
 *   it, which happens only when every copy of the write end is closed, i.e. when blockwise has
 *   exited, however it died (SIGKILL included). It then kills the whole group: the command and
 *   everything the command started;
 * - the command runs in the foreground of the watchdog (not `exec`: the watchdog stays the
 *   parent of the reader and reaps it, so no orphan is left per block; not in the background:
 *   a non-interactive shell would start it with SIGINT and SIGQUIT ignored);
 * - the watchdog exits with the command's status, and re-raises a signal that killed the
 *   command, so blockwise still sees "killed by SIGKILL" rather than status 137;
 * - blockwise kills the group itself on timeout or stop, and once the command has exited, so
 *   a grandchild left behind can neither outlive its block nor hold the output pipes open.
 *
 * Why not PR_SET_PDEATHSIG: it must be set in the child between fork and exec, which neither
 * Bun nor Deno lets JavaScript do. Why `/bin/sh` and not blockwise itself as the watchdog: a
 * shell starts in about a millisecond, a second JavaScript runtime per block in tens, and the
 * shell works the same under `bun main.ts`, `deno run` and the compiled binary.
 * `node:child_process` with `detached` and negative-pid `process.kill` behave the same in Bun,
 * Deno and Node, so this adapter needs no per-runtime branch.
 */

import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import process from "node:process";

/** The watchdog: `$@` is the command's argv. fd 3 keeps the pipe from blockwise. */
const WATCHDOG = [
  "exec 3<&0 </dev/null",
  "(while read -r _; do :; done <&3; kill -s KILL 0) >/dev/null 2>&1 &",
  "reader=$!",
  '"$@" 3<&-',
  "status=$?",
  'kill "$reader" 2>/dev/null',
  'wait "$reader" 2>/dev/null',
  'if [ "$status" -gt 128 ] && [ "$status" -lt 160 ]; then kill -s "$(kill -l "$status")" "$$"; fi',
  'exit "$status"',
].join("\n");

/** The name the watchdog shell shows in `ps` (its `$0`). */
export const WATCHDOG_NAME = "blockwise-command-watchdog";

export interface CommandGroupOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The folder the command runs in, or null for this process's. */
  readonly cwd: string | null;
}

/**
 * Start `argv` in a new process group under the watchdog. stdout and stderr are pipes; stdin is
 * the watchdog's lifeline and must stay open (never write to it) until the child has exited.
 */
export function spawnCommandGroup(
  argv: readonly string[],
  options: CommandGroupOptions,
): ChildProcessWithoutNullStreams {
  return spawn("/bin/sh", ["-c", WATCHDOG, WATCHDOG_NAME, ...argv], {
    detached: true,
    env: options.env,
    stdio: ["pipe", "pipe", "pipe"],
    ...(options.cwd === null ? {} : { cwd: options.cwd }),
  });
}

/** Send `signal` to every process of the group led by `pid`; a group already gone is fine. */
export function killCommandGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined || pid <= 0) return;
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ESRCH") throw error;
  }
}

/**
 * Where `program` would be found, as `execvp` does it: a name with a slash is a path (relative
 * to `cwd`), a bare name is looked up on `PATH`. Null when there is no executable file there.
 * The watchdog shell would only report "not found" on stderr; this lets the caller say more.
 */
export function findProgram(
  program: string,
  path: string | undefined,
  cwd: string,
): string | null {
  const candidates = program.includes("/")
    ? [isAbsolute(program) ? program : resolve(cwd, program)]
    : (path ?? "").split(delimiter).map((dir) =>
      join(resolve(cwd, dir === "" ? "." : dir), program)
    );
  for (const file of candidates) {
    try {
      if (!statSync(file).isFile()) continue;
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // Not there or not executable: try the next folder.
    }
  }
  return null;
}
