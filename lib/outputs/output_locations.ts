/**
 * `outputs.json` in the tracking store of a task with outputs: where each declared output
 * lives (written by `run` at the start when it changed), so `blockwise verify` can re-hash the
 * files the manifest names without the pipeline file.
 *
 *   {"outputs":[{"name":"o","kind":"path","base":"/abs/out/a","written":"out/a/{block_id}.txt"}]}
 */

import * as fs from "node:fs";
import * as path from "node:path";
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

/** The recorded locations, or null when the store has none (no outputs, or an older run). */
export function readOutputLocations(storeDir: string): OutputLocation[] | null {
  let text: string;
  try {
    text = fs.readFileSync(path.join(storeDir, OUTPUTS_FILE), "utf8");
  } catch {
    return null;
  }
  try {
    const value = JSON.parse(text) as { outputs?: unknown };
    return Array.isArray(value.outputs) ? value.outputs as OutputLocation[] : null;
  } catch {
    return null;
  }
}
