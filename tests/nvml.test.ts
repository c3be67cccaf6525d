/**
 * GPU figures (issue 49 items 3-4): the NVML binding (lib/runtime/nvml.ts) against a stand-in
 * libnvidia-ml.so.1 built from tests/fixtures/nvml/fake_nvml.c with gcc (skipped, with the
 * reason, where gcc is missing), its fallbacks, and the per-block sampler
 * (lib/execute/gpu_sampler.ts) on scripted sequences with a manual clock.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import {
  inProcessGroup,
  isNvmlError,
  type Nvml,
  nvmlDeviceCounter,
  type NvmlError,
  type NvmlOpen,
  openNvml,
  processGroupOf,
} from "../lib/runtime/nvml.ts";
import { runtimeName } from "../lib/runtime/detect.ts";
import {
  devicesFromVisible,
  GpuBlockSampler,
  type GpuReader,
  NO_GPU_FIGURES,
  onceEach,
} from "../lib/execute/gpu_sampler.ts";
import { GpuTimeline } from "../lib/execute/gpu_timeline.ts";
import { GpuFigureWriter } from "../lib/tracking/gpu_figures.ts";
import { TrackingStore } from "../lib/tracking/mod.ts";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import * as fs from "node:fs";
import { ManualClock } from "./fixtures/manual_clock.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { buildFakeNvml, fakeNvmlUnavailable, scriptedNvml } from "./fixtures/nvml/fake_nvml.ts";

const newDir = scratchDirs("nvml-");
const NO_GCC = fakeNvmlUnavailable();
const BUILT = NO_GCC === null ? buildFakeNvml(newDir("build")) : "";
const NEEDS_GCC = NO_GCC === null ? {} : { skip: NO_GCC };
const GIB = 2 ** 30;
const OPEN_CHILD = fileURLToPath(new URL("./fixtures/nvml/open_child.ts", import.meta.url));

const opened: Nvml[] = [];
after(() => {
  for (const n of opened) n.close();
});

/** Opens a scripted stand-in; the session is closed after the file's tests. */
async function open(script: string): Promise<NvmlOpen> {
  const library = scriptedNvml(BUILT, newDir("machine"), script);
  const result = await openNvml({ env: { BLOCKWISE_NVML: library } });
  if (result.ok) opened.push(result.nvml);
  return result;
}

async function openOk(script: string): Promise<Nvml> {
  const result = await open(script);
  if (!result.ok) throw new Error(`the stand-in did not open: ${result.reason}`);
  return result.nvml;
}

function errorOf(value: unknown): string {
  assert.ok(isNvmlError(value), `expected an error value, got ${JSON.stringify(value)}`);
  return (value as NvmlError).error;
}

const TWO_DEVICES = `
device GPU-0a1b2c3d-0000-1111-2222-333344445555
device GPU-9f8e7d6c-0000-1111-2222-333344445555
util 0 10:1 20:2 30:3
memory 0 85899345920 4294967297 5000000000
util 1 97:55
memory 1 17179869184 1024
proc 0 4242 6442450945 7000000001
proc 0 77 12345
`;

describe("NVML binding on the stand-in library", () => {
  it("reads devices, UUIDs, utilisation and memory exactly as scripted", NEEDS_GCC, async () => {
    const nvml = await openOk(TWO_DEVICES);
    assert.equal(nvml.deviceCount(), 2);
    assert.equal(nvml.uuid(0), "GPU-0a1b2c3d-0000-1111-2222-333344445555");
    assert.equal(nvml.uuid(1), "GPU-9f8e7d6c-0000-1111-2222-333344445555");
    // Values above 2^32 check both words of the u64 fields; gpu != memory checks their order.
    assert.deepEqual(nvml.sample(0), {
      utilPct: 10,
      memUtilPct: 1,
      memTotalBytes: 80 * GIB,
      memUsedBytes: 4294967297,
    });
    assert.deepEqual(nvml.sample(0), {
      utilPct: 20,
      memUtilPct: 2,
      memTotalBytes: 80 * GIB,
      memUsedBytes: 5000000000,
    });
    assert.equal((nvml.sample(0) as { utilPct: number }).utilPct, 30);
    assert.equal((nvml.sample(0) as { utilPct: number }).utilPct, 30, "the last step repeats");
    assert.deepEqual(nvml.sample(1), {
      utilPct: 97,
      memUtilPct: 55,
      memTotalBytes: 16 * GIB,
      memUsedBytes: 1024,
    });
  });

  it(
    "reads a process's memory at nvmlProcessInfo_t's offsets (padding after pid)",
    NEEDS_GCC,
    async () => {
      const nvml = await openOk(TWO_DEVICES);
      // The stand-in fills the padding with 0xAB: read at offset 4 this would be garbage.
      assert.equal(nvml.processMemory(0, 4242), 6442450945);
      assert.equal(nvml.processMemory(0, 77), 12345);
      assert.equal(nvml.processMemory(0, 4242), 7000000001);
      assert.equal(nvml.processMemory(0, 31337), 0, "a process without a context holds 0 bytes");
      assert.equal(nvml.processMemory(1, 4242), 0);
    },
  );

  it(
    "adds up the processes a matcher accepts (a command's process group, say)",
    NEEDS_GCC,
    async () => {
      const nvml = await openOk(TWO_DEVICES);
      assert.equal(nvml.processMemory(0, (pid) => pid === 77 || pid === 4242), 6442450945 + 12345);
      assert.equal(nvml.processMemory(0, () => false), 0);
    },
  );

  it("grows the process buffer when NVML answers INSUFFICIENT_SIZE", NEEDS_GCC, async () => {
    const nvml = await openOk(`
device GPU-1
util 0 0:0
memory 0 100 1
extra_procs 0 300
proc 0 4242 987654321
`);
    assert.equal(nvml.processMemory(0, 4242), 987654321);
    assert.equal(nvml.processMemory(0, 900299), 2 ** 20, "the last of 300 extra processes");
  });

  it("says when the driver cannot tell a process's memory", NEEDS_GCC, async () => {
    const nvml = await openOk("device GPU-1\nproc 0 4242 na\n");
    assert.match(errorOf(nvml.processMemory(0, 4242)), /process 4242.*not available/);
  });

  it("a call failing mid-run returns an error value, and the others go on", NEEDS_GCC, async () => {
    const nvml = await openOk(`${TWO_DEVICES}\nfail nvmlDeviceGetUtilizationRates 2 999\n`);
    assert.equal((nvml.sample(0) as { utilPct: number }).utilPct, 10);
    assert.equal((nvml.sample(1) as { utilPct: number }).utilPct, 97);
    const third = nvml.sample(0);
    assert.equal(
      errorOf(third),
      "nvmlDeviceGetUtilizationRates(device 0): Unknown Error (NVML error 999)",
    );
    assert.ok(isNvmlError(nvml.sample(1)));
    assert.equal(nvml.processMemory(0, 4242), 6442450945);
    assert.equal(nvml.deviceCount(), 2);
  });

  it(
    "a device that disappears gives 'GPU is lost' values; the other device still reads",
    NEEDS_GCC,
    async () => {
      const nvml = await openOk(`${TWO_DEVICES}\nlose 1 3\n`);
      assert.ok(!isNvmlError(nvml.sample(1)));
      assert.ok(!isNvmlError(nvml.processMemory(1, 4242)));
      assert.equal(
        errorOf(nvml.sample(1)),
        "nvmlDeviceGetUtilizationRates(device 1): GPU is lost (NVML error 15)",
      );
      assert.match(errorOf(nvml.processMemory(1, 4242)), /GPU is lost/);
      assert.match(errorOf(nvml.uuid(1)), /GPU is lost/);
      assert.equal((nvml.sample(0) as { utilPct: number }).utilPct, 10);
    },
  );

  it("a device index NVML does not have is an error value", NEEDS_GCC, async () => {
    const nvml = await openOk(TWO_DEVICES);
    assert.match(errorOf(nvml.sample(2)), /device 2\): Invalid Argument \(NVML error 2\)/);
    assert.match(errorOf(nvml.sample(-1)), /no device index -1/);
  });

  it("after close every call is an error value, and close is idempotent", NEEDS_GCC, async () => {
    const nvml = await openOk(TWO_DEVICES);
    nvml.close();
    nvml.close();
    assert.match(errorOf(nvml.deviceCount()), /NVML was closed/);
    assert.match(errorOf(nvml.sample(0)), /NVML was closed/);
  });

  it("the device-count adapter gives the count, or null", NEEDS_GCC, async () => {
    assert.equal(nvmlDeviceCounter(await open(TWO_DEVICES)).deviceCount(), 2);
    const failing = await open(`${TWO_DEVICES}\nfail nvmlDeviceGetCount_v2 0 999\n`);
    assert.equal(nvmlDeviceCounter(failing).deviceCount(), null);
    assert.equal(nvmlDeviceCounter({ ok: false, reason: "none" }).deviceCount(), null);
  });
});

describe("process groups", () => {
  it("processGroupOf reads the group /proc gives, null for a process that is gone", {
    ...(process.platform === "linux" ? {} : { skip: "Linux only (/proc)" }),
  }, () => {
    const ps = spawnSync("ps", ["-o", "pgid=", "-p", String(process.pid)], { encoding: "utf8" });
    if (ps.status === 0) assert.equal(processGroupOf(process.pid), Number(ps.stdout.trim()));
    assert.equal(processGroupOf(2 ** 22 + 12345), null);
    const group = processGroupOf(process.pid)!;
    assert.equal(inProcessGroup(group)(process.pid), true);
    assert.equal(inProcessGroup(group + 1)(process.pid), group + 1 === process.pid);
  });
});

describe("NVML fallbacks", () => {
  it("a missing library is a reason naming it, not a throw", async () => {
    const missing = path.join(newDir("missing"), "libnvidia-ml.so.1");
    const result = await openNvml({ env: { BLOCKWISE_NVML: missing } });
    assert.equal(result.ok, false);
    if (!result.ok) assert.match(result.reason, /^cannot load .*libnvidia-ml\.so\.1: /);
  });

  it("BLOCKWISE_NVML=off loads nothing", async () => {
    const result = await openNvml({ env: { BLOCKWISE_NVML: "off" } });
    assert.deepEqual(result, { ok: false, reason: "BLOCKWISE_NVML=off: GPU figures not read" });
  });

  it("nvmlInit_v2 failing gives NVML's own message", NEEDS_GCC, async () => {
    const result = await open("init 9\ndevice GPU-1\n");
    assert.equal(result.ok, false);
    if (!result.ok) {
      assert.match(result.reason, /nvmlInit_v2 in .* failed: Driver Not Loaded \(NVML error 9\)$/);
    }
  });

  it(
    "a run's process finds the stand-in and its script through the environment, and closes it",
    NEEDS_GCC,
    () => {
      const dir = newDir("env");
      const library = scriptedNvml(BUILT, dir, "device GPU-x\n");
      const script = path.join(dir, "elsewhere.txt");
      fs.writeFileSync(script, "device GPU-a\ndevice GPU-b\ndevice GPU-c\n");
      const log = path.join(dir, "calls.log");
      const child = spawnSync(process.execPath, [
        ...(runtimeName() === "deno" ? ["run", "--quiet", "-A"] : []),
        OPEN_CHILD,
      ], {
        encoding: "utf8",
        env: {
          ...process.env,
          BLOCKWISE_NVML: library,
          BLOCKWISE_FAKE_NVML: script,
          BLOCKWISE_FAKE_NVML_LOG: log,
        },
      });
      assert.equal(child.status, 0, child.stderr);
      assert.equal(child.stdout.trim(), "opened: 3 devices");
      assert.deepEqual(fs.readFileSync(log, "utf8").trim().split("\n"), [
        "nvmlInit_v2",
        "nvmlDeviceGetCount_v2",
        "nvmlShutdown",
      ]);
    },
  );

  it("under Deno without --allow-ffi the reason says what to pass", {
    ...(runtimeName() === "deno" ? {} : { skip: "needs Deno" }),
  }, () => {
    const child = spawnSync(process.execPath, [
      "run",
      "--quiet",
      "--allow-read",
      "--allow-env",
      OPEN_CHILD,
    ], { encoding: "utf8", env: { ...process.env, BLOCKWISE_NVML: "libnvidia-ml.so.1" } });
    assert.equal(child.status, 0, child.stderr);
    assert.match(child.stdout, /Deno was not given --allow-ffi/);
  });
});

/** A reader whose figures per call the test lists (the last entry repeats). */
class ScriptedReader implements GpuReader {
  readonly #util: Map<number, (number | string)[]>;
  readonly #memory: Map<number, (number | string)[]>;
  readonly #calls = new Map<string, number>();

  constructor(
    util: Record<number, (number | string)[]>,
    memory: Record<number, (number | string)[]>,
  ) {
    this.#util = new Map(Object.entries(util).map(([k, v]) => [Number(k), v]));
    this.#memory = new Map(Object.entries(memory).map(([k, v]) => [Number(k), v]));
  }

  #next(kind: string, device: number, table: Map<number, (number | string)[]>) {
    const key = `${kind}${device}`;
    const n = this.#calls.get(key) ?? 0;
    this.#calls.set(key, n + 1);
    const steps = table.get(device) ?? ["no such device"];
    return steps[Math.min(n, steps.length - 1)]!;
  }

  sample(device: number) {
    const v = this.#next("u", device, this.#util);
    return typeof v === "string" ? { error: v } : { utilPct: v };
  }

  processMemory(device: number) {
    const v = this.#next("m", device, this.#memory);
    return typeof v === "string" ? { error: v } : v;
  }
}

describe("per-block GPU sampler", () => {
  it("gives the time-weighted mean utilisation and the peak memory over a block", () => {
    const clock = new ManualClock(0);
    const reader = new ScriptedReader({ 0: [10, 20, 30, 40] }, { 0: [1000, 5000, 3000, 2000] });
    const sampler = new GpuBlockSampler(reader, [0], 4242, clock, { intervalMs: 100 });
    sampler.startBlock(); // t=0: 10 (the period before the block: not weighted)
    clock.advance(250); // t=100: 20, t=200: 30
    const figures = sampler.endBlock(); // t=250: 40, standing for 50 ms
    assert.deepEqual(figures, {
      utilPct: (20 * 100 + 30 * 100 + 40 * 50) / 250,
      memBytes: 5000,
      samples: 4,
      problem: null,
    });
    clock.advance(1000);
    assert.equal(sampler.endBlock(), NO_GPU_FIGURES, "no sampling between blocks");
  });

  it("averages a worker's devices per sample and adds up its memory on them", () => {
    const clock = new ManualClock(0);
    const reader = new ScriptedReader(
      { 0: [0, 20, 60], 1: [0, 40, 100] },
      { 0: [10, 30, 20], 1: [5, 5, 50] },
    );
    const sampler = new GpuBlockSampler(reader, [0, 1], 7, clock, { intervalMs: 100 });
    sampler.startBlock();
    clock.advance(100);
    const figures = sampler.endBlock(); // at t=100 again: a zero-length interval
    assert.equal(figures.utilPct, 30);
    assert.equal(figures.memBytes, 70);
    assert.equal(figures.samples, 3);
  });

  it("a block shorter than the clock's tick gets the plain mean of its samples", () => {
    const clock = new ManualClock(0);
    const sampler = new GpuBlockSampler(
      new ScriptedReader({ 0: [30, 50] }, { 0: [8, 9] }),
      [0],
      1,
      clock,
    );
    sampler.startBlock();
    assert.deepEqual(sampler.endBlock(), { utilPct: 40, memBytes: 9, samples: 2, problem: null });
  });

  it("a failing sample is left out, its reason kept and told once", () => {
    const clock = new ManualClock(0);
    const told: string[] = [];
    const reader = new ScriptedReader(
      { 0: [10, "GPU is lost", 50, "GPU is lost"] },
      { 0: [100, 200, "GPU is lost"] },
    );
    const sampler = new GpuBlockSampler(reader, [0], 1, clock, {
      intervalMs: 100,
      onProblem: (t) => told.push(t),
    });
    sampler.startBlock();
    clock.advance(300); // t=100 fails, t=200: 50, t=300 fails
    const figures = sampler.endBlock(); // t=300 again: fails
    assert.deepEqual(figures, { utilPct: 50, memBytes: 200, samples: 5, problem: "GPU is lost" });
    assert.deepEqual(told, ["GPU is lost"]);
  });

  it("a block with no readable sample keeps the arrays' fills (NaN and 0)", () => {
    const clock = new ManualClock(0);
    const sampler = new GpuBlockSampler(
      new ScriptedReader({ 0: ["Not Supported"] }, { 0: ["Not Supported"] }),
      [0],
      1,
      clock,
    );
    sampler.startBlock();
    clock.advance(150);
    const figures = sampler.endBlock();
    assert.ok(Number.isNaN(figures.utilPct));
    assert.equal(figures.memBytes, 0);
    assert.equal(figures.problem, "Not Supported");
  });

  it("onceEach passes each distinct notice once across samplers", () => {
    const seen: string[] = [];
    const once = onceEach((t) => seen.push(t));
    once("a");
    once("b");
    once("a");
    assert.deepEqual(seen, ["a", "b"]);
  });

  it(
    "on the stand-in library: the scripted figures, and a device lost mid-block",
    NEEDS_GCC,
    async () => {
      const nvml = await openOk(`
device GPU-a
device GPU-b
util 0 10:0 20:0 30:0 40:0
memory 0 1000 1
proc 0 4242 1000 5000 3000 2000
util 1 50:0
memory 1 1000 1
proc 1 4242 7
lose 1 3
`);
      const clock = new ManualClock(0);
      const told: string[] = [];
      const sampler = new GpuBlockSampler(nvml, [0, 1], 4242, clock, {
        intervalMs: 100,
        onProblem: (t) => told.push(t),
      });
      sampler.startBlock(); // device 0: 10, device 1: 50 (its last good sample)
      clock.advance(250); // t=100: 20, t=200: 30 (device 1 lost)
      const figures = sampler.endBlock(); // t=250: 40
      assert.equal(figures.utilPct, (20 * 100 + 30 * 100 + 40 * 50) / 250);
      assert.equal(figures.memBytes, 5000);
      assert.equal(
        figures.problem,
        "nvmlDeviceGetUtilizationRates(device 1): GPU is lost (NVML error 15)",
      );
      assert.equal(told.length, 2, "one notice per distinct reason (utilisation, processes)");
    },
  );
});

describe("the devices of CUDA_VISIBLE_DEVICES", () => {
  const directory = {
    deviceCount: () => 3,
    uuid: (i: number) => [`GPU-aaaa-1`, `GPU-bbbb-2`, `GPU-aaab-3`][i] ?? { error: "none" },
  };

  it("reads indices and UUIDs (a unique prefix is enough)", () => {
    assert.deepEqual(devicesFromVisible("2,0", directory), [2, 0]);
    assert.deepEqual(devicesFromVisible("GPU-bbbb-2, GPU-aaab", directory), [1, 2]);
    assert.deepEqual(devicesFromVisible("bbbb", directory), [1]);
  });

  it("no device, and what it cannot resolve", () => {
    assert.deepEqual(devicesFromVisible("", directory), []);
    assert.deepEqual(devicesFromVisible("-1", directory), []);
    assert.match(errorOf(devicesFromVisible(undefined, directory)), /no CUDA_VISIBLE_DEVICES/);
    assert.match(errorOf(devicesFromVisible("3", directory)), /device 3; NVML sees 3/);
    assert.match(errorOf(devicesFromVisible("GPU-aaa", directory)), /matches 2/);
    assert.match(errorOf(devicesFromVisible("MIG-1", directory)), /MIG/);
  });
});

describe("a worker's GPU timeline, asked about windows afterwards", () => {
  function timeline(capacity?: number) {
    const clock = new ManualClock(0);
    const reader = new ScriptedReader({ 0: [10, 20, 30, 40, 50] }, {
      0: [100, 500, 300, 200, 900],
    });
    const t = new GpuTimeline(reader, [0], () => 4242, clock, {
      intervalMs: 100,
      ...(capacity === undefined ? {} : { capacity }),
    });
    t.start(); // t=0: 10
    clock.advance(300); // 100: 20, 200: 30, 300: 40
    t.stop(); // 300 again: 50
    return t;
  }

  it("weights each sample by the part of its period inside the window", () => {
    const figures = timeline().figures(50, 250);
    // 20 over 50..100, 30 over 100..200, 40 (the sample after the end) over 200..250.
    assert.equal(figures.utilPct, (20 * 50 + 30 * 100 + 40 * 50) / 200);
    assert.equal(figures.memBytes, 500, "peak of the samples inside the window");
    assert.equal(figures.samples, 3);
  });

  it("a window between two samples takes the one after it", () => {
    assert.deepEqual(timeline().figures(120, 180), {
      utilPct: 30,
      memBytes: 300,
      samples: 1,
      problem: null,
    });
  });

  it("a window starting at the first sample leaves that sample's period out", () => {
    assert.equal(timeline().figures(0, 100).utilPct, 20);
  });

  it("a window nothing sampled, or one the ring has dropped, gets the fills", () => {
    assert.deepEqual(timeline().figures(400, 500), NO_GPU_FIGURES);
    // A ring of 3 keeps the samples at 200, 300 and 300 (the one stop() took).
    assert.deepEqual(timeline(3).figures(50, 150), NO_GPU_FIGURES);
    assert.equal(timeline(3).figures(250, 300).utilPct, 40);
  });

  it("a worker without a process is not sampled", () => {
    const clock = new ManualClock(0);
    const t = new GpuTimeline(new ScriptedReader({ 0: [10] }, { 0: [1] }), [0], () => null, clock);
    t.start();
    clock.advance(1000);
    t.stop();
    assert.deepEqual(t.figures(0, 1000), NO_GPU_FIGURES);
  });
});

describe("GPU figures in the ledger", () => {
  const layout = new TaskLayout({
    totalRoi: makeRoi([0], [4]),
    readRoi: makeRoi([0], [1]),
    writeRoi: makeRoi([0], [1]),
    fit: "valid",
    readWriteConflict: false,
  });

  async function store(dir: string) {
    return await TrackingStore.open(dir, { taskId: "gpu", layout, resourceTracking: true });
  }

  function ledger(dir: string) {
    const util = fs.readFileSync(path.join(dir, "gpu_util_pct", "c", "0"));
    const mem = fs.readFileSync(path.join(dir, "gpu_mem_bytes", "c", "0"));
    return {
      util: Array.from({ length: 4 }, (_, i) => util.readFloatLE(4 * i)),
      mem: Array.from({ length: 4 }, (_, i) => mem.readBigUInt64LE(8 * i)),
    };
  }

  it(
    "with the stand-in library, the ledger holds the scripted figures exactly",
    NEEDS_GCC,
    async () => {
      const nvml = await openOk(`
device GPU-a
util 0 0:0 33:0 66:0 99:0
memory 0 100 1
proc 0 4242 1 6442450945 7 5
`);
      const dir = path.join(newDir("ledger"), "gpu");
      const s = await store(dir);
      const writer = GpuFigureWriter.of(s)!;
      const clock = new ManualClock(0);
      const sampler = new GpuBlockSampler(nvml, [0], 4242, clock, { intervalMs: 100 });
      sampler.startBlock();
      clock.advance(300);
      const figures = sampler.endBlock(); // the end sample at 300 adds no time
      assert.equal(figures.utilPct, 66);
      assert.ok(writer.write(2, figures.utilPct, figures.memBytes));
      s.close();
      const { util, mem } = ledger(dir);
      assert.equal(util[2], 66);
      assert.equal(mem[2], 6442450945n);
      assert.ok(Number.isNaN(util[0]!) && mem[0] === 0n, "other blocks keep the fills");
    },
  );

  it("without the library the arrays keep NaN and 0, and the reason is there to say once", async () => {
    const opened = await openNvml({ env: { BLOCKWISE_NVML: "/nonexistent/libnvidia-ml.so.1" } });
    assert.equal(opened.ok, false);
    const dir = path.join(newDir("ledger-none"), "gpu");
    const s = await store(dir);
    GpuFigureWriter.of(s)!.write(1, NO_GPU_FIGURES.utilPct, NO_GPU_FIGURES.memBytes);
    s.close();
    const { util, mem } = ledger(dir);
    assert.ok(util.every(Number.isNaN));
    assert.deepEqual(mem, [0n, 0n, 0n, 0n]);
  });

  it("a store without resource tracking has no writer", async () => {
    const dir = path.join(newDir("ledger-off"), "gpu");
    const s = await TrackingStore.open(dir, { taskId: "gpu", layout, resourceTracking: false });
    assert.equal(GpuFigureWriter.of(s), null);
    s.close();
  });
});
