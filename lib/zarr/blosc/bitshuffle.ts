/**
 * Blosc's bit shuffle (the bitshuffle library's "bit transpose within elements", as c-blosc
 * 1.21 calls it): n elements of `typesize` bytes become 8 * typesize rows of n / 8 bytes, row
 * 8j + k holding bit k of byte j of every element, element 8b + m at bit m of the row's byte b.
 *
 * c-blosc applies it only when n is a multiple of 8 (`blosc_internal_bitshuffle`): then the
 * bytes past the last whole element are copied after the rows; otherwise the whole block is
 * copied unchanged. Both directions are the same 8x8 bit-matrix transpose (an involution) of
 * the eight bytes that sit at one (plane, group) place, done on two 32-bit halves (written out
 * in each loop: a helper would need its 64 bits in shared variables, which costs more).
 *
 * One-byte elements (Zarr v3's default for uint8 is bit-shuffle) take a path through 32-bit
 * words when the buffers allow it: four groups per step, one word per row and two per group,
 * instead of 16 byte accesses per group.
 */

/** A 32-bit view of `length` bytes of `bytes` from `offset`, or null when not 4-aligned. */
function words(bytes: Uint8Array, offset: number, length: number): Int32Array | null {
  const start = bytes.byteOffset + offset;
  if ((start & 3) !== 0 || (length & 3) !== 0) return null;
  return new Int32Array(bytes.buffer, start, length >>> 2);
}

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
  if (typesize === 1 && bitshuffleBytes(rows, src, srcAt, dst, dstAt)) return;
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
  if (typesize === 1 && bitunshuffleBytes(rows, src, srcAt, dst, dstAt)) return;
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

/** `bitshuffle` of 8 * rows one-byte elements through 32-bit words; false when not aligned. */
function bitshuffleBytes(
  rows: number,
  src: Uint8Array,
  srcAt: number,
  dst: Uint8Array,
  dstAt: number,
): boolean {
  if ((rows & 3) !== 0) return false;
  const s = words(src, srcAt, 8 * rows);
  const d = words(dst, dstAt, 8 * rows);
  if (s === null || d === null) return false;
  const w = rows >>> 2; // words per row
  for (let c = 0; c < w; c++) {
    let r0 = 0, r1 = 0, r2 = 0, r3 = 0, r4 = 0, r5 = 0, r6 = 0, r7 = 0;
    for (let g = 0, shift = 0; g < 4; g++, shift += 8) {
      let lo = s[8 * c + 2 * g]!;
      let hi = s[8 * c + 2 * g + 1]!;
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
      r0 |= (lo & 0xff) << shift;
      r1 |= ((lo >>> 8) & 0xff) << shift;
      r2 |= ((lo >>> 16) & 0xff) << shift;
      r3 |= (lo >>> 24) << shift;
      r4 |= (hi & 0xff) << shift;
      r5 |= ((hi >>> 8) & 0xff) << shift;
      r6 |= ((hi >>> 16) & 0xff) << shift;
      r7 |= (hi >>> 24) << shift;
    }
    d[c] = r0;
    d[w + c] = r1;
    d[2 * w + c] = r2;
    d[3 * w + c] = r3;
    d[4 * w + c] = r4;
    d[5 * w + c] = r5;
    d[6 * w + c] = r6;
    d[7 * w + c] = r7;
  }
  return true;
}

/** `bitunshuffle` of 8 * rows one-byte elements through 32-bit words; false when not aligned. */
function bitunshuffleBytes(
  rows: number,
  src: Uint8Array,
  srcAt: number,
  dst: Uint8Array,
  dstAt: number,
): boolean {
  if ((rows & 3) !== 0) return false;
  const s = words(src, srcAt, 8 * rows);
  const d = words(dst, dstAt, 8 * rows);
  if (s === null || d === null) return false;
  const w = rows >>> 2;
  for (let c = 0; c < w; c++) {
    const w0 = s[c]!, w1 = s[w + c]!, w2 = s[2 * w + c]!, w3 = s[3 * w + c]!;
    const w4 = s[4 * w + c]!, w5 = s[5 * w + c]!, w6 = s[6 * w + c]!, w7 = s[7 * w + c]!;
    for (let g = 0, shift = 0; g < 4; g++, shift += 8) {
      let lo = ((w0 >>> shift) & 0xff) | (((w1 >>> shift) & 0xff) << 8) |
        (((w2 >>> shift) & 0xff) << 16) | ((w3 >>> shift) << 24);
      let hi = ((w4 >>> shift) & 0xff) | (((w5 >>> shift) & 0xff) << 8) |
        (((w6 >>> shift) & 0xff) << 16) | ((w7 >>> shift) << 24);
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
      d[8 * c + 2 * g] = lo;
      d[8 * c + 2 * g + 1] = hi;
    }
  }
  return true;
}
