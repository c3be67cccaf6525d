/**
 * How a task's workers fail to start. A task whose every lost worker failed its setup (or its
 * module import) is abandoned with that message once its restarts are spent; one whose workers
 * failed setup twice in a row with the same message, before any of them ever started, is
 * abandoned at once: the failure is deterministic (a missing module, a misnamed function, a
 * file that is not there), and eight more restarts would only print it eight more times.
 */

/** Identical setup failures, with no worker ever started, that abandon a task. */
export const DETERMINISTIC_SETUP_FAILURES = 2;

export class SetupFailures {
  /** Tasks whose every lost worker failed its setup, with the last setup error. */
  readonly #onlySetup = new Map<number, string>();
  /** Per task: how many setups in a row failed with the last message. */
  readonly #repeats = new Map<number, number>();
  /** Tasks with a worker that finished its setup in this run. */
  readonly #started = new Set<number>();

  /** A worker of task `t` finished its setup. */
  started(t: number): void {
    this.#started.add(t);
  }

  /**
   * A worker of task `t` was lost: by failing its setup with `message`, or (undefined) some
   * other way. `firstFailure`: no worker of the task was lost before in this run.
   */
  lost(t: number, message: string | undefined, firstFailure: boolean): void {
    if (message === undefined) {
      this.#onlySetup.delete(t);
      this.#repeats.delete(t);
      return;
    }
    const previous = this.#onlySetup.get(t);
    if (!firstFailure && previous === undefined) return; // another kind of loss came first
    this.#repeats.set(t, previous === message ? (this.#repeats.get(t) ?? 1) + 1 : 1);
    this.#onlySetup.set(t, message);
  }

  /** The setup error when every lost worker of task `t` failed its setup, else undefined. */
  onlySetupFailure(t: number): string | undefined {
    return this.#onlySetup.get(t);
  }

  /** The message when task `t`'s setup failure is deterministic (abandon now), else null. */
  deterministic(t: number): string | null {
    if (this.#started.has(t)) return null;
    const message = this.#onlySetup.get(t);
    if (message === undefined) return null;
    return (this.#repeats.get(t) ?? 0) >= DETERMINISTIC_SETUP_FAILURES ? message : null;
  }
}
