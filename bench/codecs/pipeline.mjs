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
 * Warm-up: before the barrier each worker reads (or writes, into a scratch array) its first chunk
 * again and again, WARM_BLOCKS times or for WARM_MS, whichever ends first, so that the clock
 * measures the block path as the JIT compiles it for a long run. Without it a 512^3 run, 0.2 s
 * of blocks, spends part of its span compiling: in two workers' span of a Blosc lz4 read, the
 * JIT threads took 40 ms of the 2 x 225 ms of CPU there is (docs/design/CODECS.md, "Warm-up").
 *
 * What is timed: each block stamps the monotonic clock before and after its read or write and
 * appends the pair to this worker's file in CODECS_STAMPS (opened once, in setup); the bench's
 * figure is the span from the first stamp to the last. Setup (opening the arrays, decoding and
 * encoding one chunk to load the codec, loading the field, the warm-up) and a barrier until
 * every worker is set up come before the first stamp; the scheduler's hand-over between blocks
 * and the stamp's own write fall inside the span.
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
const WARM_BLOCKS = 256;
const WARM_MS = 300;

// Looked up once: `process.hrtime` read on every call left the compiled stamp code on every block.
const hrtime = process.hrtime.bigint;
const now = () => Number(hrtime()) / 1e6;
// Shaped as the blocks blockwise passes to `process` (the same properties in the same order):
// code compiled on the warm-up's blocks then fits the run's, where a bare { readRoi, writeRoi }
// left it on every one of the first 200 blocks.
const firstChunk = {
  taskId: `codecs-${mode}`,
  id: 0,
  index: [0, 0, 0],
  readRoi: { offset: [0, 0, 0], shape: [CHUNK, CHUNK, CHUNK] },
  writeRoi: { offset: [0, 0, 0], shape: [CHUNK, CHUNK, CHUNK] },
  attempt: 1,
};

/** Runs `step` WARM_BLOCKS times or for WARM_MS, whichever ends first. */
async function warm(step) {
  const started = now();
  for (let i = 0; i < WARM_BLOCKS && now() - started < WARM_MS; i++) await step();
}

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
        // Opened once: a block's stamp is one write(2), not an open, a write and a close.
        const file = fs.openSync(path.join(stamps, `stamps-${id}.txt`), "a");
        const source = await openArray(process.env.CODECS_SOURCE);
        const chunk = await readBlock(source, firstChunk); // loads the codec
        if (mode === "read") {
          await warm(() => readBlock(source, firstChunk));
          await barrier(id);
          return { mode, file, source };
        }
        // Encode one chunk into a scratch array of the same format (loads the encoder).
        // Beside the target (tmpfs in the bench), not in the stamps folder on disk: the warm-up
        // rewrites its one chunk file hundreds of times.
        const scratch = `${process.env.CODECS_TARGET}.warm-${id}`;
        fs.mkdirSync(scratch);
        fs.copyFileSync(
          path.join(process.env.CODECS_TARGET, ".zarray"),
          path.join(scratch, ".zarray"),
        );
        const scratchArray = await openArray(scratch);
        await writeBlock(scratchArray, firstChunk, chunk);
        const bytes = fs.readFileSync(process.env.CODECS_RAW);
        const volume = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
        const target = await openArray(process.env.CODECS_TARGET);
        const firstView = {
          data: volume,
          shape: [CHUNK, CHUNK, CHUNK],
          stride: [size * size, size, 1],
        };
        await warm(() => writeBlock(scratchArray, firstChunk, firstView));
        fs.rmSync(scratch, { recursive: true, force: true });
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
        fs.writeSync(context.file, `${started} ${ended}\n`);
      },
    },
  ],
};
