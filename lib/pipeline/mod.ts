export * from "./spec.ts";
export * from "./validate.ts";
export * from "./load.ts";
export * from "./declarations.ts";
export * from "./command_template.ts";
