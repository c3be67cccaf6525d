// examples/tour/flaky.mjs: the run in docs/guide/commands.md. "segment" tiles a 320×480 volume
// in 32×32 write blocks with 8 voxels of read context (fit shrink: 150 blocks); block 70 fails
// every attempt while FLAKY is not 0. "measure" reads the segment block under each of its
// blocks. Nothing real is computed: put your work in process().
import process from "node:process";

const volume = { offset: [0, 0], shape: [320, 480] };

export default {
  tasks: [
    {
      id: "segment",
      totalRoi: volume,
      readRoi: { offset: [-8, -8], shape: [48, 48] },
      writeRoi: { offset: [0, 0], shape: [32, 32] },
      fit: "shrink",
      readWriteConflict: false,
      maxWorkers: 2,
      process(block) {
        if (block.id === 70 && process.env.FLAKY !== "0") {
          throw new Error("no signal in this block");
        }
      },
    },
    {
      id: "measure",
      upstream: ["segment"],
      totalRoi: volume,
      readRoi: { offset: [0, 0], shape: [32, 32] },
      writeRoi: { offset: [0, 0], shape: [32, 32] },
      readWriteConflict: false,
      process() {},
    },
  ],
};
