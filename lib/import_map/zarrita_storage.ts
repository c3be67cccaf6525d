/** Deno import-map target of "@zarrita/storage" (see lib/runtime/virtual_modules.ts). */

import * as bundled from "@zarrita/storage";
import { chosenNamespace } from "../runtime/virtual_modules.ts";

const chosen = await chosenNamespace("@zarrita/storage", bundled);

export const { FetchStore, FileSystemStore, ReferenceStore, ZipFileStore } = chosen;
