export * from "./counters.ts";
export * from "./ready_queue.ts";
export * from "./scheduler.ts";
export * from "./resource_budget.ts";
