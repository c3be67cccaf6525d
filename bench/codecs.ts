/**
 * Compressed Zarr in JavaScript workers against zarr-python's C codecs (issue 50, item 4).
 *
 * Data, built once into a cache folder: a SIZE^3 float32 smooth field (sums of low-frequency
 * sines), 64^3 chunks, written by Debian's zarr-python (zarr 2.13, numcodecs 0.11: Zarr v2)
 * once per codec: zstd 3, gzip 5, blosc lz4 5 + byte shuffle, blosc zstd 5 + byte shuffle
 * (typesize 4 from the data type), and none. The field itself is kept as raw float32.
 *
 * Per codec, in the same minutes, `--rounds` interleaved rounds (default 5; the figures are
 * medians). Five, not three: this VM's kernel hands freed memory back to its host
 * (page_reporting), and a run that touches such pages again pays the host's faults; a single
 * round of the same write moved from 0.56 to 1.66 s that way, on both sides, more often in the
 * first round of a codec (docs/design/CODECS.md, "Stalls").
 *
 * - zarr-python, one thread (blosc's threads off): a whole read (`z[:]`) after one untimed read
 *   (page cache warm), and a whole write of the field from memory into a new array with the
 *   same codec (`out[:] = data`), each timed around that one statement.
 * - a blockwise pipeline (bench/codecs/pipeline.mjs) run by the blockwise CLI with 1 and with 2
 *   workers, block = chunk: a read pass (`readBlock` of every chunk) and a write pass
 *   (`writeBlock` of every block from the field held in memory into a new array made with the
 *   Python array's .zarray, so the same codec and Zarr v2 keys). Timed inside the workers: the
 *   span from the first block's start to the last block's end (process and worker start-up,
 *   module import, `setup` and a warm-up of the block path for the JIT come before it; the
 *   scheduler's hand-over between blocks falls inside). The whole process's wall time is
 *   printed beside it.
 * - one chunk (the middle one) decoded and encoded: numcodecs' codec under timeit against
 *   zarrita's codec pipeline in this process (bytes + compressor), median per call.
 *
 * MB is 10^6 bytes of float32 values (uncompressed), in and out alike.
 * Budgets (issue 50): per worker, reads and writes within 1.25x of zarr-python (JS 1 worker
 * MB/s >= Python / 1.25), for every codec, uncompressed included; with 2 workers at least 1.6x
 * the 1-worker figure (the compressed codecs); the arrays blockwise wrote decode in zarr-python
 * to the field's values, with a compression ratio within 1 % of zarr-python's. The budgets are
 * for an idle machine: the load average is printed at the start and the end.
 *
 *   bun bench/codecs.ts [--size 512] [--rounds 5] [--dir .cache/bench-codecs] [--out DIR]
 *                       [--codecs zstd3,gzip5,blosc-lz4,blosc-zstd,none]
 *                       [--binary PATH|sources] [--python /usr/bin/python3] [--keep]
 *   deno run -A bench/codecs.ts ...
 *
 * Blosc runs through the system's libblosc where there is one (lib/runtime/blosc_native.ts), in
 * the workers and in this process alike; `BLOCKWISE_LIBBLOSC=off bun bench/codecs.ts ...` times
 * blockwise's TypeScript Blosc instead. The header line says which.
 *
 * The scheduler is `--binary` (default: ./blockwise when it is newer than every source file,
 * else this runtime running main.ts). Timed writes, Python's and the pipelines', go to a new
 * folder in /dev/shm (a tmpfs: what is timed is the codecs and the file writes, not this
 * VM's disk, whose writeback moved the same write by 2-6x between rounds), or to `--out DIR`
 * (e.g. --out .cache/bench-codecs/out, to include the disk); each comes after a `sync`
 * (untimed) so that none waits for an earlier one's dirty pages. `--keep` keeps the arrays
 * the pipelines wrote (OUT/js-1w, OUT/js-2w); the built data stays in DIR/SIZE either way
 * (delete it by hand).
 */

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { openArray } from "../lib/helpers/mod.ts";
import { registerNativeCodecs } from "../lib/runtime/blosc_native.ts";
import { copyStrided } from "../lib/helpers/strided_copy.ts";

const ROOT = path.resolve(import.meta.dirname ?? ".", "..");
const ASSETS = path.join(ROOT, "bench", "codecs");
const CHUNK = 64;
const PER_WORKER = 1.25;
const SCALING = 1.6;
const RATIO_TOLERANCE = 0.01;
const BUSY_LOAD = 0.5;
/** A change here rebuilds the cached data (the field's formula lives in zarr_python.py). */
const RECIPE_VERSION = 1;
/** Allocator settings the bench never inherits from its own shell (defaults on both sides). */
const CLEARED_VARIABLES = [
  "MALLOC_MMAP_THRESHOLD_",
  "MALLOC_TRIM_THRESHOLD_",
  "MALLOC_TOP_PAD_",
  "MALLOC_ARENA_MAX",
  "MIMALLOC_PURGE_DELAY",
];

interface Codec {
  readonly name: string;
  readonly label: string;
  /** numcodecs configuration, as in .zarray's "compressor". */
  readonly config: Readonly<Record<string, unknown>> | null;
}

const CODECS: readonly Codec[] = [
  { name: "zstd3", label: "zstd 3", config: { id: "zstd", level: 3 } },
  { name: "gzip5", label: "gzip 5", config: { id: "gzip", level: 5 } },
  {
    name: "blosc-lz4",
    label: "blosc lz4 5 + shuffle",
    config: { id: "blosc", cname: "lz4", clevel: 5, shuffle: 1, blocksize: 0 },
  },
  {
    name: "blosc-zstd",
    label: "blosc zstd 5 + shuffle",
    config: { id: "blosc", cname: "zstd", clevel: 5, shuffle: 1, blocksize: 0 },
  },
  { name: "none", label: "none", config: null },
];

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const size = Number(option("--size", "512"));
const rounds = Number(option("--rounds", "5"));
const python = option("--python", "/usr/bin/python3");
const keep = process.argv.includes("--keep");
const dataDir = path.join(
  path.resolve(option("--dir", path.join(ROOT, ".cache", "bench-codecs"))),
  String(size),
);
const codecNames = option("--codecs", CODECS.map((c) => c.name).join(",")).split(",");
if (!Number.isInteger(size) || size < CHUNK || size % CHUNK !== 0) {
  console.error(`--size must be a multiple of ${CHUNK} (got ${option("--size", "")})`);
  process.exit(2);
}
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`--rounds must be a positive whole number`);
  process.exit(2);
}
const unknown = codecNames.filter((n) => !CODECS.some((c) => c.name === n));
if (unknown.length > 0) {
  console.error(
    `Unknown codec ${unknown.join(", ")} in --codecs; choose from ${
      CODECS.map((c) => c.name).join(", ")
    }`,
  );
  process.exit(2);
}
const codecs = CODECS.filter((c) => codecNames.includes(c.name));
/** Where the timed writes go (both sides): --out, else a new folder in /dev/shm, else DIR/SIZE. */
const outDir = process.argv.includes("--out")
  ? path.resolve(option("--out", ""))
  : fs.existsSync("/dev/shm")
  ? fs.mkdtempSync("/dev/shm/blockwise-bench-codecs-")
  : dataDir;
const ownOutDir = !process.argv.includes("--out") && outDir !== dataDir;
const BYTES = size ** 3 * 4;
const MB = BYTES / 1e6;
const BLOCKS = (size / CHUNK) ** 3;

function isDeno(): boolean {
  return "Deno" in globalThis;
}

/** The scheduler: --binary, else ./blockwise when newer than every source, else the sources. */
function scheduler(): { command: string[]; why: string } {
  const sources = [
    process.execPath,
    ...(isDeno() ? ["run", "-A"] : []),
    path.join(ROOT, "main.ts"),
  ];
  const chosen = option("--binary", "");
  if (chosen === "sources") return { command: sources, why: "--binary sources" };
  if (chosen !== "") return { command: [path.resolve(chosen)], why: "--binary" };
  const binary = path.join(ROOT, "blockwise");
  if (!fs.existsSync(binary)) return { command: sources, why: "no ./blockwise" };
  const built = fs.statSync(binary).mtimeMs;
  const newest = newestSource();
  return newest.mtime <= built
    ? { command: [binary], why: "./blockwise is newer than every source" }
    : {
      command: sources,
      why: `./blockwise is older than ${path.relative(ROOT, newest.file)}`,
    };
}

function newestSource(): { file: string; mtime: number } {
  let newest = { file: "", mtime: 0 };
  const visit = (entry: string) => {
    const stat = fs.statSync(entry);
    if (stat.isDirectory()) {
      for (const name of fs.readdirSync(entry)) {
        if (name !== "node_modules") visit(path.join(entry, name));
      }
    } else if (/\.(ts|js|mjs)$/.test(entry) && stat.mtimeMs > newest.mtime) {
      newest = { file: entry, mtime: stat.mtimeMs };
    }
  };
  for (const entry of ["main.ts", "lib", "workers"]) visit(path.join(ROOT, entry));
  return newest;
}

function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !CLEARED_VARIABLES.includes(name)) env[name] = value;
  }
  return { ...env, ...extra };
}

function pythonCall(args: string[]): unknown {
  const r = spawnSync(python, [path.join(ASSETS, "zarr_python.py"), ...args], {
    encoding: "utf8",
    env: cleanEnv({ OMP_NUM_THREADS: "1", OPENBLAS_NUM_THREADS: "1" }),
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) {
    throw new Error(`zarr_python.py ${args[0]} failed (${r.status}):\n${r.stderr}`);
  }
  return JSON.parse(r.stdout.trim().split("\n").pop()!);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const arrayPath = (codec: Codec) => path.join(dataDir, `${codec.name}.zarr`);
const rawPath = path.join(dataDir, "source.f32");

/** Stored bytes of an array's chunks (its files but the metadata). */
function storedBytes(array: string): number {
  let total = 0;
  for (const name of fs.readdirSync(array)) {
    if (!name.startsWith(".")) total += fs.statSync(path.join(array, name)).size;
  }
  return total;
}

/** Builds the field and the Python-written arrays, unless the cache holds them already. */
function buildData(): void {
  const recipe = JSON.stringify({ RECIPE_VERSION, size, chunk: CHUNK, codecs: CODECS });
  const stamp = path.join(dataDir, "recipe.json");
  const cached = fs.existsSync(stamp) && fs.readFileSync(stamp, "utf8") === recipe &&
    CODECS.every((c) => fs.existsSync(path.join(arrayPath(c), ".zarray")));
  if (cached) {
    console.log(`data: cached in ${dataDir}`);
    return;
  }
  console.log(`data: building ${size}^3 float32 and ${CODECS.length} arrays in ${dataDir} ...`);
  fs.rmSync(stamp, { force: true });
  const started = performance.now();
  const written = pythonCall([
    "build",
    dataDir,
    String(size),
    JSON.stringify(CODECS.map((c) => ({ name: c.name, config: c.config }))),
  ]) as { name: string; seconds: number }[];
  fs.writeFileSync(stamp, recipe);
  console.log(
    `data: built in ${((performance.now() - started) / 1000).toFixed(1)} s (${
      written.map((w) => `${w.name} ${w.seconds.toFixed(1)} s`).join(", ")
    })`,
  );
}

/** One chunk's decode and encode through zarrita's codec pipeline, here, median ms per call. */
async function jsChunk(codec: Codec, key: string): Promise<{ decode: number; encode: number }> {
  const array = await openArray(arrayPath(codec));
  const marker = Object.getOwnPropertySymbols(array).find((s) =>
    s.description === "zarrita.context"
  );
  if (marker === undefined) throw new Error("zarrita's array context was not found");
  const pipeline = (array as unknown as Record<symbol, { codec: CodecPipeline }>)[marker]!.codec;
  const encoded = new Uint8Array(fs.readFileSync(path.join(arrayPath(codec), key)));
  const chunk = await pipeline.decode(encoded);
  return {
    decode: await perCallMs(() => pipeline.decode(encoded)),
    encode: await perCallMs(() => pipeline.encode(chunk)),
  };
}

interface CodecPipeline {
  decode(bytes: Uint8Array): Promise<ChunkValues>;
  encode(chunk: ChunkValues): Promise<Uint8Array>;
}

interface ChunkValues {
  readonly data: unknown;
  readonly shape: number[];
  readonly stride: number[];
}

/** As zarr_python.py's: enough calls for 50 ms a repeat, 5 repeats, the median per call. */
async function perCallMs(fn: () => Promise<unknown>): Promise<number> {
  await fn();
  const timed = async (n: number) => {
    const started = performance.now();
    for (let i = 0; i < n; i++) await fn();
    return performance.now() - started;
  };
  let number = 1;
  while (await timed(number) < 50) number *= 2;
  const repeats: number[] = [];
  for (let i = 0; i < 5; i++) repeats.push(await timed(number) / number);
  return median(repeats);
}

interface PipelineRun {
  /** First block start to last block end, inside the workers. */
  readonly span: number;
  /** The whole CLI process, spawn to exit. */
  readonly wall: number;
  /** Blocks each worker that was set up ran (a worker that ran none still counts). */
  readonly perWorker: readonly number[];
}

const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-codecs-"));
fs.copyFileSync(path.join(ASSETS, "pipeline.mjs"), path.join(runDir, "pipeline.mjs"));
const cli = scheduler();

const jsOut = (codec: Codec, workers: number) =>
  path.join(outDir, `js-${workers}w`, `${codec.name}.zarr`);

/**
 * Writes the dirty pages of earlier runs to disk and the removal of the previous output
 * (untimed) before a timed write, so that no write waits for another's.
 */
function settle(): void {
  spawnSync("sync");
}

function runPipeline(mode: "read" | "write", codec: Codec, workers: number): PipelineRun {
  const stamps = path.join(runDir, "stamps");
  fs.rmSync(stamps, { recursive: true, force: true });
  fs.mkdirSync(stamps);
  const target = jsOut(codec, workers);
  if (mode === "write") {
    fs.rmSync(target, { recursive: true, force: true });
    fs.mkdirSync(target, { recursive: true });
    fs.copyFileSync(path.join(arrayPath(codec), ".zarray"), path.join(target, ".zarray"));
    settle();
  }
  const [command, ...args] = cli.command;
  const started = performance.now();
  const r = spawnSync(command!, [
    ...args,
    "run",
    path.join(runDir, "pipeline.mjs"),
    "--no-progress",
  ], {
    cwd: runDir,
    encoding: "utf8",
    env: cleanEnv({
      CODECS_MODE: mode,
      CODECS_SIZE: String(size),
      CODECS_WORKERS: String(workers),
      CODECS_STAMPS: stamps,
      CODECS_SOURCE: arrayPath(codec),
      CODECS_TARGET: target,
      CODECS_RAW: rawPath,
    }),
    maxBuffer: 1 << 24,
  });
  const wall = (performance.now() - started) / 1000;
  if (r.status !== 0) {
    throw new Error(
      `blockwise run (${mode}, ${codec.name}, ${workers} workers) failed (${r.status}):\n${
        (r.stderr + r.stdout).split("\n").slice(-30).join("\n")
      }`,
    );
  }
  const files = fs.readdirSync(stamps);
  if (files.some((f) => f.startsWith("barrier-timeout-"))) {
    throw new Error(`a worker waited in vain for the others to be set up (${mode}, ${codec.name})`);
  }
  let first = Infinity;
  let last = -Infinity;
  const perWorker: number[] = [];
  for (const file of files.filter((f) => f.startsWith("stamps-"))) {
    let blocks = 0;
    for (const line of fs.readFileSync(path.join(stamps, file), "utf8").split("\n")) {
      if (line === "") continue;
      const [start, end] = line.split(" ").map(Number) as [number, number];
      first = Math.min(first, start);
      last = Math.max(last, end);
      blocks++;
    }
    perWorker.push(blocks);
  }
  const blocks = perWorker.reduce((a, b) => a + b, 0);
  if (blocks !== BLOCKS) {
    throw new Error(`${mode} ${codec.name}: ${blocks} blocks stamped, expected ${BLOCKS}`);
  }
  return { span: (last - first) / 1000, wall, perWorker };
}

interface Figures {
  pyRead: number[];
  pyWrite: number[];
  jsRead: Record<number, PipelineRun[]>;
  jsWrite: Record<number, PipelineRun[]>;
  chunkPy: { decode_ms: number; encode_ms: number } | null;
  chunkJs: { decode: number; encode: number } | null;
  ratioPy: number;
  ratioJs: Record<number, number>;
  equal: Record<number, boolean>;
}

// ---------------------------------------------------------------------------------------------

const check = spawnSync(python, [
  "-c",
  "import zarr, numcodecs, numpy; print(zarr.__version__, numcodecs.__version__, numpy.__version__)",
], { encoding: "utf8" });
if (check.status !== 0) {
  console.log(
    `bench/codecs.ts skipped: ${python} cannot import zarr, numcodecs and numpy (${
      (check.stderr || String(check.error ?? "")).trim().split("\n").pop()
    }). On Debian: apt-get install python3-zarr (zarr 2.13, numcodecs 0.11); or --python PATH.`,
  );
  fs.rmSync(runDir, { recursive: true, force: true });
  if (ownOutDir) fs.rmSync(outDir, { recursive: true, force: true });
  process.exit(0);
}
const [zarrVersion, numcodecsVersion] = check.stdout.trim().split(" ");

const blosc = await registerNativeCodecs();
const loadBefore = os.loadavg();
console.log(`blosc: ${blosc.description} (${blosc.reason})`);
console.log(
  `codecs: ${size}^3 float32 (${
    MB.toFixed(1)
  } MB), ${CHUNK}^3 chunks (${BLOCKS} blocks), ${rounds} rounds; zarr-python ${zarrVersion} + numcodecs ${numcodecsVersion} (${python}), one thread; scheduler ${
    cli.command.map((p) => path.relative(ROOT, p) || p).join(" ")
  } (${cli.why}); writes to ${outDir}; ${os.cpus().length} cores; load average at start ${
    loadBefore.map((l) => l.toFixed(2)).join(" ")
  }`,
);
if (loadBefore[0]! > BUSY_LOAD) {
  console.log(
    `note: the 1-minute load is ${
      loadBefore[0]!.toFixed(2)
    } at the start (over ${BUSY_LOAD}): other programs share the cores, so these figures cannot judge the budgets`,
  );
}

fs.mkdirSync(dataDir, { recursive: true });
buildData();
reportCopy();

/**
 * What every write pass does before encoding, on both sides: copying each 64^3 block out of
 * the field in memory. numpy copies 256-byte rows with memcpy; blockwise with 32-bit words
 * (lib/helpers/strided_copy.ts). Medians of 5 passes over every block.
 */
function reportCopy(): void {
  const py = pythonCall(["copy", rawPath, String(size)]) as { copy_ms: number };
  const bytes = fs.readFileSync(rawPath);
  const field = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const block = new Float32Array(CHUNK ** 3);
  const passes: number[] = [];
  for (let pass = 0; pass < 6; pass++) {
    const started = performance.now();
    for (let z = 0; z < size; z += CHUNK) {
      for (let y = 0; y < size; y += CHUNK) {
        for (let x = 0; x < size; x += CHUNK) {
          copyStrided({
            data: field.subarray((z * size + y) * size + x),
            shape: [CHUNK, CHUNK, CHUNK],
            stride: [size * size, size, 1],
          }, block);
        }
      }
    }
    if (pass > 0) passes.push((performance.now() - started) / BLOCKS);
  }
  console.log(
    `copy of each ${CHUNK}^3 block out of the field in memory (part of every write, before encoding): numpy ${
      py.copy_ms.toFixed(2)
    } ms, blockwise ${median(passes).toFixed(2)} ms per block`,
  );
}

const figures = new Map<string, Figures>();
const middle = Array(3).fill(Math.floor(size / CHUNK / 2)).join(".");
try {
  for (const codec of codecs) {
    const f: Figures = {
      pyRead: [],
      pyWrite: [],
      jsRead: { 1: [], 2: [] },
      jsWrite: { 1: [], 2: [] },
      chunkPy: null,
      chunkJs: null,
      ratioPy: BYTES / storedBytes(arrayPath(codec)),
      ratioJs: {},
      equal: {},
    };
    figures.set(codec.name, f);
    if (codec.config !== null) {
      f.chunkPy = pythonCall([
        "chunk",
        arrayPath(codec),
        JSON.stringify(codec.config),
        middle,
      ]) as Figures["chunkPy"];
      f.chunkJs = await jsChunk(codec, middle);
    }
    const pyOut = path.join(outDir, "py-out", `${codec.name}.zarr`);
    for (let round = 1; round <= rounds; round++) {
      fs.rmSync(pyOut, { recursive: true, force: true });
      settle();
      const py = pythonCall(["measure", arrayPath(codec), rawPath, pyOut]) as {
        read_s: number;
        write_s: number;
      };
      fs.rmSync(pyOut, { recursive: true, force: true });
      f.pyRead.push(py.read_s);
      f.pyWrite.push(py.write_s);
      for (const workers of [1, 2]) f.jsRead[workers]!.push(runPipeline("read", codec, workers));
      for (const workers of [1, 2]) f.jsWrite[workers]!.push(runPipeline("write", codec, workers));
      const js = (runs: PipelineRun[]) => {
        const r = runs[runs.length - 1]!;
        const split = r.perWorker.length > 1 ? `, blocks ${r.perWorker.join("+")}` : "";
        return `${r.span.toFixed(2)} s (process ${r.wall.toFixed(2)} s${split})`;
      };
      console.log(
        `  ${codec.label}, round ${round}: Python read ${py.read_s.toFixed(2)} s, write ${
          py.write_s.toFixed(2)
        } s; JS read 1w ${js(f.jsRead[1]!)}, 2w ${js(f.jsRead[2]!)}; JS write 1w ${
          js(f.jsWrite[1]!)
        }, 2w ${js(f.jsWrite[2]!)}`,
      );
    }
    const verified = pythonCall(["verify", rawPath, jsOut(codec, 1), jsOut(codec, 2)]) as {
      equal: boolean;
      chunks: number;
      expected_chunks: number;
    }[];
    for (const [i, workers] of [1, 2].entries()) {
      const v = verified[i]!;
      f.equal[workers] = v.equal && v.chunks === v.expected_chunks;
      f.ratioJs[workers] = BYTES / storedBytes(jsOut(codec, workers));
    }
  }
} finally {
  fs.rmSync(runDir, { recursive: true, force: true });
  fs.rmSync(path.join(outDir, "py-out"), { recursive: true, force: true });
  if (!keep) {
    if (ownOutDir) fs.rmSync(outDir, { recursive: true, force: true });
    for (const workers of [1, 2]) {
      fs.rmSync(path.join(outDir, `js-${workers}w`), { recursive: true, force: true });
    }
  }
}

// ---------------------------------------------------------------------------------------------

const rate = (seconds: readonly number[]) => MB / median(seconds);
const spanRate = (runs: readonly PipelineRun[]) => rate(runs.map((r) => r.span));
const ms = (v: number | undefined) => v === undefined ? "-" : v < 1 ? v.toFixed(2) : v.toFixed(1);

const header = [
  "codec",
  "Py read",
  "JS read 1w / 2w",
  "Py write",
  "JS write 1w / 2w",
  "decode ms Py / JS",
  "encode ms Py / JS",
  "ratio Py / JS 1w / 2w",
  "values",
];
const rows: string[][] = [];
const budgets: { ok: boolean; text: string }[] = [];
for (const codec of codecs) {
  const f = figures.get(codec.name)!;
  const pyRead = rate(f.pyRead);
  const pyWrite = rate(f.pyWrite);
  const jsRead = [spanRate(f.jsRead[1]!), spanRate(f.jsRead[2]!)] as const;
  const jsWrite = [spanRate(f.jsWrite[1]!), spanRate(f.jsWrite[2]!)] as const;
  rows.push([
    codec.label,
    pyRead.toFixed(0),
    `${jsRead[0].toFixed(0)} / ${jsRead[1].toFixed(0)}`,
    pyWrite.toFixed(0),
    `${jsWrite[0].toFixed(0)} / ${jsWrite[1].toFixed(0)}`,
    f.chunkPy === null ? "-" : `${ms(f.chunkPy.decode_ms)} / ${ms(f.chunkJs?.decode)}`,
    f.chunkPy === null ? "-" : `${ms(f.chunkPy.encode_ms)} / ${ms(f.chunkJs?.encode)}`,
    `${f.ratioPy.toFixed(3)} / ${f.ratioJs[1]!.toFixed(3)} / ${f.ratioJs[2]!.toFixed(3)}`,
    f.equal[1] && f.equal[2] ? "same" : "DIFFER",
  ]);
  for (const [what, js, py] of [["read", jsRead, pyRead], ["write", jsWrite, pyWrite]] as const) {
    const floor = py / PER_WORKER;
    budgets.push({
      ok: js[0] >= floor,
      text: `${codec.label}, ${what}, 1 worker: ${js[0].toFixed(0)} MB/s, ${
        (js[0] / py).toFixed(2)
      }x zarr-python's ${py.toFixed(0)} (budget >= ${floor.toFixed(0)} MB/s, 1/${PER_WORKER}x)`,
    });
    if (codec.config !== null) {
      budgets.push({
        ok: js[1] >= SCALING * js[0],
        text: `${codec.label}, ${what}, 2 workers: ${js[1].toFixed(0)} MB/s, ${
          (js[1] / js[0]).toFixed(2)
        }x 1 worker (budget >= ${SCALING}x)`,
      });
    }
  }
  for (const workers of [1, 2]) {
    const off = f.ratioJs[workers]! / f.ratioPy - 1;
    budgets.push({
      ok: Math.abs(off) <= RATIO_TOLERANCE && f.equal[workers]!,
      text: `${codec.label}, written with ${workers} worker${workers > 1 ? "s" : ""}: ${
        f.equal[workers] ? "same values" : "NOT the same values"
      } in zarr-python, ratio ${f.ratioJs[workers]!.toFixed(3)} against ${f.ratioPy.toFixed(3)} (${
        off >= 0 ? "+" : ""
      }${(off * 100).toFixed(2)} %, budget within ${RATIO_TOLERANCE * 100} %)`,
    });
  }
}

const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: readonly string[]) =>
  `| ${cells.map((c, i) => i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)).join(" | ")} |`;
console.log(
  `\nMB/s of float32 values (median of ${rounds}); JS = blockwise pipeline, span of the blocks inside the workers; per-chunk: the middle ${CHUNK}^3 chunk, numcodecs vs zarrita's codec pipeline in ${
    isDeno() ? "Deno" : "Bun"
  }\n`,
);
console.log(line(header));
console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
for (const row of rows) console.log(line(row));
console.log("");
for (const b of budgets) console.log(`${b.ok ? "PASS" : "FAIL"} ${b.text}`);
const failed = budgets.filter((b) => !b.ok).length;
console.log(`\n${budgets.length - failed} of ${budgets.length} budgets pass`);
const loadAfter = os.loadavg();
console.log(`load average at end: ${loadAfter.map((l) => l.toFixed(2)).join(" ")}`);
if (keep) console.log(`kept the arrays blockwise wrote in ${outDir}/js-1w and js-2w`);
process.exit(failed === 0 ? 0 : 1);
