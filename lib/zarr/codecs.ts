/**
 * The compression codecs of the zarrita blockwise carries. zarrita 0.7 decodes gzip and zlib
 * with the runtime's DecompressionStream but cannot encode them ("UnsupportedError: gzip
 * encode"), and loads blosc, lz4 and zstd from `numcodecs` (WebAssembly builds of the C
 * libraries, without SIMD, copying every chunk in and out of the wasm heap). blockwise registers
 * gzip, zlib and zstd running the runtime's native C libraries (native_codecs.ts) under the Zarr
 * v3 names and the v2 (`numcodecs.*`) names, so every codec zarr-python writes by default, or
 * that imaging data ships with, is read and written at C speed (docs/design/CODECS.md).
 */

import { registry } from "zarrita";
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
];

let registered = false;

/** Makes gzip and zlib writable and gzip, zlib and zstd native (idempotent). */
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
