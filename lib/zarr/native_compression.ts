/**
 * gzip, zlib and zstd through the runtime's own C implementations (`node:zlib`, the same API in Bun
 * and Deno, so it lives here rather than in lib/runtime).
 * Bun and Deno both have `zstdCompressSync` / `zstdDecompressSync`; the Node type declarations
 * this project carries predate them, so they are reached through the typed view below, and a
 * runtime without them gets a clear error instead of a TypeError.
 */

import * as zlib from "node:zlib";
import { Buffer } from "node:buffer";

/** zstd.h's parameter numbers (ZSTD_cParameter), the keys of `params`. */
const ZSTD_C_COMPRESSION_LEVEL = 100;
const ZSTD_C_CONTENT_SIZE_FLAG = 200;
const ZSTD_C_CHECKSUM_FLAG = 201;

interface ZstdFunctions {
  zstdCompressSync(
    data: Uint8Array,
    options: { params: Record<number, number>; pledgedSrcSize: number; chunkSize: number },
  ): Buffer;
  zstdDecompressSync(data: Uint8Array, options: { chunkSize: number }): Buffer;
}

function zstdFunctions(): ZstdFunctions {
  const z = zlib as unknown as Partial<ZstdFunctions>;
  if (typeof z.zstdCompressSync !== "function" || typeof z.zstdDecompressSync !== "function") {
    throw new Error(
      "Zstandard is not available: this runtime's node:zlib has no zstdCompressSync; run blockwise's binary or Bun 1.2.15 / Deno 2.4 or later",
    );
  }
  return z as ZstdFunctions;
}

/** node:zlib's default output piece (16 KiB), and the smallest it takes (zlib's Z_MIN_CHUNK). */
const DEFAULT_PIECE = 16 * 1024;
const MIN_PIECE = 64;
/** The largest output piece asked for up front, whatever a header says. */
const MAX_PIECE = 64 * 1024 * 1024;

/**
 * The size of node:zlib's output pieces (`chunkSize`) for an output of about `expected` bytes.
 * node:zlib's synchronous functions write their output in pieces of 16 KiB and join them at the
 * end; one piece the size of the whole output saves the joining and the growing: a 1 MiB float32
 * chunk encodes in zstd 3 in 1.5 ms instead of 2.0 under Bun (1.8 instead of 3.0 under Deno) and
 * decodes in 1.2 instead of 1.6 (docs/design/CODECS.md, "Output pieces"). A wrong guess costs
 * nothing but the piece: the output goes on into more pieces.
 */
export function outputPiece(expected: number): number {
  if (!Number.isFinite(expected) || expected <= 0) return DEFAULT_PIECE;
  return Math.min(Math.max(Math.ceil(expected), MIN_PIECE), MAX_PIECE);
}

/** The room a compressor's output needs at most (zstd's and deflate's bounds are below it). */
function compressedBound(length: number): number {
  return length + (length >>> 7) + 1024;
}

/**
 * The decoded size a zstd frame's header states (Frame_Content_Size), or undefined when it has
 * none or `data` is not a zstd frame.
 */
export function zstdContentSize(data: Uint8Array): number | undefined {
  if (data.length < 6 || data[0] !== 0x28 || data[1] !== 0xb5 || data[2] !== 0x2f) return;
  if (data[3] !== 0xfd) return;
  const descriptor = data[4]!;
  const sizeFlag = descriptor >> 6;
  const singleSegment = (descriptor & 0x20) !== 0;
  const dictionaryBytes = [0, 1, 2, 4][descriptor & 3]!;
  const sizeBytes = [singleSegment ? 1 : 0, 2, 4, 8][sizeFlag]!;
  const at = 5 + (singleSegment ? 0 : 1) + dictionaryBytes;
  if (sizeBytes === 0 || at + sizeBytes > data.length) return;
  let size = 0;
  for (let i = Math.min(sizeBytes, 6) - 1; i >= 0; i--) size = size * 256 + data[at + i]!;
  if (sizeBytes === 8 && (data[at + 6] !== 0 || data[at + 7] !== 0)) return;
  return sizeFlag === 1 ? size + 256 : size;
}

/** The size a gzip stream's trailer states for its last member (mod 2^32), if it has one. */
function gzipStatedSize(data: Uint8Array): number | undefined {
  if (data.length < 18 || data[0] !== 0x1f || data[1] !== 0x8b) return;
  const end = data.length;
  return (data[end - 4]! | data[end - 3]! << 8 | data[end - 2]! << 16 | data[end - 1]! << 24) >>> 0;
}

/** A Uint8Array over the same bytes (Buffers from node:zlib are Uint8Arrays already). */
function bytesOf(b: Buffer): Uint8Array {
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

/**
 * Decoded bytes that are a whole buffer of their own. Deno hands outputs under 4 KiB out of a
 * shared 8 KiB pool (as Node's Buffer.allocUnsafe); zarrita's bytes codec encodes the whole
 * `buffer` of a chunk's elements, so a decoded chunk that zarr.set then writes back must own it.
 */
function ownBytes(b: Buffer): Uint8Array {
  return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength
    ? bytesOf(b)
    : new Uint8Array(b);
}

/**
 * A zstd encoder in C installed from above (lib/runtime/zstd_native.ts: the system's libzstd
 * with a context kept per thread); undefined from `compress` leaves the frame to node:zlib.
 */
export interface NativeZstdEncoder {
  readonly description: string;
  compress(data: Uint8Array, level: number, checksum: boolean): Uint8Array | undefined;
}

let nativeZstd: NativeZstdEncoder | null = null;

/** Installs `encoder` for this thread's zstd encodes, or with null goes back to node:zlib. */
export function setNativeZstd(encoder: NativeZstdEncoder | null): void {
  nativeZstd = encoder;
}

export function zstdCompress(data: Uint8Array, level: number, checksum: boolean): Uint8Array {
  const native = nativeZstd?.compress(data, level, checksum);
  if (native !== undefined) return native;
  const params = {
    [ZSTD_C_COMPRESSION_LEVEL]: level,
    [ZSTD_C_CHECKSUM_FLAG]: checksum ? 1 : 0,
    [ZSTD_C_CONTENT_SIZE_FLAG]: 1,
  };
  // The frame must say its decoded size: numcodecs (zarr-python) refuses a frame without it as
  // "invalid input data". Deno writes one only when told the size in advance.
  const pledgedSrcSize = data.length;
  const chunkSize = outputPiece(compressedBound(data.length));
  return bytesOf(zstdFunctions().zstdCompressSync(data, { params, pledgedSrcSize, chunkSize }));
}

export function zstdDecompress(data: Uint8Array): Uint8Array {
  const chunkSize = outputPiece(zstdContentSize(data) ?? 0);
  return ownBytes(zstdFunctions().zstdDecompressSync(data, { chunkSize }));
}

/**
 * The runtime's level for a gzip/zlib level. Bun's and Deno's node:zlib is zlib-ng, whose level 1
 * (deflate_quick: static Huffman codes) writes float chunks 6-13 % larger than C zlib's level 1,
 * what zarr-python writes, and can write more bytes than it was given; its level 2 is within
 * 1 % of C zlib's level 1 (smaller on float data) and still faster than it. The stream format is
 * the same at every level, so level 1 runs as level 2 (docs/design/CODECS.md, "gzip level 1").
 */
function deflateLevel(level: number): number {
  return level === 1 ? 2 : level;
}

export function gzipCompress(data: Uint8Array, level: number): Uint8Array {
  const chunkSize = outputPiece(compressedBound(data.length));
  return bytesOf(zlib.gzipSync(data, { level: deflateLevel(level), chunkSize }));
}

/** A gzip stream (several members are concatenated, as gzip itself does). */
export function gzipDecompress(data: Uint8Array): Uint8Array {
  // The trailer's size is a hint only (modulo 2^32, the last member's): bounded by what deflate
  // can expand to (1032:1) so that a forged trailer cannot ask for a huge piece.
  const stated = Math.min(gzipStatedSize(data) ?? 0, data.length * 1032);
  return ownBytes(zlib.gunzipSync(data, { chunkSize: outputPiece(stated) }));
}

/** A zlib stream (RFC 1950), what numcodecs' Zlib writes. */
export function zlibCompress(data: Uint8Array, level: number): Uint8Array {
  const chunkSize = outputPiece(compressedBound(data.length));
  return bytesOf(zlib.deflateSync(data, { level: deflateLevel(level), chunkSize }));
}

export function zlibDecompress(data: Uint8Array): Uint8Array {
  return ownBytes(zlib.inflateSync(data));
}
