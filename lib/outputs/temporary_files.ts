/** A temporary block's committed files: their bytes, and their removal once no reader needs them. */

import { removeAll, removeNow } from "../runtime/fs_sync.ts";
import type { ManifestFile } from "./manifest.ts";

/**
 * A batch slower than this per file and in all is slow: a network filesystem can take a
 * millisecond per unlink, which would stall the run loop. A single slow batch may be the loop's
 * thread losing its core for a time slice on a busy machine, which says nothing about the
 * filesystem; SLOW_BATCHES in a row do.
 */
const SLOW_PER_FILE_US = 250;
const SLOW_BATCH_US = 5000;
const SLOW_BATCHES = 3;

/**
 * Removes committed output files (or folders) of deleted temporary blocks; ones already gone are
 * fine. On the run loop while the filesystem answers in microseconds (tmpfs, or a local disk's
 * cached metadata: a few microseconds a file): a batch's round trip to the file helper thread,
 * queued behind the commits' renames, took 8 ms at the median in `bench/temporary.ts`, while the
 * blocks still counted as live, against well under a millisecond for the unlinks themselves.
 * After SLOW_BATCHES slow batches in a row every later batch goes to the helper thread.
 */
export class OutputRemover {
  readonly #slowPerFileUs: number;
  readonly #slowBatchUs: number;
  #slowInARow = 0;

  constructor(slowPerFileUs = SLOW_PER_FILE_US, slowBatchUs = SLOW_BATCH_US) {
    this.#slowPerFileUs = slowPerFileUs;
    this.#slowBatchUs = slowBatchUs;
  }

  /** Whether batches are still removed on the calling thread. */
  get inline(): boolean {
    return this.#slowInARow < SLOW_BATCHES;
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
      const micros = (performance.now() - started) * 1000;
      const slow = micros > this.#slowPerFileUs * locations.length && micros > this.#slowBatchUs;
      this.#slowInARow = slow ? this.#slowInARow + 1 : 0;
    } else {
      failed = (await removeAll(locations)).find((e) => e !== null) ?? null;
    }
    if (failed !== null) throw failed;
  }
}

export function bytesOf(files: readonly ManifestFile[]): number {
  let n = 0;
  for (const f of files) n += f[2];
  return n;
}
