/** Deno import-map target of "@zarrita/storage/ref" (see lib/runtime/virtual_modules.ts). */

import * as bundled from "@zarrita/storage/ref";
import { chosenNamespace } from "../runtime/virtual_modules.ts";

const chosen = await chosenNamespace("@zarrita/storage/ref", bundled);

export default chosen.default;
