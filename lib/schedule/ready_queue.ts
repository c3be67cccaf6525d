/**
 * A task's ready blocks: a lazy source of initial blocks (drained first, as daisy drains its
 * root generator) followed by a FIFO ring buffer of positions made ready at run time. The
 * initial blocks are never materialised, so a million-block root level costs nothing upfront.
 * Once the ring holds RING_FIRST positions it is served before the initial blocks: draining a
 * billion-block root level first would otherwise park most of the next level in the ring (8
 * bytes a block), while serving it keeps the ring at the frontier's size.
 */

export const RING_FIRST = 1 << 16;

export class ReadyQueue {
  #initial: Iterator<number> | null;
  /** Initial positions the iterator has not produced yet. */
  #initialLeft: number;
  #buffer: Float64Array;
  #head = 0;
  #size = 0;

  /** `initial` yields exactly `initialCount` positions. */
  constructor(initial: Iterable<number> | null, initialCount = 0) {
    this.#initial = initial === null ? null : initial[Symbol.iterator]();
    this.#initialLeft = initial === null ? 0 : initialCount;
    this.#buffer = new Float64Array(64);
  }

  /** Positions queued now (initial ones not yet produced included). */
  get length(): number {
    return this.#initialLeft + this.#size;
  }

  /** Next ready position, or -1 when none is ready now. */
  shift(): number {
    if (this.#initial !== null && this.#size < RING_FIRST) {
      const next = this.#initial.next();
      if (!next.done) {
        this.#initialLeft--;
        return next.value;
      }
      this.#initial = null;
      this.#initialLeft = 0;
    }
    if (this.#size === 0) return -1;
    const value = this.#buffer[this.#head]!;
    this.#head = (this.#head + 1) % this.#buffer.length;
    this.#size--;
    return value;
  }

  push(position: number): void {
    if (this.#size === this.#buffer.length) this.#grow();
    this.#buffer[(this.#head + this.#size) % this.#buffer.length] = position;
    this.#size++;
  }

  /** Drop everything (the task was abandoned or the run is stopping). */
  clear(): void {
    this.#initial = null;
    this.#initialLeft = 0;
    this.#head = 0;
    this.#size = 0;
  }

  #grow(): void {
    const next = new Float64Array(this.#buffer.length * 2);
    for (let i = 0; i < this.#size; i++) {
      next[i] = this.#buffer[(this.#head + i) % this.#buffer.length]!;
    }
    this.#buffer = next;
    this.#head = 0;
  }
}
