// examples/python_segment/pipeline.mjs: a task whose process function is Python (segment.py),
// for docs/guide/python.md. Needs python3 with numpy.
export default {
  tasks: [
    {
      id: "segment",
      // The 256³ volume grown by the 8 voxels of context: the write blocks tile all of it.
      totalRoi: { offset: [-8, -8, -8], shape: [272, 272, 272] },
      readRoi: { offset: [-8, -8, -8], shape: [80, 80, 80] },
      writeRoi: { offset: [0, 0, 0], shape: [64, 64, 64] },
      maxWorkers: 2,
      params: { threshold: 0.5 },
      python: { module: "segment.py", setup: "load_model" },
    },
  ],
};
