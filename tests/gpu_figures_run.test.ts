/**
 * GPU figures through a whole run (issue 49 item 3, docs/design/GPU.md "Integration"), against
 * the stand-in libnvidia-ml.so.1 (tests/fixtures/nvml/fake_nvml.c, built with gcc: skipped, with
 * the reason, where gcc is missing). The blocks write their own pid and the device memory they
 * "hold" into the file the stand-in lists processes from (`proc_file`), so the ledger must hold,
 * per block, the scripted utilisation of its worker's device and the bytes its process wrote.
 * Also the fallbacks: no library, a call failing mid-run, a device falling off the bus, and no
 * NVML at all when resource tracking is off.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { pythonMissing } from "./fixtures/python_peer.ts";
import { type CliResult, describeRun, runArgs, runCli } from "./fixtures/tracking/harness.ts";
import { buildFakeNvml, fakeNvmlUnavailable, scriptedNvml } from "./fixtures/nvml/fake_nvml.ts";

const newDir = scratchDirs("gpu-figures");
const noGcc = fakeNvmlUnavailable();
const noPython = pythonMissing();
const GCC = { timeout: 120_000, ...(noGcc === null ? {} : { skip: noGcc }) };
const PYTHON = {
  timeout: 120_000,
  ...(noGcc !== null ? { skip: noGcc } : noPython !== null ? { skip: noPython } : {}),
};

let built: string | null = null;
function stand_in(): string {
  built ??= buildFakeNvml(newDir("build"));
  return built;
}
after(() => {
  built = null;
});

const GIB4 = 4294967296; // 2^32: figures above it check both words of the uint64 cells
const UTIL = ["37", "81"];

/** Two devices, utilisation 37 % and 81 %, processes listed from `procs<dev>.txt` in `dir`. */
function script(dir: string, extra = ""): string {
  return `device GPU-aaaa0000-0000-0000-0000-000000000000
device GPU-bbbb0000-0000-0000-0000-000000000000
util 0 ${UTIL[0]}:5
util 1 ${UTIL[1]}:9
memory 0 17179869184 1000
memory 1 17179869184 1000
proc_file 0 ${path.join(dir, "procs0.txt")}
proc_file 1 ${path.join(dir, "procs1.txt")}
${extra}`;
}

/** What a block of block id `id` holds in the command test: above 2^32, its own per block. */
const commandBytes = (id: number) => (id + 1) * GIB4 + 12345;

/**
 * A gpu: 1 command task of `n` blocks, 2 workers. Each block logs "id device" and runs a child
 * (the command's process group, as `sh -c python ...` would) that lists itself with its bytes.
 */
function commandPipeline(dir: string, n: number): string {
  const sh = path.join(dir, "block.sh");
  fs.writeFileSync(
    sh,
    `bytes=$(( (BLOCKWISE_BLOCK_ID + 1) * ${GIB4} + 12345 ))
dev=$CUDA_VISIBLE_DEVICES
echo "$BLOCKWISE_BLOCK_ID $dev" >> ${dir}/blocks.log
sh -c 'printf "%s %s\\n" $$ '"$bytes"' > ${dir}/procs'"$dev"'.tmp; mv ${dir}/procs'"$dev"'.tmp ${dir}/procs'"$dev"'.txt; sleep 0.3'
`,
  );
  return pipeline(dir, n, `command: ["sh", ${JSON.stringify(sh)}]`);
}

function pipeline(dir: string, n: number, body: string): string {
  const file = path.join(dir, "pipeline.mjs");
  fs.writeFileSync(
    file,
    `export default { tasks: [{
  id: "predict",
  totalRoi: { offset: [0], shape: [${n}] }, readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false,
  maxWorkers: 2, requires: { gpu: 1 }, ${body},
}] };\n`,
  );
  return file;
}

/** Block id -> device, from the blocks' log. */
function devicesOf(dir: string): Map<number, number> {
  const lines = fs.readFileSync(path.join(dir, "blocks.log"), "utf8").trim().split("\n");
  return new Map(lines.map((l) => l.split(" ").map(Number) as [number, number]));
}

/** Block id -> how many blocks its worker had run with it (the Python test's third column). */
function nthOf(dir: string): Map<number, number> {
  const lines = fs.readFileSync(path.join(dir, "blocks.log"), "utf8").trim().split("\n");
  return new Map(lines.map((l) => l.split(" ").map(Number)).map((f) => [f[0]!, f[2]!]));
}

/** The ledger's two GPU arrays of task "predict" (one chunk: the tasks here are small). */
function ledger(tracking: string, n: number): { util: number[]; mem: number[] } {
  const store = path.join(tracking, "predict");
  const util = fs.readFileSync(path.join(store, "gpu_util_pct", "c", "0"));
  const mem = fs.readFileSync(path.join(store, "gpu_mem_bytes", "c", "0"));
  return {
    util: Array.from({ length: n }, (_, i) => util.readFloatLE(4 * i)),
    mem: Array.from({ length: n }, (_, i) => Number(mem.readBigUInt64LE(8 * i))),
  };
}

/** The environment of a run against the stand-in in `dir`. */
function nvmlEnv(library: string, more: Record<string, string> = {}): Record<string, string> {
  return { BLOCKWISE_NVML: path.resolve(library), ...more };
}

/** A pool named on the command line when the machine's environment would give one first. */
function poolArgs(): string[] {
  const named = ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"]
    .concat(["SLURM_STEP_GPUS", "SLURM_JOB_GPUS"])
    .some((v) => process.env[v] !== undefined);
  return named ? ["--resources", "gpu=2"] : [];
}

function gpuLines(r: CliResult): string[] {
  return r.stderr.split("\n").filter((l) => l.startsWith("GPU figures"));
}

interface StatusJson {
  readonly stores: { readonly resources: { readonly gpu: GpuSummary | null } | null }[];
}
interface GpuSummary {
  readonly blocks_measured: number;
  readonly util_pct_mean: number | null;
  readonly mem_bytes_max: number;
}

async function statusJson(tracking: string): Promise<StatusJson> {
  const r = await runCli(["status", tracking, "--json"]);
  assert.equal(r.code, 0, describeRun(r));
  return JSON.parse(r.stdout) as StatusJson;
}

async function statusGpu(tracking: string): Promise<GpuSummary> {
  const gpu = (await statusJson(tracking)).stores[0]!.resources!.gpu;
  assert.ok(gpu !== null, "status --json has the GPU figures");
  return gpu;
}

async function run(dir: string, file: string, env: Record<string, string>, extra: string[] = []) {
  const tracking = path.join(dir, "tracking");
  const r = await runCli(runArgs(file, tracking, ["--resource-tracking", ...extra]), {
    cwd: dir,
    env,
  });
  assert.equal(r.code, 0, describeRun(r));
  return { r, tracking };
}

describe("GPU figures in a run, against the stand-in NVML", () => {
  it(
    "a gpu: 1 command task: each block's utilisation and its process group's peak memory",
    GCC,
    async () => {
      const dir = newDir("command");
      const library = scriptedNvml(stand_in(), dir, script(dir));
      const { r, tracking } = await run(dir, commandPipeline(dir, 6), nvmlEnv(library), poolArgs());
      if (poolArgs().length === 0) {
        assert.match(r.stderr, /pool from the NVIDIA management library \(2 devices\)/);
      }
      assert.deepEqual(gpuLines(r), [], "nothing to say when every figure was read");
      const devices = devicesOf(dir);
      const { util, mem } = ledger(tracking, 6);
      for (let id = 0; id < 6; id++) {
        const device = devices.get(id)!;
        assert.equal(util[id], Number(UTIL[device]), `block ${id} on device ${device}: ${util}`);
        assert.equal(mem[id], commandBytes(id), `block ${id}'s memory: ${mem}`);
      }
      assert.equal(new Set(devices.values()).size, 2, "both devices ran blocks");
      // status sums them up: text and --json.
      const gpu = await statusGpu(tracking);
      assert.equal(gpu.blocks_measured, 6);
      assert.equal(gpu.util_pct_mean, util.reduce((a, b) => a + b, 0) / 6);
      assert.equal(gpu.mem_bytes_max, commandBytes(5));
      const text = await runCli(["status", path.join(tracking, "predict")]);
      assert.match(
        text.stdout,
        /GPU: mean utilisation \d+\.\d % over 6 blocks, peak device memory /,
      );
    },
  );

  it(
    "a Python task with 2 workers: its devices' utilisation and its process's memory",
    PYTHON,
    async () => {
      const dir = newDir("python");
      const library = scriptedNvml(stand_in(), dir, script(dir));
      fs.writeFileSync(
        path.join(dir, "task.py"),
        `import os, time

done = 0

def process(block):
    # This worker's process "holds" more device memory with each block it runs, from 20 ms
    # into the block on: a block's figure is its own only if its window is where it ran. (Not
    # from its first instant: the window's ends are this process's clock read by the
    # scheduler's, and a sample a fraction of a millisecond after the previous block ended
    # could fall inside that block's window; seen once in CI under Deno.)
    global done
    time.sleep(0.02)
    done += 1
    dev = int(os.environ["CUDA_VISIBLE_DEVICES"])
    folder = ${JSON.stringify(dir)}
    with open(os.path.join(folder, "procs%d.tmp" % dev), "w") as f:
        f.write("%d %d\\n" % (os.getpid(), (dev + 3) * ${GIB4} + 1000 * done))
    os.rename(os.path.join(folder, "procs%d.tmp" % dev), os.path.join(folder, "procs%d.txt" % dev))
    with open(os.path.join(folder, "blocks.log"), "a") as f:
        f.write("%d %d %d\\n" % (block.id, dev, done))
    time.sleep(0.23)
`,
      );
      const file = pipeline(dir, 6, `python: { module: "task.py" }`);
      const { r, tracking } = await run(dir, file, nvmlEnv(library), ["--resources", "gpu=2"]);
      assert.deepEqual(gpuLines(r), []);
      const devices = devicesOf(dir);
      const { util, mem } = ledger(tracking, 6);
      for (let id = 0; id < 6; id++) {
        const device = devices.get(id)!;
        assert.equal(util[id], Number(UTIL[device]), `block ${id} on device ${device}: ${util}`);
        const nth = nthOf(dir).get(id)!;
        assert.equal(mem[id], (device + 3) * GIB4 + 1000 * nth, `block ${id}'s memory: ${mem}`);
      }
      assert.equal(new Set(devices.values()).size, 2, "both workers ran blocks");
    },
  );

  it(
    "a JavaScript task's threads: their devices' utilisation, no memory of their own",
    GCC,
    async () => {
      const dir = newDir("threads");
      const library = scriptedNvml(stand_in(), dir, script(dir));
      // The blocks list the scheduler's own process (theirs too) with memory on both devices:
      // a thread's figure must not claim it.
      const file = pipeline(
        dir,
        6,
        `process(block) {
    for (const d of [0, 1]) {
      fs.writeFileSync(${
          JSON.stringify(dir)
        } + "/procs" + d + ".txt", process.pid + " 5000000000\\n");
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 250);
  }`,
      );
      fs.writeFileSync(
        file,
        `import * as fs from "node:fs";\nimport process from "node:process";\n` +
          fs.readFileSync(file, "utf8"),
      );
      const { r, tracking } = await run(dir, file, nvmlEnv(library), ["--resources", "gpu=2"]);
      assert.deepEqual(gpuLines(r), []);
      const { util, mem } = ledger(tracking, 6);
      assert.ok(util.every((u) => u === 37 || u === 81), `each block its worker's device: ${util}`);
      assert.deepEqual(mem, [0, 0, 0, 0, 0, 0]);
    },
  );

  it("without the library: NaN and 0, and the run says once why", GCC, async () => {
    const dir = newDir("missing");
    const { r, tracking } = await run(
      dir,
      commandPipeline(dir, 4),
      nvmlEnv(path.join(dir, "no-such-libnvidia-ml.so.1")),
      ["--resources", "gpu=2"],
    );
    const lines = gpuLines(r);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(
      lines[0]!,
      /^GPU figures: not recorded: cannot load .*no-such-libnvidia-ml\.so\.1: .*\(install the NVIDIA driver, or set BLOCKWISE_NVML to the library's path\)$/,
    );
    const { util, mem } = ledger(tracking, 4);
    assert.ok(util.every(Number.isNaN), `${util}`);
    assert.deepEqual(mem, [0, 0, 0, 0]);
    assert.equal((await statusJson(tracking)).stores[0]!.resources!.gpu, null);
  });

  it(
    "a call failing mid-run: later blocks keep what could be read, each reason said once",
    GCC,
    async () => {
      const dir = newDir("failing");
      // After 6 successes every utilisation call fails; memory is still read.
      const library = scriptedNvml(
        stand_in(),
        dir,
        script(dir, "fail nvmlDeviceGetUtilizationRates 6 999\n"),
      );
      const { r, tracking } = await run(dir, commandPipeline(dir, 6), nvmlEnv(library), [
        "--resources",
        "gpu=2",
      ]);
      // Once per distinct reason: the message names the device, so at most one line each.
      const lines = gpuLines(r);
      assert.ok(lines.length >= 1 && lines.length <= 2, r.stderr);
      assert.equal(new Set(lines).size, lines.length, "each reason once");
      for (const line of lines) {
        assert.match(line, /nvmlDeviceGetUtilizationRates\(device [01]\): .*NVML error 999/);
      }
      const devices = devicesOf(dir);
      const { util, mem } = ledger(tracking, 6);
      for (let id = 0; id < 6; id++) {
        const device = devices.get(id)!;
        assert.ok(Number.isNaN(util[id]!) || util[id] === Number(UTIL[device]), `${util}`);
        assert.equal(mem[id], commandBytes(id), `memory is still read: ${mem}`);
      }
      const order = [...devices.keys()];
      assert.equal(util[order[0]!], Number(UTIL[devices.get(order[0]!)!]), "the first block read");
      assert.ok(Number.isNaN(util[order.at(-1)!]!), `the last block could not: ${util}`);
    },
  );

  it(
    "a device falling off the bus: its blocks get NaN and 0, the other's are unaffected",
    GCC,
    async () => {
      const dir = newDir("lost");
      const library = scriptedNvml(stand_in(), dir, script(dir, "lose 1 4\n"));
      const { r, tracking } = await run(dir, commandPipeline(dir, 6), nvmlEnv(library), [
        "--resources",
        "gpu=2",
      ]);
      const lines = gpuLines(r);
      assert.ok(
        lines.length >= 1 && lines.every((l) => /device 1\): GPU is lost/.test(l)),
        r.stderr,
      );
      assert.equal(new Set(lines).size, lines.length, "each reason once");
      const devices = devicesOf(dir);
      const { util, mem } = ledger(tracking, 6);
      let lost = 0;
      for (let id = 0; id < 6; id++) {
        if (devices.get(id) === 0) {
          assert.equal(util[id], 37, `${util}`);
          assert.equal(mem[id], commandBytes(id), `${mem}`);
        } else if (Number.isNaN(util[id]!)) {
          assert.equal(mem[id], 0, `${mem}`);
          lost++;
        }
      }
      assert.ok(lost >= 1, `device 1's later blocks were not read: ${util}`);
    },
  );

  it("opens no NVML when resource tracking is off, or no task requires GPUs", GCC, async () => {
    const dir = newDir("off");
    const library = scriptedNvml(stand_in(), dir, script(dir));
    const log = path.join(dir, "calls.log");
    const env = nvmlEnv(library, { BLOCKWISE_FAKE_NVML_LOG: log });
    const file = commandPipeline(dir, 2);
    const tracking = path.join(dir, "tracking");
    const off = await runCli(runArgs(file, tracking, ["--resources", "gpu=2"]), { cwd: dir, env });
    assert.equal(off.code, 0, describeRun(off));
    assert.equal(fs.existsSync(log), false, "tracking off: no NVML call");
    assert.deepEqual(gpuLines(off), []);
    const plain = path.join(dir, "plain.mjs");
    fs.writeFileSync(
      plain,
      `export default { tasks: [{ id: "cpu", totalRoi: { offset: [0], shape: [2] },
  readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
  command: ["true"] }] };\n`,
    );
    const cpu = await runCli(runArgs(plain, tracking, ["--resource-tracking"]), { cwd: dir, env });
    assert.equal(cpu.code, 0, describeRun(cpu));
    assert.equal(fs.existsSync(log), false, "no task requires GPUs: no NVML call");
    const serial = await runCli(runArgs(file, tracking, ["--resource-tracking", "--serial"]), {
      cwd: dir,
      env,
    });
    assert.equal(serial.code, 0, describeRun(serial));
    assert.deepEqual(gpuLines(serial), [
      "GPU figures: not recorded: --serial runs no worker to read them for",
    ]);
    assert.equal(fs.existsSync(log), false, "a serial run: no NVML call");
    // The control: with tracking on, NVML is opened once and shut down at the end.
    await run(dir, file, env, ["--resources", "gpu=2"]);
    const calls = fs.readFileSync(log, "utf8").trim().split("\n");
    assert.equal(calls.filter((c) => c === "nvmlInit_v2").length, 1);
    assert.equal(calls.at(-1), "nvmlShutdown");
  });
});
