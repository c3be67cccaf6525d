// examples/tour/placeholders.mjs: what a command's placeholders render to, for
// docs/guide/pipelines.md. A 144×144 volume (128×128 plus 8 voxels of context on each side) in
// 64×64 write blocks: four blocks; each echoes its placeholders.
export default {
  tasks: [
    {
      id: "show",
      totalRoi: { offset: [-8, -8], shape: [144, 144] },
      readRoi: { offset: [-8, -8], shape: [80, 80] },
      writeRoi: { offset: [0, 0], shape: [64, 64] },
      command: [
        "echo",
        "task_id={task_id} block_id={block_id} index={index} read_offset={read_offset} read_shape={read_shape} write_offset={write_offset} write_shape={write_shape} attempt={attempt}",
      ],
    },
  ],
};
