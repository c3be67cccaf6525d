/**
 * c-blosc 1.x (libblosc.so.1) through `bun:ffi` or Deno FFI: the five functions the native
 * Blosc codec needs, with the same JavaScript shape in both runtimes (typed arrays as pointers:
 * both pass a view's own start, byteOffset included, and accept views of SharedArrayBuffers).
 * The policy (which library, which version, the size checks before each call) is
 * blosc_native.ts's.
 *
 * `bun:ffi` is imported dynamically, as in mmap_bun.ts: a static import makes Deno refuse the
 * module graph. Deno needs an unscoped --allow-ffi (or -A); `denoFfiState()` says whether it has
 * it (a scoped --allow-ffi=<path> does not cover a library opened by soname, and
 * `UnsafePointerView.getCString` needs the unscoped one).
 */

import { runtimeName } from "./detect.ts";
import { denoFfiState } from "./mmap_deno.ts";

/** The functions of libblosc this project calls, as bound in both runtimes. */
export interface LibbloscSymbols {
  blosc_compname_to_compcode(compname: Uint8Array): number;
  /** void blosc_cbuffer_sizes(const void*, size_t *nbytes, size_t *cbytes, size_t *blocksize) */
  blosc_cbuffer_sizes(
    cbuffer: Uint8Array,
    nbytes: Uint32Array,
    cbytes: Uint32Array,
    blocksize: Uint32Array,
  ): void;
  blosc_compress_ctx(
    clevel: number,
    doshuffle: number,
    typesize: number,
    nbytes: number,
    src: Uint8Array,
    dest: Uint8Array,
    destsize: number,
    compressor: Uint8Array,
    blocksize: number,
    numinternalthreads: number,
  ): number;
  blosc_decompress_ctx(
    src: Uint8Array,
    dest: Uint8Array,
    destsize: number,
    numinternalthreads: number,
  ): number;
}

/** An opened libblosc: its functions and blosc_get_version_string(). */
export interface OpenedLibblosc {
  readonly library: string;
  readonly version: string;
  readonly symbols: LibbloscSymbols;
}

type Signature = readonly [args: readonly string[], result: string];

/** Argument and result types in bun:ffi's names; Deno's are mapped from these. */
const SIGNATURES: Readonly<Record<keyof LibbloscSymbols, Signature>> = {
  blosc_compname_to_compcode: [["ptr"], "i32"],
  blosc_cbuffer_sizes: [["ptr", "ptr", "ptr", "ptr"], "void"],
  blosc_compress_ctx: [
    ["i32", "i32", "usize", "usize", "ptr", "ptr", "usize", "ptr", "usize", "i32"],
    "i32",
  ],
  blosc_decompress_ctx: [["ptr", "ptr", "usize", "i32"], "i32"],
};

interface BunFfiModule {
  dlopen(
    library: string,
    symbols: Readonly<Record<string, { args: readonly string[]; returns: string }>>,
  ): { readonly symbols: Readonly<Record<string, unknown>> };
}

interface DenoFfiNamespace {
  dlopen(
    library: string,
    symbols: Readonly<Record<string, { parameters: readonly string[]; result: string }>>,
  ): { readonly symbols: Readonly<Record<string, unknown>> };
  UnsafePointerView: { getCString(pointer: object): string };
}

/** Why FFI cannot be used in this runtime, or null when it can. */
export function ffiUnavailable(): string | null {
  const runtime = runtimeName();
  if (runtime === "bun") return null;
  if (runtime === "deno") {
    const state = denoFfiState();
    return state === "granted"
      ? null
      : `Deno was not given --allow-ffi (permission state: ${state}); run with -A or --allow-ffi`;
  }
  return `${runtime} has no FFI blockwise uses`;
}

/**
 * Opens `library` (a path, or a soname the dynamic loader looks up) and binds its functions.
 * Throws with the loader's reason when it cannot be opened or lacks a function.
 */
export async function openLibblosc(library: string): Promise<OpenedLibblosc> {
  const why = ffiUnavailable();
  if (why !== null) throw new Error(why);
  if (runtimeName() === "bun") {
    const ffi = (await import("bun:ffi" as string)) as BunFfiModule;
    const specs = Object.fromEntries(
      Object.entries(SIGNATURES).map(([name, [args, returns]]) => [name, { args, returns }]),
    );
    const version = ffi.dlopen(library, {
      blosc_get_version_string: { args: [], returns: "cstring" },
    }).symbols["blosc_get_version_string"] as () => unknown;
    const symbols = ffi.dlopen(library, specs).symbols as unknown as LibbloscSymbols;
    return { library, version: String(version()), symbols };
  }
  const deno = (globalThis as unknown as { Deno: DenoFfiNamespace }).Deno;
  const denoType = (type: string) => type === "ptr" ? "buffer" : type;
  const specs = Object.fromEntries(
    Object.entries(SIGNATURES).map((
      [name, [args, result]],
    ) => [name, { parameters: args.map(denoType), result }]),
  );
  const lib = deno.dlopen(library, {
    ...specs,
    blosc_get_version_string: { parameters: [], result: "pointer" },
  });
  const versionOf = lib.symbols["blosc_get_version_string"] as () => object | null;
  const pointer = versionOf();
  const version = pointer === null ? "" : deno.UnsafePointerView.getCString(pointer);
  return { library, version, symbols: lib.symbols as unknown as LibbloscSymbols };
}
