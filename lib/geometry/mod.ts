export * from "./coordinate.ts";
export * from "./roi.ts";
