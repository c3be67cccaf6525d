/**
 * The one Zarr writer of this project (docs/design/ZARR.md): v3 array and group documents,
 * v2/v3 array metadata for writers, chunk keys and the chunks a box covers, atomic durable
 * writes of metadata and raw chunk files, and the host's byte order. Reading values of arrays
 * other tools wrote (compressed chunks) is zarrita's job, in lib/masks.
 */

export * from "./arrays.ts";
export * from "./atomic_write.ts";
export * from "./chunk_grid.ts";
export * from "./chunk_io.ts";
export * from "./data_types.ts";
export * from "./endian.ts";
export * from "./metadata.ts";
