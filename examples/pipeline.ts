// examples/pipeline.ts: three tasks over a 512×512×512 volume in 64³ blocks, to copy.
// `blockwise plan examples/pipeline.ts` shows the blocks; `blockwise run examples/pipeline.ts`
// runs them. The process functions here only spin a little: put your real work in them.
//
// Types come from `blockwise types > blockwise.d.ts` (type-only, nothing is needed at run time).

import type { Block, Pipeline } from "./blockwise.d.ts";

const volume = { offset: [0, 0, 0], shape: [512, 512, 512] };

function pretendWork(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) { /* a stand-in for real computation */ }
}

export default {
  tasks: [
    {
      id: "extract",
      totalRoi: volume,
      // 8 voxels of read context on every side of each 64³ write block.
      readRoi: { offset: [-8, -8, -8], shape: [80, 80, 80] },
      writeRoi: { offset: [0, 0, 0], shape: [64, 64, 64] },
      fit: "shrink",
      maxWorkers: 2,
      process(block: Block) {
        pretendWork(2);
        if (block.attempt > 3) throw new Error("unreachable: maxRetries is 2");
      },
    },
    {
      id: "relabel",
      upstream: ["extract"],
      totalRoi: volume,
      readRoi: { offset: [0, 0, 0], shape: [64, 64, 64] },
      writeRoi: { offset: [0, 0, 0], shape: [64, 64, 64] },
      readWriteConflict: false,
      maxWorkers: 2,
      setup() {
        // Runs once per worker: load a model, open a dataset, ...
        return { offset: 1000 };
      },
      process(_block: Block, context: unknown) {
        const { offset } = context as { offset: number };
        if (offset !== 1000) throw new Error("setup did not run");
        pretendWork(1);
      },
    },
    {
      id: "export",
      upstream: ["relabel"],
      totalRoi: volume,
      readRoi: { offset: [0, 0, 0], shape: [128, 128, 128] },
      writeRoi: { offset: [0, 0, 0], shape: [128, 128, 128] },
      readWriteConflict: false,
      maxWorkers: 2,
      // One program per block, no shell involved; the block also arrives in BLOCKWISE_* variables.
      command: ["true", "--offset", "{write_offset}", "--shape", "{write_shape}"],
      // Commands run here (relative to this file); without cwd, where blockwise was started.
      cwd: ".",
    },
  ],
} satisfies Pipeline;
