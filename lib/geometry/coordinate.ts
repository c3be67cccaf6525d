/**
 * Coordinates: ordered lists of integers, one per axis, with daisy's arithmetic.
 *
 * Division is floor (Euclidean for positive divisors) so that negative offsets land in the
 * right cell: `floorDiv(-7, 3) === -3`, `euclidMod(-7, 3) === 2`.
 */

export type Coord = readonly number[];

/** Floor division; matches Python `//` and daisy's Euclidean division for positive divisors. */
export function floorDiv(a: number, b: number): number {
  return Math.floor(a / b);
}

/** Ceiling division, computed as daisy does: `-((-a) // b)`. */
export function ceilDiv(a: number, b: number): number {
  return -Math.floor(-a / b);
}

/** Euclidean remainder: always in `[0, b)` for positive `b`. */
export function euclidMod(a: number, b: number): number {
  const r = a % b;
  // `+ 0` turns the -0 of an exact negative multiple into +0.
  return r < 0 ? r + Math.abs(b) : r + 0;
}

function sameDims(a: Coord, b: Coord, op: string): void {
  if (a.length !== b.length) {
    throw new RangeError(
      `Cannot ${op} coordinates of different dimensionality: ${coordToString(a)} and ${
        coordToString(b)
      }`,
    );
  }
}

export function add(a: Coord, b: Coord): number[] {
  sameDims(a, b, "add");
  return a.map((v, i) => v + b[i]!);
}

export function sub(a: Coord, b: Coord): number[] {
  sameDims(a, b, "subtract");
  return a.map((v, i) => v - b[i]!);
}

export function mul(a: Coord, b: Coord): number[] {
  sameDims(a, b, "multiply");
  return a.map((v, i) => v * b[i]!);
}

export function scale(a: Coord, k: number): number[] {
  return a.map((v) => v * k);
}

export function div(a: Coord, b: Coord): number[] {
  sameDims(a, b, "divide");
  return a.map((v, i) => floorDiv(v, b[i]!));
}

export function mod(a: Coord, b: Coord): number[] {
  sameDims(a, b, "take the remainder of");
  return a.map((v, i) => euclidMod(v, b[i]!));
}

export function neg(a: Coord): number[] {
  return a.map((v) => -v);
}

export function max(a: Coord, b: Coord): number[] {
  sameDims(a, b, "take the maximum of");
  return a.map((v, i) => Math.max(v, b[i]!));
}

export function min(a: Coord, b: Coord): number[] {
  sameDims(a, b, "take the minimum of");
  return a.map((v, i) => Math.min(v, b[i]!));
}

export function product(a: Coord): number {
  let p = 1;
  for (const v of a) p *= v;
  return p;
}

export function coordEquals(a: Coord, b: Coord): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** daisy's string form: `(1, 2, 3)`, `(5)` in 1-D, `()` in 0-D. */
export function coordToString(a: Coord): string {
  return `(${a.join(", ")})`;
}
