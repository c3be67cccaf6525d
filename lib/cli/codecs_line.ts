/**
 * The third line of `--version`: which implementation each compressor runs in this runtime, so
 * a user can tell whether Blosc goes through the system's libblosc (C speed) or blockwise's
 * TypeScript port (2-4x slower to decode; docs/design/CODECS.md) without running a bench.
 */

import { loadNativeBlosc } from "../runtime/blosc_native.ts";

/** e.g. "codecs: gzip, zlib, zstd native (node:zlib); blosc: libblosc 1.21.3 (libblosc.so.1)". */
export async function codecsLine(): Promise<string> {
  let blosc: string;
  try {
    const status = await loadNativeBlosc();
    blosc = status.impl !== null && status.reason.startsWith("found ")
      ? status.description
      : `${status.description} (${status.reason})`;
  } catch (error) {
    // BLOCKWISE_LIBBLOSC names a library that cannot be used: a run would stop with this.
    blosc = (error instanceof Error ? error.message : String(error)).replace(/^blosc: /, "");
  }
  return `codecs: gzip, zlib, zstd native (node:zlib); blosc: ${blosc}`;
}
