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

export class CommandReaper {
  readonly token = randomBytes(12).toString("hex");
  #child: ChildProcess | null = null;

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
    const child = this.#child;
    if (child !== null && child.exitCode === null && child.signalCode === null) return;
    const started = spawn("/bin/sh", ["-c", REAPER_SCRIPT, REAPER_NAME, this.token], {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
    });
    // A reaper that died makes writes fail; the next command starts a new one.
    started.stdin!.on("error", () => {});
    started.on("error", () => {});
    // It must not keep this process alive: it ends when this process does.
    started.unref();
    (started.stdin as unknown as { unref?: () => void }).unref?.();
    this.#child = started;
  }

  /** A command is about to be spawned (with `environment` in its environment). */
  spawning(): void {
    this.ensureStarted();
    this.#child!.stdin!.write("?\n");
  }

  /** The command's group `pid` started: killed if blockwise dies before `ended(pid)`. */
  started(pid: number): void {
    this.#child?.stdin?.write(`+${pid}\n`);
  }

  /** The spawn announced by `spawning` failed: nothing to kill. */
  spawnFailed(): void {
    this.#child?.stdin?.write("!\n");
  }

  /** blockwise has killed the group `pid` (after the command's exit): forget it. */
  ended(pid: number): void {
    const child = this.#child;
    if (child === null || child.exitCode !== null) return;
    child.stdin!.write(`-${pid}\n`);
  }

  /** End the reaper as if blockwise had exited (tests): it kills what it knows of. */
  close(): Promise<void> {
    const child = this.#child;
    this.#child = null;
    if (child === null || child.exitCode !== null || child.signalCode !== null) {
      return Promise.resolve();
    }
    child.ref(); // waited for now: keep the event loop alive until it exits
    return new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.stdin!.end();
    });
  }
}

/** The reaper of this process (Web Workers never start commands). */
export const commandReaper = new CommandReaper();
