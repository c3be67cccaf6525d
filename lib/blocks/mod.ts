export * from "./block_id.ts";
export * from "./layout.ts";
export * from "./position_cursor.ts";
export * from "./coverage.ts";
