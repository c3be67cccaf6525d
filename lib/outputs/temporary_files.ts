/** A temporary block's committed files: their bytes, and their removal once no reader needs them. */

import * as fs from "node:fs";
import type { ManifestFile } from "./manifest.ts";

/** Remove a committed output file (or folder); one already gone is fine. */
export async function removeOutput(location: string): Promise<void> {
  try {
    await fs.promises.unlink(location);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ENOENT") return;
    if (code !== "EISDIR" && code !== "EPERM") throw error;
    await fs.promises.rm(location, { recursive: true, force: true });
  }
}

export function bytesOf(files: readonly ManifestFile[]): number {
  let n = 0;
  for (const f of files) n += f[2];
  return n;
}
