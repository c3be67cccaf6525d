/**
 * The LZ4 block format's decoder (what LZ4_decompress_safe reads; lz4 and lz4hc write the same
 * format). A block is a series of sequences: a token (literal length in its high 4 bits, match
 * length - 4 in its low 4, 15 meaning "more bytes follow, 255 meaning more again"), the
 * literals, a 2-byte little-endian offset back into the output, the match. The last sequence is
 * literals only.
 *
 * Speed: long literal runs are one `set` of a subarray and long matches one `copyWithin` (both
 * memmove inside the engine); short ones are byte loops, which beat the cost of making a view.
 * A match that overlaps its own output (offset < length) is copied in doubling chunks, a run of
 * one byte is a `fill`.
 */

/** Literal runs and matches at least this long are copied by the engine. */
const ENGINE_COPY = 64;

function corrupt(what: string): never {
  throw new Error(`blosc: corrupt lz4 stream (${what})`);
}

/**
 * Decodes the LZ4 block `src[srcAt, srcEnd)` into `dst` from `dstAt`, writing at most up to
 * `dstEnd`; returns the end of what was written. Refuses a stream that reads or writes out of
 * bounds or points before `dstAt`.
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
  if (ip >= srcEnd) corrupt("empty");
  for (;;) {
    const token = src[ip++]!;
    let length = token >>> 4;
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
    if (ip + 2 > srcEnd) corrupt("truncated offset");
    const offset = src[ip]! | (src[ip + 1]! << 8);
    ip += 2;
    let from = op - offset;
    if (offset === 0 || from < dstAt) corrupt("offset before the output");
    length = token & 15;
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
