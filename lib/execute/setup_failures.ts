/**
 * How a task's workers fail to start. A task whose every lost worker failed to start (its
 * process ended before it connected, its module did not import, or its setup raised) is
 * abandoned with that message once its restarts are spent; one whose workers failed twice in a
 * row with the same message, before any of them ever started, is abandoned at once: the failure
 * is deterministic (an interpreter that is not there, a syntax error, a missing package, a
 * misnamed function, a file that is not there), and eight more restarts would only print it
 * eight more times. The run says each such failure once, with its traceback or the first lines
 * of the process's output; a repeat is one line (`lostReason`).
 */

import type { AbandonReason, StartStage } from "../schedule/mod.ts";

/** A worker's failure to start: its message and how far it got (default "setup"). */
export interface SetupLoss {
  readonly message: string;
  readonly stage?: StartStage | undefined;
}

/** Identical setup failures, with no worker ever started, that abandon a task. */
export const DETERMINISTIC_SETUP_FAILURES = 2;

export class SetupFailures {
  /** Tasks whose every lost worker failed its setup, with the last setup error. */
  readonly #onlySetup = new Map<number, { message: string; stage: StartStage }>();
  /** Per task: how many setups in a row failed with the last message. */
  readonly #repeats = new Map<number, number>();
  /** Tasks with a worker that finished its setup in this run. */
  readonly #started = new Set<number>();
  /** Failures already shown in full (task, stage and message). */
  readonly #shown = new Set<string>();

  /** A worker of task `t` finished its setup. */
  started(t: number): void {
    this.#started.add(t);
  }

  /**
   * A worker of task `t` was lost: by failing to start (`setup`), or (undefined) some other way.
   * `firstFailure`: no worker of the task was lost before in this run.
   */
  lost(t: number, setup: SetupLoss | undefined, firstFailure: boolean): void {
    if (setup === undefined) {
      this.#onlySetup.delete(t);
      this.#repeats.delete(t);
      return;
    }
    const { message, stage = "setup" } = setup;
    const previous = this.#onlySetup.get(t);
    if (!firstFailure && previous === undefined) return; // another kind of loss came first
    const same = previous?.message === message && previous.stage === stage;
    this.#repeats.set(t, same ? (this.#repeats.get(t) ?? 1) + 1 : 1);
    this.#onlySetup.set(t, { message, stage });
  }

  /** The setup error when every lost worker of task `t` failed its setup, else undefined. */
  onlySetupFailure(t: number): string | undefined {
    return this.#onlySetup.get(t)?.message;
  }

  /** Why task `t` is abandoned when every lost worker failed to start, else undefined. */
  abandonReason(t: number): AbandonReason | undefined {
    const last = this.#onlySetup.get(t);
    if (last === undefined) return undefined;
    return {
      kind: "setup-failed",
      message: last.message,
      ...(last.stage === "setup" ? {} : { stage: last.stage }),
    };
  }

  /** The message when task `t`'s setup failure is deterministic (abandon now), else null. */
  deterministic(t: number): string | null {
    if (this.#started.has(t)) return null;
    const last = this.#onlySetup.get(t);
    if (last === undefined) return null;
    return (this.#repeats.get(t) ?? 0) >= DETERMINISTIC_SETUP_FAILURES ? last.message : null;
  }

  /**
   * The notice for a worker of task `t` (`id`) that failed to start, with `details` (its
   * traceback, or its output) under it; null when the same failure was shown already.
   */
  notice(
    t: number,
    id: string,
    workerId: number,
    failure: { message: string; details: string | undefined; stage: StartStage | undefined },
  ): string | null {
    const { message, details, stage = "setup" } = failure;
    const key = JSON.stringify([t, stage, message]);
    if (this.#shown.has(key)) return null;
    this.#shown.add(key);
    const what = stage === "start"
      ? `worker ${workerId} could not start: ${lostReason(message, stage)}`
      : stage === "import"
      ? `the module failed to import in worker ${workerId}: ${message}`
      : `setup failed in worker ${workerId}: ${message}`;
    const under = details ? `\n${details.split("\n").map((l) => `    ${l}`).join("\n")}` : "";
    return `Task "${id}": ${what}${under}`;
  }
}

const BEFORE_CONNECTING = " before it connected";

/** Why a worker that failed to start was lost, as its lost notice says it (one short line). */
export function lostReason(message: string, stage: StartStage | undefined): string {
  if (stage === "start") {
    const end = message.indexOf(BEFORE_CONNECTING);
    return end < 0 ? message : message.slice(0, end + BEFORE_CONNECTING.length);
  }
  if (stage === "import") return `its module failed to import: ${message}`;
  return `setup failed: ${message}`;
}
