// examples/gpu/pipeline.mjs: one Python worker per GPU, for docs/guide/gpus.md. Each worker
// takes one device of the run's pool (`--resources gpu=0,1`, else CUDA_VISIBLE_DEVICES, SLURM's
// allocation or the devices the NVIDIA driver reports) and starts with CUDA_VISIBLE_DEVICES
// naming it alone, so its model loads on "cuda:0". Needs PyTorch; stand_in/ holds a stand-in
// `torch` (PYTHONPATH=stand_in) that reads CUDA_VISIBLE_DEVICES, for machines without a GPU.
export default {
  tasks: [
    {
      id: "predict",
      totalRoi: { offset: [0, 0, 0], shape: [128, 128, 128] },
      readRoi: { offset: [-8, -8, -8], shape: [80, 80, 80] },
      writeRoi: { offset: [0, 0, 0], shape: [64, 64, 64] },
      fit: "shrink",
      // A prediction reads raw data and writes another array: neighbours may run at once.
      readWriteConflict: false,
      maxWorkers: 2,
      requires: { gpu: 1 },
      python: { module: "predict.py", setup: "load_model" },
    },
  ],
};
