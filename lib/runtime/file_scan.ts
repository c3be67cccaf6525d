/**
 * Stat and list many files fast. Reconciling a task's outputs stats every recorded file and
 * lists every output folder: 100,000 files at each start of a run. Under Deno, `node:fs` costs
 * about 11 µs per `statSync` and 5 µs per directory entry (the polyfill builds a `Stats` with
 * dates, and a `Dirent`, through several layers of ops); libc's `statx` and the `getdents64`
 * system call through Deno FFI cost about 3 µs and 0.5 µs. Bun's `node:fs` is already close to
 * the system calls, so Bun (and Deno without an unscoped `--allow-ffi`, and other systems) use
 * `node:fs`. Both paths give the same answers; tests/file_scan.test.ts checks them against each
 * other.
 *
 * `struct statx` and `struct linux_dirent64` have the same layout on every Linux architecture;
 * only the `getdents64` system call number differs.
 */

import * as fs from "node:fs";
import process from "node:process";
import { runtimeName } from "./detect.ts";
import { denoFfiState } from "./mmap_deno.ts";

/** `pathSize` of a path that is missing, unreadable, or neither a file nor a folder. */
export const NOT_A_FILE = -1;
/** `pathSize` of a folder. */
export const A_FOLDER = -2;

/** One directory entry: its name, and whether it is a folder (a symbolic link is not). */
export interface FolderEntry {
  readonly name: string;
  readonly folder: boolean;
}

interface FileScan {
  pathSize(file: string): number;
  /** The modification time (ms since the epoch) of the file the last `pathSize` found. */
  lastModifiedMs(): number;
  list(folder: string): FolderEntry[] | null;
}

/** The byte size of a regular file (following symbolic links), A_FOLDER, or NOT_A_FILE. */
export function pathSize(file: string): number {
  return scanner().pathSize(file);
}

/**
 * The modification time (ms since the epoch) of the regular file or folder the last
 * `pathSize` call found (read by the same system call; NaN after a path that was neither).
 */
export function lastModifiedMs(): number {
  return scanner().lastModifiedMs();
}

/** A folder's entries (without "." and ".."), or null when it cannot be listed. */
export function listFolder(folder: string): FolderEntry[] | null {
  return scanner().list(folder);
}

/**
 * Call `visit` with each line of a UTF-8 text file (without its "\n"; a last line without one
 * too); false when the file does not exist. It reads 1 MiB at a time (less for a smaller file,
 * and nothing held between calls or by threads that never call it). A 40 MB manifest read
 * whole took 270-300 ms under Deno and 120-200 ms under Bun, most of it faulting in fresh pages
 * for the bytes and again for the string, and left both for the collector.
 */
export function forEachLine(file: string, visit: (line: string) => void): boolean {
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return false;
    throw error;
  }
  try {
    const chunk = new Uint8Array(Math.min(Math.max(fs.fstatSync(fd).size, 4096), CHUNK_BYTES));
    const decoder = new TextDecoder();
    let carry = "";
    let position = 0;
    for (;;) {
      const n = fs.readSync(fd, chunk, 0, chunk.length, position);
      position += n;
      // Streaming decode: a character cut at the chunk's end is completed by the next chunk.
      const text = carry + decoder.decode(chunk.subarray(0, n), { stream: n > 0 });
      let start = 0;
      for (let end = text.indexOf("\n"); end >= 0; end = text.indexOf("\n", start)) {
        visit(text.slice(start, end));
        start = end + 1;
      }
      carry = text.slice(start);
      if (n <= 0) break;
    }
    if (carry !== "") visit(carry);
    return true;
  } finally {
    fs.closeSync(fd);
  }
}

const CHUNK_BYTES = 1 << 20;

/** Which implementation this process uses: "deno-ffi" or "node-fs" (for tests). */
export function fileScanKind(): "deno-ffi" | "node-fs" {
  return scanner() === NODE_FS ? "node-fs" : "deno-ffi";
}

let nodeModified = Number.NaN;

const NODE_FS: FileScan = {
  pathSize(file) {
    let stat: fs.Stats | undefined;
    nodeModified = Number.NaN;
    try {
      stat = fs.statSync(file, { throwIfNoEntry: false });
    } catch {
      return NOT_A_FILE;
    }
    if (stat === undefined) return NOT_A_FILE;
    nodeModified = stat.mtimeMs;
    return stat.isFile() ? stat.size : stat.isDirectory() ? A_FOLDER : NOT_A_FILE;
  },
  lastModifiedMs: () => nodeModified,
  list(folder) {
    try {
      return fs.readdirSync(folder, { withFileTypes: true }).map((e) => ({
        name: e.name,
        folder: e.isDirectory(),
      }));
    } catch {
      return null;
    }
  },
};

let chosen: FileScan | null = null;

function scanner(): FileScan {
  chosen ??= (runtimeName() === "deno" ? denoFfiScan() : null) ?? NODE_FS;
  return chosen;
}

/** getdents64's system call number per architecture (x86-64's own, else asm-generic). */
const GETDENTS64: Readonly<Record<string, bigint>> = { x64: 217n, arm64: 61n, riscv64: 61n };

interface DenoScanSymbols {
  statx(dirfd: number, path: Uint8Array, flags: number, mask: number, out: Uint8Array): number;
  open(path: Uint8Array, flags: number, mode: number): number;
  close(fd: number): number;
  syscall(number: bigint, fd: bigint, buffer: Uint8Array, length: bigint): bigint;
}

const AT_FDCWD = -100;
const AT_SYMLINK_NOFOLLOW = 0x100;
const STATX_TYPE_AND_SIZE = 0x001 | 0x200 | 0x040; // STATX_TYPE | STATX_SIZE | STATX_MTIME
const O_RDONLY_DIRECTORY_CLOEXEC = 0o200000 | 0o2000000;
const S_IFMT = 0xf000;
const S_IFDIR = 0x4000;
const S_IFREG = 0x8000;
const DT_UNKNOWN = 0;
const DT_DIR = 4;

function denoFfiScan(): FileScan | null {
  const getdents = GETDENTS64[process.arch];
  if (process.platform !== "linux" || getdents === undefined) return null;
  if (denoFfiState() !== "granted") return null;
  let libc: DenoScanSymbols;
  try {
    const d = (globalThis as unknown as {
      Deno: {
        dlopen(
          lib: string,
          symbols: Record<keyof DenoScanSymbols, { parameters: string[]; result: string }>,
        ): { symbols: DenoScanSymbols };
      };
    }).Deno;
    libc = d.dlopen("libc.so.6", {
      statx: { parameters: ["i32", "buffer", "i32", "u32", "buffer"], result: "i32" },
      open: { parameters: ["buffer", "i32", "u32"], result: "i32" },
      close: { parameters: ["i32"], result: "i32" },
      syscall: { parameters: ["i64", "i64", "buffer", "i64"], result: "i64" },
    }).symbols;
  } catch {
    return null; // no glibc (musl names it differently): node:fs is right, only slower
  }
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let cPath = new Uint8Array(4096);
  const statBuffer = new Uint8Array(256);
  const statView = new DataView(statBuffer.buffer);
  const entries = new Uint8Array(1 << 18);
  const entriesView = new DataView(entries.buffer);

  /** `text` as a NUL-terminated C string in a reused buffer, or null if it holds a NUL. */
  const cString = (text: string): Uint8Array | null => {
    if (text.includes("\0")) return null;
    if (cPath.length < text.length * 3 + 1) cPath = new Uint8Array(text.length * 3 + 1);
    const { written } = encoder.encodeInto(text, cPath);
    cPath[written] = 0;
    return cPath;
  };
  const statMode = (file: string, flags: number): number => {
    const c = cString(file);
    if (c === null || libc.statx(AT_FDCWD, c, flags, STATX_TYPE_AND_SIZE, statBuffer) !== 0) {
      return -1;
    }
    return statView.getUint16(0x1c, true) & S_IFMT;
  };

  let modified = Number.NaN;
  return {
    pathSize(file) {
      const mode = statMode(file, 0);
      // stx_mtime: seconds (i64) at 0x70, nanoseconds (u32) at 0x78.
      modified = mode === S_IFDIR || mode === S_IFREG
        ? Number(statView.getBigInt64(0x70, true)) * 1000 + statView.getUint32(0x78, true) / 1e6
        : Number.NaN;
      if (mode === S_IFDIR) return A_FOLDER;
      if (mode !== S_IFREG) return NOT_A_FILE;
      return Number(statView.getBigUint64(0x28, true));
    },
    lastModifiedMs: () => modified,
    list(folder) {
      const c = cString(folder);
      if (c === null) return null;
      const fd = libc.open(c, O_RDONLY_DIRECTORY_CLOEXEC, 0);
      if (fd < 0) return null;
      const found: FolderEntry[] = [];
      try {
        for (;;) {
          const got = Number(libc.syscall(getdents, BigInt(fd), entries, BigInt(entries.length)));
          if (got < 0) return null;
          if (got === 0) return found;
          for (let at = 0; at < got;) {
            const length = entriesView.getUint16(at + 16, true);
            const type = entries[at + 18]!;
            const end = entries.indexOf(0, at + 19);
            const name = decoder.decode(entries.subarray(at + 19, end));
            at += length;
            if (name === "." || name === "..") continue;
            // Some filesystems do not fill in the type: ask, as node:fs does (lstat).
            const folderEntry = type === DT_UNKNOWN
              ? statMode(`${folder}/${name}`, AT_SYMLINK_NOFOLLOW) === S_IFDIR
              : type === DT_DIR;
            found.push({ name, folder: folderEntry });
          }
        }
      } finally {
        libc.close(fd);
      }
    },
  };
}
