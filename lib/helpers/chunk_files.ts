/**
 * The store `openArray` reads and writes chunk files through: zarrita's FileSystemStore, except
 * for two things.
 *
 * - `set` writes synchronously and does not first create the chunk's folder. zarrita's `set`
 *   runs `mkdir -p` before every file (0.01-0.5 ms each, measured per 1 MiB chunk on a tmpfs,
 *   against 0.3 ms for the write itself) and writes through the runtime's thread pool; here
 *   the file is written straight away and only a write that fails because a folder is missing
 *   creates the folders and writes again. Synchronous writes made a pipeline's Blosc lz4 write
 *   pass 10 % faster with one worker and 15 % with two, uncompressed 25 % with two
 *   (docs/design/CODECS.md, "Synchronous chunk files"): a worker's block waits for its
 *   writes anyway, and blocks run in parallel across workers, not within one.
 * - `readChunkFile` reads a chunk file into a scratch buffer (lib/zarr/scratch_buffers.ts) instead of a
 *   new one per chunk, synchronously: on a 1 MiB chunk of a tmpfs 0.15-0.25 ms against
 *   0.35-0.7 for `fs.promises.readFile` (open, stat, read and close each a round trip through
 *   the runtime's thread pool, and fresh pages to fault in). It is used for a block that is
 *   exactly one chunk, where the read is the only thing the block waits for.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { FileSystemStore } from "@zarrita/storage";
import { takeScratch } from "../zarr/scratch_buffers.ts";

type StoreKey = Parameters<FileSystemStore["set"]>[0];

/** zarrita's FileSystemStore with a synchronous `set` that makes folders only when missing. */
export class ChunkFileStore extends FileSystemStore {
  override set(key: StoreKey, value: Uint8Array): Promise<void> {
    const file = path.join(this.root, key.slice(1)); // keys start with "/", as zarrita strips
    try {
      writeCreatingFolders(file, value);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error); // as zarrita's set: a failed write is a rejected promise
    }
  }
}

function writeCreatingFolders(file: string, value: Uint8Array): void {
  try {
    fs.writeFileSync(file, value);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, value);
  }
}

/**
 * The bytes of the chunk file `key` (zarrita's key, starting with "/") of `store`, read into a
 * scratch buffer whose first `length` bytes they are, or undefined when there is no such file
 * (the chunk holds the fill value). Give `buffer` back with `giveBackScratch` once nothing reads
 * the bytes any more.
 */
export function readChunkFile(
  store: FileSystemStore,
  key: string,
): { readonly bytes: Uint8Array; readonly buffer: Uint8Array } | undefined {
  let fd: number;
  try {
    fd = fs.openSync(path.join(store.root, key.slice(1)), "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const length = fs.fstatSync(fd).size;
    // Buffers come in powers of two so that chunks of slightly different sizes share them.
    const buffer = takeScratch(Uint8Array, 2 ** Math.ceil(Math.log2(Math.max(length, 4096))));
    let read = 0;
    while (read < length) {
      const n = fs.readSync(fd, buffer, read, length - read, read);
      if (n === 0) break;
      read += n;
    }
    return { bytes: buffer.subarray(0, read), buffer };
  } finally {
    fs.closeSync(fd);
  }
}
