export * from "./block.ts";
export * from "./command_block.ts";
export * from "./pipeline_graph.ts";
export * from "./run_types.ts";
export * from "./serial_runner.ts";
export * from "./executor.ts";
export * from "./parallel_runner.ts";
export * from "./run_stats.ts";
