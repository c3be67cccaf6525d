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
    options: { params: Record<number, number>; pledgedSrcSize: number },
  ): Buffer;
  zstdDecompressSync(data: Uint8Array): Buffer;
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

/** A Uint8Array over the same bytes (Buffers from node:zlib are Uint8Arrays already). */
function bytesOf(b: Buffer): Uint8Array {
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

export function zstdCompress(data: Uint8Array, level: number, checksum: boolean): Uint8Array {
  const params = {
    [ZSTD_C_COMPRESSION_LEVEL]: level,
    [ZSTD_C_CHECKSUM_FLAG]: checksum ? 1 : 0,
    [ZSTD_C_CONTENT_SIZE_FLAG]: 1,
  };
  // The frame must say its decoded size: numcodecs (zarr-python) refuses a frame without it as
  // "invalid input data". Deno writes one only when told the size in advance.
  const pledgedSrcSize = data.length;
  return bytesOf(zstdFunctions().zstdCompressSync(data, { params, pledgedSrcSize }));
}

export function zstdDecompress(data: Uint8Array): Uint8Array {
  return bytesOf(zstdFunctions().zstdDecompressSync(data));
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
  return bytesOf(zlib.gzipSync(data, { level: deflateLevel(level) }));
}

/** A gzip stream (several members are concatenated, as gzip itself does). */
export function gzipDecompress(data: Uint8Array): Uint8Array {
  return bytesOf(zlib.gunzipSync(data));
}

/** A zlib stream (RFC 1950), what numcodecs' Zlib writes. */
export function zlibCompress(data: Uint8Array, level: number): Uint8Array {
  return bytesOf(zlib.deflateSync(data, { level: deflateLevel(level) }));
}

export function zlibDecompress(data: Uint8Array): Uint8Array {
  return bytesOf(zlib.inflateSync(data));
}
