/**
 * What `status` says about a store's declared outputs: blocks whose outputs are committed and
 * on disk, temporary blocks deleted behind a tombstone, and the bytes of each (from the
 * manifest's intent records). Read-only, like the rest of inspection.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { indexKey, MANIFEST_FILE, readManifest, RESET_WHY } from "./manifest.ts";
import { positionOfIndex } from "./grid_index.ts";
import { trackingArray } from "./arrays.ts";
import { forEachBlockRun } from "./block_runs.ts";
import { readChunk } from "./chunk_reads.ts";
import type { StoreMetadata } from "./store_metadata.ts";
import { OUTPUTS_DELETED, OUTPUTS_PRESENT } from "./store.ts";

/**
 * `StoreReport.outputs` (null for a store without outputs):
 *
 * ```
 * { present_blocks: number, present_bytes: number,   // committed and on disk
 *   deleted_blocks: number, deleted_bytes: number,   // temporaries deleted (tombstones)
 *   reset_blocks: number,                            // reset by blockwise reset: run again
 *                                                    // (their old files stay until then)
 *   temporary: boolean,                              // the task freed outputs as a temporary
 *   nondeterministic: boolean }                      // a regenerated block came back different
 * ```
 */
export interface OutputReport {
  readonly present_blocks: number;
  readonly present_bytes: number;
  readonly deleted_blocks: number;
  readonly deleted_bytes: number;
  readonly reset_blocks: number;
  readonly temporary: boolean;
  readonly nondeterministic: boolean;
}

/** `declaredTemporary`: the last run's record says the task is temporary. */
export function outputReport(meta: StoreMetadata, declaredTemporary: boolean): OutputReport | null {
  if (!meta.provenance || !fs.existsSync(path.join(meta.path, MANIFEST_FILE))) return null;
  const layout = meta.layout;
  const states = readChunk(meta, trackingArray("outputs_state"));
  const manifest = readManifest(meta.path);
  let presentBlocks = 0;
  let presentBytes = 0;
  let deletedBlocks = 0;
  let deletedBytes = 0;
  const bytesOf = (position: number): number => {
    const entry = manifest.blocks.get(indexKey(layout.gridIndexOf(position)));
    let n = 0;
    for (const file of entry?.intent?.files ?? []) n += file[2];
    return n;
  };
  forEachBlockRun(layout, (position, cell, length) => {
    for (let i = 0; i < length; i++) {
      const state = states[cell + i];
      if (state === OUTPUTS_PRESENT) {
        presentBlocks++;
        presentBytes += bytesOf(position + i);
      } else if (state === OUTPUTS_DELETED) {
        deletedBlocks++;
        deletedBytes += bytesOf(position + i);
      }
    }
  });
  const done = readChunk(meta, trackingArray("done"));
  let resetBlocks = 0;
  for (const entry of manifest.blocks.values()) {
    if (entry.state !== "dropped" || entry.why !== RESET_WHY || entry.intent === null) continue;
    const position = positionOfIndex(layout, entry.intent.index);
    const cell = position < 0 ? -1 : layout.trackingCellOf(position);
    if (cell >= 0 && done[cell] !== 1) resetBlocks++;
  }
  let tombstones = declaredTemporary || deletedBlocks > 0;
  if (!tombstones) {
    for (const entry of manifest.blocks.values()) {
      if (entry.state === "tombstoned") {
        tombstones = true;
        break;
      }
    }
  }
  return {
    present_blocks: presentBlocks,
    present_bytes: presentBytes,
    deleted_blocks: deletedBlocks,
    deleted_bytes: deletedBytes,
    reset_blocks: resetBlocks,
    temporary: tombstones,
    nondeterministic: manifest.nondeterministic,
  };
}
