/** Deno import-map target of "zarrita" (see lib/runtime/virtual_modules.ts). */

import * as bundled from "zarrita";
import { chosenNamespace } from "../runtime/virtual_modules.ts";

const chosen = await chosenNamespace("zarrita", bundled);

export const {
  Array,
  BoolArray,
  ByteStringArray,
  CodecPipelineError,
  FetchStore,
  Group,
  InvalidMetadataError,
  InvalidSelectionError,
  Location,
  NotFoundError,
  UnicodeStringArray,
  UnknownCodecError,
  UnsupportedError,
  _zarrita_internal_get,
  _zarrita_internal_getStrides,
  _zarrita_internal_set,
  _zarrita_internal_sliceIndices,
  create,
  defineArrayExtension,
  defineStoreExtension,
  extendArray,
  extendStore,
  get,
  isZarritaError,
  open,
  registry,
  root,
  select,
  set,
  slice,
  withByteCaching,
  withConsolidatedMetadata,
  withMaybeConsolidatedMetadata,
  withRangeCoalescing,
} = chosen;
