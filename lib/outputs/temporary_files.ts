/** A temporary block's committed files: their bytes, and their removal once no reader needs them. */

import { removeAll, removeNow } from "../runtime/fs_sync.ts";
import type { ManifestFile } from "./manifest.ts";

/** What the progress line, the summary and the pacing of its task see of a temporary task. */
export interface TemporaryStats {
  readonly liveBlocks: number;
  readonly liveBytes: number;
  readonly peakBytes: number;
  readonly deletedBlocks: number;
  readonly deletedBytes: number;
  readonly regenerated: number;
  /** Blocks due for deletion whose files are not removed yet. */
  readonly removing: number;
}

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

export function bytesOf(files: readonly ManifestFile[]): number {
  let n = 0;
  for (const f of files) n += f[2];
  return n;
}
