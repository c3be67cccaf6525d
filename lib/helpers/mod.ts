/**
 * The `blockwise` module a pipeline file imports (`import { openArray, readBlock, writeBlock }
 * from "blockwise"`): small helpers around zarrita for block I/O. blockwise carries it, so it
 * needs no install; `blockwise types` prints its declarations.
 */

export {
  type BlockRois,
  type NumericArray,
  type NumericChunk,
  openArray,
  type Placement,
  readBlock,
  type ReadOptions,
  readRoi,
  type RoiLike,
  roiSelection,
  writeBlock,
  type ZarrArray,
} from "./arrays.ts";
