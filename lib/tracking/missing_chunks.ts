/**
 * Ledger arrays whose chunk file is missing (deleted by hand, or lost). In Zarr a missing chunk
 * is the array's fill value, and zarr-python and zarrita read it so; blockwise does the same:
 * readers see the fill value, and a writer (`run`, `reset`) puts the file back holding it, with
 * a notice, instead of calling the store damaged. The other arrays keep their values: a missing
 * `failures` chunk loses the failure counts, never the `done` marks.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { messageOf, StoreError } from "../errors.ts";
import { itemSize, TRACKING_ARRAYS, type TrackingArraySpec } from "./arrays.ts";
import { chunkPath, type StoreMetadata } from "./store_metadata.ts";

/** `cells` elements of the array's fill value, as little-endian bytes. */
export function fillValueBytes(spec: TrackingArraySpec, cells: number): Uint8Array {
  const buffer = new ArrayBuffer(cells * itemSize(spec.dtype));
  const fill = spec.fillValue === "NaN" ? Number.NaN : spec.fillValue;
  if (fill !== 0) {
    switch (spec.dtype) {
      case "float32":
        new Float32Array(buffer).fill(fill);
        break;
      case "float64":
        new Float64Array(buffer).fill(fill);
        break;
      case "uint32":
        new Uint32Array(buffer).fill(fill);
        break;
      case "uint64":
        new BigUint64Array(buffer).fill(BigInt(fill));
        break;
      case "uint8":
        new Uint8Array(buffer).fill(fill);
        break;
    }
  }
  return new Uint8Array(buffer);
}

/** What a missing chunk of each array means, for the notice. */
function meaning(name: string): string {
  if (name === "done") return "no block is marked done, so every block runs again";
  if (name === "failures") return "no failed attempt is recorded; the done marks are kept";
  return "those figures are unknown; the done marks are kept";
}

/**
 * Put back the missing chunk files of `meta`'s arrays, each holding its fill value (written
 * whole, then renamed into place). Returns one notice per file.
 */
export function restoreMissingChunks(meta: StoreMetadata): string[] {
  const notices: string[] = [];
  for (const name of meta.missingChunks) {
    const spec = TRACKING_ARRAYS.find((s) => s.name === name)!;
    const file = chunkPath(meta, name);
    const temporary = `${file}.${process.pid}.restore`;
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(temporary, fillValueBytes(spec, meta.layout.trackingCellCount));
      fs.renameSync(temporary, file);
    } catch (error) {
      fs.rmSync(temporary, { force: true });
      throw new StoreError(
        `Cannot restore the missing chunk file ${file} of tracking store ${meta.path}: ${
          messageOf(error)
        }. Make the store writable and run again`,
        meta.path,
      );
    }
    notices.push(
      `Tracking store ${meta.path}: the chunk file of array "${name}" was missing; restored as its fill value (${spec.fillValue}), as Zarr reads a missing chunk: ${
        meaning(name)
      }`,
    );
  }
  return notices;
}
