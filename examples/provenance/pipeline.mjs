// examples/provenance/pipeline.mjs: three tasks with declared outputs over a 64×64 volume in
// 16×16 blocks. "seg" thresholds raw.zarr into the Zarr array out.zarr/labels, "stats" counts
// each block's foreground into a JSON file, "notes" is a command that copies it. Every output
// is committed atomically and recorded with its hash; version, params (THRESHOLD) and the input
// array make the blocks that change stale (docs/guide/outputs.md).
import fs from "node:fs";
import process from "node:process";
import { openArray, readBlock, writeBlock } from "blockwise";

const here = new URL(".", import.meta.url).pathname;
const box = { offset: [0, 0], shape: [16, 16] };

export default {
  tasks: [
    {
      id: "seg",
      totalRoi: { offset: [0, 0], shape: [64, 64] },
      readRoi: box,
      writeRoi: box,
      readWriteConflict: false,
      maxWorkers: 2,
      version: process.env.SEG_VERSION ?? "1",
      params: { threshold: Number(process.env.THRESHOLD ?? 0.5) },
      inputs: [{ zarr: "raw.zarr" }],
      outputs: { labels: { zarr: "out.zarr/labels" } },
      async process(block, _setup, { outputs, params }) {
        const raw = await readBlock(await openArray(`${here}raw.zarr`), block);
        const labels = Uint8Array.from(raw.data, (v) => (v > params.threshold ? 1 : 0));
        // outputs.labels: a staging copy of out.zarr/labels; write this block's chunks there.
        await writeBlock(await openArray(outputs.labels), block, labels);
      },
    },
    {
      id: "stats",
      upstream: ["seg"],
      totalRoi: { offset: [0, 0], shape: [64, 64] },
      readRoi: box,
      writeRoi: box,
      readWriteConflict: false,
      maxWorkers: 2,
      outputs: { counts: { path: "stats/{block_id}.json" } },
      async process(block, _setup, { outputs }) {
        if (process.env.SLOW) await new Promise((r) => setTimeout(r, Number(process.env.SLOW)));
        const labels = await readBlock(await openArray(`${here}out.zarr/labels`), block);
        const foreground = labels.data.reduce((n, v) => n + v, 0);
        fs.writeFileSync(outputs.counts, JSON.stringify({ block: block.id, foreground }));
      },
    },
    {
      id: "notes",
      upstream: ["stats"],
      totalRoi: { offset: [0, 0], shape: [64, 64] },
      readRoi: box,
      writeRoi: box,
      readWriteConflict: false,
      outputs: { note: { path: "notes/{block_id}.txt" } },
      cwd: ".",
      command: [
        "sh",
        "-c",
        'cat stats/{block_id}.json > {output:note}; echo done >> "$BLOCKWISE_OUTPUT_NOTE"',
      ],
    },
  ],
};
