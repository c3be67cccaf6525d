/**
 * libc through Deno FFI (`Deno.dlopen` + `Deno.UnsafePointerView.getArrayBuffer`, reference
 * runtime-notes section 1b), reached through a `globalThis` cast so no other module names Deno.
 *
 * Deno needs an unscoped `--allow-ffi` (or `-A`): with `--allow-ffi=<path>` the `dlopen` and the
 * calls work but `UnsafePointer.value()` and `getArrayBuffer()` throw `NotCapable`. Note that a
 * libc `open()` through FFI ignores `--allow-read`/`--allow-write`.
 */

import type { LibcBinding, LibcRegion } from "./mmap_fs.ts";

/** Deno's opaque pointer object (`Deno.PointerObject`); null is the NULL pointer. */
type DenoPointer = object;

interface DenoLibcSymbols {
  open(path: Uint8Array, flags: number, mode: number): number;
  close(fd: number): number;
  ftruncate(fd: number, length: number): number;
  lseek(fd: number, offset: number, whence: number): number | bigint;
  mmap(
    addr: null,
    length: number,
    prot: number,
    flags: number,
    fd: number,
    offset: number,
  ): DenoPointer | null;
  msync(addr: DenoPointer, length: number, flags: number): number;
  madvise(addr: DenoPointer, length: number, advice: number): number;
  munmap(addr: DenoPointer, length: number): number;
}

interface DenoSymbolSpec {
  readonly parameters: readonly string[];
  readonly result: string;
}

interface DenoAllocateSymbols {
  posix_fallocate(fd: number, offset: number, length: number): number;
}

interface DenoFfiNamespace {
  dlopen?: <S>(
    library: string,
    symbols: Readonly<Record<keyof S, DenoSymbolSpec>>,
  ) => { readonly symbols: S };
  UnsafePointer: { value(pointer: DenoPointer): number | bigint };
  UnsafePointerView: { getArrayBuffer(pointer: DenoPointer, byteLength: number): ArrayBuffer };
  permissions?: { querySync?: (descriptor: { name: "ffi" }) => { state: string } };
}

const SYMBOLS: Readonly<Record<keyof DenoLibcSymbols, DenoSymbolSpec>> = {
  open: { parameters: ["buffer", "i32", "u32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  ftruncate: { parameters: ["i32", "i64"], result: "i32" },
  lseek: { parameters: ["i32", "i64", "i32"], result: "i64" },
  mmap: { parameters: ["pointer", "usize", "i32", "i32", "i32", "i64"], result: "pointer" },
  msync: { parameters: ["pointer", "usize", "i32"], result: "i32" },
  madvise: { parameters: ["pointer", "usize", "i32"], result: "i32" },
  munmap: { parameters: ["pointer", "usize"], result: "i32" },
};

const ALLOCATE: Readonly<Record<keyof DenoAllocateSymbols, DenoSymbolSpec>> = {
  posix_fallocate: { parameters: ["i32", "i64", "i64"], result: "i32" },
};

const MAP_FAILED = 0xffffffffffffffffn;

function deno(): DenoFfiNamespace | undefined {
  return (globalThis as unknown as { Deno?: DenoFfiNamespace }).Deno;
}

/**
 * Whether Deno FFI can be used: "granted" (unscoped --allow-ffi or -A), "not-deno", or the
 * permission state Deno reports ("prompt", "denied"; a scoped --allow-ffi reports "prompt").
 */
export function denoFfiState(): string {
  const d = deno();
  if (d === undefined) return "not-deno";
  if (typeof d.dlopen !== "function") return "no-dlopen";
  const query = d.permissions?.querySync;
  if (typeof query !== "function") return "no-permissions-api";
  try {
    return query.call(d.permissions, { name: "ffi" }).state;
  } catch {
    return "unknown";
  }
}

const loaded = new Map<string, LibcBinding>();

/** Open `library` (for example "libc.so.6") through Deno FFI, once per process. */
export function loadDenoLibc(library: string): LibcBinding {
  const cached = loaded.get(library);
  if (cached !== undefined) return cached;
  const d = deno();
  if (d === undefined || typeof d.dlopen !== "function") {
    throw new Error("openMapped: deno-ffi needs Deno (Deno.dlopen is missing)");
  }
  let libc: DenoLibcSymbols;
  try {
    libc = d.dlopen<DenoLibcSymbols>(library, SYMBOLS).symbols;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new Error(`openMapped: Deno.dlopen("${library}") failed: ${why}`);
  }
  let allocate: ((fd: number, length: number) => number) | undefined;
  try {
    const { posix_fallocate } = d.dlopen<DenoAllocateSymbols>(library, ALLOCATE).symbols;
    allocate = (fd, length) => posix_fallocate(fd, 0, length);
  } catch {
    // No posix_fallocate in this libc (macOS): mapped files stay sparse.
  }
  const binding: LibcBinding = {
    library,
    maxViewBytes: Number.MAX_SAFE_INTEGER,
    ...(allocate === undefined ? {} : { allocate }),
    open: (path, flags, mode) => libc.open(path, flags, mode),
    close: (fd) => libc.close(fd),
    ftruncate: (fd, length) => libc.ftruncate(fd, length),
    lseek: (fd, offset, whence) => Number(libc.lseek(fd, offset, whence)),
    mmap(length, prot, flags, fd): LibcRegion | null {
      const pointer = libc.mmap(null, length, prot, flags, fd, 0);
      if (pointer === null) return null;
      if (BigInt(d.UnsafePointer.value(pointer)) === MAP_FAILED) return null;
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(d.UnsafePointerView.getArrayBuffer(pointer, length));
      } catch (error) {
        libc.munmap(pointer, length);
        throw error;
      }
      return {
        bytes,
        msync: (msyncFlags) => libc.msync(pointer, length, msyncFlags),
        madvise: (advice) => libc.madvise(pointer, length, advice),
        munmap: () => libc.munmap(pointer, length),
      };
    },
  };
  loaded.set(library, binding);
  return binding;
}
