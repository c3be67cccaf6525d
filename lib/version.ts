/** The blockwise release and the build it came from; `--version` prints them. */

import { hostPlatform, runtimeName, runtimeVersion } from "./runtime/detect.ts";

/** The blockwise release. Keep in step with package.json. */
export const VERSION = "0.1.0";

// compile.sh bakes the build target in with `bun build --define BLOCKWISE_BUILD_TARGET:...`.
// In a source run (`bun main.ts`, `deno run`) the name is not defined at all; `typeof` on an
// undeclared name is the one read that does not throw.
declare const BLOCKWISE_BUILD_TARGET: string;

/** The target a compiled binary was built for (e.g. "linux-arm64"), or null in a source run. */
export function buildTarget(): string | null {
  return typeof BLOCKWISE_BUILD_TARGET === "string" ? BLOCKWISE_BUILD_TARGET : null;
}

/**
 * What `blockwise --version` prints: `blockwise 0.1.0 (bun 1.4.5, linux-arm64)` for a binary,
 * `blockwise 0.1.0 (deno 2.9.6, source on linux-x64)` for a source run.
 */
export function versionLine(): string {
  const build = buildTarget() ?? `source on ${hostPlatform()}`;
  return `blockwise ${VERSION} (${runtimeName()} ${runtimeVersion()}, ${build})`;
}
