/**
 * The skip masks of one run: each task's `skipMask`, overridden by `--skip-mask TASK=PATH`
 * (repeatable; the flag wins). Loaded and checked against each task's block grid before anything
 * runs, so a wrong shape or dtype is refused with exit 2.
 */

import * as path from "node:path";
import process from "node:process";
import type { TaskLayout } from "../blocks/mod.ts";
import { InputError } from "../errors.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";
import type { MaskSource } from "./load_mask.ts";
import { loadSkipMask, type SkipMask } from "./skip_mask.ts";

/** Parse repeated `TASK=PATH` values into a map. */
export function parseSkipMaskFlags(values: readonly string[]): Map<string, string> {
  const result = new Map<string, string>();
  for (const value of values) {
    const eq = value.indexOf("=");
    if (eq <= 0 || eq === value.length - 1) {
      throw new InputError(
        `Invalid --skip-mask "${value}"; write TASK=PATH, e.g. --skip-mask segment=skip_grid.npy`,
      );
    }
    const task = value.slice(0, eq);
    if (result.has(task)) {
      throw new InputError(`--skip-mask names task "${task}" twice; give one mask per task`);
    }
    result.set(task, value.slice(eq + 1));
  }
  return result;
}

export async function loadRunMasks(
  pipeline: PipelineConfig,
  layouts: readonly TaskLayout[],
  flags: ReadonlyMap<string, string>,
  cwd: string = process.cwd(),
): Promise<(SkipMask | null)[]> {
  for (const task of flags.keys()) {
    if (!pipeline.tasks.some((t) => t.id === task)) {
      throw new InputError(
        `--skip-mask names task "${task}", which is not in ${pipeline.path}; its tasks are ${
          pipeline.tasks.map((t) => `"${t.id}"`).join(", ")
        }`,
      );
    }
  }
  const masks: (SkipMask | null)[] = [];
  for (let t = 0; t < pipeline.tasks.length; t++) {
    const task = pipeline.tasks[t]!;
    const flag = flags.get(task.id);
    const source: MaskSource | null = flag !== undefined
      ? path.resolve(cwd, flag)
      : task.skipMask as MaskSource | null;
    masks.push(
      source === null
        ? null
        : await loadSkipMask(layouts[t]!, source, task.id, path.dirname(pipeline.path)),
    );
  }
  return masks;
}
