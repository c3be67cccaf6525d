/** The block value user code sees: defined in lib/pipeline/block.ts, below every user of it. */

export { blockName, makeBlock } from "../pipeline/block.ts";
