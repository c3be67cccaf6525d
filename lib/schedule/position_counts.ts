/**
 * A map from block position to a small count (upstream blocks still missing), in typed arrays:
 * open addressing with linear probing. It holds the scheduler's frontier, which for a 3-D task
 * with conflicts is hundreds of thousands of entries that come and go for every block; a `Map`
 * would allocate a collector cell per entry, this allocates nothing per entry and costs 12
 * bytes a slot.
 */

const EMPTY = -1;
const DELETED = -2;

export class PositionCounts {
  #keys: Float64Array;
  #values: Int32Array;
  #size = 0;
  /** Slots holding DELETED; they make probes longer until the next rehash. */
  #deleted = 0;

  constructor(capacity = 1024) {
    const slots = 1 << Math.ceil(Math.log2(Math.max(16, capacity * 2)));
    this.#keys = new Float64Array(slots).fill(EMPTY);
    this.#values = new Int32Array(slots);
  }

  get size(): number {
    return this.#size;
  }

  /** The count for `position`, or -1 when it has none. */
  get(position: number): number {
    const slot = this.#find(position);
    return slot < 0 ? -1 : this.#values[slot]!;
  }

  has(position: number): boolean {
    return this.#find(position) >= 0;
  }

  set(position: number, count: number): void {
    const keys = this.#keys;
    const mask = keys.length - 1;
    let slot = hash(position) & mask;
    let reuse = -1;
    while (true) {
      const k = keys[slot]!;
      if (k === position) {
        this.#values[slot] = count;
        return;
      }
      if (k === EMPTY) break;
      if (k === DELETED && reuse < 0) reuse = slot;
      slot = (slot + 1) & mask;
    }
    if (reuse >= 0) {
      slot = reuse;
      this.#deleted--;
    }
    keys[slot] = position;
    this.#values[slot] = count;
    this.#size++;
    if (2 * (this.#size + this.#deleted) > keys.length) this.#rehash();
  }

  delete(position: number): boolean {
    const slot = this.#find(position);
    if (slot < 0) return false;
    this.#keys[slot] = DELETED;
    this.#size--;
    this.#deleted++;
    return true;
  }

  clear(): void {
    this.#keys.fill(EMPTY);
    this.#size = 0;
    this.#deleted = 0;
  }

  #find(position: number): number {
    const keys = this.#keys;
    const mask = keys.length - 1;
    let slot = hash(position) & mask;
    while (true) {
      const k = keys[slot]!;
      if (k === position) return slot;
      if (k === EMPTY) return -1;
      slot = (slot + 1) & mask;
    }
  }

  /** Grow when live entries fill a quarter, else just sweep the DELETED slots out. */
  #rehash(): void {
    const oldKeys = this.#keys;
    const oldValues = this.#values;
    const slots = 4 * this.#size > oldKeys.length ? oldKeys.length * 2 : oldKeys.length;
    this.#keys = new Float64Array(slots).fill(EMPTY);
    this.#values = new Int32Array(slots);
    this.#size = 0;
    this.#deleted = 0;
    for (let i = 0; i < oldKeys.length; i++) {
      const k = oldKeys[i]!;
      if (k >= 0) this.set(k, oldValues[i]!);
    }
  }
}

/** Positions are integers below 2^53: mix the low and high words. */
function hash(position: number): number {
  const low = position >>> 0;
  const high = (position / 0x1_0000_0000) >>> 0;
  return Math.imul(low ^ Math.imul(high, 0x9e3779b1), 0x85ebca6b) ^ (low >>> 15);
}
