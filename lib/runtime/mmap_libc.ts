/**
 * The POSIX side of the mmap adapters: each platform's flag values, and opening, sizing and
 * mapping a file through a libc binding (bun:ffi or Deno FFI), with msync, madvise and munmap.
 */

import * as fs from "node:fs";
import process from "node:process";
import { type Backing, type LibcBinding, openFailedError, sizeMismatchError } from "./mmap_fs.ts";

export interface PosixPlatform {
  readonly library: string;
  readonly O_RDONLY: number;
  readonly O_RDWR: number;
  readonly O_CREAT: number;
  readonly O_EXCL: number;
  readonly O_CLOEXEC: number;
  readonly PROT_READ: number;
  readonly PROT_WRITE: number;
  readonly MAP_SHARED: number;
  readonly MAP_PRIVATE: number;
  readonly MS_ASYNC: number;
  readonly MS_SYNC: number;
  readonly MADV_DONTNEED: number;
  readonly SEEK_END: number;
}

/** Linux architectures that use the asm-generic open/mmap constants below. */
const LINUX_GENERIC_ARCHES = new Set(["x64", "arm64", "ia32", "arm", "riscv64", "loong64"]);

export function posixPlatform(): PosixPlatform | null {
  if (process.platform === "linux" && LINUX_GENERIC_ARCHES.has(process.arch)) {
    return {
      library: "libc.so.6",
      O_RDONLY: 0,
      O_RDWR: 2,
      O_CREAT: 0o100,
      O_EXCL: 0o200,
      O_CLOEXEC: 0o2000000,
      PROT_READ: 1,
      PROT_WRITE: 2,
      MAP_SHARED: 1,
      MAP_PRIVATE: 2,
      MS_ASYNC: 1,
      MS_SYNC: 4,
      MADV_DONTNEED: 4,
      SEEK_END: 2,
    };
  }
  if (process.platform === "darwin") {
    return {
      library: "/usr/lib/libSystem.B.dylib",
      O_RDONLY: 0,
      O_RDWR: 2,
      O_CREAT: 0x200,
      O_EXCL: 0x800,
      O_CLOEXEC: 0x1000000,
      PROT_READ: 1,
      PROT_WRITE: 2,
      MAP_SHARED: 1,
      MAP_PRIVATE: 2,
      MS_ASYNC: 0x1,
      MS_SYNC: 0x10,
      MADV_DONTNEED: 4,
      SEEK_END: 2,
    };
  }
  return null;
}

/** Which adapter `openMapped(..., { kind: "auto" })` uses here, and why. Synchronous. */

/** open (+ create) / check the size / mmap through a libc binding. */
export function mapWithLibc(
  libc: LibcBinding,
  p: PosixPlatform,
  path: string,
  byteLength: number,
  create: boolean,
  readOnly: boolean,
): Backing {
  const cpath = new TextEncoder().encode(`${path}\0`);
  if (create) {
    // O_EXCL: only a file this call created is ever sized. If it fails the file exists (or
    // cannot be created); the plain open below then checks or reports it.
    const fd = libc.open(cpath, p.O_RDWR | p.O_CREAT | p.O_EXCL | p.O_CLOEXEC, 0o644);
    if (fd >= 0) {
      const rc = libc.ftruncate(fd, byteLength);
      libc.close(fd);
      if (rc !== 0) {
        removeQuietly(path);
        throw new Error(
          `openMapped: ftruncate("${path}", ${byteLength}) failed after creating it ` +
            `(through ${libc.library})`,
        );
      }
    }
  }
  const openFlags = readOnly ? "O_RDONLY" : "O_RDWR";
  const fd = libc.open(cpath, (readOnly ? p.O_RDONLY : p.O_RDWR) | p.O_CLOEXEC, 0);
  if (fd < 0) {
    throw openFailedError(path, byteLength, `open(path, ${openFlags})`, create);
  }
  try {
    const size = libc.lseek(fd, 0, p.SEEK_END);
    if (size < 0) {
      throw new Error(`openMapped: lseek("${path}", 0, SEEK_END) failed (is it a regular file?)`);
    }
    if (size !== byteLength) {
      if (!isRegularFile(path)) throw new Error(`openMapped: "${path}" is not a regular file`);
      throw sizeMismatchError(path, byteLength, size);
    }
    if (!readOnly) allocateOrRefuse(libc, fd, path, byteLength);
    const prot = readOnly
      ? "PROT_READ|PROT_WRITE, MAP_PRIVATE"
      : "PROT_READ|PROT_WRITE, MAP_SHARED";
    const region = libc.mmap(
      byteLength,
      p.PROT_READ | p.PROT_WRITE,
      readOnly ? p.MAP_PRIVATE : p.MAP_SHARED,
      fd,
    );
    if (region === null) {
      throw new Error(
        `openMapped: mmap("${path}", ${byteLength} bytes, ${prot}) failed (through ` +
          `${libc.library})`,
      );
    }
    return {
      bytes: region.bytes,
      flush(): void {
        if (region.msync(p.MS_SYNC) !== 0) {
          throw new Error(`openMapped: msync("${path}", ${byteLength} bytes, MS_SYNC) failed`);
        }
      },
      dropResident(): void {
        // Waiting here for the disk (MS_SYNC) cost a run with resource tracking most of its
        // time. Dropping dirty MAP_SHARED file pages keeps their data in the page cache (Linux
        // marks the page dirty as it unmaps it); MS_ASYNC asks other kernels to write it back.
        if (region.msync(p.MS_ASYNC) !== 0) {
          throw new Error(`openMapped: msync("${path}", ${byteLength} bytes, MS_ASYNC) failed`);
        }
        if (region.madvise(p.MADV_DONTNEED) !== 0) {
          throw new Error(`openMapped: madvise("${path}", MADV_DONTNEED) failed`);
        }
      },
      release(): void {
        const unmapped = region.munmap();
        const closed = libc.close(fd);
        if (unmapped !== 0) throw new Error(`openMapped: munmap("${path}") failed`);
        if (closed !== 0) throw new Error(`openMapped: close() of "${path}" failed`);
      },
    };
  } catch (error) {
    libc.close(fd);
    throw error;
  }
}

/** False only when a stat shows `path` is not a regular file (a directory, a device...). */
function isRegularFile(path: string): boolean {
  try {
    return fs.statSync(path).isFile();
  } catch {
    return true; // cannot tell (e.g. Deno with --allow-ffi but no --allow-read)
  }
}

function removeQuietly(path: string): void {
  // Only ever called on a file this call just created with O_EXCL and could not size.
  try {
    fs.rmSync(path, { force: true });
  } catch {
    // Left as an empty file; the next create refuses it with a size mismatch.
  }
}

/** posix_fallocate's answers that mean the disk (or the quota) has no room. */
const NO_ROOM: Readonly<Record<number, string>> = {
  27: "file too large",
  28: "no space left on device",
  122: "disk quota exceeded",
};

/**
 * Give a writable mapping's file all its blocks now. A store file is created sparse; a write
 * through the mapping into a hole on a full disk is a SIGBUS, which kills the run with no
 * message. Allocated up front, a full disk is a clear refusal at the start instead, and blocks
 * written later still have their place. Filesystems that cannot allocate keep the old way.
 */
function allocateOrRefuse(libc: LibcBinding, fd: number, path: string, byteLength: number): void {
  if (libc.allocate === undefined || byteLength === 0 || !hasHoles(path, byteLength)) return;
  const rc = libc.allocate(fd, byteLength);
  const why = NO_ROOM[rc];
  if (why === undefined) return;
  throw new Error(
    `not enough room on the disk for "${path}" (${byteLength} bytes; posix_fallocate: ${why}); free space on that disk, or put the tracking store on another one (--tracking-dir)`,
  );
}

/**
 * Whether the file has fewer blocks on disk than its size needs. An allocated file is left alone:
 * `posix_fallocate` would still touch its times, and a command refused later (another run holds
 * a store) must change nothing.
 */
function hasHoles(path: string, byteLength: number): boolean {
  try {
    const blocks = fs.statSync(path).blocks;
    return !(typeof blocks === "number" && blocks * 512 >= byteLength);
  } catch {
    return true;
  }
}
