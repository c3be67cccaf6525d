/**
 * The LZ4 block format's decoder (what LZ4_decompress_safe reads; lz4 and lz4hc write the same
 * format). A block is a series of sequences: a token (literal length in its high 4 bits, match
 * length - 4 in its low 4, 15 meaning "more bytes follow, 255 meaning more again"), the
 * literals, a 2-byte little-endian offset back into the output, the match. The last sequence is
 * literals only.
 *
 * Speed: shuffled float data decode into thousands of short sequences per block, where the
 * cost is the exit branch of each variable-length copy loop. So, as lz4's own decoder does, a
 * short literal run (under 15 bytes) or short match (under 19) away from both ends is copied
 * "wild": a fixed 8 or 16 (18) bytes, unrolled, past its end into output that later sequences
 * overwrite. A byte-by-byte forward copy is LZ77's meaning for any offset, so overlapping
 * matches need no special case there. Long literal runs are one `set` of a subarray and long
 * matches one `copyWithin`; a run of one byte is a `fill`; an overlapping long match is copied
 * in chunks that double.
 */

/** Literal runs and matches at least this long are copied by the engine. */
const ENGINE_COPY = 32;
/** Wild copies need this much room left in the input and in the output. */
const INPUT_MARGIN = 20;
const OUTPUT_MARGIN = 40;

function corrupt(what: string): never {
  throw new Error(`blosc: corrupt lz4 stream (${what})`);
}

/**
 * Decodes the LZ4 block `src[srcAt, srcEnd)` into `dst` from `dstAt`, writing at most up to
 * `dstEnd`; returns the end of what was written. Refuses a stream that reads or writes out of
 * bounds or points before `dstAt`. Bytes between the returned end and `dstEnd` may have been
 * written (wild copies).
 */
export function lz4Decode(
  src: Uint8Array,
  srcAt: number,
  srcEnd: number,
  dst: Uint8Array,
  dstAt: number,
  dstEnd: number,
): number {
  let ip = srcAt;
  let op = dstAt;
  const wildIp = srcEnd - INPUT_MARGIN;
  const wildOp = dstEnd - OUTPUT_MARGIN;
  if (ip >= srcEnd) corrupt("empty");
  for (;;) {
    const token = src[ip++]!;
    let length = token >>> 4;
    if (length < 15 && ip < wildIp && op < wildOp) {
      // Short literals, wild: the last sequence is never here (it ends within 15 bytes of the
      // input's end), so no end test is needed after them.
      dst[op] = src[ip]!;
      dst[op + 1] = src[ip + 1]!;
      dst[op + 2] = src[ip + 2]!;
      dst[op + 3] = src[ip + 3]!;
      dst[op + 4] = src[ip + 4]!;
      dst[op + 5] = src[ip + 5]!;
      dst[op + 6] = src[ip + 6]!;
      dst[op + 7] = src[ip + 7]!;
      if (length > 8) {
        dst[op + 8] = src[ip + 8]!;
        dst[op + 9] = src[ip + 9]!;
        dst[op + 10] = src[ip + 10]!;
        dst[op + 11] = src[ip + 11]!;
        dst[op + 12] = src[ip + 12]!;
        dst[op + 13] = src[ip + 13]!;
        dst[op + 14] = src[ip + 14]!;
        dst[op + 15] = src[ip + 15]!;
      }
      ip += length;
      op += length;
    } else {
      if (length === 15) {
        let more = 255;
        while (more === 255) {
          if (ip >= srcEnd) corrupt("literal length past the end");
          more = src[ip++]!;
          length += more;
        }
      }
      if (length > 0) {
        if (ip + length > srcEnd || op + length > dstEnd) corrupt("literals out of bounds");
        if (length < ENGINE_COPY) {
          for (const end = ip + length; ip < end;) dst[op++] = src[ip++]!;
        } else {
          dst.set(src.subarray(ip, ip + length), op);
          ip += length;
          op += length;
        }
      }
      if (ip >= srcEnd) {
        if (ip === srcEnd) return op;
        corrupt("past the end");
      }
    }
    if (ip + 2 > srcEnd) corrupt("truncated offset");
    const offset = src[ip]! | (src[ip + 1]! << 8);
    ip += 2;
    let from = op - offset;
    if (offset === 0 || from < dstAt) corrupt("offset before the output");
    length = token & 15;
    if (length < 15 && op < wildOp) {
      // Short match, wild and forward (right for overlapping offsets too).
      dst[op] = dst[from]!;
      dst[op + 1] = dst[from + 1]!;
      dst[op + 2] = dst[from + 2]!;
      dst[op + 3] = dst[from + 3]!;
      dst[op + 4] = dst[from + 4]!;
      dst[op + 5] = dst[from + 5]!;
      dst[op + 6] = dst[from + 6]!;
      dst[op + 7] = dst[from + 7]!;
      if (length > 4) {
        dst[op + 8] = dst[from + 8]!;
        dst[op + 9] = dst[from + 9]!;
        dst[op + 10] = dst[from + 10]!;
        dst[op + 11] = dst[from + 11]!;
        dst[op + 12] = dst[from + 12]!;
        dst[op + 13] = dst[from + 13]!;
        dst[op + 14] = dst[from + 14]!;
        dst[op + 15] = dst[from + 15]!;
        dst[op + 16] = dst[from + 16]!;
        dst[op + 17] = dst[from + 17]!;
      }
      op += length + 4;
      continue;
    }
    if (length === 15) {
      let more = 255;
      while (more === 255) {
        if (ip >= srcEnd) corrupt("match length past the end");
        more = src[ip++]!;
        length += more;
      }
    }
    length += 4;
    const end = op + length;
    if (end > dstEnd) corrupt("match out of bounds");
    if (offset >= length) {
      if (length < ENGINE_COPY) {
        while (op < end) dst[op++] = dst[from++]!;
      } else {
        dst.copyWithin(op, from, end - offset);
        op = end;
      }
    } else if (offset === 1) {
      dst.fill(dst[from]!, op, end);
      op = end;
    } else if (length < ENGINE_COPY) {
      while (op < end) dst[op++] = dst[from++]!;
    } else {
      // Overlapping: the first `offset` bytes repeat; copy them in chunks that double.
      let chunk = offset;
      while (op + chunk <= end) {
        dst.copyWithin(op, from, from + chunk);
        op += chunk;
        chunk = op - from;
      }
      if (op < end) dst.copyWithin(op, from, from + (end - op));
      op = end;
    }
  }
}
