/**
 * Per-chunk Blosc decode and encode: blockwise's TypeScript codec (lib/zarr/blosc/) next to
 * numcodecs.js 0.3.2's WebAssembly build (what zarrita loaded before) and Python's numcodecs 0.11
 * (c-blosc 1.21 through Debian's libblosc), on one 64^3 float32 chunk (1 MiB) of the smooth
 * field bench/codecs.ts uses, for lz4 + shuffle and zstd + shuffle at clevel 5 (and the other
 * compressors, for their ratios). Issue 50's budget context: Python decodes the lz4 chunk in
 * ~0.08 ms and encodes it in ~0.23 ms; the WebAssembly took 0.9-2.8 and 1.45 ms.
 *
 * Figures are medians of REPEATS timed runs after WARMUP untimed ones; "into out" decodes into
 * one reused buffer, "fresh" allocates the result. The "native" column is the same codec with
 * the system's libblosc installed as workers get it (lib/runtime/blosc_native.ts: bun:ffi or
 * Deno FFI, blosc_decompress_ctx / blosc_compress_ctx on one thread, the frame's sizes checked
 * first, no copy in or out; BLOCKWISE_LIBBLOSC chooses the library, "-" when there is none).
 * Python is timed in one process with timeit, with numcodecs' threads off (one thread, as a
 * worker has) and on (its default: one per core).
 * The load average is printed before and after: the machine is shared.
 *
 *     bun bench/blosc.ts            (or: deno run -A bench/blosc.ts)
 *     BLOSC_BENCH_ALL=1 ...         also blosclz, lz4hc and zlib, and every shuffle
 */

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { loadNativeBlosc } from "../lib/runtime/blosc_native.ts";
import { BloscCodec, type NativeBlosc, setNativeBlosc } from "../lib/zarr/blosc/codec.ts";

const EDGE = 64;
const WARMUP = 30;
const REPEATS = 200;
const PYTHON = "/usr/bin/python3";

interface Config {
  cname: string;
  clevel: number;
  shuffle: number;
}

const CONFIGS: Config[] = process.env["BLOSC_BENCH_ALL"] === "1"
  ? ["blosclz", "lz4", "lz4hc", "zlib", "zstd"].flatMap((cname) =>
    [0, 1, 2].map((shuffle) => ({ cname, clevel: 5, shuffle }))
  )
  : [{ cname: "lz4", clevel: 5, shuffle: 1 }, { cname: "zstd", clevel: 5, shuffle: 1 }];

/** The smooth field of bench/codecs/zarr_python.py, chunk (0, 0, 0), in float32 as numpy. */
const FIELD_PY = `
import numpy as np, sys
i = np.arange(${EDGE}, dtype=np.float32)
z = i[:, None, None]; y = i[None, :, None]; x = i[None, None, :]
two_pi = np.float32(2 * np.pi)
f = np.sin(x * (two_pi / 97)) * np.cos(y * (two_pi / 131))
f = f + np.float32(0.5) * np.sin(z * (two_pi / 173) + x * (two_pi / 211))
f = f + np.float32(0.25) * np.cos((y + z) * (two_pi / 59))
sys.stdout.buffer.write(f.astype("<f4").tobytes())
`;

/** The field computed here (float32 rounding at each step, close to numpy's). */
function fieldHere(): Uint8Array {
  const f = new Float32Array(EDGE ** 3);
  const tp = Math.fround(2 * Math.PI);
  const r = Math.fround;
  let n = 0;
  for (let z = 0; z < EDGE; z++) {
    for (let y = 0; y < EDGE; y++) {
      for (let x = 0; x < EDGE; x++) {
        const a = r(r(Math.sin(r(x * r(tp / 97)))) * r(Math.cos(r(y * r(tp / 131)))));
        const b = r(0.5 * r(Math.sin(r(r(z * r(tp / 173)) + r(x * r(tp / 211))))));
        const c = r(0.25 * r(Math.cos(r((y + z) * r(tp / 59)))));
        f[n++] = r(r(a + b) + c);
      }
    }
  }
  return new Uint8Array(f.buffer);
}

function hasPython(): boolean {
  return spawnSync(PYTHON, ["-c", "import numcodecs.blosc"], { encoding: "utf8" }).status === 0;
}

function field(python: boolean): Uint8Array {
  if (!python) return fieldHere();
  const r = spawnSync(PYTHON, ["-c", FIELD_PY], { maxBuffer: 8 << 20 });
  if (r.status !== 0) throw new Error(`numpy field: ${r.stderr}`);
  return new Uint8Array(r.stdout);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** Median milliseconds of `fn` over REPEATS runs after WARMUP. */
function time(fn: () => unknown): number {
  for (let i = 0; i < WARMUP; i++) fn();
  const ms: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    const t0 = performance.now();
    fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

async function timeAsync(fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < WARMUP; i++) await fn();
  const ms: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    const t0 = performance.now();
    await fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

interface WasmCodec {
  encode(data: Uint8Array): Uint8Array | Promise<Uint8Array>;
  decode(data: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

/** numcodecs.js's WebAssembly Blosc (its typesize is always 1, so its shuffle does nothing). */
async function wasmFigures(config: Config, frame: Uint8Array, data: Uint8Array) {
  const module = (await import("numcodecs/blosc")) as unknown as {
    default: { fromConfig(c: Record<string, unknown>): WasmCodec };
  };
  const codec = module.default.fromConfig({ id: "blosc", ...config, blocksize: 0 });
  const decodeMs = await timeAsync(async () => await codec.decode(frame));
  const own = await codec.encode(data);
  const encodeMs = await timeAsync(async () => await codec.encode(data));
  return { decodeMs, encodeMs, ratio: data.length / own.length };
}

/** numcodecs' figures: [decode, encode] ms with one thread and with its default threads. */
function pythonFigures(folder: string): Record<string, number[]> {
  const script = `
import json, sys, timeit
import numpy as np
from numcodecs import blosc
data = np.fromfile(sys.argv[1] + "/field.f32", dtype="<f4")
configs = json.load(open(sys.argv[1] + "/configs.json"))
default_threads = blosc.get_nthreads()
out = {}
def measure(codec):
    frame = codec.encode(data)
    dest = np.empty_like(data)
    dec = min(timeit.repeat(lambda: codec.decode(frame, out=dest), number=50, repeat=5)) / 50
    enc = min(timeit.repeat(lambda: codec.encode(data), number=50, repeat=5)) / 50
    return [dec * 1e3, enc * 1e3, data.nbytes / len(frame)]
for c in configs:
    key = f"{c['cname']}-{c['shuffle']}"
    codec = blosc.Blosc(cname=c["cname"], clevel=c["clevel"], shuffle=c["shuffle"])
    blosc.use_threads = False
    blosc.set_nthreads(1)
    one = measure(codec)
    blosc.use_threads = True
    blosc.set_nthreads(default_threads)
    many = measure(codec)
    out[key] = one + many[:2] + [default_threads]
json.dump(out, sys.stdout)
`;
  const r = spawnSync(PYTHON, ["-c", script, folder], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`numcodecs timing failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, number[]>;
}

/**
 * The codec with the system's libblosc installed (lib/runtime/blosc_native.ts, as workers get
 * it): decode into out / fresh, encode, ratio; undefined when no usable libblosc is found.
 */
function nativeFigures(impl: NativeBlosc | null, codec: BloscCodec, data: Uint8Array) {
  if (impl === null) return undefined;
  setNativeBlosc(impl);
  try {
    const frame = codec.encode(data);
    const out = new Uint8Array(data.length);
    const back = codec.decode(frame, out);
    if (!back.every((v, i) => v === data[i])) throw new Error(`libblosc: round trip`);
    return [
      time(() => codec.decode(frame, out)),
      time(() => codec.decode(frame)),
      time(() => codec.encode(data)),
      data.length / frame.length,
    ];
  } finally {
    setNativeBlosc(null);
  }
}

const f2 = (v: number | undefined) => v === undefined ? "-" : v.toFixed(2);
const f3 = (v: number | undefined) => v === undefined ? "-" : v.toFixed(3);

async function main() {
  const python = hasPython();
  const data = field(python);
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-blosc-"));
  fs.writeFileSync(path.join(folder, "field.f32"), data);
  fs.writeFileSync(path.join(folder, "configs.json"), JSON.stringify(CONFIGS));
  const load = os.loadavg().map((l) => l.toFixed(2)).join(" ");
  console.log(`bench/blosc.ts: one ${EDGE}^3 float32 chunk (${data.length} bytes), clevel 5`);
  console.log(
    `load average before: ${load}; ${os.cpus().length} cores; ${
      process.versions["bun"]
        ? `bun ${process.versions["bun"]}`
        : `deno ${process.versions["deno"] ?? "?"}`
    }`,
  );
  const native = await loadNativeBlosc();
  console.log(`native: ${native.description} (${native.reason})`);
  const rows: string[][] = [];
  const out = new Uint8Array(data.length);
  const figures = new Map<string, { ts: number[]; wasm: number[]; ffi: number[] | undefined }>();
  for (const config of CONFIGS) {
    const codec = BloscCodec.fromConfig({ ...config, blocksize: 0 }, { typesize: 4 });
    const frame = codec.encode(data);
    const back = codec.decode(frame, out);
    if (!back.every((v, i) => v === data[i])) throw new Error(`${config.cname}: round trip`);
    const decodeOut = time(() => codec.decode(frame, out));
    const decodeFresh = time(() => codec.decode(frame));
    const encode = time(() => codec.encode(data));
    const wasm = await wasmFigures(config, frame, data);
    const ffi = nativeFigures(native.impl, codec, data);
    figures.set(`${config.cname}-${config.shuffle}`, {
      ts: [decodeOut, decodeFresh, encode, data.length / frame.length],
      wasm: [wasm.decodeMs, wasm.encodeMs, wasm.ratio],
      ffi,
    });
  }
  const py = python ? pythonFigures(folder) : {};
  fs.rmSync(folder, { recursive: true, force: true });
  for (const config of CONFIGS) {
    const key = `${config.cname}-${config.shuffle}`;
    const { ts, wasm, ffi } = figures.get(key)!;
    const p = py[key];
    rows.push([
      `${config.cname} shuffle=${config.shuffle}`,
      `${f3(ts[0])} / ${f3(ts[1])}`,
      f3(ts[2]),
      ffi && ffi[3] !== ts[3] ? `${f3(ts[3])} (native ${f3(ffi[3])})` : f3(ts[3]),
      `${f3(wasm[0])} / ${f3(wasm[1])}`,
      f3(wasm[2]),
      p ? `${f3(p[0])} / ${f3(p[1])}` : "-",
      p ? `${f3(p[3])} / ${f3(p[4])} (${p[5]} threads)` : "-",
      ffi ? `${f3(ffi[0])} / ${f3(ffi[1])} / ${f3(ffi[2])}` : "-",
      p ? `${f3(p[2])} (${f2(100 * (ts[3]! / p[2]! - 1))} %)` : "-",
    ]);
  }
  const header = [
    "codec",
    "TS decode ms (into out / fresh)",
    "TS encode ms",
    "TS ratio",
    "wasm decode / encode ms",
    "wasm ratio",
    "Python 1 thread decode / encode ms",
    "Python default",
    "native (libblosc) decode into out / fresh, encode ms",
    "Python ratio (TS vs it)",
  ];
  console.log(`| ${header.join(" | ")} |`);
  console.log(`|${header.map(() => "---").join("|")}|`);
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
  if (!python) console.log("(no /usr/bin/python3 with numcodecs: Python columns left out)");
  console.log(`load average after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
}

await main();
