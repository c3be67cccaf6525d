export * from "./pipeline_dag.ts";
export * from "./inter_task.ts";
export * from "./dependency_graph.ts";
