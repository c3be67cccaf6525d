/**
 * Creating Zarr v3 arrays and groups on disk (their `zarr.json` documents), atomically.
 * `ensureArray` / `ensureGroup` create a document only if it is missing (a hard link, which
 * fails when the target exists), so several workers may call them at once; `ensureArray` then
 * checks the existing array is the one asked for.
 */

import * as path from "node:path";
import { InputError } from "../errors.ts";
import { writeFileAtomic, writeFileIfMissing } from "./atomic_write.ts";
import {
  arrayDocument,
  type ArrayOptions,
  checkArrayOptions,
  documentText,
  groupDocument,
  metadataOf,
  openArrayMetadata,
  type ZarrArrayMetadata,
} from "./metadata.ts";

/** Create (or replace) an array's `zarr.json`. Existing chunks are left alone. */
export function createArray(dir: string, options: ArrayOptions): ZarrArrayMetadata {
  checkArrayOptions(`Zarr array ${dir}`, options);
  writeFileAtomic(path.join(dir, "zarr.json"), documentText(arrayDocument(options)));
  return metadataOf(options);
}

function describe(m: ZarrArrayMetadata): string {
  return `${m.dtype} array of shape [${m.shape}] in chunks [${m.chunkShape}] with fill ${m.fillValue}`;
}

function sameCoords(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * Create the array unless its `zarr.json` exists; then open it and check that it is the array
 * asked for (shape, chunk shape, dtype, fill value, plain chunks), with an actionable error
 * (InputError) otherwise.
 */
export function ensureArray(dir: string, options: ArrayOptions): ZarrArrayMetadata {
  checkArrayOptions(`Zarr array ${dir}`, options);
  if (writeFileIfMissing(path.join(dir, "zarr.json"), documentText(arrayDocument(options)))) {
    return metadataOf(options);
  }
  const meta = openArrayMetadata(dir);
  const wanted = metadataOf(options);
  const same = meta.dtype === wanted.dtype && sameCoords(meta.shape, wanted.shape) &&
    sameCoords(meta.chunkShape, wanted.chunkShape) && meta.shardShape === null &&
    meta.encoding === null && Object.is(meta.fillValue, wanted.fillValue);
  if (!same) {
    throw new InputError(
      `Zarr array ${dir} already exists as ${describe(meta)}${
        meta.encoding === null ? "" : ` (${meta.encoding})`
      }, not the ${describe(wanted)} asked for; remove it (rm -rf ${dir}) or use another directory`,
    );
  }
  return meta;
}

/** Write (or replace) a group's `zarr.json`. */
export function createGroup(dir: string, attributes: Readonly<Record<string, unknown>> = {}): void {
  writeFileAtomic(path.join(dir, "zarr.json"), documentText(groupDocument(attributes)));
}

/** Write a group's `zarr.json` unless one exists; returns whether it was created. */
export function ensureGroup(
  dir: string,
  attributes: Readonly<Record<string, unknown>> = {},
): boolean {
  return writeFileIfMissing(path.join(dir, "zarr.json"), documentText(groupDocument(attributes)));
}
