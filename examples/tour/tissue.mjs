// examples/tour/tissue.mjs: one task over the 512×768×1024 volume of the tissue mask in
// tests/fixtures/masks/ (64³ write blocks: 1,536 of them), for the skip-mask examples of the
// guide. Its process function does nothing: the examples are about which blocks run.
export default {
  tasks: [
    {
      id: "segment",
      totalRoi: { offset: [0, 0, 0], shape: [512, 768, 1024] },
      readRoi: { offset: [0, 0, 0], shape: [64, 64, 64] },
      writeRoi: { offset: [0, 0, 0], shape: [64, 64, 64] },
      readWriteConflict: false,
      maxWorkers: 2,
      process() {},
    },
  ],
};
