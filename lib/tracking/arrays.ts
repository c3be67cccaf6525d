/**
 * The arrays of a tracking group (seed 000, "What's stored"): all shaped like the tracking
 * grid, one element per block, single chunk, `bytes` codec, little-endian.
 */

import {
  arrayDocument,
  type ArrayOptions,
  chunkKey as zarrChunkKey,
  DEFAULT_KEY_ENCODING,
  elementBytes,
  itemSize,
  metadataOf,
  type ZarrArrayMetadata,
} from "../zarr/mod.ts";

export type TrackingDtype = "uint8" | "uint32" | "uint64" | "float32" | "float64";

export interface TrackingArraySpec {
  readonly name: string;
  readonly dtype: TrackingDtype;
  /** JSON fill value as written in zarr.json. */
  readonly fillValue: number | "NaN";
  readonly resourceTracking: boolean;
  /** Only in stores of tasks with provenance (outputs, version, params or inputs upstream). */
  readonly provenance?: boolean;
  /**
   * Added after stores were made without it: a store may lack it (it is not damaged then,
   * readers do without it) until a run with its set opens the store and adds it.
   */
  readonly later?: boolean;
  readonly description: string;
}

export const WORKER_NONE = 2 ** 32 - 1;
/** `recipe` of a block made without provenance. */
export const RECIPE_NONE = 2 ** 32 - 1;

/** Whether an array belongs in a store with these optional sets. */
export function arrayWanted(
  spec: TrackingArraySpec,
  sets: { readonly resourceTracking: boolean; readonly provenance: boolean },
): boolean {
  if (spec.resourceTracking) return sets.resourceTracking;
  if (spec.provenance === true) return sets.provenance;
  return true;
}

export const TRACKING_ARRAYS: readonly TrackingArraySpec[] = [
  {
    name: "done",
    dtype: "uint8",
    fillValue: 0,
    resourceTracking: false,
    description: "1 = block completed",
  },
  {
    name: "failures",
    dtype: "uint32",
    fillValue: 0,
    resourceTracking: false,
    description: "failed attempts for this block",
  },
  {
    name: "wall_seconds",
    dtype: "float32",
    fillValue: "NaN",
    resourceTracking: true,
    description: "elapsed time in the block",
  },
  {
    name: "cpu_seconds",
    dtype: "float32",
    fillValue: "NaN",
    resourceTracking: true,
    description: "user+system CPU of the worker thread",
  },
  {
    name: "peak_rss_bytes",
    dtype: "uint64",
    fillValue: 0,
    resourceTracking: true,
    description: "process peak RSS while the block ran",
  },
  {
    name: "io_read_bytes",
    dtype: "uint64",
    fillValue: 0,
    resourceTracking: true,
    description: "bytes read via syscalls by the worker thread",
  },
  {
    name: "io_write_bytes",
    dtype: "uint64",
    fillValue: 0,
    resourceTracking: true,
    description: "bytes written via syscalls by the worker thread",
  },
  {
    name: "gpu_util_pct",
    dtype: "float32",
    fillValue: "NaN",
    resourceTracking: true,
    description:
      "mean utilisation (percent) of the worker's GPUs over the block, read through NVML (NaN: not read)",
  },
  {
    name: "gpu_mem_bytes",
    dtype: "uint64",
    fillValue: 0,
    resourceTracking: true,
    description:
      "peak device memory of the worker's process (a command's process group) over the block, summed over its GPUs (0: not read)",
  },
  {
    name: "worker_id",
    dtype: "uint32",
    fillValue: WORKER_NONE,
    resourceTracking: true,
    description: "worker that completed the block (2**32-1 = none)",
  },
  {
    name: "sent_at",
    dtype: "float64",
    fillValue: "NaN",
    resourceTracking: true,
    description: "dispatch time, seconds since the UNIX epoch (scheduler clock)",
  },
  {
    name: "returned_at",
    dtype: "float64",
    fillValue: "NaN",
    resourceTracking: true,
    description: "return time, seconds since the UNIX epoch (scheduler clock)",
  },
  {
    name: "finished_at",
    dtype: "float64",
    fillValue: "NaN",
    resourceTracking: true,
    later: true,
    description:
      "when the worker finished the block, seconds since the UNIX epoch (worker clock); it ran the wall_seconds before",
  },
  {
    name: "content_hash",
    dtype: "uint64",
    fillValue: 0,
    resourceTracking: false,
    provenance: true,
    description:
      "first 8 bytes (little-endian) of the block's content SHA-256 (0 = none); without outputs, of its provenance",
  },
  {
    name: "recipe",
    dtype: "uint32",
    fillValue: RECIPE_NONE,
    resourceTracking: false,
    provenance: true,
    description: "line of recipes.jsonl (version, params, inputs) the block was made with",
  },
  {
    name: "upstream_digest",
    dtype: "uint64",
    fillValue: 0,
    resourceTracking: false,
    provenance: true,
    description: "digest of the content hashes of the upstream blocks it read",
  },
  {
    name: "outputs_state",
    dtype: "uint8",
    fillValue: 0,
    resourceTracking: false,
    provenance: true,
    description:
      "0 = no outputs recorded, 1 = outputs committed and present, 2 = deleted temporary (tombstone)",
  },
  {
    name: "inputs_digest",
    dtype: "uint64",
    fillValue: 0,
    resourceTracking: false,
    provenance: true,
    description: "digest of the fingerprints of its declared inputs under its read ROI",
  },
];

export { itemSize };

/** The array named `name`; throws (a bug) for a name that is not a tracking array. */
export function trackingArray(name: string): TrackingArraySpec {
  const spec = TRACKING_ARRAYS.find((s) => s.name === name);
  if (spec === undefined) throw new Error(`no tracking array named "${name}"`);
  return spec;
}

/** The chunk key of a single-chunk array: `c/0/0/...`, one `0` per axis (`c` for 0-d). */
export function chunkKey(dims: number): string {
  return zarrChunkKey(DEFAULT_KEY_ENCODING, new Array<number>(dims).fill(0));
}

function arrayOptions(spec: TrackingArraySpec, shape: readonly number[]): ArrayOptions {
  return {
    shape,
    chunkShape: shape,
    dtype: spec.dtype,
    fillValue: spec.fillValue === "NaN" ? Number.NaN : spec.fillValue,
    attributes: { description: spec.description },
  };
}

/** The array's `zarr.json` document (lib/zarr's v3 document: one chunk, `bytes` codec). */
export function arrayMetadata(
  spec: TrackingArraySpec,
  shape: readonly number[],
): Record<string, unknown> {
  return arrayDocument(arrayOptions(spec, shape));
}

/** What `arrayMetadata(spec, shape)` describes, to compare a stored array against. */
export function expectedArrayMetadata(
  spec: TrackingArraySpec,
  shape: readonly number[],
): ZarrArrayMetadata {
  return metadataOf(arrayOptions(spec, shape));
}

/** Bytes of one element holding the fill value, little-endian. */
export function fillPattern(spec: TrackingArraySpec): Uint8Array {
  return elementBytes(spec.dtype, spec.fillValue === "NaN" ? Number.NaN : spec.fillValue);
}
