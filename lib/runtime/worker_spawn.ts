/**
 * Spawning the block worker, and finding modules that are compiled into the binary as entry
 * points of their own (compile.sh): the worker entry and the demo pipeline. Their URLs are
 * resolved from the source root: `main.ts` registers its own folder (in the compiled binary that
 * is `/$bunfs/root/`), and the default below serves `bun run`, `deno run` and the tests.
 */

import { runtimeName } from "./detect.ts";

let sourceRoot: URL = new URL("../../", import.meta.url);

export function setSourceRoot(url: URL): void {
  sourceRoot = url;
}

/** URL of a file of the source tree, e.g. `embeddedModuleUrl("workers/block_worker.ts")`. */
export function embeddedModuleUrl(relativePath: string): URL {
  return new URL(relativePath, sourceRoot);
}

export function spawnWorker(name: string): Worker {
  if (typeof Worker === "undefined") {
    throw new Error(
      `Web Workers are not available in ${runtimeName()}; run blockwise with Bun (the compiled binary) or Deno`,
    );
  }
  // Deno requires `type: "module"`; Bun accepts it.
  return new Worker(embeddedModuleUrl("workers/block_worker.ts").href, { type: "module", name });
}
