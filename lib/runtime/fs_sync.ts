/**
 * Making many files durable at once. Group commit of block outputs writes hundreds of small
 * files and then needs them all on disk before it records them: one `fsync` per file costs about
 * a millisecond each, while Linux's `syncfs(fd)` writes back every dirty page of one filesystem
 * in a single call. It is reached through libc (bun:ffi or Deno FFI) where available; elsewhere
 * the caller falls back to fsync per file (`fsyncFile`).
 */

import * as fs from "node:fs";
import process from "node:process";
import { runtimeName } from "./detect.ts";
import { denoFfiState } from "./mmap_deno.ts";

type SyncFs = (fd: number) => number;

let binding: Promise<SyncFs | null> | null = null;

function load(): Promise<SyncFs | null> {
  binding ??= bind();
  return binding;
}

async function bind(): Promise<SyncFs | null> {
  if (process.platform !== "linux") return null;
  try {
    if (runtimeName() === "bun") {
      const ffi = await import("bun:ffi") as unknown as {
        dlopen(lib: string, symbols: Record<string, { args: string[]; returns: string }>): {
          symbols: { syncfs: SyncFs };
        };
      };
      return ffi.dlopen("libc.so.6", { syncfs: { args: ["i32"], returns: "i32" } }).symbols
        .syncfs;
    }
    if (runtimeName() === "deno" && denoFfiState() === "granted") {
      const d = (globalThis as unknown as {
        Deno: {
          dlopen(lib: string, symbols: Record<string, { parameters: string[]; result: string }>): {
            symbols: { syncfs: SyncFs };
          };
        };
      }).Deno;
      return d.dlopen("libc.so.6", { syncfs: { parameters: ["i32"], result: "i32" } }).symbols
        .syncfs;
    }
  } catch {
    return null;
  }
  return null;
}

/**
 * Write back every dirty page of the filesystem holding `path` (a file or folder); false when
 * this runtime or platform cannot, and the caller must fsync each file itself.
 */
export async function syncFilesystem(path: string): Promise<boolean> {
  const syncfs = await load();
  if (syncfs === null) return false;
  const fd = fs.openSync(path, "r");
  try {
    return syncfs(fd) === 0;
  } finally {
    fs.closeSync(fd);
  }
}

/** fsync one file (or folder) by path. */
export function fsyncFile(path: string): void {
  const fd = fs.openSync(path, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
