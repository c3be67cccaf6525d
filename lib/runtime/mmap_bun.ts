/**
 * libc through `bun:ffi` (reference runtime-notes section 1a). `bun:ffi` is imported
 * dynamically: a static import makes Deno refuse to load the module graph.
 *
 * Bun specifics handled here: a pointer comes back as a `number`, but MAP_FAILED ((void*)-1)
 * comes back as the bigint 18446744073709551615n, so success is "a non-zero number"; 64-bit
 * results (lseek) arrive as bigint; one `toArrayBuffer` view is at most 4 GiB.
 */

import type { LibcBinding, LibcRegion } from "./mmap_fs.ts";

/** Bun can view at most 2^32 bytes of one mapping (`RangeError: Out of memory` beyond). */
export const BUN_MAX_VIEW_BYTES = 2 ** 32;

type Pointer = number;

interface BunLibcSymbols {
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
  ): Pointer | bigint | null;
  msync(addr: Pointer, length: number, flags: number): number;
  madvise(addr: Pointer, length: number, advice: number): number;
  munmap(addr: Pointer, length: number): number;
}

interface BunSymbolSpec {
  readonly args: readonly string[];
  readonly returns: string;
}

interface BunAllocateSymbols {
  posix_fallocate(fd: number, offset: number, length: number): number;
}

interface BunFfiModule {
  dlopen<S>(
    library: string,
    symbols: Readonly<Record<keyof S, BunSymbolSpec>>,
  ): { readonly symbols: S };
  toArrayBuffer(ptr: Pointer, byteOffset: number, byteLength: number): ArrayBuffer;
}

const SYMBOLS: Readonly<Record<keyof BunLibcSymbols, BunSymbolSpec>> = {
  open: { args: ["ptr", "i32", "u32"], returns: "i32" },
  close: { args: ["i32"], returns: "i32" },
  ftruncate: { args: ["i32", "i64"], returns: "i32" },
  lseek: { args: ["i32", "i64", "i32"], returns: "i64" },
  mmap: { args: ["ptr", "u64", "i32", "i32", "i32", "i64"], returns: "ptr" },
  msync: { args: ["ptr", "u64", "i32"], returns: "i32" },
  madvise: { args: ["ptr", "u64", "i32"], returns: "i32" },
  munmap: { args: ["ptr", "u64"], returns: "i32" },
};

const ALLOCATE: Readonly<Record<keyof BunAllocateSymbols, BunSymbolSpec>> = {
  posix_fallocate: { args: ["i32", "i64", "i64"], returns: "i32" },
};

const loaded = new Map<string, Promise<LibcBinding>>();

/** Open `library` (for example "libc.so.6") through bun:ffi, once per process. */
export function loadBunLibc(library: string): Promise<LibcBinding> {
  let binding = loaded.get(library);
  if (binding === undefined) {
    binding = bind(library);
    loaded.set(library, binding);
    // A failed load is not cached, so a later call reports the failure again.
    binding.catch(() => loaded.delete(library));
  }
  return binding;
}

async function bind(library: string): Promise<LibcBinding> {
  let ffi: BunFfiModule;
  let libc: BunLibcSymbols;
  try {
    ffi = (await import("bun:ffi")) as unknown as BunFfiModule;
    libc = ffi.dlopen<BunLibcSymbols>(library, SYMBOLS).symbols;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new Error(`openMapped: dlopen("${library}") through bun:ffi failed: ${why}`);
  }
  let allocate: ((fd: number, length: number) => number) | undefined;
  try {
    const { posix_fallocate } = ffi.dlopen<BunAllocateSymbols>(library, ALLOCATE).symbols;
    allocate = (fd, length) => posix_fallocate(fd, 0, length);
  } catch {
    // No posix_fallocate in this libc (macOS): mapped files stay sparse.
  }
  return {
    library,
    maxViewBytes: BUN_MAX_VIEW_BYTES,
    ...(allocate === undefined ? {} : { allocate }),
    open: (path, flags, mode) => libc.open(path, flags, mode),
    close: (fd) => libc.close(fd),
    ftruncate: (fd, length) => libc.ftruncate(fd, length),
    lseek: (fd, offset, whence) => Number(libc.lseek(fd, offset, whence)),
    mmap(length, prot, flags, fd): LibcRegion | null {
      const addr = libc.mmap(null, length, prot, flags, fd, 0);
      if (typeof addr !== "number" || addr === 0) return null;
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(ffi.toArrayBuffer(addr, 0, length));
      } catch (error) {
        libc.munmap(addr, length);
        throw error;
      }
      return {
        bytes,
        msync: (msyncFlags) => libc.msync(addr, length, msyncFlags),
        madvise: (advice) => libc.madvise(addr, length, advice),
        munmap: () => libc.munmap(addr, length),
      };
    },
  };
}
