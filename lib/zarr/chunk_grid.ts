/**
 * Where a chunk lives and which chunks a box touches. Coordinates count *stored* chunks: the
 * files a chunk key names, which are shards for a sharded array (`storedChunkShape`). A writer
 * of per-block outputs asks `chunksCoveredBy(meta, block.writeRoi)` which files a block
 * writes, and `chunkAt` whether the block is exactly one of them (the case it can write alone,
 * without reading what another block wrote).
 */

import * as path from "node:path";
import type { ChunkKeyEncoding, ZarrArrayMetadata } from "./metadata.ts";

/** An axis-aligned box of array elements: `[offset, offset + shape)` per axis. */
export interface ElementBox {
  readonly offset: readonly number[];
  readonly shape: readonly number[];
}

/**
 * The chunk key of `coords`: `c/1/2` (default), `1.2` (v2); a 0-d array's only chunk is `c`
 * (default) or `0` (v2).
 */
export function chunkKey(encoding: ChunkKeyEncoding, coords: readonly number[]): string {
  const parts = coords.map(String);
  if (encoding.name === "default") return ["c", ...parts].join(encoding.separator);
  return parts.length === 0 ? "0" : parts.join(encoding.separator);
}

/** The file of a stored chunk, under the array folder `dir`. */
export function chunkFile(dir: string, meta: ZarrArrayMetadata, coords: readonly number[]): string {
  return path.join(dir, ...chunkKey(meta.chunkKeyEncoding, coords).split("/"));
}

/** Elements per stored chunk (one file): the shard shape when sharded, else the chunk shape. */
export function storedChunkShape(meta: ZarrArrayMetadata): readonly number[] {
  return meta.shardShape ?? meta.chunkShape;
}

/** Stored chunks per axis: `ceil(shape / storedChunkShape)`. */
export function chunkGridShape(meta: ZarrArrayMetadata): number[] {
  const unit = storedChunkShape(meta);
  return meta.shape.map((s, d) => Math.ceil(s / unit[d]!));
}

/** Whether `coords` names a stored chunk of the array. */
export function isChunkCoord(meta: ZarrArrayMetadata, coords: readonly number[]): boolean {
  const grid = chunkGridShape(meta);
  return coords.length === grid.length &&
    coords.every((c, d) => Number.isInteger(c) && c >= 0 && c < grid[d]!);
}

/** The box of elements a stored chunk covers, clipped to the array. */
export function chunkBox(meta: ZarrArrayMetadata, coords: readonly number[]): ElementBox {
  const unit = storedChunkShape(meta);
  const offset = coords.map((c, d) => c * unit[d]!);
  return {
    offset,
    shape: offset.map((o, d) => Math.max(0, Math.min(unit[d]!, meta.shape[d]! - o))),
  };
}

/**
 * The coordinates of every stored chunk that `box` overlaps (the part of it inside the array),
 * in C order. Empty when the box misses the array or is empty.
 */
export function chunksCoveredBy(meta: ZarrArrayMetadata, box: ElementBox): number[][] {
  const rank = meta.shape.length;
  if (box.offset.length !== rank || box.shape.length !== rank) {
    throw new RangeError(
      `box at [${box.offset}] of shape [${box.shape}] does not have the array's ${rank} axes`,
    );
  }
  const unit = storedChunkShape(meta);
  const first: number[] = [];
  const last: number[] = [];
  for (let d = 0; d < rank; d++) {
    const begin = Math.max(box.offset[d]!, 0);
    const end = Math.min(box.offset[d]! + box.shape[d]!, meta.shape[d]!);
    if (begin >= end) return [];
    first.push(Math.floor(begin / unit[d]!));
    last.push(Math.floor((end - 1) / unit[d]!));
  }
  const out: number[][] = [];
  const c = [...first];
  for (;;) {
    out.push([...c]);
    let d = rank - 1;
    for (; d >= 0; d--) {
      c[d]!++;
      if (c[d]! <= last[d]!) break;
      c[d] = first[d]!;
    }
    if (d < 0) return out;
  }
}

/**
 * The stored chunk that `box` is exactly (a chunk, clipped where it meets the array's end), or
 * null when the box is not one whole chunk: a block whose write ROI is one chunk can write it
 * without reading anything back.
 */
export function chunkAt(meta: ZarrArrayMetadata, box: ElementBox): number[] | null {
  const rank = meta.shape.length;
  if (box.offset.length !== rank || box.shape.length !== rank) return null;
  const unit = storedChunkShape(meta);
  const coords: number[] = [];
  for (let d = 0; d < rank; d++) {
    const begin = box.offset[d]!;
    if (begin < 0 || begin % unit[d]! !== 0 || begin >= meta.shape[d]!) return null;
    if (box.shape[d] !== Math.min(begin + unit[d]!, meta.shape[d]!) - begin) return null;
    coords.push(begin / unit[d]!);
  }
  return coords;
}
