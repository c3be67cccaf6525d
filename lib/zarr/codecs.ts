/**
 * The compression codecs of the zarrita blockwise carries. zarrita 0.7 decodes gzip and zlib
 * with the runtime's DecompressionStream but cannot encode them ("UnsupportedError: gzip
 * encode"), and loads blosc, lz4 and zstd from `numcodecs` (WebAssembly builds of the C
 * libraries that zarr-python uses). Registering numcodecs' gzip and zlib as well makes every
 * codec zarr-python writes by default, or that imaging data ships with, both read and written
 * by the same maintained package, under the Zarr v3 names and the v2 (`numcodecs.*`) names.
 */

import { registry } from "zarrita";
import GZip from "numcodecs/gzip";
import Zlib from "numcodecs/zlib";

type CodecLoader = Parameters<typeof registry.set>[1];

// numcodecs codecs have the shape zarrita's registry takes (fromConfig, encode, decode) but
// numcodecs' own declarations for gzip are misnamed in its package.json, so say it here.
const gzip = GZip as unknown as Awaited<ReturnType<CodecLoader>>;
const zlib = Zlib as unknown as Awaited<ReturnType<CodecLoader>>;

let registered = false;

/** Makes gzip and zlib writable (idempotent); the other codecs already are. */
export function registerZarrCodecs(): void {
  if (registered) return;
  registered = true;
  for (const name of ["gzip", "numcodecs.gzip"]) registry.set(name, () => Promise.resolve(gzip));
  for (const name of ["zlib", "numcodecs.zlib"]) registry.set(name, () => Promise.resolve(zlib));
}

/** The codecs a Zarr array's chunks may use under this zarrita, read and write. */
export const WRITABLE_COMPRESSORS: readonly string[] = ["blosc", "gzip", "lz4", "zlib", "zstd"];
