/**
 * Blosc's bit shuffle (the bitshuffle library's "bit transpose within elements", as c-blosc
 * 1.21 calls it): n elements of `typesize` bytes become 8 * typesize rows of n / 8 bytes, row
 * 8j + k holding bit k of byte j of every element, element 8b + m at bit m of the row's byte b.
 *
 * c-blosc applies it only when n is a multiple of 8 (`blosc_internal_bitshuffle`): then the
 * bytes past the last whole element are copied after the rows; otherwise the whole block is
 * copied unchanged. Both directions are the same 8x8 bit-matrix transpose (an involution) of
 * the eight bytes that sit at one (plane, group) place, done on two 32-bit halves (written out
 * in both loops: a helper would need its 64 bits in shared variables, which costs more).
 */

/** Bit-shuffles `size` bytes of `src` from `srcAt` into `dst` from `dstAt`. */
export function bitshuffle(
  typesize: number,
  size: number,
  src: Uint8Array,
  srcAt: number,
  dst: Uint8Array,
  dstAt: number,
): void {
  const n = Math.trunc(size / typesize);
  if (n % 8 !== 0) {
    dst.set(src.subarray(srcAt, srcAt + size), dstAt);
    return;
  }
  const rows = n >>> 3; // bytes per row, one per group of 8 elements
  const step = 8 * typesize;
  for (let j = 0; j < typesize; j++) {
    const out = dstAt + 8 * j * rows;
    for (let b = 0, i = srcAt + j; b < rows; b++, i += step) {
      let lo = src[i]! | (src[i + typesize]! << 8) | (src[i + 2 * typesize]! << 16) |
        (src[i + 3 * typesize]! << 24);
      let hi = src[i + 4 * typesize]! | (src[i + 5 * typesize]! << 8) |
        (src[i + 6 * typesize]! << 16) | (src[i + 7 * typesize]! << 24);
      let t = (lo ^ (lo >>> 7)) & 0x00aa00aa;
      lo = lo ^ t ^ (t << 7);
      t = (hi ^ (hi >>> 7)) & 0x00aa00aa;
      hi = hi ^ t ^ (t << 7);
      t = (lo ^ (lo >>> 14)) & 0x0000cccc;
      lo = lo ^ t ^ (t << 14);
      t = (hi ^ (hi >>> 14)) & 0x0000cccc;
      hi = hi ^ t ^ (t << 14);
      t = (lo ^ ((lo >>> 28) | (hi << 4))) & 0xf0f0f0f0;
      lo ^= t;
      hi ^= t >>> 4;
      const o = out + b;
      dst[o] = lo;
      dst[o + rows] = lo >>> 8;
      dst[o + 2 * rows] = lo >>> 16;
      dst[o + 3 * rows] = lo >>> 24;
      dst[o + 4 * rows] = hi;
      dst[o + 5 * rows] = hi >>> 8;
      dst[o + 6 * rows] = hi >>> 16;
      dst[o + 7 * rows] = hi >>> 24;
    }
  }
  const body = n * typesize;
  if (body < size) dst.set(src.subarray(srcAt + body, srcAt + size), dstAt + body);
}

/** Undoes `bitshuffle`: `size` bytes of `src` from `srcAt` into `dst` from `dstAt`. */
export function bitunshuffle(
  typesize: number,
  size: number,
  src: Uint8Array,
  srcAt: number,
  dst: Uint8Array,
  dstAt: number,
): void {
  const n = Math.trunc(size / typesize);
  if (n % 8 !== 0) {
    dst.set(src.subarray(srcAt, srcAt + size), dstAt);
    return;
  }
  const rows = n >>> 3;
  const step = 8 * typesize;
  for (let j = 0; j < typesize; j++) {
    const row = srcAt + 8 * j * rows;
    for (let b = 0, o = dstAt + j; b < rows; b++, o += step) {
      const i = row + b;
      let lo = src[i]! | (src[i + rows]! << 8) | (src[i + 2 * rows]! << 16) |
        (src[i + 3 * rows]! << 24);
      let hi = src[i + 4 * rows]! | (src[i + 5 * rows]! << 8) | (src[i + 6 * rows]! << 16) |
        (src[i + 7 * rows]! << 24);
      let t = (lo ^ (lo >>> 7)) & 0x00aa00aa;
      lo = lo ^ t ^ (t << 7);
      t = (hi ^ (hi >>> 7)) & 0x00aa00aa;
      hi = hi ^ t ^ (t << 7);
      t = (lo ^ (lo >>> 14)) & 0x0000cccc;
      lo = lo ^ t ^ (t << 14);
      t = (hi ^ (hi >>> 14)) & 0x0000cccc;
      hi = hi ^ t ^ (t << 14);
      t = (lo ^ ((lo >>> 28) | (hi << 4))) & 0xf0f0f0f0;
      lo ^= t;
      hi ^= t >>> 4;
      dst[o] = lo;
      dst[o + typesize] = lo >>> 8;
      dst[o + 2 * typesize] = lo >>> 16;
      dst[o + 3 * typesize] = lo >>> 24;
      dst[o + 4 * typesize] = hi;
      dst[o + 5 * typesize] = hi >>> 8;
      dst[o + 6 * typesize] = hi >>> 16;
      dst[o + 7 * typesize] = hi >>> 24;
    }
  }
  const body = n * typesize;
  if (body < size) dst.set(src.subarray(srcAt + body, srcAt + size), dstAt + body);
}
