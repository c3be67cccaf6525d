/**
 * Chunk-sized buffers a thread reuses for the copies it encodes from, so that writing a block
 * does not take a fresh buffer (fresh pages: a 1 MiB buffer costs about 0.3 ms of page faults
 * before its first use) every time. A buffer is taken for one write and given back when its
 * bytes are stored; writes that overlap each take their own.
 */

/** A typed array constructor by element count. */
export type ElementsConstructor<T extends ArrayBufferView> = new (length: number) => T;

/** How many free buffers of one kind and size are kept; more are left to the collector. */
const KEPT_PER_KIND = 2;
/** How many kinds (constructor and length) are kept at once; the oldest goes first. */
const KINDS = 4;

const free = new Map<string, ArrayBufferView[]>();
const keys = new WeakMap<ArrayBufferView, string>();

/** A buffer of `length` elements of `make`'s type, with no promise about its contents. */
export function takeScratch<T extends ArrayBufferView>(
  make: ElementsConstructor<T>,
  length: number,
): T {
  const key = `${make.name}:${length}`;
  const kept = free.get(key);
  const buffer = (kept?.pop() as T | undefined) ?? new make(length);
  keys.set(buffer, key);
  return buffer;
}

/** Gives back a buffer from `takeScratch` once nothing reads it any more. */
export function giveBackScratch(buffer: ArrayBufferView): void {
  const key = keys.get(buffer);
  if (key === undefined) return;
  let kept = free.get(key);
  if (kept === undefined) {
    if (free.size >= KINDS) free.delete(free.keys().next().value!);
    kept = [];
    free.set(key, kept);
  }
  if (kept.length < KEPT_PER_KIND && !kept.includes(buffer)) kept.push(buffer);
}
