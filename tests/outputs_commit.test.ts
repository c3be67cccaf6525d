/**
 * Declared outputs end to end, through the CLI: per-block path outputs (one file, or a folder
 * of several), Zarr arrays written chunk by chunk (read back with zarrita), command blocks, the
 * refusals a user meets (misaligned write ROIs, a chunk outside the block, an output never
 * written) and the manifest's intent and commit records. Reconciliation and provenance are in
 * outputs_reconcile.test.ts and outputs_provenance.test.ts.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { createHash } from "node:crypto";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { ensureArray } from "../lib/zarr/mod.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, REPO, runCli } from "./fixtures/tracking/harness.ts";
import { manifestOf, names, ran, range, runIn, treeOf } from "./fixtures/outputs.ts";

const newDir = scratchDirs("outputs-commit");
// Each test spawns several runs: give it room on a loaded machine.
const SLOW = { timeout: 60_000 };
const ZARR_MODULE = JSON.stringify(path.join(REPO, "lib", "zarr", "mod.ts"));

/** A 1-D task of 8 blocks of 2 writing `out/{block_id}.txt` (or what `body` says). */
function pathPipeline(dir: string, options: { output?: string; body?: string } = {}): string {
  const file = path.join(dir, "p.mjs");
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
const DIR = ${JSON.stringify(dir)};
export default { tasks: [{
  id: "a", totalRoi: { offset: [0], shape: [16] }, readRoi: { offset: [0], shape: [2] },
  writeRoi: { offset: [0], shape: [2] }, readWriteConflict: false, maxWorkers: 2,
  outputs: { o: { path: ${JSON.stringify(options.output ?? "out/{block_id}.txt")} } },
  process(block, state, context) {
    fs.appendFileSync(DIR + "/ran.log", "a" + block.id + "\\n");
    ${options.body ?? `fs.writeFileSync(context.outputs.o, "block " + block.id);`}
  },
}] };
`,
  );
  return file;
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

describe("path outputs", () => {
  it(
    "each block's file is committed, recorded with its hash, and staging is gone",
    SLOW,
    async () => {
      const dir = newDir("path");
      const file = pathPipeline(dir);
      const first = await runIn(dir, file);
      assert.equal(first.code, 0, describeRun(first));
      assert.deepEqual(ran(dir), names("a", range(0, 8)).sort());
      assert.deepEqual(
        treeOf(path.join(dir, "out")),
        Object.fromEntries(range(0, 8).map((i) => [`${i}.txt`, `block ${i}`])),
        "one file per block, no staging left",
      );
      const records = manifestOf(dir, "a");
      const intents = records.filter((r) => r.t === "intent");
      const commits = records.filter((r) => r.t === "commit");
      assert.equal(intents.length, 8);
      assert.deepEqual(commits.map((r) => r.index[0]).sort(), range(0, 8));
      for (const intent of intents) {
        const i = intent.index[0]!;
        assert.deepEqual(intent.files, [[
          "o",
          `${i}.txt`,
          `block ${i}`.length,
          sha256(`block ${i}`),
        ]]);
        assert.match(intent.content ?? "", /^[0-9a-f]{64}$/);
        assert.match(intent.provenance ?? "", /^[0-9a-f]{64}$/);
      }
      // Every intent is before its commit: the order the crash table relies on.
      for (const i of range(0, 8)) {
        const at = (t: string) => records.findIndex((r) => r.t === t && r.index[0] === i);
        assert.ok(at("intent") < at("commit"), `block ${i}: intent before commit`);
      }
      assert.match(
        first.stderr,
        /Task "a": outputs reconciled: 0 recorded and present, 8 never built/,
      );
      const again = await runIn(dir, file);
      assert.equal(again.code, 0, describeRun(again));
      assert.deepEqual(ran(dir), [], "a rerun runs nothing");
      assert.match(again.stderr, /Task "a": outputs reconciled: 8 recorded and present\n/);
    },
  );

  it(
    "a block that writes several files commits them as one folder; a forced rerun replaces it whole",
    SLOW,
    async () => {
      const dir = newDir("folder");
      const body = `fs.mkdirSync(context.outputs.o + "/parts", { recursive: true });
    fs.writeFileSync(context.outputs.o + "/meta.json", JSON.stringify({ id: String(block.id) }));
    fs.writeFileSync(context.outputs.o + "/parts/" + (fs.existsSync(DIR + "/second") ? "new" : "old"), "x" + block.id);`;
      const file = pathPipeline(dir, { output: "out/{block_id}", body });
      const first = await runIn(dir, file);
      assert.equal(first.code, 0, describeRun(first));
      assert.deepEqual(Object.keys(treeOf(path.join(dir, "out", "3"))), ["meta.json", "parts/old"]);
      const intent = manifestOf(dir, "a").find((r) => r.t === "intent" && r.index[0] === 3)!;
      assert.deepEqual(intent.files!.map((f) => f[1]), ["3/meta.json", "3/parts/old"]);
      fs.writeFileSync(path.join(dir, "second"), "");
      const forced = await runIn(dir, file, ["--force", "a:6:2"]);
      assert.equal(forced.code, 0, describeRun(forced));
      assert.deepEqual(ran(dir), ["a3"]);
      assert.deepEqual(
        treeOf(path.join(dir, "out", "3")),
        { "meta.json": `{"id":"3"}`, "parts/new": "x3" },
        "the old folder's files are gone: the block's outputs are what its last run wrote",
      );
      assert.deepEqual(Object.keys(treeOf(path.join(dir, "out", "2"))), ["meta.json", "parts/old"]);
    },
  );

  it(
    "a block that does not write a declared output fails, naming it, and nothing is recorded",
    SLOW,
    async () => {
      const dir = newDir("missing");
      const file = pathPipeline(dir, {
        body: `if (block.id !== 5) fs.writeFileSync(context.outputs.o, "ok");`,
      });
      const result = await runIn(dir, file);
      assert.equal(result.code, 1, describeRun(result));
      assert.match(
        result.stderr,
        /Block 5 did not write its output "o" \(out\/\{block_id\}\.txt\): nothing at \S+\. Write it to context\.outputs\.o\./,
      );
      const records = manifestOf(dir, "a");
      assert.ok(!records.some((r) => r.index[0] === 5), "no record for the failed block");
      assert.equal(records.filter((r) => r.t === "commit").length, 7);
      assert.ok(!fs.existsSync(path.join(dir, "out", "5.txt")));
    },
  );

  it("command blocks get {output:NAME} and BLOCKWISE_OUTPUT_NAME", SLOW, async () => {
    const dir = newDir("command");
    const file = path.join(dir, "p.mjs");
    const script = `printf "%s" "$1" > "$2"; printf "id %s" "$1" > "$BLOCKWISE_OUTPUT_SUMMARY"`;
    fs.writeFileSync(
      file,
      `export default { tasks: [{
  id: "cmd", totalRoi: { offset: [0], shape: [4] }, readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false, maxWorkers: 2,
  outputs: { data: { path: "out/data/{block_id}.txt" }, summary: { path: "out/summary/{block_id}.txt" } },
  command: ["sh", "-c", ${JSON.stringify(script)}, "sh", "{block_id}", "{output:data}"],
}] };
`,
    );
    const result = await runIn(dir, file);
    assert.equal(result.code, 0, describeRun(result));
    assert.deepEqual(treeOf(path.join(dir, "out")), {
      "data/0.txt": "0",
      "data/1.txt": "1",
      "data/2.txt": "2",
      "data/3.txt": "3",
      "summary/0.txt": "id 0",
      "summary/1.txt": "id 1",
      "summary/2.txt": "id 2",
      "summary/3.txt": "id 3",
    });
    const intent = manifestOf(dir, "cmd").find((r) => r.t === "intent" && r.index[0] === 2)!;
    assert.deepEqual(intent.files!.map((f) => [f[0], f[1]]).sort(), [
      ["data", "2.txt"],
      ["summary", "2.txt"],
    ]);
  });

  it("outputs without a tracking store are refused before anything runs", SLOW, async () => {
    const dir = newDir("no-store");
    // Run from the scratch folder: were the refusal to fail, a store made relative to the
    // working directory lands there, not in the repository.
    const bare = await runCli(["run", pathPipeline(dir), "--no-progress"], { cwd: dir });
    assert.equal(bare.code, 2, describeRun(bare));
    assert.match(bare.stderr, /Task "a" declares outputs, which need a tracking store/);
    assert.match(bare.stderr, /--tracking-dir DIR/);
    assert.deepEqual(ran(dir), []);
    assert.deepEqual(fs.readdirSync(dir).sort(), ["p.mjs"], "no store, no output, no staging");
  });
});

/** An 8x8 uint16 task in blocks of `block`, writing `out.zarr/labels` (chunks `chunk`). */
function zarrPipeline(
  dir: string,
  options: { block: number; chunk: number; stray?: boolean },
): string {
  ensureArray(path.join(dir, "out.zarr", "labels"), {
    shape: [8, 8],
    chunkShape: [options.chunk, options.chunk],
    dtype: "uint16",
    fillValue: 0,
  });
  const file = path.join(dir, "z.mjs");
  const b = options.block;
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
import { openArrayMetadata, writeChunkRegion } from ${ZARR_MODULE};
const DIR = ${JSON.stringify(dir)};
const STRAY = ${options.stray === true};
export default { tasks: [{
  id: "paint", totalRoi: { offset: [0, 0], shape: [8, 8] }, readRoi: { offset: [0, 0], shape: [${b}, ${b}] },
  writeRoi: { offset: [0, 0], shape: [${b}, ${b}] }, readWriteConflict: false, maxWorkers: 2,
  outputs: { labels: { zarr: "out.zarr/labels" } },
  process(block, state, context) {
    fs.appendFileSync(DIR + "/ran.log", "paint" + block.index.join("") + "\\n");
    const meta = openArrayMetadata(context.outputs.labels);
    const { offset, shape } = block.writeRoi;
    const data = new Uint16Array(shape[0] * shape[1]);
    for (let y = 0; y < shape[0]; y++) for (let x = 0; x < shape[1]; x++) {
      data[y * shape[1] + x] = (offset[0] + y) * 100 + offset[1] + x;
    }
    const c = ${options.chunk};
    for (let y = 0; y < shape[0]; y += c) for (let x = 0; x < shape[1]; x += c) {
      const part = new Uint16Array(c * c);
      for (let i = 0; i < c; i++) for (let j = 0; j < c; j++) part[i * c + j] = data[(y + i) * shape[1] + x + j];
      writeChunkRegion(context.outputs.labels, meta, [offset[0] + y, offset[1] + x], [c, c], part);
    }
    if (STRAY && block.index.join("") === "00") {
      writeChunkRegion(context.outputs.labels, meta, [4, 4], [4, 4], new Uint16Array(16));
    }
  },
}] };
`,
  );
  return file;
}

describe("zarr outputs", () => {
  it("blocks write their chunks through staging; zarrita reads the whole array", SLOW, async () => {
    const dir = newDir("zarr");
    const file = zarrPipeline(dir, { block: 4, chunk: 4 });
    const result = await runIn(dir, file);
    assert.equal(result.code, 0, describeRun(result));
    assert.deepEqual(ran(dir), ["paint00", "paint01", "paint10", "paint11"]);
    const array = path.join(dir, "out.zarr", "labels");
    assert.deepEqual(Object.keys(treeOf(array)), ["c/0/0", "c/0/1", "c/1/0", "c/1/1", "zarr.json"]);
    const store = new FileSystemStore(path.join(dir, "out.zarr"));
    const arr = await zarr.open(zarr.root(store).resolve("labels"), { kind: "array" });
    const { data } = await zarr.get(arr);
    const expected = range(0, 64).map((i) => Math.floor(i / 8) * 100 + (i % 8));
    assert.deepEqual(Array.from(data as ArrayLike<number>), expected);
    const intent = manifestOf(dir, "paint").find((r) =>
      r.t === "intent" && r.index.join() === "1,0"
    )!;
    assert.deepEqual(intent.files!.map((f) => [f[0], f[1]]), [["labels", "c/1/0"]]);
    assert.equal(intent.files![0]![2], 32, "a 4x4 uint16 chunk, uncompressed");
  });

  it("blocks of several chunks each own all of them", SLOW, async () => {
    const dir = newDir("zarr-multi");
    const result = await runIn(dir, zarrPipeline(dir, { block: 4, chunk: 2 }));
    assert.equal(result.code, 0, describeRun(result));
    const intent = manifestOf(dir, "paint").find((r) =>
      r.t === "intent" && r.index.join() === "0,1"
    )!;
    assert.deepEqual(intent.files!.map((f) => f[1]), ["c/0/2", "c/0/3", "c/1/2", "c/1/3"]);
    assert.equal(Object.keys(treeOf(path.join(dir, "out.zarr", "labels"))).length, 17);
  });

  it(
    "a write ROI that is not chunk-aligned is refused at validation, naming task, chunk shape and ROI",
    SLOW,
    async () => {
      const dir = newDir("zarr-misaligned");
      const result = await runIn(dir, zarrPipeline(dir, { block: 2, chunk: 4 }));
      assert.equal(result.code, 2, describeRun(result));
      assert.match(
        result.stderr,
        /Task "paint": output "labels" \(out\.zarr\/labels\) has chunks of 4,4 elements, but the task's blocks write 2,2 starting at 0,0 \(array index\)/,
      );
      assert.match(result.stderr, /Make writeRoi's shape a multiple of 4,4/);
      assert.deepEqual(ran(dir), [], "nothing ran");
    },
  );

  it(
    "a block that writes a chunk outside its write ROI fails, naming the chunk; the others commit",
    SLOW,
    async () => {
      const dir = newDir("zarr-stray");
      const result = await runIn(dir, zarrPipeline(dir, { block: 4, chunk: 4, stray: true }));
      assert.equal(result.code, 1, describeRun(result));
      assert.match(
        result.stderr,
        /Block 0 wrote chunk c\/1\/1 of output "labels" \(out\.zarr\/labels\), outside its write ROI 0,0 \+ 4,4; its chunks are c\/0\/0\. Write only the block's write ROI\./,
      );
      const commits = manifestOf(dir, "paint").filter((r) => r.t === "commit");
      assert.deepEqual(commits.map((r) => r.index.join()).sort(), ["0,1", "1,0", "1,1"]);
      // Block (1,1)'s chunk holds its own data, not block 0's stray zeros.
      const chunk = new Uint16Array(
        new Uint8Array(fs.readFileSync(path.join(dir, "out.zarr", "labels", "c", "1", "1"))).buffer,
      );
      assert.equal(chunk[0], 404);
      assert.ok(!fs.existsSync(path.join(dir, "out.zarr", "labels", "c", "0", "0")));
    },
  );
});
