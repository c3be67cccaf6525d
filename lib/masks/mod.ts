export * from "./block_reduce.ts";
export * from "./load_mask.ts";
export * from "./mask_file.ts";
export * from "./mask_import.ts";
export * from "./npy.ts";
export * from "./skip_mask.ts";
export * from "./run_masks.ts";
