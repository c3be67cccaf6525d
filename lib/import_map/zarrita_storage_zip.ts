/** Deno import-map target of "@zarrita/storage/zip" (see lib/runtime/virtual_modules.ts). */

import * as bundled from "@zarrita/storage/zip";
import { chosenNamespace } from "../runtime/virtual_modules.ts";

const chosen = await chosenNamespace("@zarrita/storage/zip", bundled);

export const { BlobReader, HTTPRangeReader } = chosen;
export default chosen.default;
