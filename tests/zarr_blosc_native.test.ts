/**
 * Blosc through the system's libblosc (lib/runtime/blosc_native.ts, installed into
 * lib/zarr/blosc/ with setNativeBlosc) against blockwise's TypeScript Blosc: the same frames for
 * every configuration the Blosc tests use (tests/fixtures/zarr_blosc/cases.ts), each decoding
 * the other's; BLOCKWISE_LIBBLOSC=off, a bad path, an absent library; damaged frames refused
 * before C sees them; and a pipeline reading and writing blosc arrays in workers, the same bytes
 * with and without libblosc. Skipped, with the reason, where no usable libblosc is found, unless
 * BLOCKWISE_REQUIRE_PYTHON_CODECS=1 (CI installs python3-numcodecs, which brings libblosc1).
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { openLibblosc } from "../lib/runtime/blosc_ffi.ts";
import {
  bindLibblosc,
  defaultLibblosc,
  loadNativeBlosc,
  type NativeBloscStatus,
} from "../lib/runtime/blosc_native.ts";
import {
  BloscCodec,
  type NativeBlosc,
  nativeBlosc,
  setNativeBlosc,
} from "../lib/zarr/blosc/codec.ts";
import { registerZarrCodecs } from "../lib/zarr/codecs.ts";
import { REPO_ROOT } from "./fixtures/parallel/harness.ts";
import {
  assertDamagedFramesSafe,
  bloscCases,
  CNAMES,
  EXACT,
  smooth,
} from "./fixtures/zarr_blosc/cases.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("blosc-native");
const SLOW = { timeout: 120_000 };
const BIN = path.join(REPO_ROOT, "node_modules", ".bin");
const EXAMPLE = path.join(REPO_ROOT, "examples", "compressed_zarr");
const UNDER_BUN = "Bun" in globalThis;
/** This runtime running the sources, as a user would: `bun main.ts` or `deno run -A main.ts`. */
const RUNTIME = UNDER_BUN ? [path.join(BIN, "bun")] : [path.join(BIN, "deno"), "run", "-A"];

// The library the loader finds when BLOCKWISE_LIBBLOSC is unset (the environment ignored).
const found: NativeBloscStatus = await loadNativeBlosc({});
const required = process.env["BLOCKWISE_REQUIRE_PYTHON_CODECS"] === "1";
const skip = found.impl === null && !required
  ? { skip: `no usable libblosc (${found.reason}): apt-get install libblosc1` }
  : {};

after(() => setNativeBlosc(null));

function native(): NativeBlosc {
  if (found.impl === null) assert.fail(`libblosc is required here: ${found.reason}`);
  return found.impl;
}

/** `f()` with `impl` installed (null: the TypeScript codec), then what was installed before. */
function using<T>(impl: NativeBlosc | null, f: () => T): T {
  const before = nativeBlosc();
  setNativeBlosc(impl);
  try {
    return f();
  } finally {
    setNativeBlosc(before);
  }
}

/** `impl` with its compress and decompress calls counted. */
function counted(impl: NativeBlosc) {
  const calls = { compress: 0, decompress: 0 };
  const spy: NativeBlosc = {
    description: impl.description,
    encodes: (cname) => impl.encodes(cname),
    cbufferSizes: (src) => impl.cbufferSizes(src),
    compress(...args) {
      calls.compress++;
      return impl.compress(...args);
    },
    decompress(src, dest) {
      calls.decompress++;
      return impl.decompress(src, dest);
    },
  };
  return { spy, calls };
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

describe("libblosc through FFI next to the TypeScript Blosc", () => {
  const { cases, bytes } = bloscCases();
  const frames = new Map<string, { ts: Uint8Array; c: Uint8Array }>();
  const framesOf = (impl: NativeBlosc) => {
    if (frames.size > 0) return frames;
    for (const c of cases) {
      const codec = BloscCodec.fromConfig(c.config, { typesize: c.typesize });
      const data = bytes.get(c.data)!;
      frames.set(c.id, {
        ts: using(null, () => codec.encode(data)),
        c: using(impl, () => codec.encode(data)),
      });
    }
    return frames;
  };

  it("finds the system's c-blosc 1.21 and says so", skip, () => {
    assert.match(native().description, /^libblosc 1\.21\.\d+ \(libblosc\.so\.1\)$/);
    assert.match(found.reason, /^found libblosc\.so\.1$/);
    // C encodes what it writes as the TypeScript ports do; zlib and zstd are the runtime's.
    for (const cname of CNAMES) assert.equal(native().encodes(cname), EXACT.has(cname), cname);
  });

  it(
    "writes every case's frame as the TypeScript codec does, blosclz, lz4, lz4hc through C",
    skip,
    () => {
      const { spy, calls } = counted(native());
      frames.clear();
      const all = framesOf(spy);
      const throughC = cases.filter((c) => EXACT.has(c.config.cname) && bytes.get(c.data)!.length);
      assert.equal(calls.compress, throughC.length);
      const differ = cases.filter((c) => !equalBytes(all.get(c.id)!.ts, all.get(c.id)!.c))
        .map((c) => c.id);
      assert.deepEqual(differ, []);
    },
  );

  it("each decodes the other's frames to the same bytes, into out or a new buffer", skip, () => {
    const all = framesOf(native());
    const { spy, calls } = counted(native());
    const wrong: string[] = [];
    for (const c of cases) {
      const codec = BloscCodec.fromConfig(c.config, { typesize: c.typesize });
      const data = bytes.get(c.data)!;
      const { ts, c: own } = all.get(c.id)!;
      const out = new Uint8Array(data.length + 8);
      const results = [
        ["C decodes TS", using(spy, () => codec.decode(ts))],
        ["C decodes TS into out", using(spy, () => codec.decode(ts, out))],
        ["TS decodes C", using(null, () => codec.decode(own))],
      ] as const;
      for (const [what, decoded] of results) {
        if (!equalBytes(decoded, data)) wrong.push(`${c.id}: ${what}`);
      }
    }
    assert.deepEqual(wrong, []);
    // zlib frames decode in TypeScript (the runtime's zlib-ng is faster than the system's zlib).
    const zlibFrames = cases.filter((c) => c.config.cname === "zlib" && bytes.get(c.data)!.length);
    assert.ok(zlibFrames.length > 0);
    assert.equal(
      calls.decompress,
      2 * (cases.length - 1 - zlibFrames.length),
      "all but the empty frame and zlib frames went to C",
    );
  });

  it(
    "refuses a damaged frame's sizes before calling C, with the TypeScript messages",
    skip,
    async () => {
      const opened = await openLibblosc(defaultLibblosc()!);
      let cCalls = 0;
      const s = opened.symbols;
      const impl = bindLibblosc({
        ...opened,
        symbols: {
          blosc_compname_to_compcode: (name) => s.blosc_compname_to_compcode(name),
          blosc_cbuffer_sizes: (src, n, c, b) => s.blosc_cbuffer_sizes(src, n, c, b),
          blosc_compress_ctx: (...args) => s.blosc_compress_ctx(...args),
          blosc_decompress_ctx(src, dest, destsize, threads) {
            cCalls++;
            return s.blosc_decompress_ctx(src, dest, destsize, threads);
          },
        },
      }, new Set(CNAMES));
      const data = smooth(4, 30000);
      const codec = BloscCodec.fromConfig({ cname: "lz4", shuffle: 1, typesize: 4 });
      const frame = using(impl, () => codec.encode(data));
      const out = new Uint8Array(data.length);
      const header = (at: number, value: number) => {
        const damaged = frame.slice();
        new DataView(damaged.buffer).setInt32(at, value, true);
        return damaged;
      };
      const refusals: [string, () => unknown, RegExp][] = [
        [
          "a truncated frame",
          () => codec.decode(frame.subarray(0, frame.length - 1), out),
          /^Error: blosc: cannot decode this frame: it says \d+ bytes but has \d+$/,
        ],
        [
          "cbytes past the buffer",
          () => codec.decode(header(12, frame.length + 4096), out),
          new RegExp(`it says ${frame.length + 4096} bytes but has ${frame.length}`),
        ],
        [
          "nbytes past the output",
          () => codec.decode(header(4, 2 * data.length), out),
          new RegExp(
            `^Error: blosc: the frame holds ${
              2 * data.length
            } bytes; the output has room for ${out.length}`,
          ),
        ],
        ["an output too small", () => codec.decode(frame, new Uint8Array(100)), /room for 100$/],
        ["a negative nbytes", () => codec.decode(header(4, -5), out), /nbytes is negative/],
        [
          "a header cut short",
          () => codec.decode(frame.subarray(0, 10)),
          /shorter than the 16-byte/,
        ],
        [
          "the adapter itself, cbytes",
          () => impl.decompress(frame.subarray(0, 100), out),
          /it says \d+ bytes but has 100$/,
        ],
        [
          "the adapter itself, nbytes",
          () => impl.decompress(frame, new Uint8Array(16)),
          /the output has room for 16$/,
        ],
      ];
      using(impl, () => {
        for (const [what, decode, message] of refusals) assert.throws(decode, message, what);
        assert.equal(cCalls, 0, "C was called for a frame refused");
        assert.ok(equalBytes(codec.decode(frame, out), data));
        assert.equal(cCalls, 1);
      });
    },
  );

  it("decodes or refuses every one-byte change, never writing past out", skip, () => {
    using(native(), assertDamagedFramesSafe);
  });
});

describe("which Blosc BLOCKWISE_LIBBLOSC chooses", () => {
  it("off: the TypeScript codec", async () => {
    const off = await loadNativeBlosc({ BLOCKWISE_LIBBLOSC: "off" });
    assert.equal(off.impl, null);
    assert.equal(off.description, "blockwise's TypeScript Blosc");
    assert.equal(off.reason, "BLOCKWISE_LIBBLOSC=off");
  });

  it("unset, and the usual library absent: the TypeScript codec, quietly", async () => {
    const absent = await loadNativeBlosc({}, "libblosc-absent.so.1");
    assert.equal(absent.impl, null);
    assert.match(absent.reason, /^libblosc-absent\.so\.1: /);
  });

  it("a path that cannot be used: an error naming it and the fix", async () => {
    const fix =
      /Fix: point BLOCKWISE_LIBBLOSC at c-blosc 1\.21's shared library .* or set BLOCKWISE_LIBBLOSC=off to use blockwise's TypeScript Blosc/;
    for (const library of ["/nonexistent/libblosc.so.1", "libc.so.6"]) {
      await assert.rejects(loadNativeBlosc({ BLOCKWISE_LIBBLOSC: library }), (error: Error) => {
        assert.ok(error.message.startsWith(`blosc: cannot use the libblosc "${library}": `));
        assert.match(error.message, fix);
        return true;
      });
    }
  });

  it("is what a process installs at start, from its environment", SLOW, () => {
    const dir = newDir("env");
    const script = path.join(dir, "which.ts");
    const module = pathToFileURL(path.join(REPO_ROOT, "lib", "runtime", "blosc_native.ts")).href;
    fs.writeFileSync(
      script,
      `import { registerNativeCodecs } from "${module}";
const status = await registerNativeCodecs();
console.log(status.description);
`,
    );
    const run = (value: string | undefined) => {
      const env: Record<string, string> = { PATH: process.env["PATH"] ?? "", HOME: dir };
      if (value !== undefined) env["BLOCKWISE_LIBBLOSC"] = value;
      return spawnSync(RUNTIME[0]!, [...RUNTIME.slice(1), script], { env, encoding: "utf8" });
    };
    const off = run("off");
    assert.equal(off.status, 0, off.stderr);
    assert.equal(off.stdout.trim(), "blockwise's TypeScript Blosc");
    const bad = run("/nonexistent/libblosc.so.1");
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /cannot use the libblosc "\/nonexistent\/libblosc\.so\.1"/);
    if (found.impl !== null) {
      const usual = run(undefined);
      assert.equal(usual.status, 0, usual.stderr);
      assert.equal(usual.stdout.trim(), found.impl.description);
    }
  });
});

/** The example's input values: (31 i + 17 j) mod 1000 on 20 x 30. */
function raw(i: number, j: number): number {
  return i < 0 || j < 0 || i >= 20 || j >= 30 ? 0 : (i * 31 + j * 17) % 1000;
}

/** The 3x3 mean (rounded down, 0 outside) examples/compressed_zarr computes. */
function reference(): number[] {
  const out: number[] = [];
  for (let i = 0; i < 20; i++) {
    for (let j = 0; j < 30; j++) {
      let sum = 0;
      for (let di = -1; di <= 1; di++) for (let dj = -1; dj <= 1; dj++) sum += raw(i + di, j + dj);
      out.push(Math.floor(sum / 9));
    }
  }
  return out;
}

/** examples/compressed_zarr writing blosc (lz4 + shuffle) instead of zstd, each block noting which Blosc its worker runs. */
function bloscExample(label: string): string {
  const dir = newDir(label);
  fs.cpSync(EXAMPLE, dir, { recursive: true });
  const meta = path.join(dir, "out.zarr", "zarr.json");
  const json = JSON.parse(fs.readFileSync(meta, "utf8")) as { codecs: unknown[] };
  json.codecs[1] = {
    name: "blosc",
    configuration: { cname: "lz4", clevel: 5, shuffle: "shuffle", typesize: 2, blocksize: 0 },
  };
  fs.writeFileSync(meta, JSON.stringify(json));
  const module = pathToFileURL(path.join(REPO_ROOT, "lib", "zarr", "blosc", "native.ts")).href;
  fs.writeFileSync(
    path.join(dir, "probe.mjs"),
    `import * as fs from "node:fs";
import example from "./pipeline.mjs";
import { nativeBlosc } from "${module}";
const here = new URL(".", import.meta.url).pathname;
export default {
  tasks: example.tasks.map((task) => ({
    ...task,
    async process(block, raw, context) {
      fs.appendFileSync(here + "probe.txt", (nativeBlosc()?.description ?? "typescript") + "\\n");
      return await task.process(block, raw, context);
    },
  })),
};
`,
  );
  return dir;
}

function runExample(dir: string, libblosc: string | undefined) {
  const env: Record<string, string> = { PATH: process.env["PATH"] ?? "", HOME: dir };
  if (libblosc !== undefined) env["BLOCKWISE_LIBBLOSC"] = libblosc;
  const argv = [...RUNTIME.slice(1), path.join(REPO_ROOT, "main.ts"), "run", "probe.mjs"];
  return spawnSync(RUNTIME[0]!, [...argv, "--tracking-dir", "t", "--no-progress"], {
    cwd: dir,
    env,
    encoding: "utf8",
    timeout: 100_000,
  });
}

/** Every chunk file of out.zarr, by key. */
function chunkFiles(dir: string): Map<string, Uint8Array> {
  const root = path.join(dir, "out.zarr", "c");
  const files = new Map<string, Uint8Array>();
  for (const row of fs.readdirSync(root)) {
    for (const column of fs.readdirSync(path.join(root, row))) {
      files.set(`${row}/${column}`, new Uint8Array(fs.readFileSync(path.join(root, row, column))));
    }
  }
  return files;
}

describe("a pipeline reading and writing blosc arrays in workers", () => {
  it(
    "runs with libblosc, and writes the same bytes as without it",
    { ...SLOW, ...skip },
    async () => {
      const withC = bloscExample("with");
      const r = runExample(withC, undefined);
      assert.equal(r.status, 0, r.stdout + r.stderr);
      const probes = fs.readFileSync(path.join(withC, "probe.txt"), "utf8").trim().split("\n");
      assert.equal(probes.length, 6, "six blocks");
      assert.deepEqual(new Set(probes), new Set([native().description]));

      const withoutC = bloscExample("without");
      const off = runExample(withoutC, "off");
      assert.equal(off.status, 0, off.stdout + off.stderr);
      const offProbes = fs.readFileSync(path.join(withoutC, "probe.txt"), "utf8").trim().split(
        "\n",
      );
      assert.deepEqual(new Set(offProbes), new Set(["typescript"]));

      const a = chunkFiles(withC);
      const b = chunkFiles(withoutC);
      assert.equal(a.size, 6);
      assert.deepEqual([...a.keys()].sort(), [...b.keys()].sort());
      for (const [key, bytes] of a) {
        assert.equal(bytes[0], 2, `${key}: a Blosc 1 frame`);
        assert.ok(equalBytes(bytes, b.get(key)!), `${key}: the same frame with and without C`);
      }
      registerZarrCodecs();
      const out = await zarr.open(new FileSystemStore(path.join(withC, "out.zarr")), {
        kind: "array",
      });
      const { data } = await zarr.get(out);
      assert.deepEqual(Array.from(data as Uint16Array), reference());
    },
  );

  it("stops, naming the library and the fix, when BLOCKWISE_LIBBLOSC cannot be used", SLOW, () => {
    const dir = bloscExample("bad");
    const r = runExample(dir, "/nonexistent/libblosc.so.1");
    assert.notEqual(r.status, 0);
    assert.match(r.stdout + r.stderr, /cannot use the libblosc "\/nonexistent\/libblosc\.so\.1"/);
    assert.match(r.stdout + r.stderr, /BLOCKWISE_LIBBLOSC=off/);
    assert.ok(!fs.existsSync(path.join(dir, "probe.txt")), "no block ran");
  });
});
