/**
 * SIGINT/SIGTERM handling for runs, installed before anything else so that every phase answers
 * a signal: the first signal asks the run to stop gracefully (before the run loop: after the
 * current step of opening and checking the stores; in the loop: after the blocks in flight);
 * a second one exits at once with the signal's exit code, after the cleanup set for the phase.
 */

import process from "node:process";
import type { StopReason } from "../run/run_types.ts";
import { exitCodeForSignal } from "./exit_codes.ts";

export interface StopSwitch {
  readonly reason: () => StopReason | null;
  readonly onStop: (listener: (reason: StopReason) => void) => void;
  /**
   * What the run is doing before its loop starts ("opening tracking stores"), which the first
   * signal's message names; null once the loop runs (blocks in flight then get to finish).
   */
  readonly setPhase: (phase: string | null) => void;
  /**
   * What a second signal does before it exits at once with `code` (replaces the previous
   * cleanup); the first signal's reason is `reason()`.
   */
  readonly setHardExit: (cleanup: (code: number) => void) => void;
  /**
   * Asks the run to stop as the first `reason` signal would, for a stop that arrives another
   * way (the daisy session's `stop`, sent when Python gets a KeyboardInterrupt); `why` says what
   * asked. Never exits the process: a second request is ignored.
   */
  readonly request: (reason: StopReason, why: string) => void;
  /**
   * The line the first signal's message ends with, saying how to go on ("to resume: blockwise
   * run pipeline.mjs --tracking-dir tracking"), or null for none.
   */
  readonly setResume: (hint: string | null) => void;
  readonly dispose: () => void;
}

export function installStopSwitch(
  beforeHardExit: (code: number) => void = () => {},
): StopSwitch {
  let reason: StopReason | null = null;
  let phase: string | null = null;
  let cleanup = beforeHardExit;
  let resume: string | null = null;
  const then = () => (resume === null ? "" : `${resume}\n`);
  const listeners: ((reason: StopReason) => void)[] = [];
  const handler = (signal: StopReason) => () => {
    if (reason !== null) {
      process.stderr.write(`\nReceived ${signal} again: stopping now.\n`);
      const code = exitCodeForSignal(signal);
      cleanup(code);
      process.exit(code);
    }
    reason = signal;
    process.stderr.write(
      phase === null
        ? `\nReceived ${signal}: finishing blocks in flight, then stopping (send it again to stop now).\n`
        : `\nReceived ${signal} while ${phase}: stopping before any block runs (send it again to stop now).\n`,
    );
    process.stderr.write(then());
    for (const l of listeners) l(signal);
  };
  const request = (signal: StopReason, why: string): void => {
    if (reason !== null) return;
    reason = signal;
    process.stderr.write(
      phase === null
        ? `\n${why}: finishing blocks in flight, then stopping.\n`
        : `\n${why} while ${phase}: stopping before any block runs.\n`,
    );
    process.stderr.write(then());
    for (const l of listeners) l(signal);
  };
  const onInt = handler("SIGINT");
  const onTerm = handler("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  return {
    reason: () => reason,
    onStop: (listener) => listeners.push(listener),
    setPhase: (p) => (phase = p),
    setHardExit: (c) => (cleanup = c),
    request,
    setResume: (hint) => (resume = hint),
    dispose: () => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
    },
  };
}

/**
 * What the first SIGINT/SIGTERM says about going on: the same command resumes from the
 * tracking directory (done blocks are skipped); without one nothing is recorded.
 */
export function resumeHint(file: string, trackingDir: string | undefined): string {
  const quote = (word: string) =>
    /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
  return trackingDir === undefined
    ? "Nothing is tracked (no --tracking-dir): a new run starts over."
    : `To resume (done blocks are skipped): blockwise run ${quote(file)} --tracking-dir ${
      quote(trackingDir)
    }`;
}
