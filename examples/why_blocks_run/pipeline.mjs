// examples/why_blocks_run/pipeline.mjs: two tasks of 16 blocks with path outputs, for
// docs/guide/why-blocks-run.md. "seg" writes out/seg/<id>.txt, whose text depends on the
// threshold (THRESHOLD) only in the first row of blocks; "stats" reads the seg block under it and
// writes out/stats/<id>.json. SEG_VERSION sets seg's version; FAIL=<id> makes that seg block
// fail, and after 3 failed attempts over all runs it is quarantined.
import fs from "node:fs";
import process from "node:process";

const here = new URL(".", import.meta.url).pathname;
const box = { offset: [0, 0], shape: [16, 16] };
const volume = { offset: [0, 0], shape: [64, 64] };

export default {
  tasks: [
    {
      id: "seg",
      totalRoi: volume,
      readRoi: box,
      writeRoi: box,
      readWriteConflict: false,
      maxWorkers: 2,
      version: process.env.SEG_VERSION ?? "1",
      params: { threshold: Number(process.env.THRESHOLD ?? 0.5) },
      quarantineAfter: 3,
      outputs: { labels: { path: "out/seg/{block_id}.txt" } },
      process(block, _setup, { outputs, params }) {
        if (process.env.FAIL === String(block.id)) {
          throw new Error(`segmentation diverged at block ${block.id}`);
        }
        const level = block.index[0] === 0 ? params.threshold : "background";
        fs.writeFileSync(outputs.labels, `seg ${block.id} ${level}\n`);
      },
    },
    {
      id: "stats",
      upstream: ["seg"],
      totalRoi: volume,
      readRoi: box,
      writeRoi: box,
      readWriteConflict: false,
      maxWorkers: 2,
      outputs: { counts: { path: "out/stats/{block_id}.json" } },
      process(block, _setup, { outputs }) {
        const seg = fs.readFileSync(`${here}out/seg/${block.id}.txt`, "utf8");
        fs.writeFileSync(outputs.counts, JSON.stringify({ block: block.id, bytes: seg.length }));
      },
    },
  ],
};
