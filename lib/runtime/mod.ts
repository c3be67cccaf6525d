export * from "./detect.ts";
export * from "./usage.ts";
export * from "./worker_spawn.ts";
export * from "./mmap.ts";
export * from "./command_group.ts";
export * from "./self_command.ts";
