/**
 * A task's ready blocks: a lazy source of initial blocks (drained first, as daisy drains its
 * root generator) followed by a FIFO ring buffer of positions made ready at run time. The
 * initial blocks are never materialised, so a million-block root level costs nothing upfront.
 */

export class ReadyQueue {
  private initial: Iterator<number> | null;
  private buffer: Float64Array;
  private head = 0;
  private size = 0;

  constructor(initial: Iterable<number> | null) {
    this.initial = initial === null ? null : initial[Symbol.iterator]();
    this.buffer = new Float64Array(64);
  }

  /** Next ready position, or -1 when none is ready now. */
  shift(): number {
    if (this.initial !== null) {
      const next = this.initial.next();
      if (!next.done) return next.value;
      this.initial = null;
    }
    if (this.size === 0) return -1;
    const value = this.buffer[this.head]!;
    this.head = (this.head + 1) % this.buffer.length;
    this.size--;
    return value;
  }

  push(position: number): void {
    if (this.size === this.buffer.length) this.grow();
    this.buffer[(this.head + this.size) % this.buffer.length] = position;
    this.size++;
  }

  /** Drop everything (the task was abandoned or the run is stopping). */
  clear(): void {
    this.initial = null;
    this.head = 0;
    this.size = 0;
  }

  private grow(): void {
    const next = new Float64Array(this.buffer.length * 2);
    for (let i = 0; i < this.size; i++) {
      next[i] = this.buffer[(this.head + i) % this.buffer.length]!;
    }
    this.buffer = next;
    this.head = 0;
  }
}
