/**
 * `blockwise reset` of a task with outputs. Reconciliation trusts the disk over the ledger: a
 * block whose manifest says "committed" and whose files are present is done, whatever its done
 * mark says. So clearing done marks alone was undone by the next run's start, which adopted
 * every reset block again ("resumed, 16/16 blocks already done"). A reset block gets a `drop`
 * record whose `why` says it was reset (`RESET_WHY`), written (durably) before the marks are
 * cleared: a reset killed in between leaves blocks to redo, never blocks the run adopts.
 * Reconciliation, `plan` and `status` read the record to call such blocks "reset".
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { type ManifestRecord, ManifestWriter, readManifest, RESET_WHY } from "./manifest.ts";
import { positionOfIndex } from "./reconcile.ts";

/**
 * Appends a drop record for every block of the store at `storeDir` the manifest has outputs for
 * (committed, being committed, or a deleted temporary) whose grid index `selected` accepts.
 * Returns how many.
 */
export function dropResetBlocks(
  storeDir: string,
  layout: TaskLayout,
  selected: (index: readonly number[]) => boolean,
): number {
  const contents = readManifest(storeDir);
  if (contents.lines === 0) return 0;
  const drops: ManifestRecord[] = [];
  for (const entry of contents.blocks.values()) {
    if (entry.intent === null || entry.state === "dropped") continue;
    if (positionOfIndex(layout, entry.intent.index) < 0) continue; // not a block of this grid
    if (selected(entry.intent.index)) {
      drops.push({ t: "drop", index: entry.intent.index, why: RESET_WHY });
    }
  }
  if (drops.length > 0) new ManifestWriter(storeDir).append(drops);
  return drops.length;
}
