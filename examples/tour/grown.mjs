// examples/tour/grown.mjs: a task whose volume grows along axis 1 (W, default 95) when more
// data arrives; docs/guide/commands.md migrates its store in place.
import process from "node:process";

export default {
  tasks: [
    {
      id: "a",
      totalRoi: { offset: [0, 0], shape: [100, Number(process.env.W ?? 95)] },
      readRoi: { offset: [0, 0], shape: [10, 10] },
      writeRoi: { offset: [0, 0], shape: [10, 10] },
      fit: "shrink",
      process() {},
    },
  ],
};
