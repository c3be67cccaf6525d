/**
 * A launched worker whose process ended before it connected (an interpreter that is not there,
 * or exits at once): what the run says about it. The message is the same for every start that
 * fails the same way (no pid, no log path), so that the run can tell a deterministic failure
 * (`setup_failures.ts`) and abandon the task after a few starts instead of restarting it a dozen
 * times; the details (the first lines of its output and where the rest is) are shown once.
 */

/** How a launch that ended before its worker connected failed (`LaunchHandle.startFailure`). */
export interface StartFailure {
  /** The program started, e.g. the task's Python interpreter. */
  readonly program: string;
  /** "exited with status 127", "was killed by SIGKILL", "could not start: spawn ... ENOENT". */
  readonly how: string;
  /** The first non-empty lines the process wrote (stderr and stdout), at most a few. */
  readonly output: readonly string[];
  /** The file with all of its output, or null. */
  readonly logPath: string | null;
}

/** Output lines quoted in the message (the details show up to `START_OUTPUT_LINES`). */
const QUOTED_LINES = 3;
/** Output lines a launch keeps for its start failure. */
export const START_OUTPUT_LINES = 10;
/** A longer output line is cut to this many characters. */
export const START_LINE_CHARS = 240;

/**
 * The message (one line, the same for every such start: it quotes the first output lines and
 * says what to check) and the details shown once (the output, where the rest is, the hint).
 */
export function describeStartFailure(
  f: StartFailure,
  python: boolean,
): { message: string; details: string } {
  const quoted = f.output.slice(0, QUOTED_LINES).map((l) => l.trim()).join(" / ");
  const said = quoted === "" ? "; it printed nothing" : `; its output begins: ${quoted}`;
  const program = JSON.stringify(f.program);
  const hint = python
    ? `check the task's python.interpreter: it must run Python 3.8 or later here (try ${program} -c "import sys; print(sys.version)"; for conda or a virtual environment, give the full path of its bin/python)`
    : `check that ${program} runs on this machine`;
  const log = f.logPath === null ? [] : [`(its output: ${f.logPath})`];
  return {
    message: `${program} ${f.how} before it connected${said}; ${hint}`,
    details: [...f.output, ...log, hint].join("\n"),
  };
}

/** The first non-empty lines of `text`, each cut to `START_LINE_CHARS`. */
export function firstOutputLines(text: string): string[] {
  return text.split(/\r?\n/).map((l) => l.trimEnd()).filter((l) => l.trim() !== "")
    .slice(0, START_OUTPUT_LINES)
    .map((l) => (l.length > START_LINE_CHARS ? `${l.slice(0, START_LINE_CHARS)}...` : l));
}
