/**
 * BloscLZ 2.5.1, c-blosc 1.21's own codec (a FastLZ descendant), both ways.
 *
 * Format: a control byte below 32 starts a run of ctrl + 1 literals; otherwise its top three
 * bits are the match length - 2 (7 meaning "extension bytes follow, 255 meaning more"), its
 * low five bits the high bits of the distance - 1, and the next byte the low bits. A distance
 * of 8191 or more is written as 31/255 followed by a 16-bit big-endian (distance - 8192). The
 * first byte has bit 5 set as a marker, which the decoder masks off.
 *
 * The compressor first probes a quarter of the input at its end (a dry run with a 4096-entry
 * table) and gives up at once when the estimated ratio is below the level's threshold; then
 * it compresses with 2^(12..14) hash entries, shortens every match by 3 or 4 bytes ("ipshift")
 * and keeps only matches of at least 3 or 4 bytes. The same numbers as c-blosc, so the same
 * bytes.
 */

const MAX_COPY = 32;
const MAX_DISTANCE = 8191;
const MAX_FARDISTANCE = 65535 + MAX_DISTANCE - 1;
const HASH_LOG = 14;
const HASH_LOG_PROBE = 12;
const PRIME32 = -1640531535;
/** Below this estimated ratio the level gives up (c-blosc's cratio_ per clevel). */
const MIN_RATIO: readonly number[] = [0, 2, 1.5, 1.2, 1.2, 1.2, 1.2, 1.15, 1.1, 1.0];
const HASH_LOGS: readonly number[] = [0, 12, 13, 14, 14, 14, 14, 14, 14, 14];

const table = new Uint32Array(1 << HASH_LOG);
const probeTable = new Uint16Array(1 << HASH_LOG_PROBE);

function read32(b: Uint8Array, i: number): number {
  return b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
}

/**
 * The end of a match or run found by c-blosc's get_match / get_run: one past the first byte
 * where `ref` and `ip` differ, but no further than `bound`.
 */
function matchEnd(s: Uint8Array, ip: number, bound: number, ref: number): number {
  while (ip < bound) {
    if (s[ref++] !== s[ip++]) return ip;
  }
  return ip;
}

/** c-blosc's get_cratio: the ratio a dry run over `s[at, at + maxlen)` would reach. */
function estimateRatio(s: Uint8Array, at: number, maxlen: number, minlen: number, shift: number) {
  const limit = Math.min(maxlen, 1 << HASH_LOG_PROBE);
  const bound = at + limit - 1;
  const ipLimit = at + limit - 12;
  const htab = probeTable;
  htab.fill(0);
  let ip = at;
  let oc = 5;
  let copy = 4;
  while (ip < ipLimit) {
    const anchor = ip;
    const h = Math.imul(read32(s, ip), PRIME32) >>> (32 - HASH_LOG_PROBE);
    let ref = at + htab[h]!;
    let distance = anchor - ref;
    htab[h] = anchor - at;
    if (distance === 0 || distance >= MAX_FARDISTANCE || read32(s, ref) !== read32(s, ip)) {
      oc++;
      ip = anchor + 1;
      if (++copy === MAX_COPY) {
        copy = 0;
        oc++;
      }
      continue;
    }
    ref += 4;
    distance--;
    ip = matchEnd(s, anchor + 4, bound, ref) - shift;
    const len = ip - anchor;
    if (len < minlen) {
      oc++;
      ip = anchor + 1;
      if (++copy === MAX_COPY) {
        copy = 0;
        oc++;
      }
      continue;
    }
    if (!copy) oc--;
    copy = 0;
    if (len >= 7) oc += Math.trunc((len - 7) / 255) + 1;
    oc += distance < MAX_DISTANCE ? 2 : 4;
    htab[Math.imul(read32(s, ip), PRIME32) >>> (32 - HASH_LOG_PROBE)] = ip - at;
    ip += 2;
    oc++;
  }
  return (ip - at) / oc;
}

/**
 * Compresses `src[srcAt, srcAt + length)` into `dst` from `dstAt` in at most `maxOut` bytes at
 * `clevel` (1-9); `split` says whether the frame's blocks are split (it picks the shift and
 * minimum match). Returns the compressed size, 0 when it does not pay or does not fit.
 */
export function blosclzCompress(
  clevel: number,
  src: Uint8Array,
  srcAt: number,
  length: number,
  dst: Uint8Array,
  dstAt: number,
  maxOut: number,
  split: boolean,
): number {
  const maxlen = Math.trunc(length / 4);
  const ratio = estimateRatio(src, srcAt + length - maxlen, maxlen, 3, 3);
  if (ratio < MIN_RATIO[clevel]!) return 0;
  const low = !split || ratio < 4;
  const ipshift = low ? 3 : 4;
  const minlen = low ? 3 : 4;
  const hashlog = HASH_LOGS[clevel]!;
  const hashShift = 32 - hashlog;
  if (length < 16 || maxOut < 66) return 0;
  const s = src;
  const d = dst;
  const htab = table;
  htab.fill(0, 0, 1 << hashlog);
  const ibase = srcAt;
  const bound = srcAt + length - 1;
  const ipLimit = srcAt + length - 12;
  const opLimit = dstAt + maxOut;
  let ip = srcAt;
  let op = dstAt;
  let copy = 4;
  d[op++] = MAX_COPY - 1;
  d[op++] = s[ip++]!;
  d[op++] = s[ip++]!;
  d[op++] = s[ip++]!;
  d[op++] = s[ip++]!;
  while (ip < ipLimit) {
    const anchor = ip;
    const seq = read32(s, ip);
    const h = Math.imul(seq, PRIME32) >>> hashShift;
    let ref = ibase + htab[h]!;
    let distance = anchor - ref;
    htab[h] = anchor - ibase;
    let literal = distance === 0 || distance >= MAX_FARDISTANCE || read32(s, ref) !== seq;
    let len = 0;
    if (!literal) {
      ref += 4;
      distance--;
      ip = matchEnd(s, anchor + 4, bound, ref) - ipshift;
      len = ip - anchor;
      literal = len < minlen || (len <= 5 && distance >= MAX_DISTANCE);
    }
    if (literal) {
      if (op + 2 > opLimit) return 0;
      d[op++] = s[anchor]!;
      ip = anchor + 1;
      if (++copy === MAX_COPY) {
        copy = 0;
        d[op++] = MAX_COPY - 1;
      }
      continue;
    }
    if (copy) d[op - copy - 1] = copy - 1;
    else op--;
    copy = 0;
    if (distance < MAX_DISTANCE) {
      if (len < 7) {
        if (op + 2 > opLimit) return 0;
        d[op++] = (len << 5) + (distance >>> 8);
        d[op++] = distance & 255;
      } else {
        if (op + 1 > opLimit) return 0;
        d[op++] = (7 << 5) + (distance >>> 8);
        for (len -= 7; len >= 255; len -= 255) {
          if (op + 1 > opLimit) return 0;
          d[op++] = 255;
        }
        if (op + 2 > opLimit) return 0;
        d[op++] = len;
        d[op++] = distance & 255;
      }
    } else {
      distance -= MAX_DISTANCE;
      if (len < 7) {
        if (op + 4 > opLimit) return 0;
        d[op++] = (len << 5) + 31;
      } else {
        if (op + 1 > opLimit) return 0;
        d[op++] = (7 << 5) + 31;
        for (len -= 7; len >= 255; len -= 255) {
          if (op + 1 > opLimit) return 0;
          d[op++] = 255;
        }
        if (op + 4 > opLimit) return 0;
        d[op++] = len;
      }
      d[op++] = 255;
      d[op++] = distance >>> 8;
      d[op++] = distance & 255;
    }
    const next = read32(s, ip);
    htab[Math.imul(next, PRIME32) >>> hashShift] = ip - ibase;
    ip++;
    if (clevel === 9) htab[Math.imul(next >>> 8, PRIME32) >>> hashShift] = ip - ibase;
    ip++;
    if (op + 1 > opLimit) return 0;
    d[op++] = MAX_COPY - 1;
  }
  while (ip <= bound) {
    if (op + 2 > opLimit) return 0;
    d[op++] = s[ip++]!;
    if (++copy === MAX_COPY) {
      copy = 0;
      d[op++] = MAX_COPY - 1;
    }
  }
  if (copy) d[op - copy - 1] = copy - 1;
  else op--;
  d[dstAt] = d[dstAt]! | (1 << 5);
  return op - dstAt;
}

function corrupt(what: string): never {
  throw new Error(`blosc: corrupt blosclz stream (${what})`);
}

/**
 * Decodes the BloscLZ stream `src[srcAt, srcEnd)` into `dst` from `dstAt`, up to `dstEnd`;
 * returns the end of what was written. Like c-blosc, a match with nothing after it ends the
 * stream without being copied (the compressor always ends on literals).
 */
export function blosclzDecode(
  src: Uint8Array,
  srcAt: number,
  srcEnd: number,
  dst: Uint8Array,
  dstAt: number,
  dstEnd: number,
): number {
  let ip = srcAt;
  let op = dstAt;
  if (ip >= srcEnd) return op;
  let ctrl = src[ip++]! & 31;
  for (;;) {
    if (ctrl >= 32) {
      let len = (ctrl >>> 5) - 1;
      let ofs = (ctrl & 31) << 8;
      if (len === 6) {
        let code = 255;
        while (code === 255) {
          if (ip + 1 >= srcEnd) corrupt("match length past the end");
          code = src[ip++]!;
          len += code;
        }
      } else if (ip + 1 >= srcEnd) {
        corrupt("match past the end");
      }
      const code = src[ip++]!;
      len += 3;
      let ref = op - ofs - code;
      if (code === 255 && ofs === 31 << 8) {
        if (ip + 1 >= srcEnd) corrupt("far distance past the end");
        ofs = (src[ip]! << 8) + src[ip + 1]!;
        ip += 2;
        ref = op - ofs - MAX_DISTANCE;
      }
      if (op + len > dstEnd) corrupt("match out of bounds");
      if (ref - 1 < dstAt) corrupt("distance before the output");
      if (ip >= srcEnd) break;
      ctrl = src[ip++]!;
      ref--;
      const end = op + len;
      if (ref === op - 1) {
        dst.fill(dst[ref]!, op, end);
        op = end;
      } else if (op - ref >= len && len >= 32) {
        dst.copyWithin(op, ref, ref + len);
        op = end;
      } else {
        while (op < end) dst[op++] = dst[ref++]!;
      }
    } else {
      ctrl++;
      if (op + ctrl > dstEnd) corrupt("literals out of bounds");
      if (ip + ctrl > srcEnd) corrupt("literals past the end");
      for (const end = ip + ctrl; ip < end;) dst[op++] = src[ip++]!;
      if (ip >= srcEnd) break;
      ctrl = src[ip++]!;
    }
  }
  return op;
}
