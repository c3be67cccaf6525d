/**
 * The Blosc 1.x frame as c-blosc 1.21 writes it (README_CHUNK_FORMAT.rst): a 16-byte header,
 * then (unless the frame is a plain copy) one int32 start offset per block, then each block as
 * one or more "splits", each an int32 compressed size followed by that many bytes. Also the two
 * rules of c-blosc's compressor that decide the layout: the block size (`compute_blocksize`)
 * and whether blocks are split into one stream per byte of the element (`split_block`, in its
 * default FORWARD_COMPAT mode). Both must match c-blosc's exactly so that a frame written here
 * has the blocks, and so the compression ratio, of one written by numcodecs.
 */

/** Header length; also c-blosc's BLOSC_MAX_OVERHEAD (a plain copy is header + data). */
export const HEADER_BYTES = 16;
/** The only frame format version c-blosc 1.x writes and reads. */
export const FORMAT_VERSION = 2;
/** Every inner codec's format version byte (versionlz) in c-blosc 1.x. */
export const CODEC_FORMAT_VERSION = 1;
/** Buffers below this many bytes are stored as a plain copy (MIN_BUFFERSIZE). */
export const MIN_BUFFER = 128;
/** The largest typesize blosc shuffles with; a larger one is treated as 1. */
export const MAX_TYPESIZE = 255;
/** Blocks are split only when typesize is at most this (MAX_SPLITS). */
export const MAX_SPLITS = 16;
/** The largest input c-blosc accepts (INT_MAX - header). */
export const MAX_BUFFER = 2 ** 31 - 1 - HEADER_BYTES;
/** The largest block size c-blosc accepts ((INT_MAX - 255 * 4) / 3). */
export const MAX_BLOCKSIZE = Math.floor((2 ** 31 - 1 - MAX_TYPESIZE * 4) / 3);

/** Header flag bits. */
export const FLAG_SHUFFLE = 0x01;
export const FLAG_MEMCPYED = 0x02;
export const FLAG_BITSHUFFLE = 0x04;
export const FLAG_RESERVED = 0x08;
export const FLAG_DONT_SPLIT = 0x10;

/** The compressors (numcodecs' `cname`) and their c-blosc codes. */
export type Cname = "blosclz" | "lz4" | "lz4hc" | "snappy" | "zlib" | "zstd";
export const CNAMES: readonly Cname[] = ["blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"];

/** The library format stored in the header's top three flag bits (lz4hc writes lz4's). */
export const FORMAT_OF: Readonly<Record<Cname, number>> = {
  blosclz: 0,
  lz4: 1,
  lz4hc: 1,
  snappy: 2,
  zlib: 3,
  zstd: 4,
};

/** A header format code's library name, as c-blosc's messages give it. */
export const LIBRARY_OF_FORMAT: readonly string[] = ["blosclz", "lz4", "snappy", "zlib", "zstd"];

/** The 16-byte header's fields. */
export interface BloscHeader {
  version: number;
  versionlz: number;
  flags: number;
  typesize: number;
  nbytes: number;
  blocksize: number;
  cbytes: number;
}

export function readInt32(bytes: Uint8Array, at: number): number {
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24));
}

export function writeInt32(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = value & 0xff;
  bytes[at + 1] = (value >>> 8) & 0xff;
  bytes[at + 2] = (value >>> 16) & 0xff;
  bytes[at + 3] = (value >>> 24) & 0xff;
}

/** The header of `frame`, refused when the frame is shorter than one. */
export function readHeader(frame: Uint8Array): BloscHeader {
  if (frame.length < HEADER_BYTES) {
    throw new Error(
      `blosc: a frame of ${frame.length} bytes is shorter than the 16-byte Blosc header`,
    );
  }
  return {
    version: frame[0]!,
    versionlz: frame[1]!,
    flags: frame[2]!,
    typesize: frame[3]!,
    nbytes: readInt32(frame, 4),
    blocksize: readInt32(frame, 8),
    cbytes: readInt32(frame, 12),
  };
}

export function writeHeader(frame: Uint8Array, header: BloscHeader): void {
  frame[0] = header.version;
  frame[1] = header.versionlz;
  frame[2] = header.flags;
  frame[3] = header.typesize;
  writeInt32(frame, 4, header.nbytes);
  writeInt32(frame, 8, header.blocksize);
  writeInt32(frame, 12, header.cbytes);
}

/** The codecs c-blosc calls "high compression ratio" ones: they get twice the block size. */
function isHighRatio(cname: Cname): boolean {
  return cname === "lz4hc" || cname === "zlib" || cname === "zstd";
}

/**
 * Whether the compressor splits blocks of `blocksize` bytes into `typesize` streams: c-blosc's
 * FORWARD_COMPAT rule (every codec but zstd, when typesize is at most 16 and a stream holds at
 * least 128 bytes).
 */
export function splitsBlocks(cname: Cname, typesize: number, blocksize: number): boolean {
  return cname !== "zstd" && typesize <= MAX_SPLITS &&
    Math.trunc(blocksize / typesize) >= MIN_BUFFER;
}

/**
 * How many streams the decompressor reads for one block (c-blosc's blosc_d): the frame's
 * "don't split" flag, the rule above without the codec (frames from before the flag existed),
 * and never for the short last block.
 */
export function splitsOnDecode(
  flags: number,
  typesize: number,
  blocksize: number,
  leftover: boolean,
): number {
  const split = (flags & FLAG_DONT_SPLIT) === 0 && typesize <= MAX_SPLITS &&
    Math.trunc(blocksize / typesize) >= MIN_BUFFER && !leftover;
  return split ? typesize : 1;
}

/**
 * c-blosc 1.21's compute_blocksize: from the L1-sized start scaled by the level (doubled for
 * high-ratio codecs), or the forced size clamped to [128, MAX_BLOCKSIZE]; enlarged for codecs
 * that split (x typesize within [64 KiB, 1 MiB]); never above the buffer, and a multiple of the
 * typesize.
 */
export function computeBlocksize(
  cname: Cname,
  clevel: number,
  typesize: number,
  nbytes: number,
  forced: number,
): number {
  if (nbytes < typesize) return 1;
  const L1 = 32 * 1024;
  let blocksize = nbytes;
  if (forced > 0) {
    blocksize = Math.min(Math.max(forced, MIN_BUFFER), MAX_BLOCKSIZE);
  } else if (nbytes >= L1) {
    blocksize = isHighRatio(cname) ? 2 * L1 : L1;
    blocksize = Math.trunc(blocksize * LEVEL_FACTOR[clevel]!);
    if (clevel === 9 && isHighRatio(cname)) blocksize *= 2;
  }
  if (clevel > 0 && splitsBlocks(cname, typesize, blocksize)) {
    if (blocksize > 1 << 18) blocksize = 1 << 18;
    blocksize *= typesize;
    if (blocksize < 1 << 16) blocksize = 1 << 16;
    if (blocksize > 1 << 20) blocksize = 1 << 20;
  }
  if (blocksize > nbytes) blocksize = nbytes;
  if (blocksize > typesize) blocksize = Math.trunc(blocksize / typesize) * typesize;
  return blocksize;
}

/** compute_blocksize's scaling of the L1-sized start by clevel 0..9. */
const LEVEL_FACTOR: readonly number[] = [0.25, 0.5, 1, 2, 4, 4, 8, 8, 8, 8];
