/**
 * Command blocks in a process group tied to the run. Each command starts in a process group of
 * its own (`detached`: a new session, so a Ctrl-C on the terminal reaches blockwise only, which
 * then decides what to stop), spawned directly (no shell in between), and registered with the
 * run's reaper (lib/runtime/command_reaper.ts), which kills the group if blockwise dies before
 * the command has ended, SIGKILL included. blockwise kills the group itself on timeout or stop,
 * and once the command has exited, so a grandchild left behind can neither outlive its block
 * nor hold the output pipes open.
 *
 * The spawn goes through the runtime's own API (`Bun.spawn`, `Deno.Command`; node's
 * `child_process` elsewhere): under Bun, `node:child_process` costs 0.29 ms of CPU per spawn
 * against 0.09 ms for `Bun.spawn`, which is most of what a short command block costs blockwise
 * beyond the command itself (docs/design/WORKERS.md, "Command blocks").
 *
 * Why not PR_SET_PDEATHSIG: it must be set in the child between fork and exec, which neither
 * Bun nor Deno lets JavaScript do, and it would not reach the command's own children.
 */

import { spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import process from "node:process";
import { commandReaper } from "./command_reaper.ts";

/** How long after the command exits its pipes may take to report their end. */
const CLOSE_GRACE_MS = 5000;

export interface CommandGroupOptions {
  /** The environment as layers, later ones winning (merged once, here). */
  readonly env: readonly Readonly<Record<string, string | undefined>>[];
  /** The folder the command runs in, or null for this process's. */
  readonly cwd: string | null;
  /** The command's stdout and stderr as text, in chunks as they arrive. */
  readonly onStdout: (text: string) => void;
  readonly onStderr: (text: string) => void;
}

/** How a command ended: its exit status, or the signal that killed it. */
export interface CommandExit {
  readonly code: number | null;
  readonly signal: string | null;
}

export interface CommandGroup {
  /** The command's pid, which is also its process group's id. */
  readonly pid: number;
  /**
   * Settles once the command has exited, its group is killed and both output pipes have
   * closed; or CLOSE_GRACE_MS after the exit when a process outside the group (a daemon in a
   * session of its own) still holds them.
   */
  readonly ended: Promise<CommandExit>;
}

/** What a runtime's spawn gives back, before the group logic common to all of them. */
interface Spawned {
  readonly pid: number;
  readonly exited: Promise<CommandExit>;
  /** Resolve when each pipe has reported its end. */
  readonly stdoutDone: Promise<void>;
  readonly stderrDone: Promise<void>;
}

/**
 * Start `argv` (a program found by `findProgram` and its arguments) in a new process group.
 * stdin is `/dev/null`. Throws when the runtime cannot start it (the message says why).
 */
export function startCommandGroup(
  argv: readonly string[],
  options: CommandGroupOptions,
): CommandGroup {
  const env: Record<string, string> = {};
  for (const layer of options.env) {
    for (const name in layer) {
      const value = layer[name];
      if (value !== undefined) env[name] = value;
    }
  }
  Object.assign(env, commandReaper.environment);
  commandReaper.spawning();
  let spawned: Spawned;
  try {
    spawned = spawnDetached(argv, env, options);
  } catch (error) {
    commandReaper.spawnFailed();
    throw error;
  }
  const { pid } = spawned;
  commandReaper.started(pid);
  const ended = spawned.exited.then(async (exit) => {
    // Whatever the command left behind in its group goes with it, so the pipes close.
    killCommandGroup(pid, "SIGKILL");
    commandReaper.ended(pid);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)));
    await Promise.race([Promise.all([spawned.stdoutDone, spawned.stderrDone]), grace]);
    clearTimeout(timer);
    return exit;
  });
  return { pid, ended };
}

// ---- the runtimes' spawns --------------------------------------------------------------------

interface BunSubprocess {
  readonly pid: number;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  readonly exited: Promise<number>;
  readonly exitCode: number | null;
  readonly signalCode: string | null;
}
interface BunSpawn {
  spawn(argv: string[], options: {
    cwd?: string;
    env: Record<string, string>;
    stdin: "ignore";
    stdout: "pipe";
    stderr: "pipe";
    detached: true;
  }): BunSubprocess;
}
interface DenoChild {
  readonly pid: number;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  readonly status: Promise<{ code: number; signal: string | null }>;
}
interface DenoCommandConstructor {
  new (program: string, options: {
    args: string[];
    cwd?: string;
    env: Record<string, string>;
    clearEnv: true;
    stdin: "null";
    stdout: "piped";
    stderr: "piped";
    detached: true;
  }): { spawn(): DenoChild };
}
interface RuntimeSpawners {
  Bun?: BunSpawn;
  Deno?: { Command?: DenoCommandConstructor };
}

function spawnDetached(
  argv: readonly string[],
  env: Record<string, string>,
  options: CommandGroupOptions,
): Spawned {
  const g = globalThis as RuntimeSpawners;
  const cwd = options.cwd === null ? {} : { cwd: options.cwd };
  if (g.Bun !== undefined) {
    const child = g.Bun.spawn([...argv], {
      ...cwd,
      env,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      detached: true,
    });
    return {
      pid: child.pid,
      exited: child.exited.then(() => ({
        code: child.signalCode === null ? child.exitCode : null,
        signal: child.signalCode,
      })),
      stdoutDone: readText(child.stdout, options.onStdout),
      stderrDone: readText(child.stderr, options.onStderr),
    };
  }
  const Command = g.Deno?.Command;
  if (Command !== undefined) {
    const [program, ...args] = argv;
    const child = new Command(program!, {
      args,
      ...cwd,
      env,
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      detached: true,
    }).spawn();
    return {
      pid: child.pid,
      exited: child.status.then((s) => ({
        code: s.signal === null ? s.code : null,
        signal: s.signal,
      })),
      stdoutDone: readText(child.stdout, options.onStdout),
      stderrDone: readText(child.stderr, options.onStderr),
    };
  }
  return spawnWithNode(argv, env, options);
}

/** Node (and any runtime without its own API): `child_process`, errors surfaced as throws. */
function spawnWithNode(
  argv: readonly string[],
  env: Record<string, string>,
  options: CommandGroupOptions,
): Spawned {
  const [program, ...args] = argv;
  const child = spawn(program!, args, {
    detached: true,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    ...(options.cwd === null ? {} : { cwd: options.cwd }),
  });
  if (child.pid === undefined) throw new Error(`spawn ${program} failed`);
  const done = (stream: NodeJS.ReadableStream, on: (text: string) => void): Promise<void> =>
    new Promise((resolve) => {
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => on(chunk));
      stream.on("close", () => resolve());
      stream.on("error", () => resolve());
    });
  return {
    pid: child.pid,
    exited: new Promise((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal }))
    ),
    stdoutDone: done(child.stdout!, options.onStdout),
    stderrDone: done(child.stderr!, options.onStderr),
  };
}

/** Decode a pipe's bytes as UTF-8 text for `on`; resolves at its end. */
async function readText(
  stream: ReadableStream<Uint8Array>,
  on: (text: string) => void,
): Promise<void> {
  const decoder = new TextDecoder();
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      if (text !== "") on(text);
    }
  } catch {
    // A pipe torn down with its process: what arrived is all there is.
  }
  const rest = decoder.decode();
  if (rest !== "") on(rest);
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
