/**
 * gzip, zlib and zstd, as blockwise registers them in zarrita (the runtime's native C libraries):
 * every configuration a Zarr v3 or v2 writer may emit, chunk by chunk against numcodecs (the C
 * codecs zarr-python uses). What blockwise encodes decodes in numcodecs to the same bytes, with a
 * compressed size within 1 % of numcodecs' own for the same settings; what numcodecs encodes
 * decodes in blockwise; a setting out of range is refused with its value. One Python process
 * does all of numcodecs' side. Blosc has its own matrix (tests/zarr_blosc.test.ts).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { registry } from "zarrita";
import { registerZarrCodecs } from "../lib/zarr/codecs.ts";
import { NativeGzip, NativeZlib, NativeZstd } from "../lib/zarr/native_codecs.ts";
import { setNativeZstd } from "../lib/zarr/native_compression.ts";
import { loadNativeZstd } from "../lib/runtime/zstd_native.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("codec-matrix");

/**
 * A smooth float32 field, 32^3 (what imaging chunks look like), as bytes; `shuffled` puts each
 * element's byte 0 first, then byte 1, ... (what a shuffle filter hands a compressor).
 */
function smoothChunk(shuffled: boolean): Uint8Array {
  const n = 32;
  const f = new Float32Array(n * n * n);
  for (let z = 0; z < n; z++) {
    for (let y = 0; y < n; y++) {
      for (let x = 0; x < n; x++) {
        f[(z * n + y) * n + x] = Math.sin(x / 9) * Math.cos(y / 7) * Math.sin(z / 11) * 100;
      }
    }
  }
  const bytes = new Uint8Array(f.buffer);
  if (!shuffled) return bytes;
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < f.length; i++) {
    for (let b = 0; b < 4; b++) out[b * f.length + i] = bytes[i * 4 + b]!;
  }
  return out;
}

interface Case {
  readonly label: string;
  /** The name zarrita's registry knows the codec by: v3 `zstd`, v2 `numcodecs.zstd`. */
  readonly name: string;
  readonly configuration: Record<string, unknown>;
  /** numcodecs' `get_codec` configuration for the same settings. */
  readonly numcodecs: Record<string, unknown>;
}

const CASES: Case[] = [];
for (const level of [1, 5, 9]) {
  for (const codec of ["gzip", "zlib"]) {
    CASES.push({
      label: `${codec} level ${level} (v3)`,
      name: codec,
      configuration: { level },
      numcodecs: { id: codec, level },
    });
  }
}
for (const level of [-5, 1, 3, 9, 19]) {
  CASES.push({
    label: `zstd level ${level} (v3)`,
    name: "zstd",
    configuration: { level, checksum: false },
    numcodecs: { id: "zstd", level },
  });
}
CASES.push(
  {
    label: "zstd with a checksum (v3)",
    name: "zstd",
    configuration: { level: 3, checksum: true },
    numcodecs: { id: "zstd", level: 3 },
  },
  {
    label: "gzip (v2 id)",
    name: "numcodecs.gzip",
    configuration: { level: 5 },
    numcodecs: { id: "gzip", level: 5 },
  },
  {
    label: "zlib (v2 id)",
    name: "numcodecs.zlib",
    configuration: { level: 5 },
    numcodecs: { id: "zlib", level: 5 },
  },
  {
    label: "zstd (v2 id)",
    name: "numcodecs.zstd",
    configuration: { level: 3 },
    numcodecs: { id: "zstd", level: 3 },
  },
  {
    label: "gzip, no level (numcodecs' default 1)",
    name: "gzip",
    configuration: {},
    numcodecs: { id: "gzip" },
  },
  {
    label: "zstd, no level (numcodecs' default 1)",
    name: "zstd",
    configuration: {},
    numcodecs: { id: "zstd" },
  },
);

interface Codec {
  encode(data: Uint8Array): Uint8Array | Promise<Uint8Array>;
  decode(data: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

async function codecFor(c: Case): Promise<Codec> {
  registerZarrCodecs();
  const loaded = await registry.get(c.name)!();
  return (loaded as unknown as { fromConfig(config: unknown): Codec }).fromConfig(c.configuration);
}

/** numcodecs' side: each case's own encoding and whether blockwise's encoding decodes right. */
interface PythonSide {
  readonly sizes: Record<string, number>;
  readonly decoded: Record<string, boolean>;
}

const PYTHON_SIDE = `
import json, sys, numcodecs
folder = sys.argv[1]
cases = json.load(open(folder + "/cases.json"))
raw = open(folder + "/raw", "rb").read()
sizes, decoded = {}, {}
for i, c in enumerate(cases):
    codec = numcodecs.get_codec(dict(c))
    mine = codec.encode(raw)
    open(f"{folder}/py{i}", "wb").write(mine)
    sizes[i] = len(mine)
    decoded[i] = bytes(codec.decode(open(f"{folder}/js{i}", "rb").read())) == raw
json.dump({"sizes": sizes, "decoded": decoded}, sys.stdout)
`;

function findPython(): string | null {
  for (const python of ["/usr/bin/python3", "python3"]) {
    const r = spawnSync(python, ["-c", "import numcodecs"], { encoding: "utf8" });
    if (r.status === 0) return python;
  }
  return null;
}

const python = findPython();
const libzstd = fs.existsSync("/usr/lib/x86_64-linux-gnu/libzstd.so.1") ||
  fs.existsSync("/usr/lib/aarch64-linux-gnu/libzstd.so.1");
const required = process.env["BLOCKWISE_REQUIRE_PYTHON_CODECS"] === "1";
const pythonSkip = python === null && !required
  ? { skip: "no python3 here imports numcodecs: apt-get install python3-numcodecs" }
  : {};

const libzstdSkip = python === null && !required
  ? pythonSkip
  : !libzstd && !required
  ? { skip: "no libzstd.so.1 here: apt-get install libzstd1" }
  : {};

/** What went wrong for one input, in every case (empty when all is well). */
async function compareWithNumcodecs(label: string, raw: Uint8Array): Promise<string[]> {
  const folder = newDir(label);
  fs.writeFileSync(path.join(folder, "raw"), raw);
  fs.writeFileSync(path.join(folder, "cases.json"), JSON.stringify(CASES.map((c) => c.numcodecs)));
  const codecs = await Promise.all(CASES.map(codecFor));
  const mine: number[] = [];
  for (const [i, codec] of codecs.entries()) {
    const encoded = await codec.encode(raw);
    mine.push(encoded.length);
    fs.writeFileSync(path.join(folder, `js${i}`), encoded);
  }
  const r = spawnSync(python!, ["-c", PYTHON_SIDE, folder], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const side = JSON.parse(r.stdout) as PythonSide;
  const problems: string[] = [];
  for (const [i, c] of CASES.entries()) {
    const where = `${label}, ${c.label}`;
    if (!side.decoded[i]) problems.push(`${where}: numcodecs decodes blockwise's chunk wrong`);
    const theirs = side.sizes[i]!;
    // numcodecs 0.11 runs a negative zstd level as level 1, so there is nothing to compare.
    const comparable = c.numcodecs["id"] !== "zstd" ||
      (c.configuration["level"] ?? 1) as number > 0;
    if (comparable && mine[i]! > theirs * 1.01) {
      problems.push(`${where}: ${mine[i]} bytes, numcodecs ${theirs} (over 1 % larger)`);
    }
    const back = await codecs[i]!.decode(
      new Uint8Array(fs.readFileSync(path.join(folder, `py${i}`))),
    );
    if (!Buffer.from(back).equals(Buffer.from(raw))) {
      problems.push(`${where}: numcodecs' chunk decodes wrong in blockwise`);
    }
  }
  return problems;
}

describe("gzip, zlib and zstd against numcodecs, every configuration", () => {
  for (const shuffled of [false, true]) {
    const label = shuffled ? "a byte-shuffled float32 chunk" : "a float32 chunk";
    it(
      `${label}: numcodecs decodes what blockwise encodes, at most 1 % larger than its own; blockwise decodes what it encodes`,
      pythonSkip,
      async () => {
        assert.ok(
          python !== null,
          "BLOCKWISE_REQUIRE_PYTHON_CODECS=1 but no python3 imports numcodecs",
        );
        assert.deepEqual(await compareWithNumcodecs(label, smoothChunk(shuffled)), []);
      },
    );
  }

  // zstd encodes through the system's libzstd where it is found (lib/runtime/zstd_native.ts).
  it(
    "the same with zstd encoded by libzstd: numcodecs decodes it, at most 1 % larger",
    libzstdSkip,
    async () => {
      const status = await loadNativeZstd({});
      assert.notEqual(status.impl, null, status.reason);
      setNativeZstd(status.impl);
      try {
        for (const shuffled of [false, true]) {
          const label = `libzstd, ${shuffled ? "a byte-shuffled" : "a"} float32 chunk`;
          assert.deepEqual(await compareWithNumcodecs(label, smoothChunk(shuffled)), []);
        }
      } finally {
        setNativeZstd(null);
      }
    },
  );
});

describe("settings a codec does not take", () => {
  const refusals: [string, () => unknown, RegExp][] = [
    [
      "gzip level 10",
      () => NativeGzip.fromConfig({ level: 10 }),
      /Zarr codec "gzip": level 10 is not an integer from 0 to 9/,
    ],
    [
      "zlib level 2.5",
      () => NativeZlib.fromConfig({ level: 2.5 }),
      /Zarr codec "zlib": level 2.5 is not an integer from -1 to 9/,
    ],
    [
      'zstd level "3"',
      () => NativeZstd.fromConfig({ level: "3" }),
      /Zarr codec "zstd": level "3" is not an integer from -131072 to 22; set the array's "zstd" configuration "level" to one/,
    ],
    ["zstd level 23", () => NativeZstd.fromConfig({ level: 23 }), /level 23 is not an integer/],
    [
      'zstd checksum "yes"',
      () => NativeZstd.fromConfig({ level: 3, checksum: "yes" }),
      /Zarr codec "zstd": checksum "yes" is not true or false/,
    ],
  ];
  for (const [label, make, message] of refusals) {
    it(`refuses ${label}, quoting the value`, () => assert.throws(make, message));
  }

  it("an array whose zstd level is out of range fails its first write with that message", async () => {
    registerZarrCodecs();
    const folder = path.join(newDir("bad-level"), "out.zarr");
    const array = await zarr.create(new FileSystemStore(folder), {
      shape: [4],
      chunkShape: [4],
      dtype: "uint8",
      fillValue: 0,
      codecs: [{ name: "bytes", configuration: { endian: "little" } }, {
        name: "zstd",
        configuration: { level: 99, checksum: false },
      }],
    });
    await assert.rejects(
      zarr.set(array, null, { data: Uint8Array.of(1, 2, 3, 4), shape: [4], stride: [1] }),
      (e: unknown) => /level 99 is not an integer from -131072 to 22/.test(describeError(e)),
    );
  });
});

/** An error's message with its causes (zarrita wraps a codec's error in CodecPipelineError). */
function describeError(e: unknown): string {
  const parts: string[] = [];
  for (let at: unknown = e; at instanceof Error; at = at.cause) parts.push(at.message);
  return parts.join(": ");
}

describe("a Zarr v3 array with Blosc, as zarr-python writes its metadata", () => {
  it(
    'shuffle "shuffle" compresses as numcodecs does (numcodecs.js stored such chunks raw)',
    pythonSkip,
    async () => {
      assert.ok(
        python !== null,
        "BLOCKWISE_REQUIRE_PYTHON_CODECS=1 but no python3 imports numcodecs",
      );
      registerZarrCodecs();
      const folder = path.join(newDir("v3-blosc"), "out.zarr");
      const array = await zarr.create(new FileSystemStore(folder), {
        shape: [32, 32, 32],
        chunkShape: [32, 32, 32],
        dtype: "float32",
        fillValue: 0,
        codecs: [{ name: "bytes", configuration: { endian: "little" } }, {
          name: "blosc",
          configuration: { cname: "lz4", clevel: 5, shuffle: "shuffle", typesize: 4, blocksize: 0 },
        }],
      });
      const raw = smoothChunk(false);
      const data = new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4);
      await zarr.set(array, null, { data, shape: [32, 32, 32], stride: [1024, 32, 1] });
      const stored = fs.readFileSync(path.join(folder, "c", "0", "0", "0"));
      const rawFile = path.join(newDir("v3-blosc-input"), "raw");
      fs.writeFileSync(rawFile, raw);
      const theirs = spawnSync(python, [
        "-c",
        "import sys, numpy, numcodecs; a = numpy.fromfile(sys.argv[1], '<f4'); " +
        "print(len(numcodecs.Blosc('lz4', 5, numcodecs.Blosc.SHUFFLE).encode(a)))",
        rawFile,
      ], { encoding: "utf8" });
      assert.equal(theirs.status, 0, theirs.stderr);
      const size = Number(theirs.stdout.trim());
      assert.ok(size < raw.length * 0.9, `numcodecs compresses this chunk: ${size} bytes`);
      assert.ok(
        Math.abs(stored.length - size) <= size * 0.01,
        `blockwise stored ${stored.length} bytes, numcodecs ${size}, of ${raw.length}`,
      );
    },
  );
});
