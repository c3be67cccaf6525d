/**
 * `blockwise mask import SOURCE --pipeline P --task T --out FILE [options]`: turn a mask from
 * elsewhere (.npy, Zarr v2/v3) into a block-grid skip mask for one task, and say how many blocks
 * it skips.
 */

import process from "node:process";
import { type Command, InvalidArgumentError, Option } from "commander";
import { InputError } from "../errors.ts";
import {
  importMask,
  importSummary,
  parseNumberList,
  parseSkipRule,
  type SkipRule,
} from "../masks/mod.ts";
import { LineWriter } from "./output.ts";

export interface MaskImportCommandOptions {
  readonly pipeline: string;
  readonly task: string;
  readonly out: string;
  readonly voxelSize?: number[];
  readonly offset?: number[];
  readonly skipIf?: SkipRule;
  readonly invert?: boolean;
  readonly outside?: "skip" | "keep";
  readonly json?: boolean;
}

/** Adds the `import` subcommand to the `mask` command. */
export function addMaskImportCommand(mask: Command, version: string): Command {
  return mask.command("import")
    .version(version, "-V, --version", "print the blockwise version")
    .description(
      "turn a mask (.npy or Zarr v2/v3 array, at block-grid or voxel resolution) into a task's block-grid skip mask",
    )
    .argument("<source>", "the mask: a .npy file or a Zarr v2/v3 array directory")
    .requiredOption("--pipeline <file>", "pipeline file that defines the task")
    .requiredOption("--task <id>", "the task whose block grid the mask is for")
    .requiredOption("--out <file>", "output: a .npy file or a .zarr directory (Zarr v3)")
    .option(
      "--voxel-size <list>",
      "world units per mask voxel, e.g. 8,8,8 (default: the source's voxel_size/resolution attribute)",
      (v: string) => cliValue(() => parseNumberList(v, "--voxel-size")),
    )
    .option(
      "--offset <list>",
      "world coordinate of mask voxel 0, e.g. 0,0,0 (default: the source's offset attribute, else 0)",
      (v: string) => cliValue(() => parseNumberList(v, "--offset")),
    )
    .option(
      "--skip-if <rule>",
      'skip a block when its voxels are: empty (no nonzero voxel, the default), full (all nonzero) or "fraction<X" (nonzero fraction below X)',
      (v: string) => cliValue(() => parseSkipRule(v)),
    )
    .option("--invert", "swap zero and nonzero in the source before anything else")
    .addOption(
      new Option(
        "--outside <mode>",
        "a block sticking out of the mask: skip = the outside part counts as zero voxels (default), keep = never skip it",
      ).choices(["skip", "keep"]),
    )
    .option("--json", "print the result as JSON (schema: docs/guide/json-outputs.md)")
    .exitOverride()
    .action(async (source: string, opts: MaskImportCommandOptions) => {
      await maskImportCommand(source, opts);
    });
}

export async function maskImportCommand(
  source: string,
  opts: MaskImportCommandOptions,
): Promise<void> {
  const result = await importMask({
    source,
    pipeline: opts.pipeline,
    task: opts.task,
    out: opts.out,
    ...(opts.voxelSize === undefined ? {} : { voxelSize: opts.voxelSize }),
    ...(opts.offset === undefined ? {} : { offset: opts.offset }),
    ...(opts.skipIf === undefined ? {} : { skipIf: opts.skipIf }),
    ...(opts.outside === undefined ? {} : { outside: opts.outside }),
    invert: opts.invert === true,
  });
  const out = new LineWriter();
  if (opts.json) {
    await out.line(JSON.stringify(result, null, 2));
  } else {
    for (const note of result.notes) process.stderr.write(`note: ${note}\n`);
    await out.line(importSummary(result));
  }
  await out.flush();
}

function cliValue<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof InputError) throw new InvalidArgumentError(error.message);
    throw error;
  }
}
