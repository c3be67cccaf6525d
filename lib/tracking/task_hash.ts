/**
 * The layout identity of a task: SHA-256 over the ROIs and fit that decide which blocks exist
 * and where (daisy reference §6.4). daisy's done markers hash with the domain
 * `daisy-done-marker:v1`; the group layout uses its own domain, so an old bare-array marker can
 * never be mistaken for a group store. Not hashed: task id, conflicts, workers, retries.
 */

import { createHash } from "node:crypto";
import type { LayoutSpec } from "../blocks/mod.ts";

export const DAISY_MARKER_DOMAIN = "daisy-done-marker:v1";
export const TRACKING_DOMAIN = "blockwise-tracking:v1";

const FIT_NAMES = { valid: "Valid", overhang: "Overhang", shrink: "Shrink" } as const;

export function taskHash(layout: LayoutSpec, domain: string = TRACKING_DOMAIN): string {
  const hash = createHash("sha256");
  hash.update(`${domain}\n`);
  const i64 = Buffer.alloc(8);
  const comma = Buffer.from(",");
  const coords = (values: readonly number[]) => {
    for (const v of values) {
      i64.writeBigInt64LE(BigInt(v));
      hash.update(i64);
      hash.update(comma);
    }
  };
  for (
    const [label, roi] of [
      ["total", layout.totalRoi],
      ["read", layout.readRoi],
      ["write", layout.writeRoi],
    ] as const
  ) {
    hash.update(`${label}:offset=`);
    coords(roi.offset);
    hash.update(";shape=");
    coords(roi.shape);
    hash.update(";");
  }
  hash.update(`fit=${FIT_NAMES[layout.fit]}`);
  return hash.digest("hex");
}
