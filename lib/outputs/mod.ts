export * from "./block_outputs.ts";
export * from "./forced.ts";
export * from "./manifest.ts";
export * from "./output_plan.ts";
export * from "./provenance.ts";
export * from "./reconcile.ts";
export * from "./recipes.ts";
export * from "./run_outputs.ts";
