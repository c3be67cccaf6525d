/**
 * Read-only snapshots of tracking stores for `plan`: the arrays `run` would map, read with plain
 * fs reads into memory (no lock, no mmap, nothing created, migrated or written), so what the
 * start of a run does to them (reconcile) can be replayed on the copy.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import type { TaskLayout } from "../blocks/mod.ts";
import { fillPattern, TRACKING_ARRAYS, type TrackingArraySpec } from "../tracking/arrays.ts";
import { checkHostByteOrder, readChunk } from "../tracking/chunk_reads.ts";
import { readStoreMetadata } from "../tracking/store_metadata.ts";
import type { StoreProvenance } from "../tracking/store.ts";
import { taskHash } from "../tracking/task_hash.ts";

/** What `plan` needs of a store: the shape `reconcileTask` and `ProvenanceModel` read. */
export interface StoreSnapshot {
  readonly path: string;
  readonly done: Uint8Array;
  readonly failures: Uint32Array;
  readonly provenance: StoreProvenance | null;
}

export type SnapshotResult =
  | { readonly kind: "store"; readonly store: StoreSnapshot }
  | { readonly kind: "missing"; readonly path: string }
  | { readonly kind: "other-layout"; readonly path: string; readonly note: string };

/**
 * The store at `dir` as `run` would see it before reconciling. A missing store means every
 * block is new; a store of another layout is reported (run migrates a grown volume or refuses);
 * a damaged store throws the validator's StoreError, as every command does.
 */
export function readStoreSnapshot(
  dir: string,
  layout: TaskLayout,
  provenance: boolean,
): SnapshotResult {
  const abs = path.resolve(dir);
  if (!fs.existsSync(path.join(abs, "zarr.json"))) return { kind: "missing", path: abs };
  checkHostByteOrder(abs);
  const meta = readStoreMetadata(abs);
  if (meta.taskHash !== taskHash(layout)) {
    return {
      kind: "other-layout",
      path: abs,
      note:
        `the tracking store ${abs} was written for another layout of the task; run migrates a grown volume in place (or refuses, naming the change): plan counts its blocks as new`,
    };
  }
  const cells = layout.trackingCellCount;
  const read = (name: string): Uint8Array => {
    const spec = TRACKING_ARRAYS.find((s) => s.name === name)!;
    if (meta.arrays.some((a) => a.name === name)) return readChunk(meta, spec).slice();
    return filled(spec, cells);
  };
  const u32 = (bytes: Uint8Array) => new Uint32Array(bytes.buffer, 0, bytes.byteLength / 4);
  return {
    kind: "store",
    store: {
      path: abs,
      done: read("done"),
      failures: u32(read("failures")),
      provenance: provenance || meta.provenance ? provenanceOf(read, u32) : null,
    },
  };
}

function provenanceOf(
  read: (name: string) => Uint8Array,
  u32: (bytes: Uint8Array) => Uint32Array,
): StoreProvenance {
  return {
    content: u32(read("content_hash")),
    recipe: u32(read("recipe")),
    upstream: u32(read("upstream_digest")),
    inputs: u32(read("inputs_digest")),
    outputs: read("outputs_state"),
  };
}

/** An array a run would add (provenance switched on later), as it would fill it. */
function filled(spec: TrackingArraySpec, cells: number): Uint8Array {
  const pattern = fillPattern(spec);
  const out = new Uint8Array(cells * pattern.length);
  for (let i = 0; i < out.length; i += pattern.length) out.set(pattern, i);
  return out;
}
