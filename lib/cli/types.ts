/** `blockwise types`: declarations a pipeline file can `import type` from. */

import process from "node:process";
import { PIPELINE_DECLARATIONS } from "../pipeline/mod.ts";

export function typesCommand(): void {
  process.stdout.write(
    PIPELINE_DECLARATIONS.endsWith("\n") ? PIPELINE_DECLARATIONS : PIPELINE_DECLARATIONS + "\n",
  );
}
