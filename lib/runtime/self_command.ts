/**
 * How to start this blockwise again as another process (a remote worker, launched by SLURM or a
 * site's command): the compiled binary is one file; a source run needs its runtime and main.ts.
 */

import { fileURLToPath } from "node:url";
import process from "node:process";
import { runtimeName } from "./detect.ts";
import { embeddedModuleUrl } from "./worker_spawn.ts";

declare const BLOCKWISE_BUILD_TARGET: string;

/** The argv prefix that runs blockwise: `[binary]`, `[bun, main.ts]` or `[deno, run, -A, main.ts]`. */
export function selfCommand(): string[] {
  if (typeof BLOCKWISE_BUILD_TARGET === "string") return [process.execPath];
  const main = fileURLToPath(embeddedModuleUrl("main.ts"));
  if (runtimeName() === "deno") return [process.execPath, "run", "-A", "--no-check", main];
  return [process.execPath, main];
}

/**
 * This process's command line as a person would retype it (for lock records): the binary's own
 * path, not the `/$bunfs/root/blockwise` a compiled binary sees in argv[1].
 */
export function invocation(): string {
  return [...selfCommand(), ...process.argv.slice(2)].join(" ");
}
