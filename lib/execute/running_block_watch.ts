/**
 * Timeout enforcement on the run loop's clock. An executor tells the watch, on every health
 * tick, which block runs now (a token that changes whenever a new block starts, or -1 when none
 * runs); the watch remembers when it first saw that block and says when it has run past the
 * task's timeout. Using the run clock rather than the worker's own timestamps keeps timeouts
 * testable with a manual clock, and immune to a remote machine's clock.
 */

export class RunningBlockWatch {
  readonly #timeoutMs: number;
  #token = -1;
  #since = 0;

  constructor(timeoutSeconds: number | null) {
    this.#timeoutMs = timeoutSeconds === null ? Number.POSITIVE_INFINITY : timeoutSeconds * 1000;
  }

  /**
   * `startedAt` is when the block started, when known better than "now" (a heartbeat's
   * `runningFor`). Returns why the block is overdue, or null.
   */
  observe(now: number, token: number, startedAt = now): string | null {
    if (token < 0) {
      this.#token = -1;
      return null;
    }
    if (token !== this.#token) {
      this.#token = token;
      this.#since = startedAt;
    }
    if (now - this.#since <= this.#timeoutMs) return null;
    return `block ran longer than the task's timeout of ${this.#timeoutMs / 1000} s`;
  }
}
