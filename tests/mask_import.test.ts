import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { InputError } from "../lib/errors.ts";
import {
  encodeNpy,
  importMask,
  importSummary,
  loadSkipMask,
  type MaskImportOptions,
  parseSkipRule,
  readNpyFile,
} from "../lib/masks/mod.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const FIXTURES = join(REPO, "tests", "fixtures", "masks");
const BUN = join(REPO, "node_modules", ".bin", "bun");

interface FixtureReadme {
  volume_voxels: number[];
  mask_voxel_size: number[];
  mask_shape: number[];
  block_write_shape: number[];
  block_grid: number[];
  blocks_without_tissue: number;
  blocks_total: number;
}
const README = JSON.parse(readFileSync(join(FIXTURES, "README.json"), "utf-8")) as FixtureReadme;

const root = mkdtempSync(join(tmpdir(), "blockwise-mask-import-"));
after(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
function freshDir(): string {
  const dir = join(root, `t${counter++}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

interface TaskGeometry {
  id: string;
  total: number[];
  write: number[];
  offset?: number[];
  fit?: string;
}

function writePipeline(dir: string, tasks: readonly TaskGeometry[]): string {
  const path = join(dir, "pipeline.ts");
  const body = tasks.map((t) => {
    const offset = t.offset ?? t.total.map(() => 0);
    const zero = t.write.map(() => 0);
    return `{ id: ${JSON.stringify(t.id)}, totalRoi: { offset: ${JSON.stringify(offset)}, shape: ${
      JSON.stringify(t.total)
    } }, readRoi: { offset: ${JSON.stringify(zero)}, shape: ${
      JSON.stringify(t.write)
    } }, writeRoi: { offset: ${JSON.stringify(zero)}, shape: ${JSON.stringify(t.write)} }${
      t.fit === undefined ? "" : `, fit: ${JSON.stringify(t.fit)}`
    }, process() {} }`;
  });
  writeFileSync(path, `export default { tasks: [\n  ${body.join(",\n  ")},\n] };\n`);
  return path;
}

/** A pipeline whose task "segment" has 64³ write blocks over the fixture volume. */
function fixturePipeline(): { dir: string; pipeline: string } {
  const dir = freshDir();
  const pipeline = writePipeline(dir, [
    { id: "segment", total: README.volume_voxels, write: README.block_write_shape },
  ]);
  return { dir, pipeline };
}

async function expectedGrid(): Promise<Uint8Array> {
  const npy = await readNpyFile(join(FIXTURES, "skip_grid.npy"));
  assert.deepEqual(npy.shape, README.block_grid);
  assert.equal(npy.dtype, "uint8");
  return npy.data as Uint8Array;
}

async function expectedGridV3(): Promise<Uint8Array> {
  return await readZarrCells(join(FIXTURES, "skip_grid_v3.zarr"), README.block_grid);
}

async function readZarrCells(dir: string, shape: readonly number[]): Promise<Uint8Array> {
  const array = await zarr.open.v3(zarr.root(new FileSystemStore(dir)), { kind: "array" });
  assert.equal(array.dtype, "uint8");
  assert.deepEqual(array.shape, shape);
  const chunk = await zarr.get(array);
  return chunk.data as Uint8Array;
}

async function readOutput(path: string, shape: readonly number[]): Promise<number[]> {
  if (path.endsWith(".npy")) {
    const npy = await readNpyFile(path);
    assert.equal(npy.dtype, "uint8");
    assert.deepEqual(npy.shape, shape);
    return Array.from(npy.data as Uint8Array);
  }
  return Array.from(await readZarrCells(path, shape));
}

function sameCells(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: cell count`);
  const wrong: number[] = [];
  for (let i = 0; i < expected.length; i++) if (actual[i] !== expected[i]) wrong.push(i);
  assert.deepEqual(wrong, [], `${what}: cells that differ`);
}

async function rejectsInput(promise: Promise<unknown>, parts: readonly string[]): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof InputError, `expected an InputError, got ${String(error)}`);
    for (const part of parts) {
      assert.ok(error.message.includes(part), `"${error.message}" lacks "${part}"`);
    }
    return true;
  });
}

describe("mask import of the zarr-python/numpy fixtures", () => {
  const sources: [string, Partial<MaskImportOptions>, string][] = [
    ["tissue.npy", { voxelSize: [8, 8, 8], offset: [0, 0, 0] }, "flags"],
    ["tissue.npy", { voxelSize: [8] }, "one voxel size for every axis"],
    ["tissue_v2.zarr", { voxelSize: [8, 8, 8], offset: [0, 0, 0] }, "flags"],
    ["tissue_v2.zarr", {}, "its voxel_size attribute (no offset: the origin)"],
    ["tissue_v3.zarr", { voxelSize: [8, 8, 8], offset: [0, 0, 0] }, "flags"],
    ["tissue_v3.zarr", {}, "its voxel_size and offset attributes"],
  ];
  for (const [source, flags, how] of sources) {
    for (const ext of [".npy", ".zarr"]) {
      test(`${source} with ${how} gives the fixture's skip grid (${ext} output)`, async () => {
        const { dir, pipeline } = fixturePipeline();
        const out = join(dir, `skip${ext}`);
        const result = await importMask({
          source: join(FIXTURES, source),
          pipeline,
          task: "segment",
          out,
          ...flags,
        });
        assert.equal(result.mode, "voxel");
        assert.deepEqual(result.grid_shape, README.block_grid);
        assert.equal(result.blocks, README.blocks_total);
        assert.equal(result.skipped, README.blocks_without_tissue);
        assert.deepEqual(result.voxel_size, README.mask_voxel_size);
        assert.deepEqual(result.offset, [0, 0, 0]);
        assert.equal(result.blocks_outside_mask, 0);
        const cells = await readOutput(out, README.block_grid);
        sameCells(cells, await expectedGrid(), "vs skip_grid.npy");
        sameCells(cells, await expectedGridV3(), "vs skip_grid_v3.zarr");
        assert.equal(cells.reduce((a, b) => a + b, 0), README.blocks_without_tissue);
        assert.equal(
          importSummary(result),
          `Skipping 751 of 1536 blocks (48.9%) of task "segment"; wrote ${out}`,
        );
        const assumedOrigin = result.notes.some((n) => n.includes("gives no offset"));
        assert.equal(assumedOrigin, source !== "tissue_v3.zarr" && flags.offset === undefined);
      });
    }
  }

  test("the written mask is accepted as the task's skip mask and skips the same blocks", async () => {
    const { dir, pipeline } = fixturePipeline();
    const out = join(dir, "skip.zarr");
    await importMask({ source: join(FIXTURES, "tissue_v3.zarr"), pipeline, task: "segment", out });
    const layout = new TaskLayout({
      totalRoi: { offset: [0, 0, 0], shape: README.volume_voxels },
      readRoi: { offset: [0, 0, 0], shape: README.block_write_shape },
      writeRoi: { offset: [0, 0, 0], shape: README.block_write_shape },
      fit: "valid",
      readWriteConflict: true,
    });
    const mask = await loadSkipMask(layout, "skip.zarr", "segment", dir);
    assert.equal(mask.skipCount, README.blocks_without_tissue);
    const expected = await expectedGrid();
    for (let p = 0; p < layout.blockCount; p++) assert.equal(mask.isMasked(p), expected[p] === 1);
  });

  test("the .zarr output is a Zarr v3 array zarrita opens, with provenance attributes", async () => {
    const { dir, pipeline } = fixturePipeline();
    const out = join(dir, "skip.zarr");
    await importMask({
      source: join(FIXTURES, "tissue.npy"),
      pipeline,
      task: "segment",
      out,
      voxelSize: [8, 8, 8],
      skipIf: parseSkipRule("fraction<0.25"),
    });
    const array = await zarr.open.v3(zarr.root(new FileSystemStore(out)), { kind: "array" });
    assert.equal(array.dtype, "uint8");
    assert.deepEqual(array.shape, README.block_grid);
    assert.deepEqual(array.chunks, README.block_grid);
    const attrs = array.attrs;
    assert.equal(attrs["task"], "segment");
    assert.equal(attrs["pipeline"], pipeline);
    assert.equal(attrs["skip_if"], "fraction<0.25");
    assert.equal(attrs["source"], join(FIXTURES, "tissue.npy"));
    const meta = JSON.parse(readFileSync(join(out, "zarr.json"), "utf-8"));
    assert.deepEqual(meta.codecs, [{ name: "bytes", configuration: { endian: "little" } }]);
    assert.equal(readFileSync(join(out, "c", "0", "0", "0")).length, 1536);
    // A rerun replaces the array in place.
    await importMask({ source: join(FIXTURES, "tissue_v3.zarr"), pipeline, task: "segment", out });
    sameCells(await readOutput(out, README.block_grid), await expectedGrid(), "rerun");
  });

  test("a block-grid-shaped source passes through, and --invert flips it", async () => {
    const { dir, pipeline } = fixturePipeline();
    for (const source of ["skip_grid.npy", "skip_grid_v3.zarr"]) {
      const out = join(dir, "pass.npy");
      const result = await importMask({
        source: join(FIXTURES, source),
        pipeline,
        task: "segment",
        out,
      });
      assert.equal(result.mode, "block-grid");
      assert.equal(result.skip_if, "nonzero");
      assert.equal(result.skipped, 751);
      sameCells(await readOutput(out, README.block_grid), await expectedGrid(), source);

      const inverted = join(dir, "inverted.zarr");
      const flipped = await importMask({
        source: join(FIXTURES, source),
        pipeline,
        task: "segment",
        out: inverted,
        invert: true,
      });
      assert.equal(flipped.skipped, 1536 - 751);
      const expected = Array.from(await expectedGrid(), (v) => 1 - v);
      sameCells(await readOutput(inverted, README.block_grid), expected, `${source} inverted`);
    }
    await rejectsInput(
      importMask({
        source: join(FIXTURES, "skip_grid.npy"),
        pipeline,
        task: "segment",
        out: join(dir, "x.npy"),
        skipIf: { kind: "full" },
      }),
      ["is the task's block grid", "--skip-if", "--voxel-size"],
    );
  });

  test("--invert on a voxel mask skips the blocks that are all tissue", async () => {
    const { dir, pipeline } = fixturePipeline();
    const out = join(dir, "inv.npy");
    const full = await importMask({
      source: join(FIXTURES, "tissue.npy"),
      pipeline,
      task: "segment",
      out: join(dir, "full.npy"),
      voxelSize: [8, 8, 8],
      skipIf: { kind: "full" },
    });
    const inverted = await importMask({
      source: join(FIXTURES, "tissue.npy"),
      pipeline,
      task: "segment",
      out,
      voxelSize: [8, 8, 8],
      invert: true,
    });
    assert.equal(inverted.skipped, full.skipped);
    sameCells(
      await readOutput(out, README.block_grid),
      await readOutput(join(dir, "full.npy"), README.block_grid),
      "invert+empty vs full",
    );
  });
});

describe("mask import rules on small masks", () => {
  // 4×4 voxels of size 2 under a 2×2 grid of 4×4 blocks: each block covers 2×2 voxels.
  //   block (0,0): 4 of 4 nonzero   block (0,1): 1 of 4
  //   block (1,0): 0 of 4           block (1,1): 3 of 4
  const voxels = new Uint8Array([
    1,
    1,
    1,
    0,
    1,
    1,
    0,
    0,
    0,
    0,
    1,
    1,
    0,
    0,
    1,
    0,
  ]);

  async function run2d(options: Partial<MaskImportOptions>): Promise<number[]> {
    const dir = freshDir();
    const pipeline = writePipeline(dir, [{ id: "t", total: [8, 8], write: [4, 4] }]);
    const source = join(dir, "m.npy");
    writeFileSync(source, encodeNpy({ dtype: "uint8", shape: [4, 4], data: voxels }));
    const out = join(dir, "out.npy");
    const result = await importMask({
      source,
      pipeline,
      task: "t",
      out,
      voxelSize: [2, 2],
      ...options,
    });
    const cells = await readOutput(out, [2, 2]);
    assert.equal(result.skipped, cells.reduce((a, b) => a + b, 0));
    return cells;
  }

  test("--skip-if empty (default), full and fraction<X", async () => {
    assert.deepEqual(await run2d({}), [0, 0, 1, 0]);
    assert.deepEqual(await run2d({ skipIf: parseSkipRule("empty") }), [0, 0, 1, 0]);
    assert.deepEqual(await run2d({ skipIf: parseSkipRule("full") }), [1, 0, 0, 0]);
    assert.deepEqual(await run2d({ skipIf: parseSkipRule("fraction<0.5") }), [0, 1, 1, 0]);
    assert.deepEqual(await run2d({ skipIf: parseSkipRule("fraction<0.75") }), [0, 1, 1, 0]);
    assert.deepEqual(await run2d({ skipIf: parseSkipRule("fraction<0.8") }), [0, 1, 1, 1]);
    assert.deepEqual(await run2d({ skipIf: parseSkipRule("fraction<0") }), [0, 0, 0, 0]);
    assert.deepEqual(await run2d({ skipIf: parseSkipRule("fraction < 1") }), [0, 1, 1, 1]);
  });

  test("--invert swaps zero and nonzero voxels first", async () => {
    assert.deepEqual(await run2d({ invert: true }), [1, 0, 0, 0]);
    assert.deepEqual(await run2d({ invert: true, skipIf: { kind: "full" } }), [0, 0, 1, 0]);
    assert.deepEqual(await run2d({ invert: true, skipIf: parseSkipRule("fraction<0.5") }), [
      1,
      0,
      0,
      1,
    ]);
  });

  test("an offset shifts the mask: voxels straddling a block boundary count for both blocks", async () => {
    // 1-D: voxel i covers world [-1 + 2i, 1 + 2i); blocks [0, 4) and [4, 8) see voxels 0..2
    // and 2..4, so voxel 2 belongs to both.
    const dir = freshDir();
    const pipeline = writePipeline(dir, [{ id: "t", total: [8], write: [4] }]);
    const cases: [number[], number[]][] = [
      [[0, 0, 1, 0, 0], [0, 0]],
      [[1, 0, 0, 0, 0], [0, 1]],
      [[0, 0, 0, 0, 1], [1, 0]],
      [[0, 0, 0, 0, 0], [1, 1]],
    ];
    for (const [mask, expected] of cases) {
      const source = join(dir, "m.npy");
      writeFileSync(source, encodeNpy({ dtype: "uint8", shape: [5], data: Uint8Array.from(mask) }));
      const out = join(dir, "o.npy");
      await importMask({ source, pipeline, task: "t", out, voxelSize: [2], offset: [-1] });
      assert.deepEqual(await readOutput(out, [2]), expected, JSON.stringify(mask));
    }
  });

  test("blocks sticking out of the mask: outside counts as zero, or --outside keep never skips them", async () => {
    // 1-D: mask of 3 voxels of size 2 covers world [0, 6); blocks [0, 4), [4, 8), [8, 12).
    const dir = freshDir();
    const pipeline = writePipeline(dir, [{ id: "t", total: [12], write: [4] }]);
    const source = join(dir, "m.npy");
    writeFileSync(
      source,
      encodeNpy({ dtype: "bool", shape: [3], data: new Uint8Array([1, 1, 1]) }),
    );
    const out = join(dir, "o.npy");
    const run = async (options: Partial<MaskImportOptions>) => {
      const result = await importMask({
        source,
        pipeline,
        task: "t",
        out,
        voxelSize: [2],
        ...options,
      });
      assert.equal(result.blocks_outside_mask, 2);
      return await readOutput(out, [3]);
    };
    assert.deepEqual(await run({}), [0, 0, 1]);
    assert.deepEqual(await run({ outside: "keep" }), [0, 0, 0]);
    assert.deepEqual(await run({ skipIf: { kind: "full" } }), [1, 0, 0]);
    assert.deepEqual(await run({ skipIf: { kind: "full" }, outside: "keep" }), [1, 0, 0]);
    assert.deepEqual(await run({ skipIf: parseSkipRule("fraction<0.6") }), [0, 1, 1]);
    assert.deepEqual(await run({ skipIf: parseSkipRule("fraction<0.6"), outside: "keep" }), [
      0,
      0,
      0,
    ]);
    // Inverted, voxel 2 is zero too, and the outside still counts as zero.
    assert.deepEqual(await run({ invert: true }), [1, 1, 1]);
    assert.deepEqual(await run({ invert: true, outside: "keep" }), [1, 0, 0]);
  });

  test("fit shrink and overhang: the trailing block's write ROI decides", async () => {
    // total 10, write 4: blocks [0,4), [4,8), [8,10) (shrink) or [8,12) (overhang).
    const dir = freshDir();
    const source = join(dir, "m.npy");
    // 10 voxels of size 1, nonzero only at world 10 and 11 (outside the total ROI).
    writeFileSync(
      source,
      encodeNpy({
        dtype: "uint8",
        shape: [12],
        data: Uint8Array.from([0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]),
      }),
    );
    for (const [fit, expected] of [["shrink", [0, 1, 1]], ["overhang", [0, 1, 0]]] as const) {
      // A fresh folder per pipeline: a module path is imported once per process.
      const pipeline = writePipeline(freshDir(), [{ id: "t", total: [10], write: [4], fit }]);
      const out = join(dir, `${fit}.npy`);
      await importMask({ source, pipeline, task: "t", out, voxelSize: [1] });
      assert.deepEqual(await readOutput(out, [3]), expected, fit);
    }
  });

  for (const size of [[3, 4, 2], [9, 4, 13]]) {
    test(`a 3-D mask of voxel size ${size} matches a brute-force count per block`, async () => {
      const dir = freshDir();
      const pipeline = writePipeline(dir, [
        { id: "t", total: [30, 26, 22], write: [7, 5, 6], offset: [3, -4, 2], fit: "overhang" },
      ]);
      const shape = [13, 9, 12];
      const offset = [1, -6, 0];
      const data = new Uint8Array(shape[0]! * shape[1]! * shape[2]!);
      let seed = 12345;
      for (let i = 0; i < data.length; i++) {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        data[i] = seed % 7 === 0 ? 1 : 0;
      }
      const source = join(dir, "m.npy");
      writeFileSync(source, encodeNpy({ dtype: "uint8", shape, data }));
      const layout = new TaskLayout({
        totalRoi: { offset: [3, -4, 2], shape: [30, 26, 22] },
        readRoi: { offset: [0, 0, 0], shape: [7, 5, 6] },
        writeRoi: { offset: [0, 0, 0], shape: [7, 5, 6] },
        fit: "overhang",
        readWriteConflict: true,
      });
      for (const rule of ["empty", "full", "fraction<0.2"]) {
        for (const outside of ["skip", "keep"] as const) {
          const out = join(dir, "o.npy");
          await importMask({
            source,
            pipeline,
            task: "t",
            out,
            voxelSize: size,
            offset,
            skipIf: parseSkipRule(rule),
            outside,
          });
          const cells = await readOutput(out, layout.gridShape);
          for (let p = 0; p < layout.blockCount; p++) {
            const w = layout.writeRoiOf(p);
            const lo = w.offset.map((o, d) => Math.floor((o - offset[d]!) / size[d]!));
            const hi = w.offset.map((o, d) => Math.ceil((o + w.shape[d]! - offset[d]!) / size[d]!));
            let total = 1;
            let sticksOut = false;
            for (let d = 0; d < 3; d++) {
              total *= hi[d]! - lo[d]!;
              if (lo[d]! < 0 || hi[d]! > shape[d]!) sticksOut = true;
            }
            let nonzero = 0;
            for (let z = lo[0]!; z < hi[0]!; z++) {
              for (let y = lo[1]!; y < hi[1]!; y++) {
                for (let x = lo[2]!; x < hi[2]!; x++) {
                  const inside = z >= 0 && y >= 0 && x >= 0 && z < shape[0]! && y < shape[1]! &&
                    x < shape[2]!;
                  if (inside) nonzero += data[(z * shape[1]! + y) * shape[2]! + x]!;
                }
              }
            }
            const skip = outside === "keep" && sticksOut
              ? false
              : rule === "empty"
              ? nonzero === 0
              : rule === "full"
              ? nonzero === total
              : nonzero < 0.2 * total;
            assert.equal(cells[p], skip ? 1 : 0, `block ${p}, ${rule}, ${outside}`);
          }
        }
      }
    });
  }
});

describe("mask import refuses bad input", () => {
  test("unknown task, missing voxel size, wrong axes, bad output extension, bad rules", async () => {
    const { dir, pipeline } = fixturePipeline();
    const npy = join(FIXTURES, "tissue.npy");
    const base = { source: npy, pipeline, task: "segment", out: join(dir, "o.npy") };
    await rejectsInput(importMask({ ...base, task: "segmnt" }), ["no such task", '"segment"']);
    await rejectsInput(importMask(base), [
      "(64, 96, 128)",
      "(8, 12, 16)",
      "voxel size is unknown",
      "--voxel-size",
    ]);
    await rejectsInput(importMask({ ...base, voxelSize: [8, 8] }), ["2 values", "3 axes"]);
    await rejectsInput(importMask({ ...base, voxelSize: [8, 0, 8] }), ["positive integers"]);
    await rejectsInput(importMask({ ...base, voxelSize: [8], offset: [0.5] }), ["integers"]);
    await rejectsInput(importMask({ ...base, out: join(dir, "o.tif") }), [".npy", ".zarr"]);
    await rejectsInput(importMask({ ...base, out: join(dir, "nope", "o.npy") }), [
      "does not exist",
    ]);
    mkdirSync(join(dir, "taken.zarr"));
    writeFileSync(join(dir, "taken.zarr", "data.bin"), "x");
    await rejectsInput(importMask({ ...base, voxelSize: [8], out: join(dir, "taken.zarr") }), [
      "not a Zarr array",
    ]);
    assert.ok(existsSync(join(dir, "taken.zarr", "data.bin")));
    assert.throws(() => parseSkipRule("fraction<2"), /from 0 to 1/);
    assert.throws(() => parseSkipRule("most"), /empty.*full.*fraction<X/);
    const twoD = writePipeline(freshDir(), [{ id: "flat", total: [64, 64], write: [8, 8] }]);
    await rejectsInput(importMask({ ...base, pipeline: twoD, task: "flat", voxelSize: [8] }), [
      "3 axes",
      "the task has 2",
    ]);
  });
});

describe("the blockwise mask import command", () => {
  async function cli(
    args: string[],
    cwd: string,
  ): Promise<{ code: number | null; out: string; err: string }> {
    const child = spawn(BUN, [join(REPO, "main.ts"), "mask", "import", ...args], {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((r) => child.on("close", (c) => r(c)));
    return { code, out, err };
  }

  test("exit 0 and the summary line; --json; exit 2 on bad input", async () => {
    const { dir } = fixturePipeline();
    const npy = join(FIXTURES, "tissue.npy");
    const ok = await cli([
      npy,
      "--pipeline",
      "pipeline.ts",
      "--task",
      "segment",
      "--out",
      "skip_grid.npy",
      "--voxel-size",
      "8,8,8",
    ], dir);
    assert.equal(ok.code, 0, ok.err);
    assert.equal(
      ok.out,
      `Skipping 751 of 1536 blocks (48.9%) of task "segment"; wrote skip_grid.npy\n`,
    );
    sameCells(
      await readOutput(join(dir, "skip_grid.npy"), README.block_grid),
      await expectedGrid(),
      "cli",
    );

    const json = await cli([
      join(FIXTURES, "tissue_v3.zarr"),
      "--pipeline",
      join(dir, "pipeline.ts"),
      "--task",
      "segment",
      "--out",
      "skip.zarr",
      "--skip-if",
      "empty",
      "--outside",
      "keep",
      "--json",
    ], dir);
    assert.equal(json.code, 0, json.err);
    const report = JSON.parse(json.out);
    assert.equal(report.task, "segment");
    assert.equal(report.blocks, 1536);
    assert.equal(report.skipped, 751);
    assert.equal(report.out, "skip.zarr");
    assert.deepEqual(report.grid_shape, [8, 12, 16]);
    sameCells(
      await readOutput(join(dir, "skip.zarr"), README.block_grid),
      await expectedGridV3(),
      "cli zarr",
    );

    const noSize = await cli([
      npy,
      "--pipeline",
      "pipeline.ts",
      "--task",
      "segment",
      "--out",
      "x.npy",
    ], dir);
    assert.equal(noSize.code, 2);
    assert.match(noSize.err, /^error: .*--voxel-size/m);
    assert.equal(noSize.out, "");

    const badExt = await cli([
      npy,
      "--pipeline",
      "pipeline.ts",
      "--task",
      "segment",
      "--out",
      "x.png",
      "--voxel-size",
      "8",
    ], dir);
    assert.equal(badExt.code, 2);
    assert.match(badExt.err, /\.npy.*\.zarr/);

    const badRule = await cli([
      npy,
      "--pipeline",
      "pipeline.ts",
      "--task",
      "segment",
      "--out",
      "x.npy",
      "--voxel-size",
      "8",
      "--skip-if",
      "fraction<7",
    ], dir);
    assert.equal(badRule.code, 2);
    assert.match(badRule.err, /from 0 to 1/);

    const badOutside = await cli([
      npy,
      "--pipeline",
      "pipeline.ts",
      "--task",
      "segment",
      "--out",
      "x.npy",
      "--voxel-size",
      "8",
      "--outside",
      "maybe",
    ], dir);
    assert.equal(badOutside.code, 2);

    const missing = await cli([npy, "--pipeline", "pipeline.ts", "--out", "x.npy"], dir);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /--task/);
    assert.ok(!existsSync(join(dir, "x.npy")));
  });
});
