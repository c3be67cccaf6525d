// examples/tour/convert.mjs: command blocks, for docs/guide/pipelines.md. Each block runs one
// program (here sh, standing in for a converter); block 3's input is missing, so it fails and
// its stderr is shown under the failure.
const roi = (shape) => ({ offset: [0], shape: [shape] });

export default {
  tasks: [
    {
      id: "export",
      totalRoi: roi(8),
      readRoi: roi(1),
      writeRoi: roi(1),
      maxRetries: 0,
      command: [
        "sh",
        "-c",
        "test {block_id} != 3 || { echo 'convert: cannot open in_{block_id}.tif' >&2; exit 1; }; touch block_{block_id}.png",
      ],
    },
  ],
};
