/**
 * The append-only `manifest.jsonl` of a task's tracking store: defined in
 * lib/tracking/manifest.ts (below lib/outputs, so `status` reads it without importing upwards).
 */

export * from "../tracking/manifest.ts";
