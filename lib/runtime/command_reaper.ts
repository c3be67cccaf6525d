/**
 * One reaper per blockwise process ties every command block to the run: a small `/bin/sh` in a
 * session of its own whose stdin is a pipe from blockwise that carries a line per event: `?`
 * before a command is spawned, `+PID` once its group has started, `!` when the spawn failed,
 * `-PID` once blockwise has ended the group. EOF on that pipe comes only when blockwise has
 * exited, however it died (SIGKILL included); the reaper then kills every group still
 * registered and, if blockwise died between a `?` and its `+PID` (the microseconds of a fork),
 * every process whose environment carries this run's token: the command that was being
 * started. Only then, so a process a command deliberately left running in a session of its
 * own (a daemon, a job it submitted) is not hunted down by its token after a normal end.
 *
 * Why not a watchdog shell per command (the design before): two more processes per block (the
 * shell and its EOF reader) cost 0.3 ms of each block's time and most of blockwise's lead over
 * `xargs -P` on short commands (docs/design/WORKERS.md). The token scan alone would miss a
 * command that replaces its environment (`env -i`, `apptainer exec --cleanenv`); the
 * registration alone would miss the window above: each covers the other's gap.
 *
 * Every line must be in the pipe before the call that writes it returns: a line still in a
 * userspace buffer dies with a SIGKILLed blockwise, and the reaper then sees EOF with nothing
 * registered. Bun's `node:child_process` defers a pipe write to a later turn of the event loop
 * (a SIGKILL right after `write` loses it, every time; under load the turn can come after the
 * command has run for tens of ms), so under Bun the reaper is started with `Bun.spawn`, whose
 * stdin (a FileSink) writes through at `flush()`. Node's and Deno's `node:child_process` write
 * to the pipe within `write` (measured: 30 of 30 lines arrived when the writer was SIGKILLed
 * right after, under load).
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";

/** The variable every command gets, naming this run's reaper token. */
export const REAPER_TOKEN_VARIABLE = "BLOCKWISE_REAPER_TOKEN";

/** The name the reaper shell shows in `ps` (its `$0`). */
export const REAPER_NAME = "blockwise-command-reaper";

/** `$1` is the token. The set of live groups is a space-separated list (a few per worker). */
const REAPER_SCRIPT = [
  'token="$1"',
  'live=" "',
  "spawning=0",
  "while IFS= read -r line; do",
  "  case $line in",
  "    '?') spawning=1 ;;",
  "    '!') spawning=0 ;;",
  '    +*) live="$live${line#+} "; spawning=0 ;;',
  '    -*) pid="${line#-}"; case $live in *" $pid "*) live="${live%% $pid *} ${live#* $pid }" ;; esac ;;',
  "  esac",
  "done",
  'for pid in $live; do kill -s KILL -- "-$pid" 2>/dev/null; done',
  '[ "$spawning" = 1 ] || exit 0',
  `for f in $(grep -l -a -F -e "${REAPER_TOKEN_VARIABLE}=$token" /proc/[0-9]*/environ 2>/dev/null); do`,
  '  pid="${f#/proc/}"; pid="${pid%/environ}"',
  '  kill -s KILL -- "-$pid" 2>/dev/null; kill -s KILL "$pid" 2>/dev/null',
  "done",
].join("\n");

/** The running reaper as a runtime started it. */
interface ReaperProcess {
  readonly pid: number | undefined;
  /** False once it has exited: writes then go nowhere, and the next command starts another. */
  running(): boolean;
  /** Put `text` into the pipe before returning (whatever is not refused by a full pipe). */
  write(text: string): void;
  /** Close the pipe (the reaper sees EOF) and resolve once it has exited. */
  close(): Promise<void>;
}

interface BunFileSink {
  write(chunk: string): unknown;
  flush(): unknown;
  end(): unknown;
  unref?(): void;
}
interface BunReaperSubprocess {
  readonly pid: number;
  readonly stdin: BunFileSink;
  readonly exited: Promise<number>;
  readonly exitCode: number | null;
  readonly signalCode: string | null;
  ref(): void;
  unref(): void;
}
interface BunPipedSpawn {
  spawn(argv: string[], options: {
    stdin: "pipe";
    stdout: "ignore";
    stderr: "ignore";
    detached: true;
  }): BunReaperSubprocess;
}

/** A pending flush or end of a reaper that died fails quietly: the next command starts one. */
function settleQuietly(result: unknown): void {
  if (result instanceof Promise) result.catch(() => {});
}

function startReaper(argv: readonly string[]): ReaperProcess {
  const bun = (globalThis as { Bun?: BunPipedSpawn }).Bun;
  return bun === undefined ? startWithNode(argv) : startWithBun(bun, argv);
}

function startWithBun(bun: BunPipedSpawn, argv: readonly string[]): ReaperProcess {
  const child = bun.spawn([...argv], {
    stdin: "pipe",
    stdout: "ignore",
    stderr: "ignore",
    detached: true,
  });
  // It must not keep this process alive: it ends when this process does.
  child.unref();
  child.stdin.unref?.();
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    pid: child.pid,
    running,
    write(text) {
      // A FileSink buffers `write` until `flush`, which writes to the pipe there and then.
      child.stdin.write(text);
      settleQuietly(child.stdin.flush());
    },
    close() {
      if (!running()) return Promise.resolve();
      child.ref(); // waited for now: keep the event loop alive until it exits
      settleQuietly(child.stdin.end());
      return child.exited.then(() => {});
    },
  };
}

function startWithNode(argv: readonly string[]): ReaperProcess {
  const [program, ...args] = argv;
  const child: ChildProcess = spawn(program!, args, {
    detached: true,
    stdio: ["pipe", "ignore", "ignore"],
  });
  // A reaper that died makes writes fail; the next command starts a new one.
  child.stdin!.on("error", () => {});
  child.on("error", () => {});
  // It must not keep this process alive: it ends when this process does.
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    pid: child.pid,
    running,
    write(text) {
      child.stdin!.write(text);
    },
    close() {
      if (!running()) return Promise.resolve();
      child.ref(); // waited for now: keep the event loop alive until it exits
      return new Promise((resolve) => {
        child.once("exit", () => resolve());
        child.stdin!.end();
      });
    },
  };
}

export class CommandReaper {
  readonly token = randomBytes(12).toString("hex");
  #child: ReaperProcess | null = null;

  /** The variables a command needs so the reaper finds it: add them to its environment. */
  get environment(): Readonly<Record<string, string>> {
    return { [REAPER_TOKEN_VARIABLE]: this.token };
  }

  /** The reaper's pid once started, for tests. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Start the reaper unless it runs (again, should someone have killed it). */
  ensureStarted(): void {
    if (this.#child?.running()) return;
    this.#child = startReaper(["/bin/sh", "-c", REAPER_SCRIPT, REAPER_NAME, this.token]);
  }

  /** A command is about to be spawned (with `environment` in its environment). */
  spawning(): void {
    this.ensureStarted();
    this.#child!.write("?\n");
  }

  /** The command's group `pid` started: killed if blockwise dies before `ended(pid)`. */
  started(pid: number): void {
    this.#child?.write(`+${pid}\n`);
  }

  /** The spawn announced by `spawning` failed: nothing to kill. */
  spawnFailed(): void {
    this.#child?.write("!\n");
  }

  /** blockwise has killed the group `pid` (after the command's exit): forget it. */
  ended(pid: number): void {
    const child = this.#child;
    if (child === null || !child.running()) return;
    child.write(`-${pid}\n`);
  }

  /** End the reaper as if blockwise had exited (tests): it kills what it knows of. */
  close(): Promise<void> {
    const child = this.#child;
    this.#child = null;
    return child === null ? Promise.resolve() : child.close();
  }
}

/** The reaper of this process (Web Workers never start commands). */
export const commandReaper = new CommandReaper();
