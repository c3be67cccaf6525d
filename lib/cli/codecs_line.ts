/**
 * The third line of `--version`: which implementation each compressor runs in this runtime, so
 * a user can tell whether Blosc goes through the system's libblosc (C speed) or blockwise's
 * TypeScript port (2-4x slower to decode), and zstd encodes through libzstd or node:zlib
 * (docs/design/CODECS.md), and whether a block is copied out of a bigger array with memcpy or
 * in JavaScript, without running a bench.
 */

import { loadNativeBlosc } from "../runtime/blosc_native.ts";
import { loadNativeZstd } from "../runtime/zstd_native.ts";
import { loadNativeCopy } from "../runtime/native_copy.ts";

/** What was loaded, or why not, in the words of `--version`. */
async function described(
  load: () => Promise<{ impl: unknown; description: string; reason: string }>,
  prefix: RegExp,
): Promise<string> {
  try {
    const status = await load();
    return status.impl !== null && status.reason.startsWith("found ")
      ? status.description
      : `${status.description} (${status.reason})`;
  } catch (error) {
    // The environment names a library that cannot be used: a run would stop with this.
    return (error instanceof Error ? error.message : String(error)).replace(prefix, "");
  }
}

/**
 * e.g. "codecs: gzip, zlib native (node:zlib); zstd: libzstd 1.5.4 (libzstd.so.1) to encode,
 * node:zlib to decode; blosc: libblosc 1.21.3 (libblosc.so.1); block copy: memcpy (Bun's cc)".
 */
export async function codecsLine(): Promise<string> {
  const zstd = await described(() => loadNativeZstd(), /^zstd: /);
  const zstdPart = zstd.startsWith("libzstd ") ? `${zstd} to encode, node:zlib to decode` : zstd;
  const blosc = await described(() => loadNativeBlosc(), /^blosc: /);
  const copy = await loadNativeCopy().then(
    (status) =>
      status.impl !== null ? status.description : `${status.description} (${status.reason})`,
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
  return `codecs: gzip, zlib native (node:zlib); zstd: ${zstdPart}; blosc: ${blosc}; block copy: ${copy}`;
}
