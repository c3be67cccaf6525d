/**
 * Lines about strangers, at a bounded rate: 6,000 refused connection attempts printed 6,000
 * lines. The first LINES_PER_WINDOW of each window are written as they come; the rest are
 * counted and summed up in one line when the next line comes after the window, or when the
 * window's timer fires.
 */

export const LINES_PER_WINDOW = 10;
export const WINDOW_MS = 10_000;

export class RateLimitedLog {
  readonly #write: (line: string) => void;
  readonly #what: string;
  #windowStart = Number.NEGATIVE_INFINITY;
  #written = 0;
  #held = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;

  /** `what` names the held lines in the summary, e.g. "refused worker connections". */
  constructor(write: (line: string) => void, what: string) {
    this.#write = write;
    this.#what = what;
  }

  line(text: string, now: number = Date.now()): void {
    if (now - this.#windowStart >= WINDOW_MS) {
      this.flush();
      this.#windowStart = now;
      this.#written = 0;
    }
    if (this.#written < LINES_PER_WINDOW) {
      this.#written++;
      this.#write(text);
      return;
    }
    this.#held++;
    if (this.#timer === null) {
      this.#timer = setTimeout(() => this.flush(), WINDOW_MS - (now - this.#windowStart));
      (this.#timer as { unref?: () => void }).unref?.();
    }
  }

  /** Writes the summary of the held lines, if any. */
  flush(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#held === 0) return;
    this.#write(
      `... and ${this.#held} more ${this.#what} within ${WINDOW_MS / 1000} s (not each shown)`,
    );
    this.#held = 0;
  }
}
