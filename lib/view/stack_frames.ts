/**
 * A failed block's stack as the report shows it: blockwise's own frames dropped (issue 48 item
 * 11), so the user's frames are what is left. In the compiled binary those frames are minified
 * code under `/$bunfs/` (`at processBlock (/$bunfs/root/workers/block_worker.js:54:1986)`);
 * run from source, they are the files of blockwise's `lib/` and `workers/` folders and
 * `main.ts`. Every other line (the message, `Caused by:`, a Python traceback with its `~~^^`
 * markers) is kept as it is, leading spaces included.
 */

import { fileURLToPath } from "node:url";

/** blockwise's own source folder when run from source (`/$bunfs/root/` in the binary). */
function sourceRoot(): string | null {
  try {
    return fileURLToPath(new URL("../../", import.meta.url));
  } catch {
    return null;
  }
}

const ROOT = sourceRoot();
const OWN = ROOT === null
  ? []
  : [`${ROOT}lib/`, `${ROOT}workers/`, `${ROOT}main.ts`].flatMap((p) => [p, `file://${p}`]);

/** Whether `line` is a JavaScript stack frame (`    at ...`) of blockwise's own code. */
export function isOwnFrame(line: string): boolean {
  if (!/^\s*at\s/.test(line)) return false;
  if (line.includes("/$bunfs/")) return true;
  return OWN.some((p) => line.includes(p));
}

/** The stack without blockwise's own frames; a stack of nothing else is kept whole. */
export function userStack(stack: readonly string[]): readonly string[] {
  const kept = stack.filter((line) => !isOwnFrame(line));
  return kept.length === 0 ? stack : kept;
}
