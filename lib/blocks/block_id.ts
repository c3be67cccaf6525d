/**
 * daisy's block IDs: the generalised Cantor ("pyramid volume") number of a grid index,
 * matching `funlib.math.cantor_number`:
 *
 *   id(x1..xn) = sum over k = 1..n of C(x1 + ... + xk + k - 1, k)
 *
 * The incremental form `v <- v * (s + d) / (d + 1)` is exact at every step. A `number` is used
 * while every intermediate stays below 2^53; grids whose largest ID could exceed that use
 * `bigint`, so an ID is never rounded.
 */

export type BlockId = number | bigint;

export function cantorNumber(index: readonly number[]): number {
  let id = 0;
  let sum = 0;
  for (let k = 1; k <= index.length; k++) {
    sum += index[k - 1]!;
    if (sum === 0) continue;
    let v = 1;
    for (let d = 0; d < k; d++) v = (v * (sum + d)) / (d + 1);
    id += v;
  }
  return id;
}

export function cantorNumberBig(index: readonly number[]): bigint {
  let id = 0n;
  let sum = 0n;
  for (let k = 1; k <= index.length; k++) {
    sum += BigInt(index[k - 1]!);
    if (sum === 0n) continue;
    let v = 1n;
    for (let d = 0; d < k; d++) v = (v * (sum + BigInt(d))) / BigInt(d + 1);
    id += v;
  }
  return id;
}

/**
 * Whether `cantorNumber` is exact for every index up to `maxIndex` (component-wise). The ID grows
 * with every component, so the largest one is at `maxIndex`; the largest intermediate of the
 * incremental product is at most `k` times the final term.
 */
export function numberIdsAreExact(maxIndex: readonly number[]): boolean {
  if (maxIndex.length === 0) return true;
  const largest = cantorNumberBig(maxIndex);
  return largest * BigInt(maxIndex.length + 1) <= BigInt(Number.MAX_SAFE_INTEGER);
}

/** JSON form of an ID: a number when exact as a JSON number, otherwise a decimal string. */
export function blockIdToJson(id: BlockId): number | string {
  if (typeof id === "number") return id;
  return id <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(id) : id.toString();
}

export function compareBlockIds(a: BlockId, b: BlockId): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
