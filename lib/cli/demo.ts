/**
 * `blockwise demo [--dir DIR] [--tracking-dir T] [--resource-tracking]`: the built-in pipeline
 * on generated data, its ledger in DIR/tracking unless T is given.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describeDemoOutputs, ensureDemoArrays } from "../demo/demo_pipeline.ts";
import { validatePipeline } from "../pipeline/mod.ts";
import { embeddedModuleUrl } from "../runtime/mod.ts";
import { createFailureAdvice, errorCode, InputError } from "../errors.ts";
import { runPipeline } from "./run.ts";

export interface DemoOptions {
  readonly dir: string;
  readonly serial?: boolean;
  /** Where the ledger goes (default: DIR/tracking). */
  readonly trackingDir?: string;
  readonly resourceTracking?: boolean;
}

export async function demoCommand(options: DemoOptions): Promise<number> {
  const dir = path.resolve(options.dir);
  const usable = (action: () => void) => {
    try {
      action();
    } catch (error) {
      if (errorCode(error) === undefined) throw error;
      throw new InputError(
        `Cannot use ${dir} as the demo folder (--dir): ${createFailureAdvice(error, dir)}`,
      );
    }
  };
  usable(() => fs.mkdirSync(dir, { recursive: true }));
  process.env.BLOCKWISE_DEMO_DIR = dir;
  const url = embeddedModuleUrl("lib/demo/demo_module.ts");
  const module = await import(url.href) as { default: unknown };
  const pipeline = validatePipeline(module.default, fileURLToPath(url));
  // The arrays are the tasks' declared outputs: they must exist before the run checks them.
  usable(() => ensureDemoArrays(dir));
  process.stderr.write(`Running the demo pipeline in ${dir}\n`);
  const trackingDir = options.trackingDir === undefined
    ? path.join(dir, "tracking")
    : path.resolve(options.trackingDir);
  const code = await runPipeline(pipeline, {
    serial: options.serial === true,
    trackingDir,
    resourceTracking: options.resourceTracking === true,
  });
  process.stdout.write(
    `\nDemo outputs:\n${
      describeDemoOutputs(dir, {}, trackingDir).map((l) => `  ${l}`).join("\n")
    }\n`,
  );
  return code;
}
