/**
 * Compressed Zarr, read and written by the zarrita blockwise carries: arrays that zarr-python
 * (v2) and numcodecs (v3 chunks) wrote read back identical, and what blockwise writes decodes
 * with those Python codecs. The fixtures and the script that made them are in
 * tests/fixtures/zarr_codecs/.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { openArray } from "../lib/helpers/mod.ts";
import { registerZarrCodecs } from "../lib/zarr/codecs.ts";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const FIXTURES = path.join(REPO_ROOT, "tests", "fixtures", "zarr_codecs");
const SHAPE = [20, 30] as const;
const newDir = scratchDirs("codecs");

/** The values every fixture holds (make_fixtures.py's `values`). */
function expected(dtype: "uint16" | "float32"): number[] {
  const out: number[] = [];
  for (let i = 0; i < SHAPE[0]; i++) {
    for (let j = 0; j < SHAPE[1]; j++) {
      out.push(dtype === "float32" ? Math.fround(i + j / 100) : (i * 31 + j * 17) % 1000);
    }
  }
  return out;
}

/** A python3 that has zarr-python and numcodecs (Debian's /usr/bin/python3 first), or why not. */
function findPython(): { python: string } | { missing: string } {
  for (const python of ["/usr/bin/python3", "python3"]) {
    const r = spawnSync(python, ["-c", "import zarr, numcodecs"], { encoding: "utf8" });
    if (r.status === 0) return { python };
  }
  return {
    missing:
      "no python3 here imports zarr and numcodecs: apt-get install python3-zarr python3-numcodecs",
  };
}

const found = findPython();
// CI installs the packages and sets this, so there the Python checks fail rather than skip.
const required = process.env["BLOCKWISE_REQUIRE_PYTHON_CODECS"] === "1";
const pythonSkip = "missing" in found && !required ? { skip: found.missing } : {};

function decodeWithPython(folder: string): { shape: number[]; dtype: string; values: number[] } {
  if ("missing" in found) assert.fail(found.missing);
  const r = spawnSync(found.python, [path.join(FIXTURES, "decode.py"), folder], {
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  assert.equal(r.status, 0, `decode.py ${folder} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { shape: number[]; dtype: string; values: number[] };
}

describe("compressed Zarr written by zarr-python and numcodecs", () => {
  const fixtures = fs.readdirSync(FIXTURES).filter((name) => name.endsWith(".zarr")).sort();

  it("are all there (five v2 arrays, four v3 arrays)", () => {
    assert.deepEqual(fixtures, [
      "v2_blosc_lz4.zarr",
      "v2_blosc_zstd_f4.zarr",
      "v2_gzip.zarr",
      "v2_zlib.zarr",
      "v2_zstd.zarr",
      "v3_blosc.zarr",
      "v3_blosc_f4.zarr",
      "v3_gzip.zarr",
      "v3_zstd.zarr",
    ]);
  });

  for (const name of fixtures) {
    it(`${name} reads back identical`, async () => {
      const array = await openArray(path.join(FIXTURES, name));
      const dtype = name.includes("f4") ? "float32" : "uint16";
      assert.equal(array.dtype, dtype);
      assert.deepEqual(array.shape, [...SHAPE]);
      const { data, shape } = await zarr.get(array);
      assert.deepEqual(shape, [...SHAPE]);
      assert.deepEqual(Array.from(data as ArrayLike<number>), expected(dtype));
    });
  }
});

/** The v3 codecs (after `bytes`) and v2 compressors blockwise writes in the tests below. */
const V3_WRITES: Record<string, zarr.CodecMetadata> = {
  gzip: { name: "gzip", configuration: { level: 5 } },
  zlib: { name: "zlib", configuration: { level: 5 } },
  zstd: { name: "zstd", configuration: { level: 3, checksum: false } },
  blosc: {
    name: "blosc",
    configuration: { cname: "zstd", clevel: 5, shuffle: "shuffle", typesize: 2, blocksize: 0 },
  },
};

const V2_WRITES: Record<string, Record<string, unknown>> = {
  gzip: { id: "gzip", level: 5 },
  zlib: { id: "zlib", level: 5 },
  zstd: { id: "zstd", level: 3 },
  blosc: { id: "blosc", cname: "lz4", clevel: 5, shuffle: 1, blocksize: 0 },
};

function writeV2Metadata(folder: string, compressor: Record<string, unknown>): void {
  fs.mkdirSync(folder, { recursive: true });
  fs.writeFileSync(
    path.join(folder, ".zarray"),
    JSON.stringify({
      zarr_format: 2,
      shape: [...SHAPE],
      chunks: [8, 16],
      dtype: "<u2",
      compressor,
      fill_value: 0,
      filters: null,
      order: "C",
    }),
  );
}

describe("compressed Zarr written by blockwise", () => {
  const data = Uint16Array.from(expected("uint16"));
  const chunk = { data, shape: [...SHAPE], stride: [SHAPE[1], 1] };

  for (const [name, codec] of Object.entries(V3_WRITES)) {
    it(`Zarr v3 with ${name} decodes with numcodecs`, pythonSkip, async () => {
      registerZarrCodecs();
      const folder = path.join(newDir(`v3-${name}`), "out.zarr");
      const array = await zarr.create(new FileSystemStore(folder), {
        shape: [...SHAPE],
        chunkShape: [8, 16],
        dtype: "uint16",
        fillValue: 0,
        codecs: [{ name: "bytes", configuration: { endian: "little" } }, codec],
      });
      await zarr.set(array, null, chunk);
      const decoded = decodeWithPython(folder);
      assert.deepEqual(decoded.shape, [...SHAPE]);
      assert.deepEqual(decoded.values, expected("uint16"));
      // The chunks are compressed, not raw: a full 8x16 uint16 chunk is 256 bytes.
      assert.ok(fs.statSync(path.join(folder, "c", "0", "0")).size < 256);
    });
  }

  for (const [name, compressor] of Object.entries(V2_WRITES)) {
    it(`Zarr v2 with ${name} reads in zarr-python`, pythonSkip, async () => {
      registerZarrCodecs();
      const folder = path.join(newDir(`v2-${name}`), "out.zarr");
      writeV2Metadata(folder, compressor);
      const array = await openArray(folder);
      await zarr.set(array, null, chunk);
      const decoded = decodeWithPython(folder);
      assert.deepEqual(decoded.values, expected("uint16"));
    });
  }

  it("writes gzip at all (zarrita alone says UnsupportedError: gzip encode)", async () => {
    registerZarrCodecs();
    const folder = path.join(newDir("gzip-magic"), "out.zarr");
    const array = await zarr.create(new FileSystemStore(folder), {
      shape: [4],
      chunkShape: [4],
      dtype: "uint8",
      fillValue: 0,
      codecs: [{ name: "bytes", configuration: { endian: "little" } }, V3_WRITES["gzip"]!],
    });
    await zarr.set(array, null, { data: Uint8Array.of(1, 2, 3, 4), shape: [4], stride: [1] });
    const bytes = fs.readFileSync(path.join(folder, "c", "0"));
    assert.deepEqual([...bytes.subarray(0, 2)], [0x1f, 0x8b]); // the gzip magic number
    const back = await zarr.get(await openArray(folder));
    assert.deepEqual([...(back.data as Uint8Array)], [1, 2, 3, 4]);
  });
});
