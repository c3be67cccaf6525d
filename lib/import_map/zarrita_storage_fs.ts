/** Deno import-map target of "@zarrita/storage/fs" (see lib/runtime/virtual_modules.ts). */

import * as bundled from "@zarrita/storage/fs";
import { chosenNamespace } from "../runtime/virtual_modules.ts";

const chosen = await chosenNamespace("@zarrita/storage/fs", bundled);

export default chosen.default;
