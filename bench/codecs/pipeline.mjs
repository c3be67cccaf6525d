/**
 * bench/codecs.ts's blockwise pipeline: one task over a SIZE^3 float32 Zarr array, block =
 * chunk = 64^3, run with CODECS_WORKERS workers, in one of two modes:
 *
 * - read: each block reads its chunk of CODECS_SOURCE with `readBlock` (zarrita's `get`:
 *   read the file, decode, copy into the block's array).
 * - write: each block writes its 64^3 of the whole field, held in memory (CODECS_RAW, loaded in
 *   `setup`), into CODECS_TARGET with `writeBlock` (zarrita's `set`: copy the block out of the
 *   volume, encode, write the file), as zarr-python's `out[:] = data` does.
 *
 * What is timed: each block stamps the monotonic clock before and after its read or write and
 * appends the pair to this worker's file in CODECS_STAMPS; the bench's figure is the span from
 * the first stamp to the last. Setup (opening the arrays, decoding and encoding one chunk to
 * load the codec, loading the field) and a barrier until every worker is set up come before
 * the first stamp; the scheduler's hand-over between blocks and the stamp's own append fall
 * inside the span.
 *
 * This file is copied next to nothing (a temporary folder outside the checkout) so that it
 * imports the zarrita and blockwise helpers the scheduler carries, as on a node.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { openArray, readBlock, writeBlock } from "blockwise";

const CHUNK = 64;
const mode = process.env.CODECS_MODE;
const size = Number(process.env.CODECS_SIZE);
const workers = Number(process.env.CODECS_WORKERS);
const stamps = process.env.CODECS_STAMPS;
const BARRIER_MS = 30_000;

const now = () => Number(process.hrtime.bigint()) / 1e6;
const firstChunk = {
  readRoi: { offset: [0, 0, 0], shape: [CHUNK, CHUNK, CHUNK] },
  writeRoi: { offset: [0, 0, 0], shape: [CHUNK, CHUNK, CHUNK] },
};

/** Waits until every worker has written its ready file (or BARRIER_MS has passed). */
async function barrier(id) {
  fs.writeFileSync(path.join(stamps, `ready-${id}`), "");
  const started = Date.now();
  while (Date.now() - started < BARRIER_MS) {
    const ready = fs.readdirSync(stamps).filter((f) => f.startsWith("ready-")).length;
    if (ready >= workers) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  fs.writeFileSync(path.join(stamps, `barrier-timeout-${id}`), "");
}

export default {
  tasks: [
    {
      id: `codecs-${mode}`,
      totalRoi: { offset: [0, 0, 0], shape: [size, size, size] },
      readRoi: { offset: [0, 0, 0], shape: [CHUNK, CHUNK, CHUNK] },
      writeRoi: { offset: [0, 0, 0], shape: [CHUNK, CHUNK, CHUNK] },
      readWriteConflict: false,
      maxWorkers: workers,
      async setup() {
        const id = crypto.randomUUID();
        const file = path.join(stamps, `stamps-${id}.txt`);
        fs.writeFileSync(file, "");
        const source = await openArray(process.env.CODECS_SOURCE);
        const chunk = await readBlock(source, firstChunk); // loads the codec
        if (mode === "read") {
          await barrier(id);
          return { mode, file, source };
        }
        // Encode one chunk into a scratch array of the same format (loads the encoder).
        const scratch = path.join(stamps, `warm-${id}.zarr`);
        fs.mkdirSync(scratch);
        fs.copyFileSync(
          path.join(process.env.CODECS_TARGET, ".zarray"),
          path.join(scratch, ".zarray"),
        );
        await writeBlock(await openArray(scratch), firstChunk, chunk);
        const bytes = fs.readFileSync(process.env.CODECS_RAW);
        const volume = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
        const target = await openArray(process.env.CODECS_TARGET);
        await barrier(id);
        return { mode, file, target, volume };
      },
      async process(block, context) {
        let started;
        let ended;
        if (context.mode === "read") {
          started = now();
          await readBlock(context.source, block);
          ended = now();
        } else {
          const [z, y, x] = block.writeRoi.offset;
          const view = {
            data: context.volume.subarray((z * size + y) * size + x),
            shape: [CHUNK, CHUNK, CHUNK],
            stride: [size * size, size, 1],
          };
          started = now();
          await writeBlock(context.target, block, view);
          ended = now();
        }
        fs.appendFileSync(context.file, `${started} ${ended}\n`);
      },
    },
  ],
};
