/**
 * Temporary intermediates (issue "Temporary intermediates freed block by block"): a 3-D chain
 * A -> B (temporary, context of one block) -> C over 16^3 blocks, 2 workers per task sharing
 * the machine's cores (with `--budget`: 2 workers in all, `--resources cpu=2`), every block
 * writing 4 KiB and reading its 27 input blocks. Reports
 *   - the peak bytes of B on disk as a fraction of B's total (budget: under 20 %), from the run's
 *     own accounting (`--events` run_end: a block's files count from its result, through its
 *     commit, until they are removed) and checked against the files left (none), and
 *   - the run's wall time against the same chain without `temporary` (budget: under 10 % slower):
 *     runs alternate, each temporary run is compared with the plain run next to it (before it,
 *     then after it, in turn), and the median of those ratios is the figure (a shared machine's speed drifts by more than 10 %
 *     from one minute to the next; neighbouring runs see the same machine).
 *
 * It then times the deletions alone: B's files written, made durable and unlinked on one thread,
 * against the run without `temporary` (what no scheduling can save where an unlink trims the disk).
 *
 * `--dir DIR` puts the runs' files under DIR (default: the system's temporary folder): the
 * filesystem matters. ext4 mounted with `discard` trims a file's blocks inside its unlink once
 * they reached the disk (about 135 µs a file), and each commit barrier (`syncfs`) flushes the
 * disk's cache; without a journal, its allocator also skips recently deleted inodes one by one
 * on every file creation. tmpfs does none of this. On any disk, though, each block reaches its
 * readers a commit barrier (`syncfs`) after its result, and is freed a barrier after theirs;
 * the pacing that keeps the temporary task just ahead of its readers makes them wait for those:
 * a default-mounted ext4 misses the speed budget too (docs/design/TEMPORARIES.md, Limits).
 *
 *   npx bun bench/temporary.ts [--side 16] [--repetitions 8] [--budget] [--dir DIR]
 */

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { runtimeName } from "../lib/runtime/mod.ts";
import { fsyncFile, syncFilesystem } from "../lib/runtime/fs_sync.ts";

const FRACTION_BUDGET = 0.2;
const SLOWDOWN_BUDGET = 0.1;
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const side = arg("--side", 16);
const repetitions = arg("--repetitions", 8);
/** `--budget`: 2 workers in all (`--resources cpu=2`); default: 2 workers per task, sharing the cores. */
const budget = process.argv.includes("--budget");
const BLOCK = 8;
const BYTES = 4096;
const repo = fileURLToPath(new URL("../", import.meta.url));
const dirAt = process.argv.indexOf("--dir");
const base = dirAt > 0 ? path.resolve(process.argv[dirAt + 1]!) : os.tmpdir();
const dir = fs.mkdtempSync(path.join(base, "blockwise-bench-temporary-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));

function pipeline(temporary: boolean, root: string): string {
  const file = path.join(root, "chain.mjs");
  const n = side * BLOCK;
  const task = (id: string, up: string | null) =>
    `{
    id: "${id}", ${up === null ? "" : `upstream: ["${up}"],`}
    totalRoi: { offset: [${up === null ? "0,0,0" : `-${BLOCK},-${BLOCK},-${BLOCK}`}], shape: [${
      up === null ? `${n},${n},${n}` : `${n + 2 * BLOCK},${n + 2 * BLOCK},${n + 2 * BLOCK}`
    }] },
    readRoi: { offset: [${up === null ? "0,0,0" : `-${BLOCK},-${BLOCK},-${BLOCK}`}], shape: [${
      up === null ? `${BLOCK},${BLOCK},${BLOCK}` : `${3 * BLOCK},${3 * BLOCK},${3 * BLOCK}`
    }] },
    writeRoi: { offset: [0,0,0], shape: [${BLOCK},${BLOCK},${BLOCK}] },
    readWriteConflict: false, fit: "shrink", maxWorkers: 2, requires: { cpu: 1 },
    ${id === "b" && temporary ? "temporary: true," : ""}
    outputs: { o: { path: "${id}/{write_offset}.bin" } },
    process(block, state, context) {
      ${up === null ? "" : `readInputs("${up}", block);`}
      fs.writeFileSync(context.outputs.o, PAYLOAD);
    },
  }`;
  fs.writeFileSync(
    file,
    `import fs from "node:fs";
const ROOT = ${JSON.stringify(root)};
const PAYLOAD = new Uint8Array(${BYTES});
const S = ${side};
const N = S * ${BLOCK};
const starts = (o, s) => {
  const out = [];
  for (let v = Math.max(0, o); v < Math.min(N, o + s); v += ${BLOCK}) out.push(v);
  return out;
};
function readInputs(up, block) {
  const [oz, oy, ox] = block.readRoi.offset;
  const [sz, sy, sx] = block.readRoi.shape;
  for (const a of starts(oz, sz)) for (const b of starts(oy, sy)) for (const c of starts(ox, sx)) {
    const f = ROOT + "/" + up + "/" + a + "," + b + "," + c + ".bin";
    if (fs.statSync(f).size !== ${BYTES}) throw new Error("short input " + f);
  }
}
export default { tasks: [${task("a", null)}, ${task("b", "a")}, ${task("c", "b")}] };
`,
  );
  return file;
}

interface Run {
  readonly seconds: number;
  readonly peakBytes: number | null;
  readonly bFiles: number;
}

function run(temporary: boolean, label: string): Run {
  const root = path.join(dir, label);
  fs.rmSync(root, { recursive: true, force: true });
  fs.mkdirSync(root);
  const file = pipeline(temporary, root);
  const events = path.join(root, "events.jsonl");
  const cmd = runtimeName() === "deno"
    ? ["run", "-A", "--quiet", path.join(repo, "main.ts")]
    : [path.join(repo, "main.ts")];
  const started = performance.now();
  const r = spawnSync(process.execPath, [
    ...cmd,
    "run",
    file,
    "--no-progress",
    "--tracking-dir",
    path.join(root, "tracking"),
    ...(budget ? ["--resources", "cpu=2"] : []),
    "--events",
    events,
  ], { encoding: "utf8" });
  const seconds = (performance.now() - started) / 1000;
  if (r.status !== 0) throw new Error(`the ${label} run exited ${r.status}:\n${r.stderr}`);
  const end = fs.readFileSync(events, "utf8").trim().split("\n").map((l) => JSON.parse(l))
    .find((e) => e.event === "run_end");
  const b = end.tasks.find((t: { task: string }) => t.task === "b");
  const bDir = path.join(root, "b");
  // The files stay until the end: removing tens of thousands of them between runs would make
  // every later file creation slower on a journal-less ext4 (its inode allocator skips recently
  // deleted inodes one by one), which is not what this measures.
  return {
    seconds,
    peakBytes: b.temporary?.peak_bytes ?? null,
    bFiles: fs.existsSync(bDir) ? fs.readdirSync(bDir).length : 0,
  };
}

/**
 * The filesystem under `where` as the kernel mounted it (Linux): its type, and for ext4 whether
 * unlinks trim the disk (`discard`) and whether it has a journal; the figures depend on both.
 */
function describeFilesystem(where: string): string {
  try {
    const real = fs.realpathSync(where);
    let best: string[] | null = null;
    for (const line of fs.readFileSync("/proc/mounts", "utf8").split("\n")) {
      const fields = line.split(" ");
      const point = fields[1];
      if (
        point === undefined ||
        !(real === point || real.startsWith(point === "/" ? "/" : `${point}/`))
      ) continue;
      if (best === null || point.length >= best[1]!.length) best = fields;
    }
    if (best === null) return "filesystem unknown";
    const [device, , type, options] = best;
    if (type !== "ext4") return device === type ? type! : `${type} on ${device}`;
    const name = path.basename(device!);
    const journal = fs.existsSync("/proc/fs/jbd2") &&
      fs.readdirSync("/proc/fs/jbd2").some((j) => j.startsWith(`${name}-`));
    const discard = options!.split(",").includes("discard");
    return `ext4 (${discard ? "discard" : "no discard"}, ${
      journal ? "journal" : "no journal"
    }) on ${device}`;
  } catch {
    return "filesystem unknown";
  }
}

console.log(
  `blockwise temporary benchmark (${runtimeName()}, ${os.cpus().length} cores): A -> B (temporary) -> C, ${side}^3 blocks each, ${
    budget ? "2 workers in all" : "2 workers per task"
  }, ${BYTES} B per block, files under ${base}: ${describeFilesystem(base)}`,
);
/**
 * What deleting B costs this filesystem by itself: B's files written and made durable (as every
 * committed block is before its readers free it), then unlinked one by one on this thread. On
 * tmpfs a few milliseconds; on an ext4 mounted with `discard` each unlink trims the disk first.
 */
async function removalSeconds(): Promise<number> {
  const folder = path.join(dir, "removal");
  fs.mkdirSync(folder);
  const payload = new Uint8Array(BYTES);
  const files = Array.from({ length: side ** 3 }, (_, i) => path.join(folder, `${i}.bin`));
  for (const f of files) fs.writeFileSync(f, payload);
  if (!(await syncFilesystem(folder))) { for (const f of files) fsyncFile(f); }
  const started = performance.now();
  for (const f of files) fs.unlinkSync(f);
  return (performance.now() - started) / 1000;
}

const plain: number[] = [];
const temp: Run[] = [];
for (let i = 0; i < repetitions; i++) {
  // Which of a pair runs first alternates, so neither always meets the machine a moment later.
  if (i % 2 === 1) temp.push(run(true, `temp-${i}`));
  plain.push(run(false, `plain-${i}`).seconds);
  if (i % 2 === 0) temp.push(run(true, `temp-${i}`));
}
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const total = side ** 3 * BYTES;
const peak = Math.max(...temp.map((t) => t.peakBytes ?? total));
const fraction = peak / total;
const slowdown = median(temp.map((t, i) => t.seconds / plain[i]!)) - 1;
const left = Math.max(...temp.map((t) => t.bFiles));
const okFraction = fraction < FRACTION_BUDGET && left === 0;
const okSlowdown = slowdown < SLOWDOWN_BUDGET;
console.log(
  `  peak B on disk: ${(peak / 2 ** 20).toFixed(2)} of ${(total / 2 ** 20).toFixed(2)} MiB = ${
    (100 * fraction).toFixed(1)
  } %; B files left after the run: ${left}   budget < ${100 * FRACTION_BUDGET} %: ${
    okFraction ? "PASS" : "FAIL"
  }`,
);
console.log(
  `  wall time: ${median(temp.map((t) => t.seconds)).toFixed(2)} s with temporary vs ${
    median(plain).toFixed(2)
  } s without (medians of ${repetitions}); median of paired ratios ${
    (100 * slowdown).toFixed(1)
  } % slower   budget < ${100 * SLOWDOWN_BUDGET} %: ${okSlowdown ? "PASS" : "FAIL"}`,
);
const removal = await removalSeconds();
console.log(
  `  removing B's ${side ** 3} files alone, once on the disk, takes ${removal.toFixed(2)} s here (${
    (100 * removal / median(plain)).toFixed(1)
  } % of the run without temporary)`,
);
if (!okSlowdown && !describeFilesystem(base).startsWith("tmpfs")) {
  console.log(
    "  on a disk each commit barrier delays the temporary task's readers, and with `discard` every deletion trims the disk: docs/design/TEMPORARIES.md, Limits",
  );
}
if (!okFraction || !okSlowdown) process.exitCode = 1;
