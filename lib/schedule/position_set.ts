/**
 * A set of block positions in typed arrays (the hash table of `PositionCounts`, plus the members
 * in insertion order), for the blocks of a resumed task that still have to succeed: a few per
 * pending block, never one per done block.
 */

import type { BlockSet } from "../graph/mod.ts";
import { PositionCounts } from "./position_counts.ts";

export class PositionSet implements BlockSet {
  readonly #table = new PositionCounts();
  #members = new Float64Array(16);
  #size = 0;

  get size(): number {
    return this.#size;
  }

  has(position: number): boolean {
    return this.#table.has(position);
  }

  /** Add a position; false when it was there already. */
  add(position: number): boolean {
    if (this.#table.has(position)) return false;
    this.#table.set(position, 0);
    if (this.#size === this.#members.length) {
      const grown = new Float64Array(2 * this.#members.length);
      grown.set(this.#members);
      this.#members = grown;
    }
    this.#members[this.#size++] = position;
    return true;
  }

  /** The i-th position added (0 <= i < size). */
  at(i: number): number {
    return this.#members[i]!;
  }

  /** Order the members by position (`forEach` then visits them in that order). */
  sort(): void {
    this.#members.subarray(0, this.#size).sort();
  }

  forEach(visit: (position: number) => void): void {
    for (let i = 0; i < this.#size; i++) visit(this.#members[i]!);
  }
}
