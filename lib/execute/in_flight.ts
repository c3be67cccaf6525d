/**
 * The blocks an executor holds: a FIFO ring of (position, attempt, sentAt) triples in one
 * Float64Array, so a million blocks in flight over a run allocate nothing per block. Executors
 * run their blocks in the order they were sent, so results arrive at the head and blocks handed
 * back unstarted leave from the tail; `remove` covers anything else.
 */

const STRIDE = 3;

/**
 * Counts kept over the queues of one task's executors as blocks come and go, so the run loop
 * asks "how many of them wait" in O(1) rather than walking thousands of executors
 * (`fill_queue.ts`): `empty` queues (an executor starting or idle), and `heavy` ones holding more
 * than two blocks (a worker whose unstarted blocks an idle sibling could take over).
 */
export class QueueTally {
  empty = 0;
  heavy = 0;
}

/** A queue holding more than this many blocks counts as heavy in its tally. */
const HEAVY = 2;

/** The ring of a queue that never held a block: thousands of workers may still be starting. */
const NO_SLOTS = new Float64Array(0);
const FIRST_SLOTS = STRIDE * 16;

export class InFlightQueue {
  #slots = NO_SLOTS;
  #head = 0;
  #size = 0;
  #tally: QueueTally | null = null;

  get size(): number {
    return this.#size;
  }

  /** Count this queue in `tally` from now on (null: in none); it moves its share over. */
  track(tally: QueueTally | null): void {
    this.#count(-1);
    this.#tally = tally;
    this.#count(1);
  }

  #count(sign: number): void {
    if (this.#tally === null) return;
    if (this.#size === 0) this.#tally.empty += sign;
    else if (this.#size > HEAVY) this.#tally.heavy += sign;
  }

  push(position: number, attempt: number, sentAt: number): void {
    if (this.#tally !== null) {
      if (this.#size === 0) this.#tally.empty--;
      else if (this.#size === HEAVY) this.#tally.heavy++;
    }
    if (this.#size * STRIDE === this.#slots.length) {
      this.#grow(Math.max(FIRST_SLOTS, this.#slots.length * 2));
    }
    const at = this.#slot(this.#size);
    this.#slots[at] = position;
    this.#slots[at + 1] = attempt;
    this.#slots[at + 2] = sentAt;
    this.#size++;
  }

  /**
   * Make room for `extra` more blocks at once: a batch of hundreds grows the ring once, not
   * once per doubling from 16 (a third of a new worker's first fill, with 2,000 workers).
   */
  reserve(extra: number): void {
    const wanted = (this.#size + extra) * STRIDE;
    if (wanted <= this.#slots.length) return;
    let length = Math.max(FIRST_SLOTS, this.#slots.length);
    while (length < wanted) length *= 2;
    this.#grow(length);
  }

  /** Position of the i-th block (0 = the oldest), or -1. */
  positionAt(i: number): number {
    return i < this.#size ? this.#slots[this.#slot(i)]! : -1;
  }

  attemptAt(i: number): number {
    return this.#slots[this.#slot(i) + 1]!;
  }

  sentAtAt(i: number): number {
    return this.#slots[this.#slot(i) + 2]!;
  }

  /**
   * Remove the block at `position`, trying the head (a result) and the tail (a block handed
   * back) first. Returns the index it had, or -1 when it was not in flight. Read its attempt
   * and sentAt with `lastAttempt` / `lastSentAt` right after.
   */
  remove(position: number): number {
    if (this.#size === 0) return -1;
    if (this.#slots[this.#slot(0)] === position) {
      this.#keep(0);
      this.#head = (this.#head + STRIDE) % this.#slots.length;
      this.#shrink();
      return 0;
    }
    const last = this.#size - 1;
    if (this.#slots[this.#slot(last)] === position) {
      this.#keep(last);
      this.#shrink();
      return last;
    }
    for (let i = 1; i < last; i++) {
      if (this.#slots[this.#slot(i)] !== position) continue;
      this.#keep(i);
      for (let j = i; j < last; j++) {
        const to = this.#slot(j);
        const from = this.#slot(j + 1);
        this.#slots[to] = this.#slots[from]!;
        this.#slots[to + 1] = this.#slots[from + 1]!;
        this.#slots[to + 2] = this.#slots[from + 2]!;
      }
      this.#shrink();
      return i;
    }
    return -1;
  }

  /** Attempt and sentAt of the block `remove` took out last. */
  lastAttempt = 0;
  lastSentAt = 0;

  clear(): void {
    this.#count(-1);
    this.#head = 0;
    this.#size = 0;
    this.#count(1);
  }

  /**
   * Counted without branches: a run's first workers, on big windows, never drain to two blocks
   * or none, and the JIT that compiled this for them left the paths of a fleet's small windows
   * out (a hundred deoptimisations of the result loop it is inlined into, then a recompile).
   */
  #shrink(): void {
    const size = --this.#size;
    const tally = this.#tally;
    if (tally === null) return;
    tally.empty += +(size === 0);
    tally.heavy -= +(size === HEAVY);
  }

  #keep(i: number): void {
    const at = this.#slot(i);
    this.lastAttempt = this.#slots[at + 1]!;
    this.lastSentAt = this.#slots[at + 2]!;
  }

  #slot(i: number): number {
    return (this.#head + i * STRIDE) % this.#slots.length;
  }

  #grow(length: number): void {
    const next = new Float64Array(length);
    for (let i = 0; i < this.#size; i++) {
      const from = this.#slot(i);
      next[i * STRIDE] = this.#slots[from]!;
      next[i * STRIDE + 1] = this.#slots[from + 1]!;
      next[i * STRIDE + 2] = this.#slots[from + 2]!;
    }
    this.#slots = next;
    this.#head = 0;
  }
}
