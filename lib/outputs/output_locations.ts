/**
 * `outputs.json` in the tracking store of a task with outputs: where each declared output
 * lives (written by `run` at the start when it changed), so `blockwise verify` can re-hash the
 * files the manifest names without the pipeline file.
 *
 *   {"outputs":[{"name":"o","kind":"path","base":"/abs/out/a","written":"out/a/{block_id}.txt"}]}
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { errorCode, isRecord, messageOf, StoreError } from "../errors.ts";
import { writeJsonAtomic } from "../zarr/mod.ts";
import type { OutputPlan } from "./output_plan.ts";

export const OUTPUTS_FILE = "outputs.json";

export interface OutputLocation {
  readonly name: string;
  readonly kind: "path" | "zarr";
  /** Absolute folder the manifest's relative paths are below. */
  readonly base: string;
  readonly written: string;
}

/** Record the outputs' locations in the store (atomically, only when they changed). */
export function writeOutputLocations(storeDir: string, plans: readonly OutputPlan[]): void {
  const value = {
    outputs: plans.map((p): OutputLocation => ({
      name: p.name,
      kind: p.kind,
      base: p.base,
      written: p.written,
    })),
  };
  const file = path.join(storeDir, OUTPUTS_FILE);
  const text = `${JSON.stringify(value, null, 2)}\n`;
  try {
    if (fs.readFileSync(file, "utf8") === text) return;
  } catch {
    // Missing: write it.
  }
  writeJsonAtomic(file, value);
}

/**
 * The recorded locations, or null when the store has none (no outputs, or an older run).
 * Refuses (StoreError, exit 3) a file that is there but is not what `run` writes, instead of
 * reporting every committed file as an "unknown output".
 */
export function readOutputLocations(storeDir: string): OutputLocation[] | null {
  const file = path.join(storeDir, OUTPUTS_FILE);
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw new StoreError(`Cannot read ${file}: ${messageOf(error)}`, storeDir);
  }
  const refuse = (why: string) =>
    new StoreError(
      `${file} is damaged (${why}): it records where each declared output lives. Run the pipeline once (run rewrites it at its start, from the pipeline file), then verify again`,
      storeDir,
    );
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw refuse(`not JSON: ${messageOf(error)}`);
  }
  const outputs = isRecord(value) ? value["outputs"] : undefined;
  if (!Array.isArray(outputs) || !outputs.every(isLocation)) {
    throw refuse('not {"outputs": [{name, kind, base, written}, ...]}');
  }
  return outputs;
}

function isLocation(value: unknown): value is OutputLocation {
  return isRecord(value) && typeof value["name"] === "string" &&
    (value["kind"] === "path" || value["kind"] === "zarr") &&
    typeof value["base"] === "string" && typeof value["written"] === "string";
}
