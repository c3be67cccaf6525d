/**
 * The arrays of a tracking group (seed 000, "What's stored"): all shaped like the tracking
 * grid, one element per block, single chunk, `bytes` codec, little-endian.
 */

export type TrackingDtype = "uint8" | "uint32" | "uint64" | "float32" | "float64";

export interface TrackingArraySpec {
  readonly name: string;
  readonly dtype: TrackingDtype;
  /** JSON fill value as written in zarr.json. */
  readonly fillValue: number | "NaN";
  readonly resourceTracking: boolean;
  readonly description: string;
}

export const WORKER_NONE = 2 ** 32 - 1;

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
    description: "reserved (NaN)",
  },
  {
    name: "gpu_mem_bytes",
    dtype: "uint64",
    fillValue: 0,
    resourceTracking: true,
    description: "reserved (0)",
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
];

export function itemSize(dtype: TrackingDtype): number {
  return dtype === "uint8" ? 1 : dtype === "uint32" || dtype === "float32" ? 4 : 8;
}

/** The chunk key of a single-chunk array: `c/0/0/...`, one `0` per axis. */
export function chunkKey(dims: number): string {
  return ["c", ...new Array<string>(Math.max(1, dims)).fill("0")].join("/");
}

export function arrayMetadata(
  spec: TrackingArraySpec,
  shape: readonly number[],
): Record<string, unknown> {
  return {
    zarr_format: 3,
    node_type: "array",
    shape: [...shape],
    data_type: spec.dtype,
    chunk_grid: { name: "regular", configuration: { chunk_shape: [...shape] } },
    chunk_key_encoding: { name: "default", configuration: { separator: "/" } },
    fill_value: spec.fillValue,
    codecs: [{ name: "bytes", configuration: { endian: "little" } }],
    attributes: { description: spec.description },
  };
}

/** Bytes of one element holding the fill value, little-endian. */
export function fillPattern(spec: TrackingArraySpec): Uint8Array {
  const bytes = new Uint8Array(itemSize(spec.dtype));
  const view = new DataView(bytes.buffer);
  const fill = spec.fillValue === "NaN" ? Number.NaN : spec.fillValue;
  switch (spec.dtype) {
    case "uint8":
      view.setUint8(0, fill);
      break;
    case "uint32":
      view.setUint32(0, fill, true);
      break;
    case "uint64":
      view.setBigUint64(0, BigInt(fill), true);
      break;
    case "float32":
      view.setFloat32(0, fill, true);
      break;
    case "float64":
      view.setFloat64(0, fill, true);
      break;
  }
  return bytes;
}
