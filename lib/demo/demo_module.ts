/**
 * The demo pipeline as a module, so workers can import it like any pipeline file. The output
 * folder comes from `BLOCKWISE_DEMO_DIR`, which `blockwise demo` sets before the run (workers
 * share the process environment).
 */

import process from "node:process";
import { createDemoPipeline } from "./demo_pipeline.ts";

export const DEMO_DIR_VARIABLE = "BLOCKWISE_DEMO_DIR";

export default createDemoPipeline(process.env[DEMO_DIR_VARIABLE] ?? "blockwise-demo");
