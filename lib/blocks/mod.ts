export * from "./block_id.ts";
export * from "./layout.ts";
