/** Deno import-map target of "@zarrita/storage/fetch" (see lib/runtime/virtual_modules.ts). */

import * as bundled from "@zarrita/storage/fetch";
import { chosenNamespace } from "../runtime/virtual_modules.ts";

const chosen = await chosenNamespace("@zarrita/storage/fetch", bundled);

export default chosen.default;
