/**
 * The compression codecs of the zarrita blockwise carries. zarrita 0.7 decodes gzip and zlib
 * with the runtime's DecompressionStream but cannot encode them ("UnsupportedError: gzip
 * encode"), and loads blosc, lz4 and zstd from `numcodecs` (WebAssembly builds of the C
 * libraries, without SIMD, copying every chunk in and out of the wasm heap). blockwise registers
 * gzip, zlib and zstd running the runtime's native C libraries (native_codecs.ts), and Blosc
 * in TypeScript with those inside (blosc/: numcodecs.js' WebAssembly Blosc wrote v3 arrays
 * uncompressed), under the Zarr v3 names and the v2 (`numcodecs.*`) names, so every codec zarr-python writes by default, or
 * that imaging data ships with, is read and written at C speed (docs/design/CODECS.md).
 */

import { registry } from "zarrita";
import { BloscCodec } from "./blosc/codec.ts";
import { NativeGzip, NativeZlib, NativeZstd } from "./native_codecs.ts";

type CodecLoader = Parameters<typeof registry.set>[1];
type CodecClass = Awaited<ReturnType<CodecLoader>>;

/** A codec class of this project as zarrita's registry types it (fromConfig, encode, decode). */
function loader(codec: unknown): CodecLoader {
  return () => Promise.resolve(codec as CodecClass);
}

/** The codecs registered under their name and `numcodecs.<name>`. */
const NATIVE: ReadonlyArray<readonly [string, unknown]> = [
  ["gzip", NativeGzip],
  ["zlib", NativeZlib],
  ["zstd", NativeZstd],
  ["blosc", BloscCodec],
];

let registered = false;

/** Makes gzip and zlib writable, gzip, zlib and zstd native, and Blosc blockwise's (idempotent). */
export function registerZarrCodecs(): void {
  if (registered) return;
  registered = true;
  for (const [name, codec] of NATIVE) {
    registry.set(name, loader(codec));
    registry.set(`numcodecs.${name}`, loader(codec));
  }
}

/** The codecs a Zarr array's chunks may use under this zarrita, read and write. */
export const WRITABLE_COMPRESSORS: readonly string[] = ["blosc", "gzip", "lz4", "zlib", "zstd"];
