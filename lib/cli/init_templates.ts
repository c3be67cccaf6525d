/**
 * The files `blockwise init` writes: a starter pipeline that runs as it is (JavaScript, or a
 * pipeline file with a Python module), every task field shown with what it does, and a
 * .gitignore for what runs leave behind.
 */

const GEOMETRY =
  `      // The volume, in voxels: the write ROIs tile it; it includes the read context at the edge.
      totalRoi: { offset: [0, 0], shape: [256, 256] },
      // What one block may read: its write ROI plus 8 voxels of context on every side.
      readRoi: { offset: [-8, -8], shape: [80, 80] },
      // What one block writes; its shape is the block stride. Write ROIs never overlap.
      writeRoi: { offset: [0, 0], shape: [64, 64] },
      // Blocks at the far edge: "valid" (whole read ROI inside totalRoi, the default),
      // "overhang" (also those sticking out), "shrink" (cropped to totalRoi).
      fit: "shrink",`;

const COMMON_FIELDS =
  `      // Blocks whose read ROI overlaps another's write ROI never run at once (default true).
      readWriteConflict: false,
      maxWorkers: 2, //         workers of this task at once (default 1)
      maxRetries: 2, //         retries of a failed block (default 2)
      // maxWorkerRestarts: 10, replacements of crashed workers before the task is abandoned
      // timeout: 600,          seconds a block may run before its worker is replaced
      // requires: { cpu: 1 },  per-worker cost against run --resources
      // upstream: ["other"],   tasks whose blocks under the read ROI must be done first
      // skipMask: "skip.npy",  blocks to leave out in this run
      // quarantineAfter: 5,    failed attempts (all runs) after which a block is left alone
      // temporary: false,      delete the outputs once every reader has committed
      // Bump version when a code change changes results: blocks made before then run again.
      version: "1",
      // Parameters that change results (the third argument of process has them).
      params: { threshold: 0.5 },
      // What each block writes, committed atomically and recorded with its hash (needs a
      // tracking store: run --tracking-dir). {block_id}, {index}, {write_offset}, ... render per
      // block; see blockwise types for all the placeholders.
      outputs: { summary: { path: "out/{index}.json" } },
      // inputs: [{ zarr: "raw.zarr" }], external data blocks read (a change makes them stale)
      // check(block) { return false; },  a main-thread pre-check: true skips the block
      // tracking: "tracking/summarise",  this task's store (default: run --tracking-dir/<id>)
      // resourceTracking: true,          wall/CPU/RSS/IO per block in the store
      // launch: "slurm",                 where workers run: "local" (default), "slurm",
      //                                  or { kind: "command", argv: ["ssh", "n1", "{worker}"] }
      // workerProfile: true,             thread pools and malloc of Python and command workers`;

/** pipeline.mjs of a JavaScript starter. */
export const JS_PIPELINE =
  `// A starter pipeline from \`blockwise init\`: it runs as it is. Put your block's work in
// process(), then:
//
//   blockwise plan pipeline.mjs                          what would run
//   blockwise run pipeline.mjs --tracking-dir tracking   run it; run it again to resume
//   blockwise status tracking                            what the ledger says
//
// zarrita, @zarrita/storage and blockwise (openArray, readBlock, writeBlock) can be imported
// without installing anything; \`blockwise types > blockwise.d.ts\` gives editors the types.
import fs from "node:fs";

export default {
  tasks: [
    {
      id: "summarise", // unique; [A-Za-z0-9._-]
${GEOMETRY}
${COMMON_FIELDS}
      // Instead of process: a program per block (placeholders render per block), run in cwd:
      // command: ["python3", "export.py", "--offset", "{write_offset}", "--shape", "{write_shape}"],
      // cwd: ".", env: { OMP_NUM_THREADS: "4" },
      // Or a Python function: python: { module: "task.py" } (see blockwise init --python).
      //
      // Runs once per worker before its first block; what it returns is process's 2nd argument.
      setup() {
        return { startedAt: new Date().toISOString() };
      },
      // Runs once per block in a worker. block: taskId, id, index, readRoi, writeRoi, attempt.
      // Throwing fails the attempt (it is retried); outputs.NAME is where to write each output.
      process(block, state, { outputs, params }) {
        const voxels = block.writeRoi.shape.reduce((a, b) => a * b, 1);
        fs.writeFileSync(
          outputs.summary,
          JSON.stringify({ index: block.index, voxels, threshold: params.threshold, state }),
        );
      },
    },
  ],
};
`;

/** pipeline.mjs of a Python starter (its blocks run task.py's functions). */
export const PYTHON_PIPELINE =
  `// A starter pipeline from \`blockwise init --python\`: each block runs process() in task.py,
// in persistent Python workers (python3 on PATH, or python.interpreter). Then:
//
//   blockwise plan pipeline.mjs                          what would run
//   blockwise run pipeline.mjs --tracking-dir tracking   run it; run it again to resume
//   blockwise status tracking                            what the ledger says
export default {
  tasks: [
    {
      id: "summarise", // unique; [A-Za-z0-9._-]
${GEOMETRY}
${COMMON_FIELDS}
      // The module (relative to this file), its per-block function, and a once-per-worker
      // setup whose result process gets; interpreter defaults to "python3".
      python: { module: "task.py", process: "process", setup: "setup" },
      // env: { OMP_NUM_THREADS: "4" },  variables for the task's worker processes
    },
  ],
};
`;

/** task.py of a Python starter. */
export const PYTHON_MODULE =
  `"""Process functions of pipeline.mjs, from \`blockwise init --python\`.

Each worker imports this module once, calls setup() once, then process(block, state) for each
block. block has task_id, id, index, read_roi and write_roi (offset and shape tuples; roi.to_slices()
for numpy), attempt, params (the task's params) and outputs (where to write each declared output).
Raising fails the attempt; it is retried.
"""

import json
import os


def setup():
    """Runs once per worker: load a model, open a volume; the result is process's state."""
    return {"worker": os.getpid()}


def process(block, state):
    voxels = 1
    for s in block.write_roi.shape:
        voxels *= s
    with open(block.outputs["summary"], "w") as f:
        json.dump({"index": list(block.index), "voxels": voxels,
                   "threshold": block.params["threshold"], "worker": state["worker"]}, f)
`;

/** .gitignore: what runs leave beside the pipeline. */
export const GITIGNORE = `# Written by blockwise runs (blockwise init)
tracking/
out/
.blockwise-staging/
`;
