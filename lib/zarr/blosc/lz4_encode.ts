/**
 * An LZ4 block compressor that makes the same bytes as lz4 1.9's LZ4_compress_fast with a fresh
 * state and a bounded output (what c-blosc's lz4_wrap_compress calls, with acceleration
 * 10 - clevel): same hash tables (a 16-bit one of 2^13 entries hashing 4 bytes for inputs under
 * 64 KiB + 11, a 32-bit one of 2^12 entries hashing 5 bytes otherwise), same skip schedule
 * (the step grows by one every 2^6 misses times the acceleration), same back-extension and
 * same "does it still fit" tests, which make it give up (0) exactly where lz4 does.
 *
 * The 5-byte hash is a 64-bit multiply in C; here its top 12 bits are computed from 16-bit
 * partial products in doubles (exact below 2^53) and one 32-bit `Math.imul`.
 */

const MINMATCH = 4;
const LASTLITERALS = 5;
const MFLIMIT = 12;
const MIN_LENGTH = MFLIMIT + 1;
const SKIP_TRIGGER = 6;
const MAX_DISTANCE = 65535;
const LIMIT_64K = 65536 + MFLIMIT - 1;
const ACCELERATION_MAX = 65537;

/** 2654435761, Knuth's multiplier, as a signed 32-bit integer for Math.imul. */
const PRIME32 = -1640531535;
/** The low and high 32-bit halves of lz4's 5-byte prime 889523592379. */
const PRIME5_LO = 465362107;
const PRIME5_HI = 207;
const TWO_TO_MINUS_28 = 1 / 268435456;

const table16 = new Uint16Array(1 << 13);
const table32 = new Uint32Array(1 << 12);

function read32(b: Uint8Array, i: number): number {
  return b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
}

/** lz4's LZ4_hash5 for the 32-bit table: bits 52..63 of ((5 bytes at i) << 24) * prime. */
function hash5(b: Uint8Array, i: number): number {
  return hash5Of(read32(b, i), b[i + 4]!);
}

/** hash5 of the bytes whose first four are `low` (little-endian) and fifth is `fifth`. */
function hash5Of(low: number, fifth: number): number {
  // (low * PRIME5_LO) mod 2^40 up to a multiple of 2^40: the low half times the prime, plus
  // the high half's product mod 2^24 (Math.imul's low bits) shifted by 16; exact below 2^46.
  const product = (low & 0xffff) * PRIME5_LO +
    (Math.imul(low >>> 16, PRIME5_LO) & 0xffffff) * 65536;
  const carry = (Math.imul(low, PRIME5_HI) + Math.imul(fifth, PRIME5_LO)) & 0xff;
  return (product * TWO_TO_MINUS_28 + carry * 16) & 0xfff;
}

/** lz4's LZ4_hash4 for the 16-bit table (13 bits). */
function hash4(b: Uint8Array, i: number): number {
  return Math.imul(read32(b, i), PRIME32) >>> 19;
}

/** The hash of position `i` whose first four bytes are `seq`, for the table in use. */
function hashSeq(small: boolean, seq: number, b: Uint8Array, i: number): number {
  return small ? Math.imul(seq, PRIME32) >>> 19 : hash5Of(seq, b[i + 4]!);
}

/** Bytes equal from `a` and `b` onward, `a` stopping before `limit` (lz4's LZ4_count). */
function count(s: Uint8Array, a: number, b: number, limit: number): number {
  const start = a;
  while (a < limit && s[a] === s[b]) {
    a++;
    b++;
  }
  return a - start;
}

/**
 * Compresses `src[srcAt, srcAt + length)` into `dst` from `dstAt`, using at most `maxOut`
 * bytes; returns the compressed size, or 0 when it does not fit (as LZ4_compress_fast does
 * with a bound below LZ4_compressBound).
 */
export function lz4Compress(
  src: Uint8Array,
  srcAt: number,
  length: number,
  dst: Uint8Array,
  dstAt: number,
  maxOut: number,
  acceleration: number,
): number {
  const accel = acceleration < 1 ? 1 : Math.min(acceleration, ACCELERATION_MAX);
  const small = length < LIMIT_64K;
  if (small) table16.fill(0);
  else table32.fill(0);
  return small
    ? compress(src, srcAt, length, dst, dstAt, maxOut, accel, true)
    : compress(src, srcAt, length, dst, dstAt, maxOut, accel, false);
}

function compress(
  src: Uint8Array,
  base: number,
  length: number,
  dst: Uint8Array,
  dstAt: number,
  maxOut: number,
  accel: number,
  small: boolean,
): number {
  const iend = base + length;
  const mflimitPlusOne = iend - MFLIMIT + 1;
  const matchlimit = iend - LASTLITERALS;
  const olimit = dstAt + maxOut;
  const t16 = table16;
  const t32 = table32;
  let ip = base;
  let anchor = base;
  let op = dstAt;

  if (length >= MIN_LENGTH) {
    if (small) t16[hash4(src, ip)] = 0;
    else t32[hash5(src, ip)] = 0;
    ip++;
    let forwardSeq = read32(src, ip);
    let forwardH = hashSeq(small, forwardSeq, src, ip);
    main: for (;;) {
      let match = 0;
      // Find a match, stepping faster the longer none is found.
      let forwardIp = ip;
      let step = 1;
      let searchMatchNb = accel << SKIP_TRIGGER;
      let found = false;
      while (!found) {
        const h = forwardH;
        const seq = forwardSeq;
        const current = forwardIp - base;
        const matchIndex = small ? t16[h]! : t32[h]!;
        ip = forwardIp;
        forwardIp += step;
        step = searchMatchNb++ >>> SKIP_TRIGGER;
        if (forwardIp > mflimitPlusOne) break main;
        match = base + matchIndex;
        forwardSeq = read32(src, forwardIp);
        forwardH = hashSeq(small, forwardSeq, src, forwardIp);
        if (small) t16[h] = current;
        else t32[h] = current;
        found = (small || matchIndex + MAX_DISTANCE >= current) &&
          src[match] === (seq & 0xff) && read32(src, match) === seq;
      }
      // Catch up backwards.
      while (ip > anchor && match > base && src[ip - 1] === src[match - 1]) {
        ip--;
        match--;
      }
      // Literals.
      const litLength = ip - anchor;
      let token = op++;
      if (op + litLength + (2 + 1 + LASTLITERALS) + Math.trunc(litLength / 255) > olimit) {
        return 0;
      }
      if (litLength >= 15) {
        dst[token] = 15 << 4;
        let len = litLength - 15;
        for (; len >= 255; len -= 255) dst[op++] = 255;
        dst[op++] = len;
      } else {
        dst[token] = litLength << 4;
      }
      if (litLength > 32) {
        dst.set(src.subarray(anchor, ip), op);
        op += litLength;
      } else {
        for (let k = anchor; k < ip; k++) dst[op++] = src[k]!;
      }
      // Matches, as long as the next position matches at once.
      let again = true;
      while (again) {
        const offset = ip - match;
        dst[op] = offset & 0xff;
        dst[op + 1] = offset >>> 8;
        op += 2;
        let matchCode = count(src, ip + MINMATCH, match + MINMATCH, matchlimit);
        ip += matchCode + MINMATCH;
        if (op + (1 + LASTLITERALS) + Math.trunc((matchCode + 240) / 255) > olimit) return 0;
        if (matchCode >= 15) {
          dst[token] = dst[token]! + 15;
          matchCode -= 15;
          for (; matchCode >= 255; matchCode -= 255) dst[op++] = 255;
          dst[op++] = matchCode;
        } else {
          dst[token] = dst[token]! + matchCode;
        }
        anchor = ip;
        if (ip >= mflimitPlusOne) break main;
        // Fill the table at ip - 2, then test ip itself.
        if (small) t16[hash4(src, ip - 2)] = ip - 2 - base;
        else t32[hash5(src, ip - 2)] = ip - 2 - base;
        const h = small ? hash4(src, ip) : hash5(src, ip);
        const current = ip - base;
        const matchIndex = small ? t16[h]! : t32[h]!;
        match = base + matchIndex;
        if (small) t16[h] = current;
        else t32[h] = current;
        again = (small || matchIndex + MAX_DISTANCE >= current) &&
          read32(src, match) === read32(src, ip);
        if (again) {
          token = op++;
          dst[token] = 0;
        }
      }
      ip++;
      forwardSeq = read32(src, ip);
      forwardH = hashSeq(small, forwardSeq, src, ip);
    }
  }
  // Last literals.
  const lastRun = iend - anchor;
  if (op + lastRun + 1 + Math.trunc((lastRun + 255 - 15) / 255) > olimit) return 0;
  if (lastRun >= 15) {
    dst[op++] = 15 << 4;
    let rest = lastRun - 15;
    for (; rest >= 255; rest -= 255) dst[op++] = 255;
    dst[op++] = rest;
  } else {
    dst[op++] = lastRun << 4;
  }
  dst.set(src.subarray(anchor, iend), op);
  op += lastRun;
  return op - dstAt;
}
