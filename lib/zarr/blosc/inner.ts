/**
 * The compressors inside a Blosc frame, one stream at a time: BloscLZ, LZ4 and LZ4HC in
 * TypeScript (ports that make c-blosc's bytes), zlib and zstd through `node:zlib`, which both
 * Bun and Deno implement natively. Each compressor gets blosc's arguments: the level mapped as
 * c-blosc maps it, and a bound on the output, past which the stream "does not compress" (0).
 */

import zlib from "node:zlib";
import { blosclzCompress, blosclzDecode } from "./blosclz.ts";
import { SNAPPY_REFUSED } from "./config.ts";
import { type Cname, LIBRARY_OF_FORMAT } from "./format.ts";
import { lz4Decode } from "./lz4_decode.ts";
import { lz4Compress } from "./lz4_encode.ts";
import { lz4hcCompress } from "./lz4hc_encode.ts";
import { outputPiece } from "../native_compression.ts";

/**
 * node:zlib's zstd functions, which Bun 1.4 and Deno 2.9 have natively but the @types/node
 * this checkout type-checks against (Node 20's) does not declare.
 */
interface ZstdZlib {
  zstdCompressSync(
    input: Uint8Array,
    options: { params: Record<number, number>; pledgedSrcSize: number; chunkSize: number },
  ): Uint8Array;
  zstdDecompressSync(
    input: Uint8Array,
    options: { maxOutputLength: number; chunkSize: number },
  ): Uint8Array;
  constants: { ZSTD_c_compressionLevel: number };
}
const zstd = zlib as unknown as ZstdZlib;

/** zstd's level for blosc's clevel (zstd_wrap_compress: 2 * clevel - 1, and 9 is zstd's 22). */
function zstdLevel(clevel: number): number {
  return clevel < 9 ? 2 * clevel - 1 : 22;
}

/**
 * zlib's level for blosc's clevel: the same number, except level 1, which both runtimes'
 * zlib-ng makes with its "quick" strategy, 7 % larger than zlib's level 1 on shuffled floats;
 * its level 2 is within 0.5 % of zlib's level 1 (c-blosc passes clevel through to compress2).
 */
function zlibLevel(clevel: number): number {
  return clevel === 1 ? 2 : clevel;
}

/**
 * Compresses `length` bytes of `src` from `srcAt` into `dst` from `dstAt`, at most `maxOut`
 * bytes; returns the size written, 0 when it did not fit or the compressor gave up.
 */
export function compressStream(
  cname: Cname,
  clevel: number,
  split: boolean,
  src: Uint8Array,
  srcAt: number,
  length: number,
  dst: Uint8Array,
  dstAt: number,
  maxOut: number,
): number {
  switch (cname) {
    case "blosclz":
      return blosclzCompress(clevel, src, srcAt, length, dst, dstAt, maxOut, split);
    case "lz4":
      // c-blosc's get_accel: acceleration 10 - clevel.
      return lz4Compress(src, srcAt, length, dst, dstAt, maxOut, 10 - clevel);
    case "lz4hc":
      return lz4hcCompress(src, srcAt, length, dst, dstAt, maxOut, clevel);
    case "zlib":
    case "zstd": {
      const input = src.subarray(srcAt, srcAt + length);
      // One output piece of the stream's size (node:zlib joins 16 KiB pieces otherwise).
      const chunkSize = outputPiece(length + 1024);
      const out = cname === "zlib"
        ? zlib.deflateSync(input, { level: zlibLevel(clevel), chunkSize })
        : zstd.zstdCompressSync(input, {
          params: { [zstd.constants.ZSTD_c_compressionLevel]: zstdLevel(clevel) },
          pledgedSrcSize: length,
          chunkSize,
        });
      if (out.length > maxOut) return 0;
      dst.set(out, dstAt);
      return out.length;
    }
    case "snappy":
      throw new Error(SNAPPY_REFUSED);
  }
}

/** Whether streams of this library format decode into a buffer of their own (native codecs). */
export function decodesApart(format: number): boolean {
  return format === 3 || format === 4;
}

/**
 * Decompresses the zlib (format 3) or zstd (4) stream `src[srcAt, srcAt + csize)` into a new
 * buffer of the runtime's (node:zlib cannot write into a given one), refusing more than
 * `length` bytes or anything but `length`.
 */
export function inflateStream(
  format: number,
  src: Uint8Array,
  srcAt: number,
  csize: number,
  length: number,
): Uint8Array {
  const input = src.subarray(srcAt, srcAt + csize);
  let out: Uint8Array;
  try {
    const chunkSize = outputPiece(length);
    out = format === 3
      ? zlib.inflateSync(input, { maxOutputLength: length, chunkSize })
      : zstd.zstdDecompressSync(input, { maxOutputLength: length, chunkSize });
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new Error(`blosc: corrupt ${LIBRARY_OF_FORMAT[format]} stream (${why})`);
  }
  if (out.length !== length) {
    throw new Error(
      `blosc: a ${LIBRARY_OF_FORMAT[format]} stream decoded to ${out.length} bytes ` +
        `where the frame says ${length}`,
    );
  }
  return out;
}

/**
 * Decompresses the stream `src[srcAt, srcAt + csize)` of library format `format` (the header's
 * top three flag bits) into exactly `length` bytes of `dst` from `dstAt`; refuses a stream that
 * does not decode to that length.
 */
export function decompressStream(
  format: number,
  src: Uint8Array,
  srcAt: number,
  csize: number,
  dst: Uint8Array,
  dstAt: number,
  length: number,
): void {
  let end: number;
  switch (format) {
    case 0:
      end = blosclzDecode(src, srcAt, srcAt + csize, dst, dstAt, dstAt + length);
      break;
    case 1:
      end = lz4Decode(src, srcAt, srcAt + csize, dst, dstAt, dstAt + length);
      break;
    case 3:
    case 4: {
      const out = inflateStream(format, src, srcAt, csize, length);
      dst.set(out, dstAt);
      end = dstAt + out.length;
      break;
    }
    case 2:
      throw new Error(SNAPPY_REFUSED);
    default:
      throw new Error(
        `blosc: the frame's compressor format ${format} is none of c-blosc 1.x's ` +
          `(0 blosclz, 1 lz4/lz4hc, 2 snappy, 3 zlib, 4 zstd)`,
      );
  }
  if (end !== dstAt + length) {
    throw new Error(
      `blosc: a ${LIBRARY_OF_FORMAT[format]} stream decoded to ${end - dstAt} bytes ` +
        `where the frame says ${length}`,
    );
  }
}
