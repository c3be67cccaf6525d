/** A temporary block's committed files: their bytes, and their removal once no reader needs them. */

import { removeAll, removeNow } from "../runtime/fs_sync.ts";
import type { ManifestFile } from "./manifest.ts";

/** Above this mean time per file, unlinking would stall the run loop: the helper thread does it. */
const INLINE_LIMIT_US = 50;

/**
 * Removes committed output files (or folders) of deleted temporary blocks; ones already gone are
 * fine. On the run loop while the filesystem answers in microseconds (tmpfs, or a local disk's
 * cached metadata: a few microseconds a file): a batch's round trip to the file helper thread,
 * queued behind the commits' renames, took 8 ms at the median in `bench/temporary.ts`, while the
 * blocks still counted as live, against well under a millisecond for the unlinks themselves.
 * Once a batch averages more than INLINE_LIMIT_US a file (a network filesystem can take a
 * millisecond per unlink, which would stall the loop), every later batch goes to the helper.
 */
export class OutputRemover {
  readonly #limitMicros: number;
  #inline = true;

  constructor(limitMicros = INLINE_LIMIT_US) {
    this.#limitMicros = limitMicros;
  }

  /** Whether batches are still removed on the calling thread. */
  get inline(): boolean {
    return this.#inline;
  }

  /** Remove every location; rejects with the first failure once all were tried. */
  async remove(locations: readonly string[]): Promise<void> {
    if (locations.length === 0) return;
    let failed: Error | null = null;
    if (this.#inline) {
      const started = performance.now();
      for (const location of locations) {
        const error = removeNow(location);
        failed ??= error;
      }
      const micros = (performance.now() - started) * 1000;
      if (micros > this.#limitMicros * locations.length) this.#inline = false;
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
