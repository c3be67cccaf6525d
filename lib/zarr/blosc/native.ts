/**
 * Where a native Blosc (the system's c-blosc 1.21 through FFI) plugs into `BloscCodec`. This
 * layer cannot reach FFI (lib/zarr sits below lib/runtime), so the implementation is given from
 * above: lib/runtime/blosc_native.ts installs one with `setNativeBlosc` where libblosc loads,
 * and the TypeScript codec stays the fallback for everything it does not take (see
 * docs/design/CODECS.md, "Blosc through libblosc").
 *
 * C trusts a frame's sizes, so they are checked here before any call: the header's cbytes must
 * lie within the given bytes and its nbytes within the output. A frame the library refuses is
 * handed to the TypeScript decoder, which decodes it or says what is wrong with it.
 */

import type { BloscConfig } from "./config.ts";
import { FLAG_MEMCPYED, HEADER_BYTES, MAX_BLOCKSIZE, MAX_BUFFER } from "./format.ts";
import { giveBackScratch, takeScratch } from "../scratch_buffers.ts";

/** What blosc_cbuffer_sizes reads from a frame's header. */
export interface BloscBufferSizes {
  readonly nbytes: number;
  readonly cbytes: number;
  readonly blocksize: number;
}

/**
 * c-blosc's one-thread context calls. `compress` and `decompress` return what the C functions
 * return (the bytes written; 0 or less: not done). An implementation must refuse, before calling
 * C, a `src` shorter than its header's cbytes or a `dest` shorter than its nbytes.
 */
export interface NativeBlosc {
  /** What it is, for messages and benches: e.g. "libblosc 1.21.3 (libblosc.so.1)". */
  readonly description: string;
  /** Whether `compress` takes `cname` (the others are the TypeScript encoder's). */
  encodes(cname: string): boolean;
  /** blosc_compress_ctx(clevel, shuffle, typesize, src.length, src, dest, dest.length, ...). */
  compress(
    src: Uint8Array,
    typesize: number,
    clevel: number,
    shuffle: number,
    cname: string,
    blocksize: number,
    dest: Uint8Array,
  ): number;
  /** blosc_decompress_ctx(src, dest, dest.length, 1). */
  decompress(src: Uint8Array, dest: Uint8Array): number;
  /** blosc_cbuffer_sizes of a frame of at least 16 bytes. */
  cbufferSizes(src: Uint8Array): BloscBufferSizes;
}

let native: NativeBlosc | null = null;

/** Installs `impl` for every `BloscCodec` of this thread, or with null goes back to TypeScript. */
export function setNativeBlosc(impl: NativeBlosc | null): void {
  native = impl;
}

/** The native Blosc installed in this thread, if any. */
export function nativeBlosc(): NativeBlosc | null {
  return native;
}

/** The compressor format number of zlib in a frame's flags (their top three bits). */
const FORMAT_ZLIB = 3;

const SHUFFLE_NUMBER = { noshuffle: 0, shuffle: 1, bitshuffle: 2 } as const;

/**
 * `src` encoded by the native Blosc as numcodecs asks c-blosc to (an output of nbytes + 16
 * bytes, one thread), or undefined where the TypeScript encoder is to do it (none installed, an
 * empty or too large buffer, a compressor it does not encode, or the library gave up).
 */
export function encodeNative(src: Uint8Array, config: BloscConfig): Uint8Array | undefined {
  const impl = native;
  if (impl === null || src.length === 0 || src.length > MAX_BUFFER) return undefined;
  if (!impl.encodes(config.cname)) return undefined;
  // A reused buffer: writeWholeChunk gives it back once the frame is in its file.
  const dest = takeScratch(Uint8Array, src.length + HEADER_BYTES);
  const written = impl.compress(
    src,
    config.typesize,
    config.clevel,
    SHUFFLE_NUMBER[config.shuffle],
    config.cname,
    // c-blosc keeps a forced block size as an int32: clamp it as it (and encode.ts) would.
    Math.min(config.blocksize, MAX_BLOCKSIZE),
    dest,
  );
  if (written > 0 && written <= dest.length) return dest.subarray(0, written);
  giveBackScratch(dest);
  return undefined;
}

function refuse(why: string): never {
  throw new Error(`blosc: cannot decode this frame: ${why}`);
}

/**
 * `frame` decoded by the native Blosc into `out` (its first nbytes) or a new buffer; undefined
 * where the TypeScript decoder is to do it (none installed, a header it refuses by itself, an
 * empty frame, or a frame the library would not decode). Throws, before any C call, for a frame
 * whose cbytes exceed its bytes or whose nbytes exceed `out`.
 */
export function decodeNative(frame: Uint8Array, out?: Uint8Array): Uint8Array | undefined {
  const impl = native;
  if (impl === null || frame.length < HEADER_BYTES) return undefined;
  // zlib streams decode faster through the runtime's zlib-ng than through the system's zlib
  // inside libblosc (2.17 vs 2.59 ms per 1 MiB chunk): those frames stay in TypeScript.
  if (frame[2]! >> 5 === FORMAT_ZLIB) return undefined;
  const { nbytes, cbytes } = impl.cbufferSizes(frame);
  // Negative int32s come back as huge size_t values: the TypeScript decoder names those.
  if (nbytes === 0 || nbytes > MAX_BUFFER || cbytes > MAX_BUFFER + HEADER_BYTES) return undefined;
  if (cbytes > frame.length) refuse(`it says ${cbytes} bytes but has ${frame.length}`);
  // A plain copy is nbytes read from after the header: the TypeScript decoder checks its length.
  if ((frame[2]! & FLAG_MEMCPYED) !== 0 && cbytes !== nbytes + HEADER_BYTES) return undefined;
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
  return impl.decompress(frame, dest) === nbytes ? dest : undefined;
}
