// examples/joining/pipeline.mjs: a task whose workers join by hand, for
// docs/guide/many-machines.md ("Workers joining by hand"). With launch: "manual" the run
// launches no worker: it writes its secret to a file only you can read, prints
//   Workers can join: blockwise worker --connect HOST:PORT --secret-file PATH
// and waits. Run that line from any shell or node that reaches the run (your own job script,
// another scheduler), up to maxWorkers times; more are told the task is full. PAUSE_MS makes
// each block last that long.
import process from "node:process";

export default {
  tasks: [
    {
      id: "predict",
      totalRoi: { offset: [0, 0], shape: [256, 256] },
      readRoi: { offset: [0, 0], shape: [64, 64] },
      writeRoi: { offset: [0, 0], shape: [64, 64] },
      readWriteConflict: false,
      maxWorkers: 2,
      launch: "manual",
      async process() {
        await new Promise((resolve) => setTimeout(resolve, Number(process.env.PAUSE_MS ?? 0)));
      },
    },
  ],
};
