/**
 * Decoding a Blosc 1.x frame (anything c-blosc 1.21 writes), checked as c-blosc checks it
 * (blosc_run_decompression_with_context and blosc_d): header fields in range, a plain copy
 * exactly header + data long, block starts and stream sizes inside the frame, every stream
 * decoding to exactly its size.
 *
 * Copies: a block that was not shuffled is decoded straight into its place in the output; a
 * shuffled one into a scratch block (reused across calls), then unshuffled into its place. A
 * stream stored raw (its size equals the stream's) is one `set`.
 */

import { bitunshuffle } from "./bitshuffle.ts";
import {
  FLAG_BITSHUFFLE,
  FLAG_MEMCPYED,
  FLAG_RESERVED,
  FLAG_SHUFFLE,
  FORMAT_VERSION,
  HEADER_BYTES,
  MAX_BLOCKSIZE,
  readHeader,
  readInt32,
  splitsOnDecode,
} from "./format.ts";
import { decodesApart, decompressStream, inflateStream } from "./inner.ts";
import { unshuffle } from "./shuffle.ts";

let scratch = new Uint8Array(0);

/** A scratch block of at least `size` bytes, reused between calls (one thread per worker). */
function scratchOf(size: number): Uint8Array {
  if (scratch.length < size) scratch = new Uint8Array(size);
  return scratch;
}

function refuse(why: string): never {
  throw new Error(`blosc: cannot decode this frame: ${why}`);
}

/** The uncompressed size a frame says it holds (its header's nbytes). */
export function decodedSize(frame: Uint8Array): number {
  return readHeader(frame).nbytes;
}

/**
 * Decodes `frame` into `out` (which must hold at least the frame's nbytes; the result is its
 * first nbytes) or, without `out`, into one new buffer.
 */
export function decodeFrame(frame: Uint8Array, out?: Uint8Array): Uint8Array {
  const h = readHeader(frame);
  const { nbytes, blocksize, typesize, flags, cbytes } = h;
  if (nbytes < 0) refuse(`its header's nbytes is negative (${nbytes})`);
  if (out !== undefined && out.length < nbytes) {
    throw new Error(
      `blosc: the frame holds ${nbytes} bytes; the output has room for ${out.length}`,
    );
  }
  const dest = out === undefined
    ? new Uint8Array(nbytes)
    : out.length === nbytes
    ? out
    : out.subarray(0, nbytes);
  if (nbytes === 0) return dest;
  if (h.version !== FORMAT_VERSION) {
    refuse(`format version ${h.version} (c-blosc 1.x reads and writes version 2)`);
  }
  if (blocksize <= 0 || blocksize > nbytes || blocksize > MAX_BLOCKSIZE) {
    refuse(`block size ${blocksize} for ${nbytes} bytes`);
  }
  if (typesize === 0) refuse("typesize 0");
  if (flags & FLAG_RESERVED) refuse(`reserved flag 0x08 set (flags 0x${flags.toString(16)})`);
  if (cbytes > frame.length) refuse(`it says ${cbytes} bytes but has ${frame.length}`);
  if (flags & FLAG_MEMCPYED) {
    if (cbytes !== nbytes + HEADER_BYTES) {
      refuse(`a plain copy of ${nbytes} bytes cannot be ${cbytes} bytes long`);
    }
    dest.set(frame.subarray(HEADER_BYTES, HEADER_BYTES + nbytes));
    return dest;
  }
  if (h.versionlz !== 1) refuse(`compressor format version ${h.versionlz} (c-blosc 1.x: 1)`);
  const format = flags >>> 5;
  const nblocks = Math.ceil(nbytes / blocksize);
  if (nblocks > Math.trunc((cbytes - HEADER_BYTES) / 4)) {
    refuse(`${nblocks} block starts do not fit in ${cbytes} bytes`);
  }
  const leftover = nbytes % blocksize;
  for (let j = 0; j < nblocks; j++) {
    const last = j === nblocks - 1 && leftover > 0;
    const bsize = last ? leftover : blocksize;
    const start = readInt32(frame, HEADER_BYTES + 4 * j);
    decodeBlock(frame, cbytes, format, flags, typesize, bsize, last, start, dest, j * blocksize);
  }
  return dest;
}

/** c-blosc's blosc_d: one block's streams into `dest` at `at`, unshuffled. */
function decodeBlock(
  frame: Uint8Array,
  cbytes: number,
  format: number,
  flags: number,
  typesize: number,
  bsize: number,
  leftover: boolean,
  start: number,
  dest: Uint8Array,
  at: number,
): void {
  const shuffled = (flags & FLAG_SHUFFLE) !== 0 && typesize > 1;
  const bitshuffled = !shuffled && (flags & FLAG_BITSHUFFLE) !== 0 && bsize >= typesize;
  const nsplits = splitsOnDecode(flags, typesize, bsize, leftover);
  const neblock = Math.trunc(bsize / nsplits);
  let target = shuffled || bitshuffled ? scratchOf(bsize) : dest;
  const targetAt = target === dest ? at : 0;
  let offset = start;
  for (let k = 0; k < nsplits; k++) {
    if (offset < 0 || offset > cbytes - 4) refuse(`a stream starts at ${offset}, past ${cbytes}`);
    const csize = readInt32(frame, offset);
    offset += 4;
    if (csize < 0 || csize > cbytes - offset) {
      refuse(`a stream of ${csize} bytes at ${offset} runs past ${cbytes}`);
    }
    const streamAt = targetAt + k * neblock;
    if (csize === neblock) {
      target.set(frame.subarray(offset, offset + neblock), streamAt);
    } else if (nsplits === 1 && target !== dest && decodesApart(format)) {
      // One zlib or zstd stream, shuffled: unshuffle from the runtime's buffer, no copy.
      target = inflateStream(format, frame, offset, csize, neblock);
    } else {
      decompressStream(format, frame, offset, csize, target, streamAt, neblock);
    }
    offset += csize;
  }
  // c-blosc decodes nsplits * neblock bytes; a block not a multiple of its splits cannot occur
  // (blocks are split only by their typesize, of which they are a multiple).
  if (shuffled) unshuffle(typesize, bsize, target, 0, dest, at);
  else if (bitshuffled) bitunshuffle(typesize, bsize, target, 0, dest, at);
}
