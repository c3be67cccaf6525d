/** Deno import-map target of "blockwise" (see lib/runtime/virtual_modules.ts). */

import * as bundled from "../helpers/mod.ts";
import { chosenNamespace } from "../runtime/virtual_modules.ts";

const chosen = await chosenNamespace("blockwise", bundled);

export const { openArray, readBlock, readRoi, roiSelection, writeBlock } = chosen;
