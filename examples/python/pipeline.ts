/**
 * A pipeline whose process functions are Python (segment.py): "smooth" reads 2 voxels of
 * context around each 32³ block and writes a smoothed volume; its total ROI is the volume grown
 * by that context, so its blocks write the whole volume, and read_block pads with zeros what
 * the edge blocks read outside it. "threshold" reads what smooth wrote and writes a mask plus
 * one JSON summary per block (a declared output, committed atomically). Each Python worker
 * imports segment.py once and calls open_volumes() once.
 *
 *   blockwise run examples/python/pipeline.ts --tracking-dir /tmp/python-example
 *
 * Needs python3 with numpy (apt install python3-numpy, or python.interpreter pointing at an
 * environment that has it).
 */

import type { Pipeline } from "../blockwise.d.ts";

const volume = { offset: [0, 0, 0], shape: [128, 128, 128] };
const block = { offset: [0, 0, 0], shape: [32, 32, 32] };
/** The volume grown by smooth's 2 voxels of context: its write blocks tile the volume whole. */
const withContext = { offset: [-2, -2, -2], shape: [132, 132, 132] };

export default {
  tasks: [
    {
      id: "smooth",
      totalRoi: withContext,
      // 2 voxels of context on every side.
      readRoi: { offset: [-2, -2, -2], shape: [36, 36, 36] },
      writeRoi: block,
      maxWorkers: 2,
      params: { radius: 2 },
      python: { module: "segment.py", process: "smooth", setup: "open_volumes" },
    },
    {
      id: "threshold",
      upstream: ["smooth"],
      totalRoi: volume,
      readRoi: block,
      writeRoi: block,
      maxWorkers: 2,
      params: { level: 0.5 },
      outputs: { counts: { path: "counts/{index}.json" } },
      python: { module: "segment.py", process: "threshold", setup: "open_volumes" },
    },
  ],
} satisfies Pipeline;
