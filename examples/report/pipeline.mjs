// examples/report/pipeline.mjs: a 2-D volume of 20 x 30 blocks whose blocks take longer in a
// dense region in the middle, and one of which fails. Run it with --resource-tracking, then
// `blockwise report` pictures where the time went and where the failure is
// (docs/guide/seeing-a-run.md).
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export default {
  tasks: [
    {
      id: "segment",
      totalRoi: { offset: [0, 0], shape: [400, 600] },
      readRoi: { offset: [0, 0], shape: [20, 20] },
      writeRoi: { offset: [0, 0], shape: [20, 20] },
      readWriteConflict: false,
      maxWorkers: 2,
      maxRetries: 1,
      async process(block) {
        const [i, j] = block.index;
        if (i === 3 && j === 25) throw new Error("no objects found in block (3, 25)");
        // The dense region: an ellipse around the middle, ten times slower.
        const dense = ((i - 10) / 6) ** 2 + ((j - 15) / 8) ** 2 < 1;
        await sleep(dense ? 30 : 3);
      },
    },
  ],
};
