/**
 * Encoding a Blosc 1.x frame as c-blosc 1.21 does for numcodecs (blosc_compress with an output
 * of nbytes + 16 bytes, one thread): the same block size and split decision (format.ts), the
 * same per-stream bound (a stream may use no more than its own size, nor more than what is
 * left of nbytes + 16), a stream that does not compress stored raw, and a buffer that does not
 * fit at all (or clevel 0, or under 128 bytes) stored as a plain copy ("memcpyed"). So a frame
 * written here has c-blosc's layout, and for BloscLZ, LZ4 and LZ4HC its bytes.
 */

import { bitshuffle } from "./bitshuffle.ts";
import type { BloscConfig } from "./config.ts";
import {
  CODEC_FORMAT_VERSION,
  computeBlocksize,
  FLAG_BITSHUFFLE,
  FLAG_DONT_SPLIT,
  FLAG_MEMCPYED,
  FLAG_SHUFFLE,
  FORMAT_OF,
  FORMAT_VERSION,
  HEADER_BYTES,
  MAX_BUFFER,
  MIN_BUFFER,
  splitsBlocks,
  writeHeader,
  writeInt32,
} from "./format.ts";
import { compressStream } from "./inner.ts";
import { shuffle } from "./shuffle.ts";

let scratch = new Uint8Array(0);

function scratchOf(size: number): Uint8Array {
  if (scratch.length < size) scratch = new Uint8Array(size);
  return scratch;
}

/** What one frame's blocks share. */
interface Job {
  readonly config: BloscConfig;
  readonly flags: number;
  readonly typesize: number;
  readonly dest: Uint8Array;
  /** The output's capacity: nbytes + 16, as numcodecs gives c-blosc. */
  readonly maxbytes: number;
}

/**
 * Encodes `src` with `config` into a new frame (a view of a buffer of nbytes + 16 bytes, the
 * most a frame can take).
 */
export function encodeFrame(src: Uint8Array, config: BloscConfig): Uint8Array {
  const nbytes = src.length;
  if (nbytes > MAX_BUFFER) {
    throw new Error(`blosc: cannot compress ${nbytes} bytes (c-blosc's limit is ${MAX_BUFFER})`);
  }
  const { cname, clevel, typesize } = config;
  const blocksize = computeBlocksize(cname, clevel, typesize, nbytes, config.blocksize);
  const nblocks = Math.ceil(nbytes / blocksize);
  const leftover = nbytes % blocksize;
  let flags = FORMAT_OF[cname] << 5;
  if (config.shuffle === "shuffle") flags |= FLAG_SHUFFLE;
  if (config.shuffle === "bitshuffle") flags |= FLAG_BITSHUFFLE;
  if (!splitsBlocks(cname, typesize, blocksize)) flags |= FLAG_DONT_SPLIT;
  const maxbytes = nbytes + HEADER_BYTES;
  const dest = new Uint8Array(maxbytes);
  let cbytes = 0;
  if (clevel > 0 && nbytes >= MIN_BUFFER) {
    const job: Job = { config, flags, typesize, dest, maxbytes };
    cbytes = HEADER_BYTES + 4 * nblocks;
    for (let j = 0; j < nblocks; j++) {
      writeInt32(dest, HEADER_BYTES + 4 * j, cbytes);
      const last = j === nblocks - 1 && leftover > 0;
      const written = encodeBlock(
        job,
        src,
        j * blocksize,
        last ? leftover : blocksize,
        last,
        cbytes,
      );
      if (written === 0) {
        cbytes = 0;
        break;
      }
      cbytes += written;
    }
  }
  if (cbytes === 0) {
    // Level 0, a buffer under 128 bytes, or one that does not compress: a plain copy.
    flags |= FLAG_MEMCPYED;
    dest.set(src, HEADER_BYTES);
    cbytes = maxbytes;
  }
  writeHeader(dest, {
    version: FORMAT_VERSION,
    versionlz: CODEC_FORMAT_VERSION,
    flags,
    typesize,
    nbytes,
    blocksize,
    cbytes,
  });
  return dest.subarray(0, cbytes);
}

/**
 * c-blosc's blosc_c: shuffles one block of `bsize` bytes from `src` at `at` and writes its
 * streams at `ntbytes`; returns the bytes written, 0 when the frame cannot hold it.
 */
function encodeBlock(
  job: Job,
  src: Uint8Array,
  at: number,
  bsize: number,
  leftover: boolean,
  ntbytes: number,
): number {
  const { config, flags, typesize, dest, maxbytes } = job;
  let stream = src;
  let streamAt = at;
  if ((flags & FLAG_SHUFFLE) !== 0 && typesize > 1) {
    stream = scratchOf(bsize);
    streamAt = 0;
    shuffle(typesize, bsize, src, at, stream, 0);
  } else if ((flags & FLAG_BITSHUFFLE) !== 0 && bsize >= typesize) {
    stream = scratchOf(bsize);
    streamAt = 0;
    bitshuffle(typesize, bsize, src, at, stream, 0);
  }
  const split = (flags & FLAG_DONT_SPLIT) === 0;
  const nsplits = split && !leftover ? typesize : 1;
  const neblock = Math.trunc(bsize / nsplits);
  let written = 0;
  for (let k = 0; k < nsplits; k++) {
    const sizeAt = ntbytes;
    ntbytes += 4;
    written += 4;
    let maxout = neblock;
    if (ntbytes + maxout > maxbytes) {
      maxout = maxbytes - ntbytes;
      if (maxout <= 0) return 0;
    }
    const from = streamAt + k * neblock;
    let cbytes = compressStream(
      config.cname,
      config.clevel,
      split,
      stream,
      from,
      neblock,
      dest,
      ntbytes,
      maxout,
    );
    if (cbytes === 0 || cbytes === neblock) {
      // The stream does not compress: stored raw, if the frame still has room for it.
      if (ntbytes + neblock > maxbytes) return 0;
      dest.set(stream.subarray(from, from + neblock), ntbytes);
      cbytes = neblock;
    }
    writeInt32(dest, sizeAt, cbytes);
    ntbytes += cbytes;
    written += cbytes;
  }
  return written;
}
