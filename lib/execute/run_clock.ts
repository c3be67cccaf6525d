/**
 * The run loop's clock and timers, injected so that tests can drive timeouts, grace periods and
 * health checks by advancing a manual clock instead of sleeping.
 */

import { clearTimeout, setTimeout } from "node:timers";

export interface RunClock {
  /** Milliseconds since the epoch (Date.now() in a real run). */
  now(): number;
  /** Call `tick` every `ms` milliseconds until the returned function is called. */
  every(ms: number, tick: () => void): () => void;
  /**
   * Call `fire` once after `ms` milliseconds unless the returned function is called first. The
   * timer alone does not keep the process alive.
   */
  after(ms: number, fire: () => void): () => void;
}

export const SYSTEM_CLOCK: RunClock = {
  now: () => Date.now(),
  every(ms, tick) {
    const timer = setInterval(tick, ms);
    return () => clearInterval(timer);
  },
  after(ms, fire) {
    const timer = setTimeout(fire, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/**
 * Let timers, I/O and signal handlers run: a macrotask, since a resolved promise alone runs
 * before any of them.
 */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
