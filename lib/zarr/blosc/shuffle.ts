/**
 * Blosc's byte shuffle: a block of n elements of `typesize` bytes becomes `typesize` planes of n
 * bytes, plane j holding byte j of every element (then the bytes that do not fill an element,
 * copied). Smooth numbers have near-constant high bytes, which the planes put side by side.
 *
 * The common element sizes 2, 4 and 8 go through 32-bit words when both buffers allow it
 * (offsets on a 4-byte boundary, n a multiple of 4): four elements per step, one 32-bit load or
 * store per plane instead of four byte accesses. Everything else takes the byte loop, which is
 * the definition.
 */

/**
 * A 32-bit view of `length` bytes of `bytes` from `offset`, or null when not 4-aligned. Signed:
 * an unsigned load above 2^31 is not an int32, which JavaScriptCore handles 15 % slower.
 */
function words(bytes: Uint8Array, offset: number, length: number): Int32Array | null {
  const start = bytes.byteOffset + offset;
  if ((start & 3) !== 0 || (length & 3) !== 0) return null;
  return new Int32Array(bytes.buffer, start, length >>> 2);
}

/** Shuffles `size` bytes of `src` from `srcAt` into `dst` from `dstAt`. */
export function shuffle(
  typesize: number,
  size: number,
  src: Uint8Array,
  srcAt: number,
  dst: Uint8Array,
  dstAt: number,
): void {
  const n = Math.trunc(size / typesize);
  const body = n * typesize;
  if (!shuffleWords(typesize, n, src, srcAt, dst, dstAt)) {
    for (let j = 0; j < typesize; j++) {
      let o = dstAt + j * n;
      for (let i = srcAt + j, end = srcAt + body; i < end; i += typesize) dst[o++] = src[i]!;
    }
  }
  if (body < size) dst.set(src.subarray(srcAt + body, srcAt + size), dstAt + body);
}

/** Unshuffles `size` bytes of `src` from `srcAt` into `dst` from `dstAt`. */
export function unshuffle(
  typesize: number,
  size: number,
  src: Uint8Array,
  srcAt: number,
  dst: Uint8Array,
  dstAt: number,
): void {
  const n = Math.trunc(size / typesize);
  const body = n * typesize;
  if (!unshuffleWords(typesize, n, src, srcAt, dst, dstAt)) {
    for (let j = 0; j < typesize; j++) {
      let i = srcAt + j * n;
      for (let o = dstAt + j, end = dstAt + body; o < end; o += typesize) dst[o] = src[i++]!;
    }
  }
  if (body < size) dst.set(src.subarray(srcAt + body, srcAt + size), dstAt + body);
}

/** The 32-bit path of `shuffle`; false when the buffers do not allow it. */
function shuffleWords(
  typesize: number,
  n: number,
  src: Uint8Array,
  srcAt: number,
  dst: Uint8Array,
  dstAt: number,
): boolean {
  if ((n & 3) !== 0 || (typesize !== 2 && typesize !== 4 && typesize !== 8)) return false;
  const s = words(src, srcAt, n * typesize);
  const d = words(dst, dstAt, n * typesize);
  if (s === null || d === null) return false;
  const q = n >>> 2; // words per plane
  if (typesize === 4) {
    for (let i = 0, k = 0; i < q; i++, k += 4) {
      const a = s[k]!, b = s[k + 1]!, c = s[k + 2]!, e = s[k + 3]!;
      d[i] = (a & 0xff) | ((b & 0xff) << 8) | ((c & 0xff) << 16) | (e << 24);
      d[q + i] = ((a >>> 8) & 0xff) | (b & 0xff00) | ((c & 0xff00) << 8) | ((e & 0xff00) << 16);
      d[2 * q + i] = ((a >>> 16) & 0xff) | ((b >>> 8) & 0xff00) | (c & 0xff0000) |
        ((e & 0xff0000) << 8);
      d[3 * q + i] = (a >>> 24) | ((b >>> 16) & 0xff00) | ((c >>> 8) & 0xff0000) |
        (e & 0xff000000);
    }
    return true;
  }
  if (typesize === 2) {
    for (let i = 0, k = 0; i < q; i++, k += 2) {
      const a = s[k]!, b = s[k + 1]!; // elements 0,1 in a; 2,3 in b
      d[i] = (a & 0xff) | ((a >>> 8) & 0xff00) | ((b & 0xff) << 16) | ((b & 0xff0000) << 8);
      d[q + i] = ((a >>> 8) & 0xff) | ((a >>> 16) & 0xff00) | ((b & 0xff00) << 8) |
        (b & 0xff000000);
    }
    return true;
  }
  for (let i = 0, k = 0; i < q; i++, k += 8) {
    // typesize 8: element e is words k + 2e (bytes 0-3) and k + 2e + 1 (bytes 4-7)
    for (let h = 0; h < 2; h++) {
      const a = s[k + h]!, b = s[k + 2 + h]!, c = s[k + 4 + h]!, e = s[k + 6 + h]!;
      const p = 4 * h * q + i;
      d[p] = (a & 0xff) | ((b & 0xff) << 8) | ((c & 0xff) << 16) | (e << 24);
      d[p + q] = ((a >>> 8) & 0xff) | (b & 0xff00) | ((c & 0xff00) << 8) | ((e & 0xff00) << 16);
      d[p + 2 * q] = ((a >>> 16) & 0xff) | ((b >>> 8) & 0xff00) | (c & 0xff0000) |
        ((e & 0xff0000) << 8);
      d[p + 3 * q] = (a >>> 24) | ((b >>> 16) & 0xff00) | ((c >>> 8) & 0xff0000) |
        (e & 0xff000000);
    }
  }
  return true;
}

/** The 32-bit path of `unshuffle`; false when the buffers do not allow it. */
function unshuffleWords(
  typesize: number,
  n: number,
  src: Uint8Array,
  srcAt: number,
  dst: Uint8Array,
  dstAt: number,
): boolean {
  if ((n & 3) !== 0 || (typesize !== 2 && typesize !== 4 && typesize !== 8)) return false;
  const s = words(src, srcAt, n * typesize);
  const d = words(dst, dstAt, n * typesize);
  if (s === null || d === null) return false;
  const q = n >>> 2;
  if (typesize === 4) {
    for (let i = 0, k = 0; i < q; i++, k += 4) {
      const p0 = s[i]!, p1 = s[q + i]!, p2 = s[2 * q + i]!, p3 = s[3 * q + i]!;
      d[k] = (p0 & 0xff) | ((p1 & 0xff) << 8) | ((p2 & 0xff) << 16) | (p3 << 24);
      d[k + 1] = ((p0 >>> 8) & 0xff) | (p1 & 0xff00) | ((p2 & 0xff00) << 8) |
        ((p3 & 0xff00) << 16);
      d[k + 2] = ((p0 >>> 16) & 0xff) | ((p1 >>> 8) & 0xff00) | (p2 & 0xff0000) |
        ((p3 & 0xff0000) << 8);
      d[k + 3] = (p0 >>> 24) | ((p1 >>> 16) & 0xff00) | ((p2 >>> 8) & 0xff0000) |
        (p3 & 0xff000000);
    }
    return true;
  }
  if (typesize === 2) {
    for (let i = 0, k = 0; i < q; i++, k += 2) {
      const lo = s[i]!, hi = s[q + i]!; // byte 0 and byte 1 of elements 0..3
      d[k] = (lo & 0xff) | ((hi & 0xff) << 8) | ((lo & 0xff00) << 8) | ((hi & 0xff00) << 16);
      d[k + 1] = ((lo >>> 16) & 0xff) | ((hi >>> 8) & 0xff00) | ((lo >>> 8) & 0xff0000) |
        (hi & 0xff000000);
    }
    return true;
  }
  for (let i = 0, k = 0; i < q; i++, k += 8) {
    for (let h = 0; h < 2; h++) {
      const p = 4 * h * q + i;
      const p0 = s[p]!, p1 = s[p + q]!, p2 = s[p + 2 * q]!, p3 = s[p + 3 * q]!;
      d[k + h] = (p0 & 0xff) | ((p1 & 0xff) << 8) | ((p2 & 0xff) << 16) | (p3 << 24);
      d[k + 2 + h] = ((p0 >>> 8) & 0xff) | (p1 & 0xff00) | ((p2 & 0xff00) << 8) |
        ((p3 & 0xff00) << 16);
      d[k + 4 + h] = ((p0 >>> 16) & 0xff) | ((p1 >>> 8) & 0xff00) | (p2 & 0xff0000) |
        ((p3 & 0xff0000) << 8);
      d[k + 6 + h] = (p0 >>> 24) | ((p1 >>> 16) & 0xff00) | ((p2 >>> 8) & 0xff0000) |
        (p3 & 0xff000000);
    }
  }
  return true;
}
