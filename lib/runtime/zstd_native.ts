/**
 * The system's libzstd (libzstd.so.1) for zstd encodes, through `bun:ffi` or Deno FFI, with one
 * compression context per thread kept across chunks. node:zlib's zstd is its streaming API,
 * which makes a new context and window for every call and closes it after a finished frame:
 * in a loop over an array's chunks it took 2.5-2.7 ms per 1 MiB float32 chunk at level 3, a
 * context kept per thread 1.65-1.8 ms (numcodecs 1.37-1.40; docs/design/CODECS.md, "zstd
 * through libzstd"). Levels up to MAX_NATIVE_LEVEL only, and decoding stays node:zlib's (it
 * already reads faster than zarr-python).
 *
 * Which library: BLOCKWISE_LIBZSTD=off keeps node:zlib; BLOCKWISE_LIBZSTD=<path or soname>
 * that library, and one that cannot be used is an error naming it and the fix; unset,
 * libzstd.so.1 (libzstd.1.dylib on macOS) through the dynamic loader, and anything unexpected
 * (absent, no FFI permission, older than 1.4.0, frames node:zlib does not decode back) quietly
 * leaves node:zlib. Every frame carries its content size (numcodecs needs it) and, when asked,
 * its checksum.
 */

import process from "node:process";
import {
  type NativeZstdEncoder,
  setNativeZstd,
  zstdDecompress,
} from "../zarr/native_compression.ts";
import { giveBackScratch, takeScratch } from "../zarr/scratch_buffers.ts";
import { runtimeName } from "./detect.ts";
import { ffiUnavailable } from "./blosc_ffi.ts";
import { chooseLibrary, oncePerThread } from "./native_library.ts";

export const LIBZSTD_ENV = "BLOCKWISE_LIBZSTD";

/** ZSTD_versionNumber of 1.4.0, the first with ZSTD_compress2 and the parameter API stable. */
const MIN_VERSION = 10400;
/** zstd.h's ZSTD_cParameter and ZSTD_ResetDirective numbers. */
const C_COMPRESSION_LEVEL = 100;
const C_CONTENT_SIZE_FLAG = 200;
const C_CHECKSUM_FLAG = 201;
const RESET_SESSION_AND_PARAMETERS = 3;
/**
 * The highest level libzstd encodes. Above it the runtimes' newer zstd is faster despite its
 * new context per call (1 MiB float32 chunks in a loop, Bun: level 4 3.50 vs 2.13 ms through
 * libzstd 1.5.4, level 5 2.76 vs 5.99, level 9 3.73 vs 11.2), so those levels stay node:zlib's.
 */
export const MAX_NATIVE_LEVEL = 4;

/** Which zstd encoder this thread uses, and why. */
export interface NativeZstdStatus {
  readonly impl: NativeZstdEncoder | null;
  /** e.g. "libzstd 1.5.4 (libzstd.so.1)" or "node:zlib". */
  readonly description: string;
  readonly reason: string;
}

/** The functions bound, the same shape in both runtimes (contexts as opaque pointers). */
interface LibzstdSymbols {
  ZSTD_versionNumber(): number;
  ZSTD_createCCtx(): unknown;
  ZSTD_CCtx_reset(cctx: unknown, directive: number): number | bigint;
  ZSTD_CCtx_setParameter(cctx: unknown, parameter: number, value: number): number | bigint;
  ZSTD_compressBound(size: number): number | bigint;
  ZSTD_compress2(
    cctx: unknown,
    dst: Uint8Array,
    capacity: number,
    src: Uint8Array,
    size: number,
  ): number | bigint;
}

/** [arguments, result]: "ctx" an opaque pointer, "buf" a typed array, else a number type. */
const SIGNATURES: Readonly<Record<keyof LibzstdSymbols, readonly [readonly string[], string]>> = {
  ZSTD_versionNumber: [[], "u32"],
  ZSTD_createCCtx: [[], "ctx"],
  ZSTD_CCtx_reset: [["ctx", "i32"], "usize"],
  ZSTD_CCtx_setParameter: [["ctx", "i32", "i32"], "usize"],
  ZSTD_compressBound: [["usize"], "usize"],
  ZSTD_compress2: [["ctx", "buf", "usize", "buf", "usize"], "usize"],
};

interface Dlopen {
  dlopen(
    library: string,
    symbols: Readonly<Record<string, Readonly<Record<string, unknown>>>>,
  ): { readonly symbols: Readonly<Record<string, unknown>> };
}

/** Opens `library` and binds its functions; throws with the loader's reason. */
async function openLibzstd(library: string): Promise<LibzstdSymbols> {
  const why = ffiUnavailable();
  if (why !== null) throw new Error(why);
  if (runtimeName() === "bun") {
    const ffi = (await import("bun:ffi" as string)) as Dlopen;
    const bunType = (t: string) => t === "ctx" || t === "buf" ? "ptr" : t;
    const specs = Object.fromEntries(
      Object.entries(SIGNATURES).map(([name, [args, result]]) => [
        name,
        { args: args.map(bunType), returns: bunType(result) },
      ]),
    );
    return ffi.dlopen(library, specs).symbols as unknown as LibzstdSymbols;
  }
  const deno = (globalThis as unknown as { Deno: Dlopen }).Deno;
  const denoType = (t: string) => t === "ctx" ? "pointer" : t === "buf" ? "buffer" : t;
  const specs = Object.fromEntries(
    Object.entries(SIGNATURES).map(([name, [args, result]]) => [
      name,
      { parameters: args.map(denoType), result: denoType(result) },
    ]),
  );
  return deno.dlopen(library, specs).symbols as unknown as LibzstdSymbols;
}

/** The library to open when BLOCKWISE_LIBZSTD is unset. */
export function defaultLibzstd(): string | null {
  if (process.platform === "linux") return "libzstd.so.1";
  if (process.platform === "darwin") return "libzstd.1.dylib";
  return null;
}

function versionText(n: number): string {
  return `${Math.floor(n / 10000)}.${Math.floor(n / 100) % 100}.${n % 100}`;
}

/** The encoder over an opened libzstd: one context for this thread, reset for every frame. */
function bindLibzstd(s: LibzstdSymbols, description: string): NativeZstdEncoder {
  const cctx = s.ZSTD_createCCtx();
  const failed = (code: number | bigint) => Number(code) > 2 ** 62; // (size_t)-errno
  return {
    description,
    compress(data, level, checksum) {
      if (cctx === null || cctx === 0 || level > MAX_NATIVE_LEVEL) return undefined;
      if (
        failed(s.ZSTD_CCtx_reset(cctx, RESET_SESSION_AND_PARAMETERS)) ||
        failed(s.ZSTD_CCtx_setParameter(cctx, C_COMPRESSION_LEVEL, level)) ||
        failed(s.ZSTD_CCtx_setParameter(cctx, C_CONTENT_SIZE_FLAG, 1)) ||
        failed(s.ZSTD_CCtx_setParameter(cctx, C_CHECKSUM_FLAG, checksum ? 1 : 0))
      ) {
        return undefined;
      }
      const capacity = Number(s.ZSTD_compressBound(data.length));
      if (!Number.isSafeInteger(capacity) || capacity < data.length) return undefined;
      // A reused buffer: writeWholeChunk gives it back once the frame is in its file.
      const out = takeScratch(Uint8Array, capacity);
      const written = Number(s.ZSTD_compress2(cctx, out, capacity, data, data.length));
      if (written > 0 && written <= capacity) return out.subarray(0, written);
      giveBackScratch(out);
      return undefined;
    },
  };
}

/** A frame of 64 KiB of float32 that node:zlib must decode back, at two levels. */
function selfTest(impl: NativeZstdEncoder): boolean {
  const data = new Uint8Array(
    Float32Array.from({ length: 16384 }, (_, i) => Math.sin(i / 97) + 0.25 * Math.cos(i / 13))
      .buffer,
  );
  for (const [level, checksum] of [[3, false], [-1, true]] as const) {
    const frame = impl.compress(data, level, checksum);
    if (frame === undefined) return false;
    const back = zstdDecompress(frame);
    if (back.length !== data.length || !back.every((v, i) => v === data[i])) return false;
  }
  return true;
}

/**
 * Opens and checks the libzstd `env` asks for (`usual` when BLOCKWISE_LIBZSTD is unset).
 * Resolves to node:zlib (impl null) with the reason when none is asked for or the usual one
 * cannot be used; rejects (InputError: exit 2) when the one BLOCKWISE_LIBZSTD names cannot be.
 */
export async function loadNativeZstd(
  env: Readonly<Record<string, string | undefined>> = process.env,
  usual: string | null = defaultLibzstd(),
): Promise<NativeZstdStatus> {
  const zlib = (reason: string): NativeZstdStatus => ({
    impl: null,
    description: "node:zlib",
    reason,
  });
  const choice = chooseLibrary(env, LIBZSTD_ENV, usual, {
    what: "libzstd",
    prefix: "zstd",
    fix: (setting) =>
      `point ${LIBZSTD_ENV} at libzstd 1.4 or later (Debian and Ubuntu: apt-get install libzstd1, then /usr/lib/<arch>-linux-gnu/libzstd.so.1), unset it to look for ${
        usual ?? "libzstd"
      } where the loader looks, or set ${LIBZSTD_ENV}=off to encode with node:zlib (currently ${LIBZSTD_ENV}=${setting})`,
  });
  const library = choice.library;
  if (library === null) return zlib(choice.skipped!);
  const unusable = (why: string) => zlib(choice.unusable(why));
  let symbols: LibzstdSymbols;
  try {
    symbols = await openLibzstd(library);
  } catch (error) {
    return unusable(error instanceof Error ? error.message : String(error));
  }
  const version = symbols.ZSTD_versionNumber();
  if (version < MIN_VERSION) {
    return unusable(`it is zstd ${versionText(version)}; blockwise needs 1.4.0 or later`);
  }
  const impl = bindLibzstd(symbols, `libzstd ${versionText(version)} (${library})`);
  if (!selfTest(impl)) return unusable("its frames do not decode back to the same bytes");
  return {
    impl,
    description: impl.description,
    reason: choice.setting !== "" ? `${LIBZSTD_ENV}=${choice.setting}` : `found ${library}`,
  };
}

/** Installs this thread's zstd encoder once and says which; rejects on a bad BLOCKWISE_LIBZSTD. */
export const registerNativeZstd: () => Promise<NativeZstdStatus> = oncePerThread(() =>
  loadNativeZstd().then((status) => {
    setNativeZstd(status.impl);
    return status;
  })
);
