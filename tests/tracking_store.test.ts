/**
 * The tracking store at library level (TrackingStore.open directly): daisy's task-hash vectors,
 * the exact Zarr v3 group layout (seed 000 "What's stored" / "On-disk layout", DESIGN.md
 * section 6, reference zarr-v3-facts), zarrita reading what the store wrote, refusals that leave
 * the store untouched, resource tracking switched on later, and the mmap and fs adapters writing
 * byte-identical stores.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { type Fit, TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import { StoreError } from "../lib/errors.ts";
import { mmapSupport } from "../lib/runtime/mod.ts";
import {
  DAISY_MARKER_DOMAIN,
  readStoreMetadata,
  taskHash,
  TRACKING_DOMAIN,
  TrackingStore,
  WORKER_NONE,
} from "../lib/tracking/mod.ts";
import type { MmapKind } from "../lib/runtime/mod.ts";
import { removeDir, snapshotFiles, snapshotStats, tempDir } from "./fixtures/tracking/harness.ts";

const root = tempDir("tracking-store");
after(() => removeDir(root));
let counter = 0;

/** A path for a store that does not exist yet. */
function storePath(label = "store"): string {
  return path.join(root, `${label}-${++counter}`);
}

interface LayoutArgs {
  readonly total?: readonly [readonly number[], readonly number[]];
  readonly read?: readonly [readonly number[], readonly number[]];
  readonly write?: readonly [readonly number[], readonly number[]];
  readonly fit?: Fit;
  readonly conflict?: boolean;
}

/** Default: total [0,0]+[40,30], read = write = [0,0]+[10,10], valid: a 4x3 grid. */
function layout(args: LayoutArgs = {}): TaskLayout {
  const total = args.total ?? [[0, 0], [40, 30]];
  const write = args.write ?? [[0, 0], [10, 10]];
  const read = args.read ?? write;
  return new TaskLayout({
    totalRoi: makeRoi(total[0], total[1]),
    readRoi: makeRoi(read[0], read[1]),
    writeRoi: makeRoi(write[0], write[1]),
    fit: args.fit ?? "valid",
    readWriteConflict: args.conflict ?? false,
  });
}

function open(
  dir: string,
  l: TaskLayout,
  resourceTracking = true,
  mmap: MmapKind | "auto" = "auto",
): Promise<TrackingStore> {
  return TrackingStore.open(dir, { taskId: "seg", layout: l, resourceTracking, mmap });
}

function readJson(file: string): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The arrays of seed 000's table, with the dtype and fill value written in zarr.json. */
const SEED_ARRAYS: readonly {
  name: string;
  dtype: string;
  size: number;
  fill: number | "NaN";
  resource: boolean;
}[] = [
  { name: "done", dtype: "uint8", size: 1, fill: 0, resource: false },
  { name: "failures", dtype: "uint32", size: 4, fill: 0, resource: false },
  { name: "wall_seconds", dtype: "float32", size: 4, fill: "NaN", resource: true },
  { name: "cpu_seconds", dtype: "float32", size: 4, fill: "NaN", resource: true },
  { name: "peak_rss_bytes", dtype: "uint64", size: 8, fill: 0, resource: true },
  { name: "io_read_bytes", dtype: "uint64", size: 8, fill: 0, resource: true },
  { name: "io_write_bytes", dtype: "uint64", size: 8, fill: 0, resource: true },
  { name: "gpu_util_pct", dtype: "float32", size: 4, fill: "NaN", resource: true },
  { name: "gpu_mem_bytes", dtype: "uint64", size: 8, fill: 0, resource: true },
  { name: "worker_id", dtype: "uint32", size: 4, fill: 4294967295, resource: true },
  { name: "sent_at", dtype: "float64", size: 8, fill: "NaN", resource: true },
  { name: "returned_at", dtype: "float64", size: 8, fill: "NaN", resource: true },
  // Not in seed 000: when the worker finished the block (issue 48, the report's timeline).
  { name: "finished_at", dtype: "float64", size: 8, fill: "NaN", resource: true },
];

/** The little-endian bytes of one fill element (quiet NaN: top mantissa bit only). */
function fillBytes(dtype: string, fill: number | "NaN"): number[] {
  if (fill === "NaN") {
    return dtype === "float32" ? [0, 0, 0xc0, 0x7f] : [0, 0, 0, 0, 0, 0, 0xf8, 0x7f];
  }
  if (fill === 4294967295) return [0xff, 0xff, 0xff, 0xff];
  return new Array<number>(dtype === "uint8" ? 1 : dtype.endsWith("32") ? 4 : 8).fill(0);
}

const ARRAY_KEYS = [
  "attributes",
  "chunk_grid",
  "chunk_key_encoding",
  "codecs",
  "data_type",
  "fill_value",
  "node_type",
  "shape",
  "zarr_format",
];

describe("taskHash", () => {
  const spec = (fit: Fit) => ({
    totalRoi: makeRoi([0], [100]),
    readRoi: makeRoi([0], [20]),
    writeRoi: makeRoi([5], [10]),
    fit,
    readWriteConflict: true,
  });

  it("reproduces daisy's vector for total [0]+[100], read [0]+[20], write [5]+[10], valid", () => {
    assert.equal(
      taskHash(spec("valid"), DAISY_MARKER_DOMAIN),
      "c0137e6871b462156a3619eb57c1e87564c40a8cae7cd0222c3c17bb9c3ad036",
    );
  });

  it("reproduces daisy's vector for the same layout with shrink", () => {
    assert.equal(
      taskHash(spec("shrink"), DAISY_MARKER_DOMAIN),
      "d3cd1b7fb0c054de8bd024ba63469364e79621612d32772da16cebeffdfd20d1",
    );
  });

  it("reproduces daisy's 2-D zarr.json example hash", () => {
    const hash = taskHash({
      totalRoi: makeRoi([0, 0], [400, 400]),
      readRoi: makeRoi([0, 0], [100, 100]),
      writeRoi: makeRoi([0, 0], [100, 100]),
      fit: "valid",
      readWriteConflict: false,
    }, DAISY_MARKER_DOMAIN);
    assert.equal(hash, "72dc582c9366b89f1aa16ffa48a77647848b1d905a88aacff36062a188c11a8e");
  });

  it("does not hash readWriteConflict, and the store's own domain differs from daisy's", () => {
    const a = taskHash(spec("valid"));
    assert.equal(taskHash({ ...spec("valid"), readWriteConflict: false }), a);
    assert.match(a, /^[0-9a-f]{64}$/);
    assert.notEqual(a, taskHash(spec("valid"), DAISY_MARKER_DOMAIN));
    assert.equal(taskHash(spec("valid"), TRACKING_DOMAIN), a);
    assert.notEqual(taskHash(spec("overhang")), a);
  });
});

describe("group layout on disk", () => {
  it("writes zarr.json with exactly zarr_format, node_type and attributes, hash under attributes.blockwise", async () => {
    const dir = storePath();
    const l = layout();
    const store = await open(dir, l);
    assert.equal(store.created, true);
    store.close();
    const group = readJson(path.join(dir, "zarr.json"));
    assert.deepEqual(Object.keys(group).sort(), ["attributes", "node_type", "zarr_format"]);
    assert.equal(group["zarr_format"], 3);
    assert.equal(group["node_type"], "group");
    const attrs = group["attributes"] as Record<string, unknown>;
    assert.deepEqual(Object.keys(attrs), ["blockwise"]);
    const bw = attrs["blockwise"] as Record<string, unknown>;
    assert.equal(bw["task_hash"], taskHash(l));
    assert.equal(bw["task_id"], "seg");
    const stored = bw["layout"] as Record<string, unknown>;
    assert.deepEqual(stored["grid_shape"], [4, 3]);
    assert.deepEqual(stored["write_shape"], [10, 10]);
  });

  it("writes every seed array with the 8 mandatory keys + attributes, little-endian bytes codec and a full-size chunk at c/0/0 filled with the fill value", async () => {
    const dir = storePath();
    (await open(dir, layout())).close();
    const entries = fs.readdirSync(dir).sort();
    assert.deepEqual(entries, [...SEED_ARRAYS.map((a) => a.name), "zarr.json"].sort());
    for (const a of SEED_ARRAYS) {
      const metaFile = path.join(dir, a.name, "zarr.json");
      const meta = readJson(metaFile);
      assert.deepEqual(Object.keys(meta).sort(), ARRAY_KEYS, a.name);
      assert.equal(meta["zarr_format"], 3);
      assert.equal(meta["node_type"], "array");
      assert.deepEqual(meta["shape"], [4, 3], a.name);
      assert.equal(meta["data_type"], a.dtype, a.name);
      assert.deepEqual(meta["chunk_grid"], {
        name: "regular",
        configuration: { chunk_shape: [4, 3] },
      });
      assert.deepEqual(meta["chunk_key_encoding"], {
        name: "default",
        configuration: { separator: "/" },
      });
      assert.deepEqual(meta["codecs"], [{ name: "bytes", configuration: { endian: "little" } }]);
      assert.deepEqual(meta["fill_value"], a.fill, a.name);
      assert.equal(typeof meta["attributes"], "object");
      if (a.fill === "NaN") {
        assert.match(fs.readFileSync(metaFile, "utf8"), /"fill_value": "NaN"/);
      }
      // Exactly one chunk, at c/0/0, of exactly 12 elements, initialised to the fill pattern.
      assert.deepEqual(fs.readdirSync(path.join(dir, a.name)).sort(), ["c", "zarr.json"]);
      assert.deepEqual(fs.readdirSync(path.join(dir, a.name, "c")), ["0"]);
      assert.deepEqual(fs.readdirSync(path.join(dir, a.name, "c", "0")), ["0"]);
      const chunk = fs.readFileSync(path.join(dir, a.name, "c", "0", "0"));
      assert.equal(chunk.length, 12 * a.size, a.name);
      const pattern = fillBytes(a.dtype, a.fill);
      for (let i = 0; i < chunk.length; i++) {
        if (chunk[i] !== pattern[i % pattern.length]) {
          assert.fail(
            `${a.name}: byte ${i} is ${chunk[i]}, expected ${pattern[i % pattern.length]}`,
          );
        }
      }
    }
    // Nothing left behind by the build-and-rename.
    assert.deepEqual(
      fs.readdirSync(path.dirname(dir)).filter((n) => n.includes(path.basename(dir) + ".")),
      [],
    );
  });

  it("without resource tracking writes only done and failures", async () => {
    const dir = storePath();
    (await open(dir, layout(), false)).close();
    assert.deepEqual(fs.readdirSync(dir).sort(), ["done", "failures", "zarr.json"]);
  });

  it("puts the chunk at c/0 for 1-D and c/0/0/0 for 3-D, sized to the tracking grid", async () => {
    const one = storePath();
    (await open(one, layout({ total: [[0], [95]], write: [[0], [10]] }), false)).close();
    assert.equal(fs.statSync(path.join(one, "done", "c", "0")).size, 10);
    assert.equal(fs.statSync(path.join(one, "failures", "c", "0")).size, 40);
    const three = storePath();
    (await open(
      three,
      layout({ total: [[0, 0, 0], [20, 30, 40]], write: [[0, 0, 0], [10, 10, 10]] }),
      false,
    ))
      .close();
    assert.equal(fs.statSync(path.join(three, "done", "c", "0", "0", "0")).size, 24);
    assert.deepEqual(readJson(path.join(three, "done", "zarr.json"))["shape"], [2, 3, 4]);
  });

  it("creates the store in an existing empty folder, and reopens it with its bytes", async () => {
    const dir = storePath();
    fs.mkdirSync(dir);
    const l = layout();
    const a = await open(dir, l);
    assert.equal(a.created, true);
    a.markDone(5);
    a.addFailure(7);
    a.close();
    const b = await open(dir, l);
    assert.equal(b.created, false);
    assert.equal(b.isDone(5), true);
    assert.equal(b.isDone(4), false);
    assert.equal(b.failures[7], 1);
    assert.equal(b.doneBlocks(), 1);
    b.close();
  });
});

describe("zarrita reads the store", () => {
  it("opens the group and every array and reads what markDone, addFailure and recordBlock wrote", async () => {
    const dir = storePath();
    const l = layout();
    const store = await open(dir, l);
    store.markDone(0);
    store.markDone(11);
    store.addFailure(3);
    store.addFailure(3);
    store.addFailure(11);
    const sent = 1_700_000_000_123;
    store.recordBlock(11, sent, sent + 250, 7, {
      wallSeconds: 0.2,
      cpuSeconds: 0.15,
      peakRssBytes: 123_456_789,
      ioReadBytes: 2 ** 40 + 3,
      ioWriteBytes: 4096,
    });
    store.recordBlock(3, sent, sent + 5, -1, null);
    store.close();

    const zs = new FileSystemStore(dir);
    const group = await zarr.open.v3(zs, { kind: "group" });
    const attrs = group.attrs as { blockwise?: { task_hash?: string } };
    assert.equal(attrs.blockwise?.task_hash, taskHash(l));
    const read = async (name: string) => {
      const arr = await zarr.open.v3(group.resolve(name), { kind: "array" });
      assert.deepEqual(arr.shape, [4, 3], name);
      const chunk = await zarr.get(arr);
      assert.deepEqual(chunk.shape, [4, 3]);
      return Array.from(chunk.data as ArrayLike<number | bigint>);
    };
    const at = (values: (number | bigint)[], cell: number) => values[cell];
    const done = await read("done");
    assert.deepEqual(done, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    const failures = await read("failures");
    assert.deepEqual(failures, [0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1]);
    const wall = await read("wall_seconds");
    assert.equal(at(wall, 11), Math.fround(0.2));
    assert.ok(Number.isNaN(at(wall, 0)));
    assert.ok(Number.isNaN(at(wall, 3)), "recordBlock without usage leaves wall_seconds NaN");
    assert.equal(at(await read("cpu_seconds"), 11), Math.fround(0.15));
    assert.equal(at(await read("peak_rss_bytes"), 11), 123_456_789n);
    assert.equal(at(await read("io_read_bytes"), 11), 2n ** 40n + 3n);
    assert.equal(at(await read("io_write_bytes"), 11), 4096n);
    assert.equal(at(await read("io_write_bytes"), 0), 0n);
    assert.ok((await read("gpu_util_pct")).every((v) => Number.isNaN(v)));
    assert.ok((await read("gpu_mem_bytes")).every((v) => v === 0n));
    const workers = await read("worker_id");
    assert.equal(at(workers, 11), 7);
    assert.equal(at(workers, 3), WORKER_NONE, "worker -1 (serial) is recorded as 2**32-1");
    assert.equal(at(workers, 0), 4294967295);
    const sentAt = await read("sent_at");
    const returnedAt = await read("returned_at");
    assert.equal(at(sentAt, 11), sent / 1000);
    assert.equal(at(returnedAt, 11), (sent + 250) / 1000);
    assert.equal(at(returnedAt, 3), (sent + 5) / 1000);
    assert.ok(Number.isNaN(at(sentAt, 0)));
  });

  it("sees a mapped store's writes while it is still open (mmap adapters)", async (t) => {
    const dir = storePath();
    const store = await open(dir, layout(), false);
    try {
      if (store.mmapKind === "fs") {
        t.skip("the fs fallback writes back only on flush");
        return;
      }
      store.markDone(6);
      store.addFailure(2);
      const group = await zarr.open.v3(new FileSystemStore(dir), { kind: "group" });
      const done = await zarr.get(await zarr.open.v3(group.resolve("done"), { kind: "array" }));
      assert.equal((done.data as Uint8Array)[6], 1);
      const failures = await zarr.get(
        await zarr.open.v3(group.resolve("failures"), { kind: "array" }),
      );
      assert.equal((failures.data as Uint32Array)[2], 1);
    } finally {
      store.close();
    }
  });
});

describe("refusals leave the store untouched", () => {
  /** Open must fail with a StoreError naming `dir` and `rm -rf`, and change no file or mtime. */
  async function refused(
    dir: string,
    l: TaskLayout,
    pattern: RegExp,
    resourceTracking = true,
  ): Promise<string> {
    const parent = fs.readdirSync(path.dirname(dir)).sort();
    const files = snapshotFiles(dir);
    const stats = snapshotStats(dir);
    let message = "";
    await assert.rejects(open(dir, l, resourceTracking), (error: unknown) => {
      assert.ok(error instanceof StoreError, `expected a StoreError, got ${String(error)}`);
      message = error.message;
      assert.match(message, new RegExp(escape(dir)));
      assert.match(message, new RegExp(`rm -rf ${escape(dir)}`));
      assert.match(message, pattern);
      return true;
    });
    assert.deepEqual(snapshotFiles(dir), files, "no file content changed");
    assert.deepEqual(snapshotStats(dir), stats, "no file or folder was touched");
    assert.deepEqual(fs.readdirSync(path.dirname(dir)).sort(), parent, "nothing left beside it");
    return message;
  }

  async function written(l: TaskLayout, resourceTracking = true): Promise<string> {
    const dir = storePath();
    const store = await open(dir, l, resourceTracking);
    store.markDone(1);
    store.addFailure(2);
    store.close();
    return dir;
  }

  it("a changed write shape names the block stride", async () => {
    const dir = await written(layout());
    await refused(
      dir,
      layout({ write: [[0, 0], [5, 5]] }),
      /different task layout.*write shape \(block stride\) changed from \(10, 10\) to \(5, 5\)/s,
    );
  });

  it("a changed fit names the fit, and adds no resource arrays to a store without them", async () => {
    const dir = await written(layout(), false);
    await refused(dir, layout({ fit: "shrink" }), /fit changed from "valid" to "shrink"/, true);
  });

  it("a changed read ROI names the context", async () => {
    const dir = await written(layout());
    await refused(
      dir,
      layout({ read: [[-2, -2], [14, 14]], write: [[0, 0], [10, 10]] }),
      /read context before the write ROI changed from \(0, 0\) to \(2, 2\)/,
    );
  });

  it("a shrunk or moved total ROI names totalRoi", async () => {
    const dir = await written(layout());
    await refused(dir, layout({ total: [[0, 0], [30, 30]] }), /totalRoi changed from/);
    await refused(dir, layout({ total: [[10, 0], [40, 30]] }), /totalRoi changed.*grid offset/s);
  });

  it("the old bare-array done-marker layout is refused", async () => {
    const dir = storePath("daisy");
    fs.mkdirSync(path.join(dir, "c", "0"), { recursive: true });
    // daisy §6.3, byte for byte (serde_json, sorted keys).
    const meta = {
      attributes: {
        daisy_task_hash: "72dc582c9366b89f1aa16ffa48a77647848b1d905a88aacff36062a188c11a8e",
      },
      chunk_grid: { configuration: { chunk_shape: [4, 4] }, name: "regular" },
      chunk_key_encoding: { configuration: { separator: "/" }, name: "default" },
      codecs: [{ name: "bytes" }],
      data_type: "uint8",
      fill_value: 0,
      node_type: "array",
      shape: [4, 4],
      storage_transformers: [],
      zarr_format: 3,
    };
    fs.writeFileSync(path.join(dir, "zarr.json"), JSON.stringify(meta, null, 2) + "\n");
    fs.writeFileSync(path.join(dir, "c", "0", "0"), new Uint8Array(16).fill(1));
    await refused(
      dir,
      layout({ total: [[0, 0], [400, 400]], write: [[0, 0], [100, 100]] }),
      /old bare-array/,
    );
  });

  it("a group without the blockwise hash is refused as a layout mismatch", async () => {
    const dir = storePath();
    fs.mkdirSync(dir);
    fs.writeFileSync(
      path.join(dir, "zarr.json"),
      JSON.stringify({ zarr_format: 3, node_type: "group", attributes: {} }),
    );
    await refused(dir, layout(), /<missing zarr\.json\/attributes\.blockwise\.task_hash>/);
  });

  it("an invalid zarr.json is refused", async () => {
    const dir = storePath();
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, "zarr.json"), "{ not json");
    await refused(dir, layout(), /invalid/);
  });

  it("a non-empty folder that is not a store is refused", async () => {
    const dir = storePath("notes");
    fs.mkdirSync(path.join(dir, "sub"), { recursive: true });
    fs.writeFileSync(path.join(dir, "notes.txt"), "keep me\n");
    await refused(dir, layout(), /not a tracking store/);
  });

  it("a file at the path is refused", async () => {
    const dir = storePath("file");
    fs.writeFileSync(dir, "a file\n");
    await assert.rejects(open(dir, layout()), (error: unknown) => {
      assert.ok(error instanceof StoreError);
      assert.match(error.message, new RegExp(`${escape(dir)} is a file`));
      return true;
    });
    assert.equal(fs.readFileSync(dir, "utf8"), "a file\n");
  });

  it("a chunk of the wrong size is refused, never resized", async () => {
    const l = layout();
    const short = await written(l);
    const doneChunk = path.join(short, "done", "c", "0", "0");
    fs.writeFileSync(doneChunk, new Uint8Array(7));
    await refused(short, l, /chunk file .*"done" has 7 bytes, expected 12/);
    assert.equal(fs.statSync(doneChunk).size, 7);

    const long = await written(l);
    const failChunk = path.join(long, "failures", "c", "0", "0");
    fs.appendFileSync(failChunk, new Uint8Array(4));
    await refused(long, l, /"failures" has 52 bytes, expected 48/);
    assert.equal(fs.statSync(failChunk).size, 52);

    const resource = await written(l);
    const workerChunk = path.join(resource, "worker_id", "c", "0", "0");
    fs.writeFileSync(workerChunk, new Uint8Array(0));
    await refused(resource, l, /"worker_id" has 0 bytes, expected 48/);
    assert.equal(fs.statSync(workerChunk).size, 0);
  });

  it("an array document that is not the one written is refused (issue 12.6: done/zarr.json = {})", async () => {
    const l = layout();
    const edits: [string, (doc: Record<string, unknown>) => unknown, RegExp][] = [
      ["done", () => ({}), /done\/zarr\.json is not a Zarr v3 array document/],
      [
        "failures",
        (d) => ({ ...d, fill_value: 5 }),
        /failures\/zarr\.json describes a uint32 array .* fill 5; expected a uint32 array .* fill 0/,
      ],
      [
        "done",
        (d) => ({ ...d, codecs: [{ name: "bytes" }, { name: "gzip" }] }),
        /done\/zarr\.json describes .*codecs bytes, gzip/,
      ],
      ["done", (d) => ({ ...d, data_type: "uint16" }), /describes a uint16 array/],
      ["failures", (d) => ({ ...d, shape: [4, 4] }), /of shape \[4, 4\]/],
    ];
    for (const [name, edit, pattern] of edits) {
      const dir = await written(l, false);
      const file = path.join(dir, name, "zarr.json");
      fs.writeFileSync(file, JSON.stringify(edit(readJson(file))));
      const message = await refused(dir, l, pattern, false);
      assert.match(message, /^Tracking store at .* is damaged: /);
      // The same message whichever command asks: the validator is shared.
      assert.throws(
        () => readStoreMetadata(dir),
        (error: unknown) => error instanceof StoreError && error.message === message,
      );
    }
  });

  it("group metadata whose layout parameters or hash disagree with its ROIs is refused", async () => {
    const l = layout();
    const group = (dir: string) => path.join(dir, "zarr.json");
    const edit = (dir: string, change: (b: Record<string, unknown>) => void) => {
      const doc = readJson(group(dir)) as { attributes: { blockwise: Record<string, unknown> } };
      change(doc.attributes.blockwise);
      fs.writeFileSync(group(dir), JSON.stringify(doc));
    };
    const grid = await written(l, false);
    edit(grid, (b) => ((b["layout"] as Record<string, unknown>)["grid_shape"] = [9, 9]));
    await refused(
      grid,
      l,
      /layout\.grid_shape is \[9,9\], which does not match its ROIs and fit \(expected \[4,3\]\)/,
      false,
    );
    const hash = await written(l, false);
    edit(hash, (b) => (b["task_hash"] = "0".repeat(64)));
    await refused(hash, l, /task_hash 0{64} is not the hash of its layout/, false);
    const format = await written(l, false);
    edit(format, (b) => (b["format"] = "blockwise-tracking/9"));
    await refused(
      format,
      l,
      /format is "blockwise-tracking\/9", expected "blockwise-tracking\/1"/,
      false,
    );
    const flag = await written(l, false);
    edit(flag, (b) => (b["resource_tracking"] = true));
    await refused(
      flag,
      l,
      /resource tracking arrays are missing \(wall_seconds, .*returned_at\)/,
      false,
    );
  });

  it("a store made before finished_at is not damaged; a run with resource tracking adds it", async () => {
    const l = layout();
    const dir = storePath();
    (await open(dir, l)).close();
    fs.rmSync(path.join(dir, "finished_at"), { recursive: true });
    const before = readStoreMetadata(dir);
    assert.equal(before.resourceTracking, true);
    assert.ok(!before.arrays.some((a) => a.name === "finished_at"));
    const store = await open(dir, l);
    // As the run loop passes them: the worker's record figures in `Usage` order.
    store.recordBlock(5, 1_700_000_000_000, 1_700_000_000_300, 2, [
      0.25,
      0.2,
      1,
      2,
      3,
      1_700_000_000.28,
      0,
    ]);
    store.close();
    assert.ok(readStoreMetadata(dir).arrays.some((a) => a.name === "finished_at"));
    const finished = new Float64Array(
      fs.readFileSync(path.join(dir, "finished_at", "c", "0", "0")).buffer,
    );
    assert.equal(finished[5], 1_700_000_000.28);
    assert.ok(Number.isNaN(finished[4]));
  });

  it("a missing chunk is not refused: it is restored as the fill value, with a notice", async () => {
    const l = layout();
    const dir = await written(l, false);
    fs.rmSync(path.join(dir, "failures", "c"), { recursive: true });
    const notices: string[] = [];
    const store = await TrackingStore.open(dir, {
      taskId: "seg",
      layout: l,
      resourceTracking: false,
      onNotice: (n) => notices.push(n),
    });
    try {
      assert.equal(store.isDone(1), true, "the done marks are kept");
      assert.equal(store.failures[2], 0, "the lost failure count is the fill value");
      assert.match(notices.join("\n"), /"failures" was missing; restored as its fill value \(0\)/);
    } finally {
      store.close();
    }
  });
});

describe("resource tracking switched on later", () => {
  it("adds the resource arrays, keeps done and failures, and leaves them when switched off again", async () => {
    const dir = storePath();
    const l = layout();
    const a = await open(dir, l, false);
    a.markDone(4);
    a.addFailure(9);
    a.close();
    assert.deepEqual(fs.readdirSync(dir).sort(), ["done", "failures", "zarr.json"]);

    const b = await open(dir, l, true);
    assert.equal(b.created, false);
    assert.equal(b.isDone(4), true);
    assert.equal(b.failures[9], 1);
    b.recordBlock(4, 1_000_000, 1_000_500, 1, {
      wallSeconds: 0.5,
      cpuSeconds: 0.25,
      peakRssBytes: 10,
      ioReadBytes: 20,
      ioWriteBytes: 30,
    });
    b.close();
    assert.deepEqual(
      fs.readdirSync(dir).sort(),
      [...SEED_ARRAYS.map((s) => s.name), "zarr.json"].sort(),
    );
    for (const s of SEED_ARRAYS) {
      const meta = readJson(path.join(dir, s.name, "zarr.json"));
      assert.deepEqual(Object.keys(meta).sort(), ARRAY_KEYS);
      assert.equal(fs.statSync(path.join(dir, s.name, "c", "0", "0")).size, 12 * s.size);
    }
    assert.deepEqual(
      fs.readdirSync(root).filter((n) => n.startsWith(`.${path.basename(dir)}`)),
      [],
      "no temporary folders left",
    );

    const worker = new Uint32Array(
      new Uint8Array(fs.readFileSync(path.join(dir, "worker_id", "c", "0", "0"))).buffer,
    );
    assert.equal(worker[4], 1);
    assert.equal(worker[0], WORKER_NONE, "added arrays start at their fill value");

    const before = snapshotFiles(dir);
    const c = await open(dir, l, false);
    assert.equal(c.isDone(4), true);
    c.close();
    assert.deepEqual(snapshotFiles(dir), before, "a run without resource tracking keeps them");

    const group = await zarr.open.v3(new FileSystemStore(dir), { kind: "group" });
    const wall = await zarr.get(
      await zarr.open.v3(group.resolve("wall_seconds"), { kind: "array" }),
    );
    assert.equal((wall.data as Float32Array)[4], 0.5);
    assert.ok(Number.isNaN((wall.data as Float32Array)[0]));
  });
});

describe("resource arrays left half-added by a crash", () => {
  it("are ignored without resource tracking and completed with it", async () => {
    const dir = storePath();
    const l = layout();
    const a = await open(dir, l, false);
    a.markDone(3);
    a.close();
    // What a run killed while adding the resource arrays leaves: some arrays, the flag still false.
    for (
      const spec of SEED_ARRAYS.filter((s) => s.name === "wall_seconds" || s.name === "worker_id")
    ) {
      const src = await open(storePath(), l, true);
      src.close();
      fs.cpSync(path.join(src.path, spec.name), path.join(dir, spec.name), { recursive: true });
    }
    const meta = readStoreMetadata(dir);
    assert.equal(meta.resourceTracking, false);
    assert.deepEqual(meta.arrays.map((s) => s.name), [
      "done",
      "failures",
      "wall_seconds",
      "worker_id",
    ]);
    const b = await open(dir, l, false);
    assert.equal(b.isDone(3), true);
    b.close();
    const c = await open(dir, l, true);
    assert.equal(c.isDone(3), true);
    c.close();
    const after = readStoreMetadata(dir);
    assert.equal(after.resourceTracking, true);
    assert.equal(after.attributes.resource_tracking, true);
  });
});

describe("mmap and fs adapters", () => {
  it("auto picks the runtime's adapter", async () => {
    const dir = storePath();
    const store = await open(dir, layout(), false, "auto");
    assert.equal(store.mmapKind, mmapSupport().kind);
    store.close();
  });

  it("write byte-identical stores for the same operations", async () => {
    const l = layout({ total: [[0, 0, 0], [30, 20, 50]], write: [[0, 0, 0], [10, 10, 10]] });
    const cells = l.trackingCellCount;
    const script = async (dir: string, kind: MmapKind | "auto") => {
      const first = await open(dir, l, false, kind);
      for (let c = 0; c < cells; c += 3) first.markDone(c);
      for (let c = 1; c < cells; c += 4) first.addFailure(c);
      first.close();
      const second = await open(dir, l, true, kind);
      for (let c = 0; c < cells; c += 5) {
        second.recordBlock(c, 1_700_000_000_000 + c, 1_700_000_000_100 + 2 * c, c % 3, {
          wallSeconds: c / 7,
          cpuSeconds: c / 11,
          peakRssBytes: 1000 * c,
          ioReadBytes: 3 * c,
          ioWriteBytes: 2 ** 33 + c,
        });
        second.markDone(c);
      }
      second.addFailure(2);
      second.flush();
      second.close();
    };
    const mapped = storePath("auto");
    const plain = storePath("fs");
    await script(mapped, "auto");
    await script(plain, "fs");
    const a = snapshotFiles(mapped);
    const b = snapshotFiles(plain);
    assert.deepEqual([...a.keys()], [...b.keys()]);
    for (const [name, bytes] of a) {
      assert.ok(Buffer.from(bytes).equals(Buffer.from(b.get(name)!)), `${name} differs`);
    }
    const done = a.get("done/c/0/0/0")!;
    assert.equal(done.length, cells);
    assert.equal(done[0], 1);
    assert.equal(done[1], 0);
    assert.equal(done[3], 1);
    assert.equal(done[5], 1);
  });
});
