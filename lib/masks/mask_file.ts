/**
 * Writing a block-grid mask file: a `.npy` (uint8, C order) or a Zarr v3 array directory ending
 * in `.zarr` (uint8, one chunk covering the whole grid, `bytes` codec, so numpy, zarr-python and
 * zarrita all read it, and blockwise reads it back as a skip mask), written by lib/zarr. The file
 * appears complete or not at all: it is written under a temporary name beside the target and
 * renamed into place.
 */

import { readdir, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { InputError } from "../errors.ts";
import {
  arrayDocument,
  chunkFile,
  documentText,
  fsyncDirectory,
  hiddenSibling,
  metadataOf,
  writeFileDurable,
} from "../zarr/mod.ts";
import { writeNpyFile } from "./npy.ts";

export type MaskFileFormat = "npy" | "zarr";

/** The format `path`'s extension asks for; refuses any other extension. */
export function maskFileFormat(path: string): MaskFileFormat {
  const trimmed = path.replace(/[/\\]+$/, "").toLowerCase();
  if (trimmed.endsWith(".npy")) return "npy";
  if (trimmed.endsWith(".zarr")) return "zarr";
  throw new InputError(
    `Cannot write mask "${path}": the output's extension must be .npy (a NumPy file) or .zarr (a Zarr v3 array directory).`,
  );
}

/** Checks that `path` can be written: its folder exists and it is not something else. */
export async function checkMaskOutput(path: string): Promise<MaskFileFormat> {
  const format = maskFileFormat(path);
  const where = `Cannot write mask "${path}"`;
  const parent = dirname(path.replace(/[/\\]+$/, ""));
  const parentInfo = await statOrNull(parent);
  if (parentInfo === null || !parentInfo.isDirectory()) {
    throw new InputError(`${where}: the folder "${parent}" does not exist. Create it first.`);
  }
  const info = await statOrNull(path);
  if (info === null) return format;
  if (format === "npy" && info.isDirectory()) {
    throw new InputError(`${where}: it is a directory. Pick a file name ending in .npy.`);
  }
  if (format === "zarr") {
    if (!info.isDirectory()) {
      throw new InputError(
        `${where}: it exists and is not a directory. Remove it or pick another name.`,
      );
    }
    const entries = await readdir(path);
    const isArray = entries.includes("zarr.json") || entries.includes(".zarray");
    if (entries.length > 0 && !isArray) {
      throw new InputError(
        `${where}: the directory exists and is not a Zarr array; refusing to replace it. Remove it or pick another name.`,
      );
    }
  }
  return format;
}

/** Writes `cells` (one byte per block, C order over `gridShape`) to `path`. */
export async function writeBlockMask(
  path: string,
  cells: Uint8Array,
  gridShape: readonly number[],
  attributes: Readonly<Record<string, unknown>>,
): Promise<void> {
  const format = await checkMaskOutput(path);
  if (format === "npy") {
    writeNpyFile(path, { dtype: "uint8", shape: gridShape, data: cells });
    return;
  }
  const target = path.replace(/[/\\]+$/, "");
  const temporary = hiddenSibling(target, "writing");
  try {
    const options = {
      shape: gridShape,
      chunkShape: gridShape.map((g) => Math.max(1, g)),
      dtype: "uint8" as const,
      fillValue: 0,
      attributes,
    };
    const meta = metadataOf(options);
    writeFileDurable(join(temporary, "zarr.json"), documentText(arrayDocument(options)));
    if (cells.length > 0) {
      writeFileDurable(chunkFile(temporary, meta, gridShape.map(() => 0)), cells);
    }
    if ((await statOrNull(target)) !== null) await rm(target, { recursive: true, force: true });
    await rename(temporary, target);
    fsyncDirectory(dirname(target));
  } catch (error) {
    await rm(temporary, { recursive: true, force: true });
    throw error;
  }
}

async function statOrNull(path: string) {
  try {
    return await stat(path);
  } catch {
    return null;
  }
}
