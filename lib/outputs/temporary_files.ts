/** A temporary block's committed files: their bytes, and their removal once no reader needs them. */

import { removeAll, removeNow } from "../runtime/fs_sync.ts";
import type { ManifestFile } from "./manifest.ts";
import type { TemporaryStats } from "../run/run_types.ts";

/**
 * Unlinking on the run loop is worth it only while a file goes in microseconds: tmpfs takes
 * about 6 µs, a local disk's cached metadata 8-10 µs. A file whose data reached the disk can
 * cost much more: ext4 mounted with `discard` trims the freed blocks inside the unlink (135 µs a
 * file on this project's VM, up to 0.55 s of a 2.7 s run), a network filesystem takes a round
 * trip (a millisecond). Those go to a helper thread instead, decided over windows of
 * WINDOW_FILES files: one batch alone may be slow because the loop's thread lost its core for a
 * time slice (up to 10-15 ms on a busy 2-core machine, which a window's average absorbs), so
 * only SLOW_WINDOWS slow windows in a row switch.
 */
const SLOW_PER_FILE_US = 60;
const WINDOW_FILES = 256;
const SLOW_WINDOWS = 2;
/** Files per request to the helper thread, which answers each when its unlinks are done. */
const HELPER_CHUNK = 8;

/**
 * Removes committed output files (or folders) of deleted temporary blocks; ones already gone are
 * fine. On the run loop while the filesystem answers in microseconds: a batch's round trip to a
 * helper thread took 8 ms at the median in `bench/temporary.ts` while queued behind the
 * commits' renames, and the blocks still count as live meanwhile. After SLOW_WINDOWS slow
 * windows in a row every later batch goes to the file helper thread that only removes.
 */
export class OutputRemover {
  readonly #slowPerFileUs: number;
  readonly #windowFiles: number;
  #windowUs = 0;
  #windowCount = 0;
  #slowInARow = 0;

  constructor(slowPerFileUs = SLOW_PER_FILE_US, windowFiles = WINDOW_FILES) {
    this.#slowPerFileUs = slowPerFileUs;
    this.#windowFiles = windowFiles;
  }

  /** Whether batches are still removed on the calling thread. */
  get inline(): boolean {
    return this.#slowInARow < SLOW_WINDOWS;
  }

  /** Remove every location; rejects with the first failure once all were tried. */
  async remove(locations: readonly string[]): Promise<void> {
    if (locations.length === 0) return;
    let failed: Error | null = null;
    if (this.inline) {
      const started = performance.now();
      for (const location of locations) {
        const error = removeNow(location);
        failed ??= error;
      }
      this.#measured((performance.now() - started) * 1000, locations.length);
    } else {
      failed = (await removeAll(locations)).find((e) => e !== null) ?? null;
    }
    if (failed !== null) throw failed;
  }

  /**
   * Remove each block's locations, reporting each block (by index, in order) once all of them
   * went. Off the loop they go in requests of HELPER_CHUNK files, so a block counts as removed
   * when its own unlinks returned, not when the whole batch's did: where an unlink trims the
   * disk (80 µs a file on `/tmp` here), a batch of 200 blocks sent as one request stayed
   * counted live for 16 ms after its first files were gone (docs/design/TEMPORARIES.md).
   * Rejects with the first failure once all were tried; the blocks from the first failing
   * request on are not reported.
   */
  async removeBlocks(
    blocks: readonly (readonly string[])[],
    onRemoved: (block: number) => void,
  ): Promise<void> {
    const locations = blocks.flat();
    if (this.inline || locations.length <= HELPER_CHUNK) {
      await this.remove(locations);
      for (let i = 0; i < blocks.length; i++) onRemoved(i);
      return;
    }
    const requests: Promise<(Error | null)[]>[] = [];
    for (let i = 0; i < locations.length; i += HELPER_CHUNK) {
      requests.push(removeAll(locations.slice(i, i + HELPER_CHUNK)));
    }
    let failed: Error | null = null;
    let removed = 0;
    let next = 0;
    let upTo = 0;
    for (const request of requests) {
      const errors = await request;
      failed ??= errors.find((e) => e !== null) ?? null;
      if (failed !== null) continue;
      removed += errors.length;
      while (next < blocks.length && upTo + blocks[next]!.length <= removed) {
        upTo += blocks[next]!.length;
        onRemoved(next++);
      }
    }
    if (failed !== null) throw failed;
  }

  #measured(micros: number, files: number): void {
    this.#windowUs += micros;
    this.#windowCount += files;
    if (this.#windowCount < this.#windowFiles) return;
    const slow = this.#windowUs > this.#slowPerFileUs * this.#windowCount;
    this.#slowInARow = slow ? this.#slowInARow + 1 : 0;
    this.#windowUs = 0;
    this.#windowCount = 0;
  }
}

/**
 * The bytes of one temporary task on disk. A block's files count from the moment its result
 * arrives (written in staging, its commit starting: `staging`), not only once its commit ends:
 * with a hundred blocks committing at once on a disk they are a few percent of the task, and
 * they are on the disk all that time. `liveBlocks` counts committed blocks only.
 */
export class TemporaryBytes {
  liveBlocks = 0;
  liveBytes = 0;
  peakBytes = 0;
  deletedBlocks = 0;
  deletedBytes = 0;
  /** Bytes of the blocks whose commit has begun and not ended, by position. */
  readonly #committing = new Map<number, number>();

  /** A committed block becomes live (+1) or its files are removed (-1). */
  live(files: readonly ManifestFile[], sign: 1 | -1): void {
    this.liveBlocks += sign;
    this.#add(sign * bytesOf(files));
  }

  /** A block is deleted (+1), or a deleted one is regenerated (-1, its tombstone's bytes). */
  deleted(bytes: number, sign: 1 | -1): void {
    this.deletedBlocks += sign;
    this.deletedBytes += sign * bytes;
  }

  /** A block's result arrived: its files are on disk while it commits. */
  staging(position: number, files: readonly ManifestFile[]): void {
    this.#add(bytesOf(files) - (this.#committing.get(position) ?? 0));
    this.#committing.set(position, bytesOf(files));
  }

  /** Its commit ended (counted by `live` from now on, if it is live) or failed. */
  settled(position: number): void {
    this.#add(-(this.#committing.get(position) ?? 0));
    this.#committing.delete(position);
  }

  stats(regenerated: number, removing: number): TemporaryStats {
    const { liveBlocks, liveBytes, peakBytes, deletedBlocks, deletedBytes } = this;
    return { liveBlocks, liveBytes, peakBytes, deletedBlocks, deletedBytes, regenerated, removing };
  }

  #add(bytes: number): void {
    this.liveBytes += bytes;
    if (this.liveBytes > this.peakBytes) this.peakBytes = this.liveBytes;
  }
}

export function bytesOf(files: readonly ManifestFile[]): number {
  let n = 0;
  for (const f of files) n += f[2];
  return n;
}
