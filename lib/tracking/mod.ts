export * from "./arrays.ts";
export * from "./lock.ts";
export * from "./runs_log.ts";
export * from "./session.ts";
export * from "./store.ts";
export * from "./store_layout.ts";
export * from "./task_hash.ts";
export * from "./migrate.ts";
