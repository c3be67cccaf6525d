/**
 * LZ4HC for blosc's levels 1-9: lz4 1.9's LZ4_compress_HC with a fresh state and a bounded
 * output, which for levels up to 9 is the hash-chain parser (LZ4HC_compress_hashChain): a
 * 2^15-entry hash of 4 bytes, a 64 Ki chain of 16-bit deltas, 2^(level-1) candidates per
 * search (2 below level 3), three overlapping matches weighed against each other before one is
 * written, and at level 9 the repeated-pattern shortcut. Same decisions, same bytes; 0 when the
 * output does not fit, exactly where lz4 gives up. Levels 10-12 (the optimal parser) are never
 * asked for by blosc, whose clevel stops at 9.
 *
 * Indices are positions + 64 Ki, as in lz4 (its window starts 64 KiB in so that "no entry"
 * (0) is always out of reach); the dictionary paths lz4 has for streaming are never taken for
 * one independent block and are left out.
 */

const MINMATCH = 4;
const LASTLITERALS = 5;
const MFLIMIT = 12;
const MIN_LENGTH = MFLIMIT + 1;
const MAX_DISTANCE = 65535;
const OPTIMAL_ML = 15 - 1 + MINMATCH;
const PREFIX = 65536;
const PRIME32 = -1640531535;
/** Candidates searched per level 0..9 (lz4hc's clTable). */
const ATTEMPTS: readonly number[] = [2, 2, 2, 4, 8, 16, 32, 64, 128, 256];

const hashTable = new Uint32Array(1 << 15);
const chainTable = new Uint16Array(1 << 16);
let base = 0;
let nextToUpdate = PREFIX;
/** Where the last search's best match starts in the input, and its source. */
let foundStart = 0;
let foundMatch = 0;

function read32(b: Uint8Array, i: number): number {
  return b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
}

function hashAt(b: Uint8Array, i: number): number {
  return Math.imul(read32(b, i), PRIME32) >>> 17;
}

function count(s: Uint8Array, a: number, b: number, limit: number): number {
  const start = a;
  while (a < limit - 3 && read32(s, a) === read32(s, b)) {
    a += 4;
    b += 4;
  }
  while (a < limit && s[a] === s[b]) {
    a++;
    b++;
  }
  return a - start;
}

/** Bytes from `at` on (before `end`) that continue the 4-byte `pattern` (LZ4HC_countPattern). */
function countPattern(s: Uint8Array, at: number, end: number, pattern: number): number {
  let i = at;
  while (i < end && s[i] === ((pattern >>> (((i - at) & 3) << 3)) & 0xff)) i++;
  return i - at;
}

/** Bytes before `at` (not before `low`) that continue `pattern` backwards. */
function reverseCountPattern(s: Uint8Array, at: number, low: number, pattern: number): number {
  let i = at;
  while (i > low && s[i - 1] === ((pattern >>> ((3 - ((at - i) & 3)) << 3)) & 0xff)) i--;
  return at - i;
}

/** lz4's LZ4HC_protectDictEnd: false for the three indices just below the prefix. */
function protectDictEnd(index: number): boolean {
  return ((PREFIX - 1 - index) >>> 0) >= 3;
}

function insert(s: Uint8Array, ip: number): void {
  const target = ip - base + PREFIX;
  for (let idx = nextToUpdate; idx < target; idx++) {
    const h = hashAt(s, base + idx - PREFIX);
    const delta = idx - hashTable[h]!;
    chainTable[idx & 0xffff] = delta > MAX_DISTANCE ? MAX_DISTANCE : delta;
    hashTable[h] = idx;
  }
  nextToUpdate = target;
}

/**
 * LZ4HC_InsertAndGetWiderMatch without dictionaries or chain swap: the longest match for `ip`
 * that may start as far back as `low`, longer than `longest`; sets foundStart and foundMatch.
 */
function widerMatch(
  s: Uint8Array,
  ip: number,
  low: number,
  high: number,
  longest: number,
  attempts: number,
  patternAnalysis: boolean,
): number {
  const ipIndex = ip - base + PREFIX;
  const lowest = PREFIX + MAX_DISTANCE + 1 > ipIndex ? PREFIX : ipIndex - MAX_DISTANCE;
  const lookBack = ip - low;
  const pattern = read32(s, ip);
  let repeat = 0; // 0 untested, 1 not a repeat, 2 confirmed
  let srcPatternLength = 0;
  insert(s, ip);
  let matchIndex = hashTable[hashAt(s, ip)]!;
  while (matchIndex >= lowest && attempts > 0) {
    attempts--;
    const matchPtr = base + matchIndex - PREFIX;
    const a = low + longest - 1;
    const b = matchPtr - lookBack + longest - 1;
    if (s[a] === s[b] && s[a + 1] === s[b + 1] && read32(s, matchPtr) === pattern) {
      let back = 0;
      if (lookBack) {
        const min = Math.max(low - ip, base - matchPtr);
        while (back > min && s[ip + back - 1] === s[matchPtr + back - 1]) back--;
      }
      const matchLength = MINMATCH + count(s, ip + MINMATCH, matchPtr + MINMATCH, high) - back;
      if (matchLength > longest) {
        longest = matchLength;
        foundMatch = matchPtr + back;
        foundStart = ip + back;
      }
    }
    const distNextMatch = chainTable[matchIndex & 0xffff]!;
    if (patternAnalysis && distNextMatch === 1) {
      const candidate = matchIndex - 1;
      if (repeat === 0) {
        if ((pattern & 0xffff) === pattern >>> 16 && (pattern & 0xff) === pattern >>> 24) {
          repeat = 2;
          srcPatternLength = countPattern(s, ip + 4, high, pattern) + 4;
        } else {
          repeat = 1;
        }
      }
      if (repeat === 2 && candidate >= lowest && protectDictEnd(candidate)) {
        const candidatePtr = base + candidate - PREFIX;
        if (read32(s, candidatePtr) === pattern) {
          const forward = countPattern(s, candidatePtr + 4, high, pattern) + 4;
          let backLength = reverseCountPattern(s, candidatePtr, base, pattern);
          backLength = candidate - Math.max(candidate - backLength, lowest);
          const segment = backLength + forward;
          if (segment >= srcPatternLength && forward <= srcPatternLength) {
            const next = candidate + forward - srcPatternLength;
            matchIndex = protectDictEnd(next) ? next : PREFIX;
          } else {
            const next = candidate - backLength;
            if (!protectDictEnd(next)) {
              matchIndex = PREFIX;
            } else {
              matchIndex = next;
              if (lookBack === 0) {
                const maxML = Math.min(segment, srcPatternLength);
                if (longest < maxML) {
                  if (ipIndex - matchIndex > MAX_DISTANCE) break;
                  longest = maxML;
                  foundMatch = base + matchIndex - PREFIX;
                  foundStart = ip;
                }
                const distToNextPattern = chainTable[matchIndex & 0xffff]!;
                if (distToNextPattern > matchIndex) break;
                matchIndex -= distToNextPattern;
              }
            }
          }
          continue;
        }
      }
    }
    matchIndex -= distNextMatch;
  }
  return longest;
}

/** Where encodeSequence left the input (ip = anchor after it). */
let seqIp = 0;

/**
 * Writes the literals from `anchor` to `ip` and a match of `length` at `ref`
 * (LZ4HC_encodeSequence with a bounded output); returns the new output end, -1 when it does
 * not fit. Sets seqIp to ip + length.
 */
function encodeSequence(
  s: Uint8Array,
  d: Uint8Array,
  ip: number,
  anchor: number,
  op: number,
  length: number,
  ref: number,
  oend: number,
): number {
  const token = op++;
  const literals = ip - anchor;
  if (op + Math.trunc(literals / 255) + literals + (2 + 1 + LASTLITERALS) > oend) return -1;
  let t: number;
  if (literals >= 15) {
    t = 15 << 4;
    let len = literals - 15;
    for (; len >= 255; len -= 255) d[op++] = 255;
    d[op++] = len;
  } else {
    t = literals << 4;
  }
  if (literals > 32) {
    d.set(s.subarray(anchor, ip), op);
    op += literals;
  } else {
    for (let k = anchor; k < ip; k++) d[op++] = s[k]!;
  }
  const offset = ip - ref;
  d[op++] = offset & 0xff;
  d[op++] = offset >>> 8;
  let len = length - MINMATCH;
  if (op + Math.trunc(len / 255) + (1 + LASTLITERALS) > oend) return -1;
  if (len >= 15) {
    t += 15;
    len -= 15;
    for (; len >= 255; len -= 255) d[op++] = 255;
    d[op++] = len;
  } else {
    t += len;
  }
  d[token] = t;
  seqIp = ip + length;
  return op;
}

/**
 * Compresses `src[srcAt, srcAt + length)` at LZ4HC `level` (1-9) into `dst` from `dstAt`, in
 * at most `maxOut` bytes; returns the compressed size or 0 when it does not fit.
 */
export function lz4hcCompress(
  src: Uint8Array,
  srcAt: number,
  length: number,
  dst: Uint8Array,
  dstAt: number,
  maxOut: number,
  level: number,
): number {
  const attempts = ATTEMPTS[Math.min(Math.max(level < 1 ? 9 : level, 0), 9)]!;
  const patternAnalysis = attempts > 128;
  hashTable.fill(0);
  chainTable.fill(0);
  base = srcAt;
  nextToUpdate = PREFIX;
  const s = src;
  const iend = srcAt + length;
  const mflimit = iend - MFLIMIT;
  const matchlimit = iend - LASTLITERALS;
  const oend = dstAt + maxOut;
  let ip = srcAt;
  let anchor = ip;
  let op = dstAt;
  if (length >= MIN_LENGTH) {
    while (ip <= mflimit) {
      let ml = widerMatch(s, ip, ip, matchlimit, MINMATCH - 1, attempts, patternAnalysis);
      if (ml < MINMATCH) {
        ip++;
        continue;
      }
      let ref = foundMatch;
      let start0 = ip, ref0 = ref, ml0 = ml;
      let start2 = 0, ref2 = 0, ml2 = 0, start3 = 0, ref3 = 0, ml3 = 0;
      let search2 = true;
      for (;;) {
        if (search2) {
          if (ip + ml <= mflimit) {
            ml2 = widerMatch(s, ip + ml - 2, ip, matchlimit, ml, attempts, patternAnalysis);
            ref2 = foundMatch;
            start2 = foundStart;
          } else {
            ml2 = ml;
          }
          if (ml2 === ml) {
            op = encodeSequence(s, dst, ip, anchor, op, ml, ref, oend);
            if (op < 0) return 0;
            ip = anchor = seqIp;
            break;
          }
          if (start0 < ip && start2 < ip + ml0) {
            ip = start0;
            ref = ref0;
            ml = ml0;
          }
          if (start2 - ip < 3) {
            ml = ml2;
            ip = start2;
            ref = ref2;
            continue;
          }
        }
        search2 = false;
        // Search3: ml2 > ml, ip + 3 <= start2.
        if (start2 - ip < OPTIMAL_ML) {
          let newMl = ml > OPTIMAL_ML ? OPTIMAL_ML : ml;
          if (ip + newMl > start2 + ml2 - MINMATCH) newMl = start2 - ip + ml2 - MINMATCH;
          const correction = newMl - (start2 - ip);
          if (correction > 0) {
            start2 += correction;
            ref2 += correction;
            ml2 -= correction;
          }
        }
        if (start2 + ml2 <= mflimit) {
          ml3 = widerMatch(s, start2 + ml2 - 3, start2, matchlimit, ml2, attempts, patternAnalysis);
          ref3 = foundMatch;
          start3 = foundStart;
        } else {
          ml3 = ml2;
        }
        if (ml3 === ml2) {
          if (start2 < ip + ml) ml = start2 - ip;
          op = encodeSequence(s, dst, ip, anchor, op, ml, ref, oend);
          if (op < 0) return 0;
          anchor = seqIp;
          op = encodeSequence(s, dst, start2, anchor, op, ml2, ref2, oend);
          if (op < 0) return 0;
          ip = anchor = seqIp;
          break;
        }
        if (start3 < ip + ml + 3) {
          if (start3 >= ip + ml) {
            if (start2 < ip + ml) {
              const correction = ip + ml - start2;
              start2 += correction;
              ref2 += correction;
              ml2 -= correction;
              if (ml2 < MINMATCH) {
                start2 = start3;
                ref2 = ref3;
                ml2 = ml3;
              }
            }
            op = encodeSequence(s, dst, ip, anchor, op, ml, ref, oend);
            if (op < 0) return 0;
            anchor = seqIp;
            ip = start3;
            ref = ref3;
            ml = ml3;
            start0 = start2;
            ref0 = ref2;
            ml0 = ml2;
            search2 = true;
            continue;
          }
          start2 = start3;
          ref2 = ref3;
          ml2 = ml3;
          continue;
        }
        // Three ascending matches: write the first, shortened to end where the second starts.
        if (start2 < ip + ml) {
          if (start2 - ip < OPTIMAL_ML) {
            if (ml > OPTIMAL_ML) ml = OPTIMAL_ML;
            if (ip + ml > start2 + ml2 - MINMATCH) ml = start2 - ip + ml2 - MINMATCH;
            const correction = ml - (start2 - ip);
            if (correction > 0) {
              start2 += correction;
              ref2 += correction;
              ml2 -= correction;
            }
          } else {
            ml = start2 - ip;
          }
        }
        op = encodeSequence(s, dst, ip, anchor, op, ml, ref, oend);
        if (op < 0) return 0;
        anchor = seqIp;
        ip = start2;
        ref = ref2;
        ml = ml2;
        start2 = start3;
        ref2 = ref3;
        ml2 = ml3;
      }
    }
  }
  const lastRun = iend - anchor;
  const total = 1 + Math.trunc((lastRun + 255 - 15) / 255) + lastRun;
  if (op + total > oend) return 0;
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
