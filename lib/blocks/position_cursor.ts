/**
 * Positions handed out one at a time without an iterator result object per position. The ready
 * queue draws every initial block of a task through one of these: a generator there cost a
 * resumption of two generator frames and an allocation per block, a sixth of the scheduler's
 * time on no-op blocks (docs/design/REMOTE.md, "A saturated machine").
 */
export interface PositionCursor {
  /** The next position, or -1 after the last. */
  next(): number;
}

/** A cursor over any iterable of positions (filtered or exception-driven initial sets). */
export function cursorOf(positions: Iterable<number>): PositionCursor {
  const iterator = positions[Symbol.iterator]();
  let done = false;
  return {
    next(): number {
      if (done) return -1;
      const step = iterator.next();
      if (step.done === true) {
        done = true;
        return -1;
      }
      return step.value;
    },
  };
}

/**
 * The blocks of one level of a grid in row-major order: every coordinate starts at `start` and
 * steps by `period` below `grid`. The position (C order over `strides`) is kept up to date as
 * the coordinates step, so a position costs a few additions, not a sum over the axes.
 */
export class LevelCursor implements PositionCursor {
  readonly #start: readonly number[];
  readonly #period: readonly number[];
  readonly #grid: readonly number[];
  readonly #strides: readonly number[];
  readonly #coords: number[];
  #position: number;
  #done: boolean;

  constructor(
    start: readonly number[],
    period: readonly number[],
    grid: readonly number[],
    strides: readonly number[],
  ) {
    this.#start = start;
    this.#period = period;
    this.#grid = grid;
    this.#strides = strides;
    this.#coords = [...start];
    this.#done = start.some((k, d) => k >= grid[d]!);
    let position = 0;
    for (let d = 0; d < start.length; d++) position += start[d]! * strides[d]!;
    this.#position = position;
  }

  next(): number {
    if (this.#done) return -1;
    const position = this.#position;
    const c = this.#coords;
    let p = position;
    let d = c.length - 1;
    for (; d >= 0; d--) {
      const step = this.#period[d]!;
      c[d]! += step;
      p += step * this.#strides[d]!;
      if (c[d]! < this.#grid[d]!) break;
      p -= (c[d]! - this.#start[d]!) * this.#strides[d]!;
      c[d] = this.#start[d]!;
    }
    if (d < 0) this.#done = true;
    this.#position = p;
    return position;
  }
}
