// examples/temporaries/chain.mjs: raw -> affinities (temporary) -> segment, plus a second reader
// of the affinities, stats, over a 256×256 volume in 64×64 blocks (16 per task), for
// docs/guide/temporaries.md. An affinities block (3 float32 channels, 48 KB) is deleted as soon
// as every block that reads it has committed; a segment block reads 3×3 affinities blocks.
import fs from "node:fs";

const volume = { offset: [0, 0], shape: [256, 256] };
const block = { offset: [0, 0], shape: [64, 64] };
const withContext = { offset: [-64, -64], shape: [192, 192] };

/** A block's bytes, made from its index so that a rebuild writes the same ones. */
function bytes(index, length) {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (index[0] * 31 + index[1] * 7 + i) % 251;
  return out;
}

export default {
  tasks: [
    {
      id: "raw",
      totalRoi: volume,
      readRoi: block,
      writeRoi: block,
      readWriteConflict: false,
      maxWorkers: 2,
      outputs: { raw: { path: "raw/{index}.bin" } },
      process(b, _s, { outputs }) {
        fs.writeFileSync(outputs.raw, bytes(b.index, 64 * 64));
      },
    },
    {
      id: "affinities",
      upstream: ["raw"],
      temporary: true,
      totalRoi: volume,
      readRoi: block,
      writeRoi: block,
      readWriteConflict: false,
      maxWorkers: 2,
      outputs: { affs: { path: "affs/{index}.bin" } },
      process(b, _s, { outputs }) {
        fs.writeFileSync(outputs.affs, bytes(b.index, 3 * 4 * 64 * 64));
      },
    },
    {
      id: "segment",
      upstream: ["affinities"],
      // The volume plus the read context: the write ROIs tile the volume (16 blocks).
      totalRoi: { offset: [-64, -64], shape: [384, 384] },
      readRoi: withContext,
      writeRoi: block,
      fit: "shrink",
      readWriteConflict: false,
      maxWorkers: 2,
      outputs: { labels: { path: "labels/{index}.bin" } },
      process(b, _s, { outputs }) {
        fs.writeFileSync(outputs.labels, bytes(b.index, 64 * 64));
      },
    },
    {
      id: "stats",
      upstream: ["affinities"],
      totalRoi: volume,
      readRoi: block,
      writeRoi: block,
      readWriteConflict: false,
      outputs: { counts: { path: "stats/{index}.json" } },
      process(b, _s, { outputs }) {
        fs.writeFileSync(outputs.counts, JSON.stringify({ index: b.index }));
      },
    },
  ],
};
