/** A temporary block's committed files: their bytes, and their removal once no reader needs them. */

import { removeAll } from "../runtime/fs_sync.ts";
import type { ManifestFile } from "./manifest.ts";

/** Remove committed output files (or folders); ones already gone are fine. */
export async function removeOutputs(locations: readonly string[]): Promise<void> {
  const failed = (await removeAll(locations)).find((e) => e !== null);
  if (failed != null) throw failed;
}

export function bytesOf(files: readonly ManifestFile[]): number {
  let n = 0;
  for (const f of files) n += f[2];
  return n;
}
