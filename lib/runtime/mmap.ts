/**
 * Memory-mapped files for the tracking store: one owner object per mapping (`MappedFile`),
 * backed by libc `mmap` through `bun:ffi` (`mmap_bun.ts`) or Deno FFI (`mmap_deno.ts`), or by an
 * in-memory copy with explicit write-back (`mmap_fs.ts`) where no FFI is available.
 *
 * A store's chunk files are raw little-endian element arrays of a fixed size; writes go through
 * the view at about 1 ns each (reference runtime-notes section 1e) and, for the mmap kinds, are
 * visible to other processes at once and kept by the page cache if this process is killed.
 *
 * Hazards the owner object exists to contain (runtime-notes section 1c), neither catchable:
 * - touching a view after `munmap` kills the process with SIGSEGV. `close()` detaches every view
 *   it handed out (their length becomes 0) before unmapping, but callers must still drop them:
 *   never keep a view in a place that outlives the `MappedFile`;
 * - truncating a mapped file kills every process mapping it with SIGBUS. So nothing here ever
 *   resizes an existing file: a size mismatch is refused.
 */

import process from "node:process";
import { HOST_LITTLE_ENDIAN } from "../zarr/endian.ts";
import { runtimeName } from "./detect.ts";
import { BUN_MAX_VIEW_BYTES, loadBunLibc } from "./mmap_bun.ts";
import { denoFfiState, loadDenoLibc } from "./mmap_deno.ts";
import { mapWithLibc, posixPlatform } from "./mmap_libc.ts";
import { type Backing, openFsBacking } from "./mmap_fs.ts";

export type MmapKind = "bun-ffi" | "deno-ffi" | "fs";

/** The element arrays a chunk file can hold. */
export type ElementArrayConstructor =
  | Uint8ArrayConstructor
  | Uint32ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor
  | BigUint64ArrayConstructor;

/** The view `typed(ctor)` returns for each constructor (distributes over unions). */
export type TypedViewOf<C extends ElementArrayConstructor> = C extends BigUint64ArrayConstructor
  ? BigUint64Array
  : C extends Float64ArrayConstructor ? Float64Array
  : C extends Float32ArrayConstructor ? Float32Array
  : C extends Uint32ArrayConstructor ? Uint32Array
  : Uint8Array;

export interface MappedFile {
  readonly kind: MmapKind;
  readonly path: string;
  readonly byteLength: number;
  readonly readOnly: boolean;
  /** True once `close()` was called; every method then throws. */
  readonly closed: boolean;
  /**
   * The whole file as bytes. For the mmap kinds this is the mapping itself (shared with other
   * processes); for "fs" an in-memory copy. Drop it before `close()`.
   */
  view(): Uint8Array;
  /**
   * The whole file as elements of `ctor` (host byte order, which must be little-endian for
   * multi-byte elements). `byteLength` must be a multiple of the element size. Same memory as
   * `view()`; drop it before `close()`.
   */
  typed<C extends ElementArrayConstructor>(ctor: C): TypedViewOf<C>;
  /** Make the writes so far durable: msync(MS_SYNC), or for "fs" write back + fsync. */
  flush(): void;
  /**
   * Let the kernel drop the mapping's pages from this process's resident set: the data stays in
   * the file and the page cache (written pages are written back in the background, without
   * waiting for the disk; `flush` is what makes them durable), and the next access faults them
   * back in. Keeps a long run's resident memory to the pages written since the last call. Does
   * nothing for "fs", whose copy is the process's own memory, nor for read-only mappings.
   */
  flushAndDropResident(): void;
  /**
   * Flush (unless readOnly), then unmap and close the file descriptor. Views handed out are
   * detached (length 0) first. Any later call, including a second `close()`, throws.
   */
  close(): void;
}

export interface OpenMappedOptions {
  /** Exact size of the file in bytes, at least 1. */
  readonly byteLength: number;
  /**
   * Create the file (zero-filled, sparse) if it does not exist. An existing file of the same
   * size is opened as it is; one of a different size is refused, never resized.
   */
  readonly create: boolean;
  /**
   * Never write to the file. Writes through the view are allowed but stay private to this
   * process (MAP_PRIVATE copy-on-write, or the "fs" in-memory copy); flush() is a no-op.
   */
  readonly readOnly?: boolean;
  /** Adapter to use; "auto" (the default) picks what `mmapSupport()` reports. */
  readonly kind?: MmapKind | "auto";
}

export interface MmapSupport {
  readonly kind: MmapKind;
  readonly reason: string;
}

export function mmapSupport(): MmapSupport {
  const runtime = runtimeName();
  const platform = posixPlatform();
  const where = `${process.platform}/${process.arch}`;
  if (runtime === "bun") {
    if (platform === null) {
      return {
        kind: "fs",
        reason: `Bun on ${where}: no libc mmap binding for this platform, using the fs fallback`,
      };
    }
    return {
      kind: "bun-ffi",
      reason: `Bun: libc mmap through bun:ffi (${platform.library}; at most 4 GiB per file)`,
    };
  }
  if (runtime === "deno") {
    const state = denoFfiState();
    if (state !== "granted") {
      return {
        kind: "fs",
        reason: `Deno without --allow-ffi (ffi permission: ${state}): using the fs fallback; ` +
          `run with -A or an unscoped --allow-ffi to map files`,
      };
    }
    if (platform === null) {
      return {
        kind: "fs",
        reason: `Deno on ${where}: no libc mmap binding for this platform, using the fs fallback`,
      };
    }
    return { kind: "deno-ffi", reason: `Deno with --allow-ffi: libc mmap through Deno.dlopen` };
  }
  return { kind: "fs", reason: `${runtime}: no FFI in this runtime, using the fs fallback` };
}

/** This runtime's FFI adapter, asked for by `--tracking-io mmap` whatever `mmapSupport()` says. */
export function nativeMmapKind(): MmapKind {
  return runtimeName() === "bun" ? "bun-ffi" : "deno-ffi";
}

/**
 * Open (or with `create`, create) a file of exactly `byteLength` bytes and map all of it.
 * Refuses, with an Error naming the path: a missing file (without `create`), a file of another
 * size (with expected and actual size), `byteLength` < 1, a file over 4 GiB under Bun, and an
 * adapter this runtime does not have.
 */
export async function openMapped(path: string, options: OpenMappedOptions): Promise<MappedFile> {
  const { byteLength, create } = options;
  const readOnly = options.readOnly ?? false;
  if (!Number.isSafeInteger(byteLength) || byteLength < 1) {
    throw new Error(
      `openMapped: byteLength for "${path}" must be a whole number of bytes >= 1, got ` +
        `${byteLength}`,
    );
  }
  if (path === "" || path.includes("\0")) {
    throw new Error(`openMapped: invalid path ${JSON.stringify(path)}`);
  }
  const kind = resolveKind(path, options.kind ?? "auto");
  let backing: Backing;
  if (kind === "fs") {
    backing = openFsBacking(path, byteLength, create, readOnly);
  } else {
    const platform = posixPlatform();
    if (platform === null) {
      throw new Error(
        `openMapped: ${kind} for "${path}": no libc mmap binding for ` +
          `${process.platform}/${process.arch}; use kind "fs"`,
      );
    }
    if (kind === "bun-ffi" && byteLength > BUN_MAX_VIEW_BYTES) {
      throw new Error(
        `openMapped: "${path}" is ${byteLength} bytes, but Bun can view at most 4 GiB ` +
          `(${BUN_MAX_VIEW_BYTES} bytes) of one mapping; split the array into chunks of at ` +
          `most 4 GiB`,
      );
    }
    const libc = kind === "bun-ffi"
      ? await loadBunLibc(platform.library)
      : loadDenoLibc(platform.library);
    backing = mapWithLibc(libc, platform, path, byteLength, create, readOnly);
  }
  return new Mapping(kind, path, byteLength, readOnly, backing);
}

function resolveKind(path: string, wanted: MmapKind | "auto"): MmapKind {
  if (wanted === "auto") return mmapSupport().kind;
  if (wanted === "fs") return "fs";
  const runtime = runtimeName();
  if (wanted === "bun-ffi" && runtime !== "bun") {
    throw new Error(`openMapped: kind "bun-ffi" for "${path}" needs Bun; this is ${runtime}`);
  }
  if (wanted === "deno-ffi") {
    if (runtime !== "deno") {
      throw new Error(`openMapped: kind "deno-ffi" for "${path}" needs Deno; this is ${runtime}`);
    }
    const state = denoFfiState();
    if (state !== "granted") {
      throw new Error(
        `openMapped: kind "deno-ffi" for "${path}" needs an unscoped --allow-ffi (or -A); ` +
          `ffi permission is "${state}"`,
      );
    }
  }
  if (wanted !== "bun-ffi" && wanted !== "deno-ffi") {
    throw new Error(`openMapped: unknown kind ${JSON.stringify(wanted)} for "${path}"`);
  }
  return wanted;
}

const ELEMENT_CONSTRUCTORS: ReadonlySet<unknown> = new Set<unknown>([
  Uint8Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigUint64Array,
]);

interface ViewConstructor {
  readonly name: string;
  readonly BYTES_PER_ELEMENT: number;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): ArrayBufferView;
}

interface Detachable {
  readonly detached?: boolean;
  transfer?: (newLength: number) => ArrayBuffer;
}

class Mapping implements MappedFile {
  #backing: Backing | null;
  readonly #views = new Map<unknown, ArrayBufferView>();

  constructor(
    readonly kind: MmapKind,
    readonly path: string,
    readonly byteLength: number,
    readonly readOnly: boolean,
    backing: Backing,
  ) {
    this.#backing = backing;
  }

  get closed(): boolean {
    return this.#backing === null;
  }

  view(): Uint8Array {
    return this.#live("view").bytes;
  }

  typed<C extends ElementArrayConstructor>(ctor: C): TypedViewOf<C> {
    const bytes = this.#live("typed").bytes;
    if (!ELEMENT_CONSTRUCTORS.has(ctor)) {
      throw new Error(
        `MappedFile.typed: unsupported element type for "${this.path}"; use Uint8Array, ` +
          `Uint32Array, Float32Array, Float64Array or BigUint64Array`,
      );
    }
    const c = ctor as unknown as ViewConstructor;
    const cached = this.#views.get(ctor);
    if (cached !== undefined) return cached as TypedViewOf<C>;
    if (c.BYTES_PER_ELEMENT > 1 && !HOST_LITTLE_ENDIAN) {
      throw new Error(
        `MappedFile.typed(${c.name}): the file "${this.path}" is little-endian but this host ` +
          `is big-endian; read it through a DataView`,
      );
    }
    if (this.byteLength % c.BYTES_PER_ELEMENT !== 0) {
      throw new Error(
        `MappedFile.typed(${c.name}): "${this.path}" is ${this.byteLength} bytes, not a ` +
          `multiple of ${c.BYTES_PER_ELEMENT}`,
      );
    }
    const view = new c(bytes.buffer, bytes.byteOffset, this.byteLength / c.BYTES_PER_ELEMENT);
    this.#views.set(ctor, view);
    return view as TypedViewOf<C>;
  }

  flush(): void {
    const backing = this.#live("flush");
    if (!this.readOnly) backing.flush();
  }

  flushAndDropResident(): void {
    const backing = this.#live("flushAndDropResident");
    if (this.readOnly) return;
    backing.dropResident();
  }

  close(): void {
    const backing = this.#live("close");
    this.#backing = null;
    this.#views.clear();
    let failure: unknown = null;
    if (!this.readOnly) {
      try {
        backing.flush();
      } catch (error) {
        failure = error;
      }
    }
    detach(backing.bytes);
    try {
      backing.release();
    } catch (error) {
      failure ??= error;
    }
    if (failure !== null) throw failure;
  }

  #live(call: string): Backing {
    if (this.#backing === null) {
      throw new Error(
        `MappedFile.${call}(): "${this.path}" was closed; open it again with openMapped ` +
          `(and drop every view of the closed mapping)`,
      );
    }
    return this.#backing;
  }
}

/**
 * Detach the buffer under every view handed out, so a stale view reads `undefined` and ignores
 * writes instead of touching unmapped memory (SIGSEGV). `transfer(0)` copies nothing.
 */
function detach(bytes: Uint8Array): void {
  const buffer = bytes.buffer as unknown as Detachable;
  if (buffer.detached === true || typeof buffer.transfer !== "function") return;
  try {
    buffer.transfer(0);
  } catch {
    // Not detachable here: callers must have dropped their views, as documented.
  }
}
