// examples/many_machines/pipeline.mjs: a task whose workers are separate `blockwise worker`
// processes that connect back to the run over TCP, for docs/guide/many-machines.md. Here the
// generic launcher starts them on this machine ("{worker}" becomes the worker's command line);
// launch: "slurm" submits each as a SLURM job instead, and { kind: "command", argv: ["bsub",
// "-I", "{worker}"] } hands it to another scheduler. PAUSE_MS makes each block last that long.
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
      launch: { kind: "command", argv: ["{worker}"] },
      async process() {
        await new Promise((resolve) => setTimeout(resolve, Number(process.env.PAUSE_MS ?? 0)));
      },
    },
  ],
};
