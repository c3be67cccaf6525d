/** blockwise entry point: `bun main.ts ...`, `deno run -A main.ts ...`, or the compiled binary. */

import process from "node:process";
import { main } from "./lib/cli/program.ts";
import { setSourceRoot } from "./lib/runtime/mod.ts";
import { restartForBlockWork } from "./lib/runtime/allocator.ts";

// Workers and the demo pipeline are separate entry points of the compiled binary; they are
// found relative to this file, which is the root of the source tree (or of the binary's bundle).
setSourceRoot(new URL("./", import.meta.url));

// Commands that run blocks in this process start again with the allocator set for block work.
if (process.argv[2] === "run" || process.argv[2] === "worker") restartForBlockWork();

const code = await main(process.argv);
// Let pending output drain instead of calling process.exit(); nothing else keeps the loop alive.
process.exitCode = code;
