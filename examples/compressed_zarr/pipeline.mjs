// A 3x3 mean filter over a compressed Zarr array, with nothing installed: zarrita,
// @zarrita/storage and the blockwise helpers come with the blockwise binary.
//
//   blockwise run pipeline.mjs --tracking-dir tracking
//
// raw.zarr is blosc-compressed (written by numcodecs); out.zarr is zstd-compressed and starts
// empty. Each block reads its write ROI plus one voxel of context (padded with 0 at the volume's
// edge) and writes its write ROI through the declared output, so a killed run resumes with the
// blocks whose chunks were not committed.
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { openArray, readBlock, writeBlock } from "blockwise";

const here = new URL(".", import.meta.url).pathname;
const pause = Number(process.env.SMOOTH_PAUSE_MS ?? 0); // to watch a run, or kill one
// SMOOTH_CRASH=1 (with --tracking-dir tracking), to try a resume: a worker's second block waits
// until a block is marked done in the ledger, then kills the run as a crash would (SIGKILL).
const crash = process.env.SMOOTH_CRASH === "1";
let started = 0; // blocks this worker has started

async function blocksDone() {
  const done = new FileSystemStore(`${here}tracking/smooth/done`);
  const marks = await zarr.get(await zarr.open(done, { kind: "array" }));
  return marks.data.filter((mark) => mark === 1).length;
}

export default {
  tasks: [
    {
      id: "smooth",
      // totalRoi includes the read context: the write ROIs tile [0, 20) x [0, 30).
      totalRoi: { offset: [-1, -1], shape: [22, 32] },
      readRoi: { offset: [-1, -1], shape: [12, 12] },
      writeRoi: { offset: [0, 0], shape: [10, 10] },
      readWriteConflict: false,
      maxWorkers: 2,
      version: "1",
      outputs: { smoothed: { zarr: "out.zarr" } },
      async setup() {
        return await zarr.open(new FileSystemStore(`${here}raw.zarr`), { kind: "array" });
      },
      async process(block, raw, { outputs }) {
        if (crash && started++ > 0) {
          while ((await blocksDone()) === 0) {
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          process.kill(process.pid, "SIGKILL");
        }
        const input = await readBlock(raw, block, { fill: 0 });
        const [rows, columns] = input.shape;
        const mean = new Uint16Array(rows * columns);
        for (let r = 1; r < rows - 1; r++) {
          for (let c = 1; c < columns - 1; c++) {
            let sum = 0;
            for (let dr = -1; dr <= 1; dr++) {
              for (let dc = -1; dc <= 1; dc++) sum += input.data[(r + dr) * columns + c + dc];
            }
            mean[r * columns + c] = Math.floor(sum / 9);
          }
        }
        if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
        // outputs.smoothed is this block's staging copy of out.zarr; blockwise commits it.
        await writeBlock(await openArray(outputs.smoothed), block, mean);
      },
    },
  ],
};
