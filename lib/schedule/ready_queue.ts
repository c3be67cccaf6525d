/**
 * A task's ready blocks: a lazy source of initial blocks (drained first, as daisy drains its
 * root generator) followed by a FIFO ring buffer of positions made ready at run time. The
 * initial blocks are never materialised, so a million-block root level costs nothing upfront.
 * Once the ring holds RING_FIRST positions it is served before the initial blocks: draining a
 * billion-block root level first would otherwise park most of the next level in the ring (8
 * bytes a block), while serving it keeps the ring at the frontier's size.
 *
 * In position order (`byPosition`, for pipelines with temporaries) the positions made ready at
 * run time are kept in a binary min-heap instead, merged with the initial blocks (which come in
 * ascending order) through one position of lookahead: the lowest ready position is served
 * first. A temporary task and its readers then work along one tight front, so a temporary block
 * waits for fewer lagging readers before it is deleted (bench/temporary.ts: the peak of B on
 * disk 0.8 points lower, in two runs of 10 pairs each).
 */

import { cursorOf, type PositionCursor } from "../blocks/mod.ts";

export const RING_FIRST = 1 << 16;

export class ReadyQueue {
  #initial: PositionCursor | null;
  /** Initial positions the cursor has not produced yet. */
  #initialLeft: number;
  #buffer: Float64Array;
  #head = 0;
  #size = 0;
  readonly #byPosition: boolean;
  /** In position order: the initial position drawn from the cursor and not served yet. */
  #lookahead = -1;

  /** `initial` yields exactly `initialCount` positions (in ascending order when `byPosition`). */
  constructor(
    initial: PositionCursor | Iterable<number> | null,
    initialCount = 0,
    byPosition = false,
  ) {
    this.#byPosition = byPosition;
    this.#initial = initial === null
      ? null
      : Symbol.iterator in initial
      ? cursorOf(initial)
      : initial;
    this.#initialLeft = initial === null ? 0 : initialCount;
    this.#buffer = new Float64Array(64);
  }

  /** Positions queued now (initial ones not yet produced included). */
  get length(): number {
    return this.#initialLeft + this.#size;
  }

  /** Next ready position, or -1 when none is ready now. */
  shift(): number {
    if (this.#byPosition) return this.#shiftLowest();
    if (this.#initial !== null && this.#size < RING_FIRST) {
      const next = this.#initial.next();
      if (next >= 0) {
        this.#initialLeft--;
        return next;
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
    if (this.#byPosition) {
      this.#heapPush(position);
      return;
    }
    if (this.#size === this.#buffer.length) this.#grow();
    this.#buffer[(this.#head + this.#size) % this.#buffer.length] = position;
    this.#size++;
  }

  /** Drop everything (the task was abandoned or the run is stopping). */
  clear(): void {
    this.#lookahead = -1;
    this.#initial = null;
    this.#initialLeft = 0;
    this.#head = 0;
    this.#size = 0;
  }

  #shiftLowest(): number {
    if (this.#lookahead < 0 && this.#initial !== null) {
      const next = this.#initial.next();
      if (next < 0) {
        this.#initial = null;
        this.#initialLeft = 0;
      } else {
        this.#lookahead = next;
      }
    }
    if (this.#lookahead >= 0 && (this.#size === 0 || this.#lookahead < this.#buffer[0]!)) {
      const position = this.#lookahead;
      this.#lookahead = -1;
      this.#initialLeft--;
      return position;
    }
    return this.#size === 0 ? -1 : this.#heapPop();
  }

  /** The heap lives in `#buffer[0, #size)` (`#head` stays 0). */
  #heapPush(position: number): void {
    if (this.#size === this.#buffer.length) this.#grow();
    const heap = this.#buffer;
    let i = this.#size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]! <= position) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = position;
  }

  #heapPop(): number {
    const heap = this.#buffer;
    const lowest = heap[0]!;
    const last = heap[--this.#size]!;
    const n = this.#size;
    let i = 0;
    for (let child = 1; child < n; child = 2 * i + 1) {
      if (child + 1 < n && heap[child + 1]! < heap[child]!) child++;
      if (heap[child]! >= last) break;
      heap[i] = heap[child]!;
      i = child;
    }
    if (n > 0) heap[i] = last;
    return lowest;
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
