/**
 * Chunk-sized buffers a thread reuses for the copies it encodes from, so that writing a block
 * does not take a fresh buffer (fresh pages: a 1 MiB buffer costs about 0.3 ms of page faults
 * before its first use) every time. A buffer is taken for one write and given back when its
 * bytes are stored; writes that overlap each take their own. The native encoders (libblosc,
 * libzstd) write their frames into one too: a frame that reaches a chunk file is given back
 * after the write, one a store keeps (or another codec reads on) is simply never given back.
 */

/** A typed array constructor by element count. */
export type ElementsConstructor<T extends ArrayBufferView> = new (length: number) => T;

/** How many free buffers of one kind and size are kept; more are left to the collector. */
const KEPT_PER_KIND = 2;
/** How many kinds (constructor and length) are kept at once; the oldest goes first. */
const KINDS = 4;

const free = new Map<string, ArrayBufferView[]>();
/** Each buffer handed out, by its memory: its kind and the whole view that was handed out. */
const handedOut = new WeakMap<
  ArrayBufferLike,
  { readonly key: string; readonly view: ArrayBufferView }
>();

/** A buffer of `length` elements of `make`'s type, with no promise about its contents. */
export function takeScratch<T extends ArrayBufferView>(
  make: ElementsConstructor<T>,
  length: number,
): T {
  const key = `${make.name}:${length}`;
  const kept = free.get(key);
  const buffer = (kept?.pop() as T | undefined) ?? new make(length);
  handedOut.set(buffer.buffer, { key, view: buffer });
  return buffer;
}

/**
 * Gives back a buffer from `takeScratch` (or any view of its memory, such as the part an
 * encoder filled) once nothing reads it any more. Anything else is left alone.
 */
export function giveBackScratch(buffer: ArrayBufferView): void {
  const entry = handedOut.get(buffer.buffer);
  if (entry === undefined) return;
  handedOut.delete(buffer.buffer);
  let kept = free.get(entry.key);
  if (kept === undefined) {
    if (free.size >= KINDS) free.delete(free.keys().next().value!);
    kept = [];
    free.set(entry.key, kept);
  }
  if (kept.length < KEPT_PER_KIND) kept.push(entry.view);
}

/**
 * Forgets a buffer from `takeScratch` for good: its memory now belongs to a caller (a chunk
 * returned as a view of the file bytes it was read into), so no later `giveBackScratch` of any
 * view of it may return it to the pool.
 */
export function disownScratch(buffer: ArrayBufferView): void {
  handedOut.delete(buffer.buffer);
}
