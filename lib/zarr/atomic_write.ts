/**
 * Durable, atomic file writes: the one way this project publishes a metadata document or a
 * chunk file. A file is written under a temporary name in its own folder, flushed to disk
 * (fsync), renamed over its final name, and the folder is flushed too (best effort: some file
 * systems cannot fsync a folder). A reader, or a crash of the process or the machine, sees the
 * old file or the new one, never a partial one; two writers of one file leave one complete
 * version.
 *
 * Folders built whole (a tracking store, a migrated store, a mask's Zarr array) are assembled
 * in a `hiddenSibling` with `writeFileDurable` / `createFilledFile` and renamed into place by
 * their owner, which then calls `fsyncDirectory` on the parent.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { randomUUID } from "node:crypto";
import { errorCode } from "../errors.ts";
import { fillWithPattern } from "./data_types.ts";

/** Flush a folder's entries (renames, new files) to disk; ignored where that is unsupported. */
export function fsyncDirectory(dir: string): void {
  let fd: number;
  try {
    fd = fs.openSync(dir, "r");
  } catch {
    return;
  }
  try {
    fs.fsyncSync(fd);
  } catch {
    // EINVAL/EISDIR/EPERM: the file system does not sync folders; the rename still happened.
  } finally {
    fs.closeSync(fd);
  }
}

function writeAll(fd: number, data: string | Uint8Array): void {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  for (let at = 0; at < bytes.length;) at += fs.writeSync(fd, bytes, at, bytes.length - at);
}

/** Write `data` to a new file `file` (it must not exist) and fsync it. */
function writeNewFile(file: string, data: string | Uint8Array): void {
  const fd = fs.openSync(file, "wx", 0o644);
  try {
    writeAll(fd, data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function tempName(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.tmp-${randomUUID()}`);
}

/**
 * Write `data` to `file` atomically and durably, creating the folder if needed: temporary file
 * in the same folder, fsync, rename, fsync of the folder.
 */
export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  const dir = path.dirname(file);
  fs.mkdirSync(dir, { recursive: true });
  const temp = tempName(file);
  try {
    writeNewFile(temp, data);
    fs.renameSync(temp, file);
  } catch (error) {
    fs.rmSync(temp, { force: true });
    throw error;
  }
  fsyncDirectory(dir);
}

/** `writeFileAtomic` of a JSON document (2-space indented, trailing newline). */
export function writeJsonAtomic(file: string, value: unknown): void {
  writeFileAtomic(file, `${JSON.stringify(value, null, 2)}\n`);
}

/**
 * Publish `data` at `file` only if nothing is there yet; false when it already existed. The
 * file appears complete or not at all (a hard link of a finished, flushed temporary file), and
 * of several concurrent callers exactly one wins. On a file system without hard links it falls
 * back to an exclusive create, which still has one winner but may briefly show a partial file.
 */
export function writeFileIfMissing(file: string, data: string | Uint8Array): boolean {
  const dir = path.dirname(file);
  fs.mkdirSync(dir, { recursive: true });
  const temp = tempName(file);
  writeNewFile(temp, data);
  try {
    fs.linkSync(temp, file);
    fsyncDirectory(dir);
    return true;
  } catch (error) {
    const code = errorCode(error);
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "ENOSYS" && code !== "EOPNOTSUPP") {
      throw error;
    }
  } finally {
    fs.rmSync(temp, { force: true });
  }
  try {
    writeNewFile(file, data);
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    throw error;
  }
  fsyncDirectory(dir);
  return true;
}

/** Write and fsync a file inside a folder that is published later, whole, by a rename. */
export function writeFileDurable(file: string, data: string | Uint8Array): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const fd = fs.openSync(file, "w", 0o644);
  try {
    writeAll(fd, data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Create `file` with `byteLength` bytes of a repeated element `pattern`, fsynced. Zeros make a
 * sparse file (no memory, no writes); other patterns are written in 1 MiB pieces, so a large
 * chunk is never held in memory whole.
 */
export function createFilledFile(file: string, byteLength: number, pattern: Uint8Array): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const fd = fs.openSync(file, "w", 0o644);
  try {
    if (pattern.every((b) => b === 0)) {
      fs.ftruncateSync(fd, byteLength);
    } else {
      const size = Math.min(byteLength, 1 << 20);
      const piece = new Uint8Array(size - (size % pattern.length));
      fillWithPattern(piece, pattern);
      for (let at = 0; at < byteLength; at += piece.length) {
        fs.writeSync(fd, piece, 0, Math.min(piece.length, byteLength - at), at);
      }
    }
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A hidden name beside `target` for building it before a rename: `.<name>.<label>-<pid>-<t>`.
 * The prefix `.<name>.<label>-` is what recovery code looks for.
 */
export function hiddenSibling(target: string, label: string): string {
  return path.join(
    path.dirname(target),
    `.${path.basename(target)}.${label}-${process.pid}-${Date.now().toString(36)}`,
  );
}
