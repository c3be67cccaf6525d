/**
 * The portable half of the mmap adapter (`mmap.ts`): the node:fs fallback used where no FFI is
 * available (Node, Deno without `--allow-ffi`), plus the contracts and error messages every
 * adapter shares. Nothing here names Bun or Deno.
 *
 * The fallback reads the whole file into memory once; writes go to that copy at RAM speed and
 * reach the file only on `flush()` / `close()` (whole buffer written at offset 0, then fsync).
 * Unlike a MAP_SHARED mapping it is not visible to other processes between flushes and does not
 * survive a crash between flushes (reference runtime-notes section 2, "fallback 1").
 */

import * as fs from "node:fs";

/** What an adapter hands to the owner object in `mmap.ts`: the bytes and how to release them. */
export interface Backing {
  /** Every byte of the file, `byteLength` long. Only the owner object holds it. */
  readonly bytes: Uint8Array;
  /** Make the bytes durable (msync MS_SYNC, or write back + fsync). Throws naming path and call. */
  flush(): void;
  /**
   * Let the kernel take the pages out of this process's resident set (the file and the page
   * cache keep the data, written back in the background; the next access faults it back in).
   * A no-op for the fs fallback, whose bytes are the process's own memory.
   */
  dropResident(): void;
  /** Unmap and close the file descriptor, without flushing. Throws naming path and call. */
  release(): void;
}

/**
 * The libc calls an FFI adapter binds (`mmap_bun.ts`, `mmap_deno.ts`). Mapping addresses never
 * leave the adapter: `mmap` returns the region with its own msync/munmap.
 */
export interface LibcBinding {
  /** The library that was opened, for messages ("libc.so.6"). */
  readonly library: string;
  /** Largest view the runtime can make over one mapping, in bytes. */
  readonly maxViewBytes: number;
  /** `open(path, flags, mode)`: the descriptor, or a negative number on failure. */
  open(path: Uint8Array, flags: number, mode: number): number;
  close(fd: number): number;
  ftruncate(fd: number, length: number): number;
  /**
   * `posix_fallocate(fd, 0, length)`: 0, or the error number. Missing where libc has no such
   * function (macOS): the file then stays sparse.
   */
  readonly allocate?: (fd: number, length: number) => number;
  /** `lseek(fd, offset, whence)`: the resulting offset, or a negative number on failure. */
  lseek(fd: number, offset: number, whence: number): number;
  /** `mmap(NULL, length, prot, flags, fd, 0)`; null when it returned NULL or MAP_FAILED. */
  mmap(length: number, prot: number, flags: number, fd: number): LibcRegion | null;
}

/** One live mapping made by a `LibcBinding`. */
export interface LibcRegion {
  /** A zero-copy view over the whole mapping. */
  readonly bytes: Uint8Array;
  /** `msync(addr, length, flags)`: 0 on success. */
  msync(flags: number): number;
  /** `madvise(addr, length, advice)`: 0 on success. */
  madvise(advice: number): number;
  /** `munmap(addr, length)`: 0 on success. */
  munmap(): number;
}

/** The refusal for a file whose size is not the expected one. Names path and both sizes. */
export function sizeMismatchError(path: string, expected: number, actual: number): Error {
  return new Error(
    `openMapped: "${path}" is ${actual} bytes but ${expected} bytes were expected; refusing to ` +
      `resize it (a file may be mapped by another process, and truncating it under a mapping ` +
      `kills that process with SIGBUS)`,
  );
}

/**
 * The error for an open that failed. libc errno is not reachable through FFI, so the reason is
 * recovered with a stat of the path where the runtime allows it.
 */
export function openFailedError(
  path: string,
  expected: number,
  call: string,
  create: boolean,
  cause?: unknown,
): Error {
  let reason = describeCause(cause);
  if (reason === "") {
    try {
      const st = fs.statSync(path);
      reason = st.isFile()
        ? `the file exists (${st.size} bytes) but could not be opened (permissions?)`
        : "it is not a regular file";
    } catch (error) {
      reason = describeCause(error);
      if (reason === "") reason = "the file is missing or not accessible";
    }
  }
  const what = create
    ? "cannot create or open it"
    : `cannot open it (expected an existing file of ${expected} bytes)`;
  return new Error(`openMapped: ${call} of "${path}" failed, ${what}: ${reason}`);
}

function describeCause(cause: unknown): string {
  if (cause === undefined) return "";
  const code = (cause as { code?: unknown }).code;
  if (code === "ENOENT") return "no such file or directory";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  if (code === "EISDIR") return "it is a directory";
  if (cause instanceof Error) return cause.message;
  return String(cause);
}

/** Largest single read/write handed to node:fs (it refuses more than 2 GiB - 1 per call). */
const IO_CHUNK = 1 << 30;

/** Open (and with `create`, create) `path` through node:fs and read it into memory. */
export function openFsBacking(
  path: string,
  byteLength: number,
  create: boolean,
  readOnly: boolean,
): Backing {
  if (create) {
    let fd: number | undefined;
    try {
      fd = fs.openSync(path, "wx", 0o644);
    } catch (error) {
      if ((error as { code?: unknown }).code !== "EEXIST") {
        throw openFailedError(path, byteLength, 'fs.openSync(path, "wx")', true, error);
      }
    }
    if (fd !== undefined) {
      try {
        fs.ftruncateSync(fd, byteLength);
      } catch (error) {
        fs.closeSync(fd);
        fs.rmSync(path, { force: true });
        throw new Error(
          `openMapped: fs.ftruncateSync("${path}", ${byteLength}) failed after creating it: ` +
            describeCause(error),
        );
      }
      fs.closeSync(fd);
    }
  }
  let fd: number;
  const flags = readOnly ? "r" : "r+";
  try {
    fd = fs.openSync(path, flags);
  } catch (error) {
    throw openFailedError(path, byteLength, `fs.openSync(path, "${flags}")`, create, error);
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) {
      throw new Error(`openMapped: "${path}" is not a regular file`);
    }
    if (st.size !== byteLength) throw sizeMismatchError(path, byteLength, st.size);
    const bytes = new Uint8Array(byteLength);
    readFully(fd, bytes, path);
    return {
      bytes,
      flush(): void {
        writeFully(fd, bytes, path);
        try {
          fs.fsyncSync(fd);
        } catch (error) {
          throw new Error(`openMapped: fs.fsyncSync("${path}") failed: ${describeCause(error)}`);
        }
      },
      dropResident(): void {},
      release(): void {
        try {
          fs.closeSync(fd);
        } catch (error) {
          throw new Error(`openMapped: fs.closeSync("${path}") failed: ${describeCause(error)}`);
        }
      },
    };
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
}

function readFully(fd: number, bytes: Uint8Array, path: string): void {
  let done = 0;
  while (done < bytes.length) {
    const want = Math.min(IO_CHUNK, bytes.length - done);
    let got: number;
    try {
      got = fs.readSync(fd, bytes, done, want, done);
    } catch (error) {
      throw new Error(
        `openMapped: fs.readSync("${path}", offset ${done}) failed: ${describeCause(error)}`,
      );
    }
    if (got === 0) {
      throw new Error(
        `openMapped: fs.readSync("${path}") hit the end of the file at ${done} of ` +
          `${bytes.length} bytes (was it truncated while opening?)`,
      );
    }
    done += got;
  }
}

function writeFully(fd: number, bytes: Uint8Array, path: string): void {
  let done = 0;
  while (done < bytes.length) {
    const want = Math.min(IO_CHUNK, bytes.length - done);
    try {
      done += fs.writeSync(fd, bytes, done, want, done);
    } catch (error) {
      throw new Error(
        `openMapped: fs.writeSync("${path}", offset ${done}) failed: ${describeCause(error)}`,
      );
    }
  }
}
