/** `blockwise types`: declarations a pipeline file can `import type` from. */

import process from "node:process";
import { HELPER_DECLARATIONS } from "../helpers/declarations.ts";
import { PIPELINE_DECLARATIONS } from "../pipeline/mod.ts";

/** What `blockwise types` prints: the pipeline types, then the `blockwise` module's. */
export function typesText(): string {
  const text = `${PIPELINE_DECLARATIONS.trimEnd()}\n${HELPER_DECLARATIONS}`;
  return text.endsWith("\n") ? text : text + "\n";
}

export function typesCommand(): void {
  process.stdout.write(typesText());
}
