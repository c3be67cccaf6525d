/**
 * GPUs per worker, without a GPU (docs/guide/gpus.md): where the run's device pool comes from
 * (`--resources gpu=...`, CUDA_VISIBLE_DEVICES, AMD's variables, SLURM's allocation, the NVIDIA
 * management library) and in which order; bad ids, duplicates, a pool smaller than one worker's
 * need and `gpu: 0.5` refused with the value and the fix; devices taken whole and given back
 * once a worker's process has exited; what `plan` says; SLURM's request per worker.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  deviceEnvironment,
  DevicePool,
  parseGpuOption,
  parseResources,
  resolveDevicePool,
} from "../lib/schedule/mod.ts";
import {
  describeDevices,
  DeviceSeats,
  deviceSeats,
  taskDevices,
} from "../lib/execute/device_seats.ts";
import type { Executor } from "../lib/execute/executor.ts";
import { InputError, PipelineError } from "../lib/errors.ts";
import { validatePipeline } from "../lib/pipeline/validate.ts";
import type { PipelineConfig } from "../lib/pipeline/spec.ts";
import {
  sbatchArgv,
  sbatchArrayArgv,
  srunArgv,
  withWorkerGpus,
} from "../lib/remote/slurm_commands.ts";
import { defaultLaunch } from "../lib/pipeline/launch_fields.ts";
import type { SlurmLaunchConfig } from "../lib/pipeline/spec.ts";

const ROI = {
  totalRoi: { offset: [0], shape: [8] },
  readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] },
};

function pipeline(tasks: readonly Record<string, unknown>[]): PipelineConfig {
  return validatePipeline({ tasks: tasks.map((t) => ({ ...ROI, ...t })) }, "/tmp/p.js");
}

const predict = (extra: Record<string, unknown> = {}) => ({
  id: "predict",
  maxWorkers: 2,
  requires: { gpu: 1 },
  command: ["true"],
  ...extra,
});

describe("the device pool", () => {
  it("reads --resources gpu as ids or a count, other resources as before", () => {
    assert.deepEqual(parseGpuOption("cpu=8,gpu=0,1,3"), { kind: "ids", ids: ["0", "1", "3"] });
    assert.deepEqual(parseResources("cpu=8,gpu=0,1,3"), { cpu: 8, gpu: 3 });
    assert.deepEqual(parseGpuOption("gpu=0,1,mem=4"), { kind: "ids", ids: ["0", "1"] });
    assert.deepEqual(parseResources("gpu=0,1,mem=4"), { gpu: 2, mem: 4 });
    assert.deepEqual(parseGpuOption("gpu=4"), { kind: "count", count: 4 });
    assert.deepEqual(parseResources("gpu=4"), { gpu: 4 });
    assert.deepEqual(parseGpuOption("gpu=GPU-8f2c"), { kind: "ids", ids: ["GPU-8f2c"] });
    assert.equal(parseGpuOption("cpu=2"), null);
  });

  it("refuses duplicate and malformed ids, quoting them", () => {
    assert.throws(() => parseGpuOption("gpu=0,1,1"), (e: Error) => {
      assert.ok(e instanceof InputError);
      assert.match(
        e.message,
        /GPU 1 is named twice in --resources "gpu=0,1,1"; give each device once/,
      );
      return true;
    });
    assert.throws(
      () => parseResources("gpu=0,1/2"),
      /Invalid resource "1\/2" in --resources "gpu=0,1\/2"/,
    );
    assert.throws(
      () => resolveDevicePool(null, { CUDA_VISIBLE_DEVICES: "0,0" }),
      /GPU 0 is named twice in CUDA_VISIBLE_DEVICES=0,0; .*--resources gpu=0,1/,
    );
    assert.throws(
      () => resolveDevicePool(null, { SLURM_JOB_GPUS: "0,,1" }),
      /Invalid GPU id "" in SLURM_JOB_GPUS=0,,1/,
    );
  });

  it("takes the first source found: --resources, CUDA, AMD, SLURM, the management library", () => {
    const env = {
      CUDA_VISIBLE_DEVICES: "4,5",
      HIP_VISIBLE_DEVICES: "6",
      SLURM_STEP_GPUS: "7",
      SLURM_JOB_GPUS: "8,9",
    };
    const ids = { kind: "ids", ids: ["1", "3"] } as const;
    const nvml = { deviceCount: () => 3 };
    const pool = (gpu: Parameters<typeof resolveDevicePool>[0], e: Record<string, string>) =>
      resolveDevicePool(gpu, e, nvml);
    assert.deepEqual(pool(ids, env)?.ids, ["1", "3"]);
    assert.equal(pool(ids, env)?.source, "--resources gpu=1,3");
    assert.deepEqual(pool(null, env)?.ids, ["4", "5"]);
    assert.equal(pool(null, env)?.source, "CUDA_VISIBLE_DEVICES=4,5");
    const { CUDA_VISIBLE_DEVICES: _c, ...amd } = env;
    assert.deepEqual(pool(null, amd), {
      ids: ["6"],
      source: "HIP_VISIBLE_DEVICES=6",
      amd: "HIP_VISIBLE_DEVICES",
    });
    assert.deepEqual(pool(null, { ROCR_VISIBLE_DEVICES: "2,3" })?.amd, "ROCR_VISIBLE_DEVICES");
    assert.deepEqual(pool(null, { SLURM_STEP_GPUS: "7", SLURM_JOB_GPUS: "8,9" })?.ids, ["7"]);
    assert.deepEqual(pool(null, { SLURM_JOB_GPUS: "8,9" })?.ids, ["8", "9"]);
    // SLURM's NoDevFiles (gres without device files) names nothing: the next source counts.
    assert.deepEqual(pool(null, { CUDA_VISIBLE_DEVICES: "NoDevFiles" })?.ids, ["0", "1", "2"]);
    assert.match(pool(null, {})!.source, /NVIDIA management library \(3 devices\)/);
    assert.equal(resolveDevicePool(null, {}), null, "the default counter knows nothing");
    // An empty CUDA_VISIBLE_DEVICES hides every device: a pool of none.
    assert.deepEqual(pool(null, { CUDA_VISIBLE_DEVICES: "" })?.ids, []);
  });

  it("a count takes the first ids of the next source, or 0..N-1 without one", () => {
    const two = { kind: "count", count: 2 } as const;
    assert.deepEqual(resolveDevicePool(two, {})?.ids, ["0", "1"]);
    const cuda = resolveDevicePool(two, { CUDA_VISIBLE_DEVICES: "3,5,6" });
    assert.deepEqual(cuda?.ids, ["3", "5"]);
    assert.equal(cuda?.source, "--resources gpu=2 (of CUDA_VISIBLE_DEVICES=3,5,6)");
    assert.throws(
      () => resolveDevicePool({ kind: "count", count: 4 }, { CUDA_VISIBLE_DEVICES: "3,5" }),
      /--resources gpu=4 asks for 4 GPUs but CUDA_VISIBLE_DEVICES=3,5 makes 2 visible; lower the count to 2/,
    );
  });

  it("gives each worker whole devices of its own, lowest first, back when it is gone", () => {
    const pool = new DevicePool({ ids: ["0", "1", "3"], source: "test", amd: null });
    assert.deepEqual(pool.take(7, 2), ["0", "1"]);
    assert.equal(pool.take(8, 2), null, "one left");
    assert.deepEqual(pool.take(8, 1), ["3"]);
    assert.equal(pool.free(), 0);
    pool.give(7);
    assert.deepEqual(pool.take(9, 1), ["0"]);
    assert.deepEqual(pool.heldBy(9), ["0"]);
    assert.deepEqual(pool.heldBy(8), ["3"]);
  });

  it("names a worker's devices in CUDA's variable, and AMD's when the pool is AMD's", () => {
    assert.equal(deviceEnvironment(["0"], null, true)["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
    assert.equal(
      deviceEnvironment(["0"], "HIP_VISIBLE_DEVICES", true)["CUDA_DEVICE_ORDER"],
      undefined,
    );
    const ordered = deviceSeats(
      pipeline([predict()]),
      [{ kind: "local" }],
      null,
      { CUDA_VISIBLE_DEVICES: "1", CUDA_DEVICE_ORDER: "FASTEST_FIRST" },
    );
    assert.deepEqual(
      ordered.take(0, 1)?.env,
      { BLOCKWISE_GPU: "1", CUDA_VISIBLE_DEVICES: "1" },
      "theirs kept",
    );
    assert.deepEqual(deviceEnvironment(["0", "2"], null), {
      BLOCKWISE_GPU: "0,2",
      CUDA_VISIBLE_DEVICES: "0,2",
    });
    assert.deepEqual(deviceEnvironment(["1"], "HIP_VISIBLE_DEVICES"), {
      BLOCKWISE_GPU: "1",
      CUDA_VISIBLE_DEVICES: "1",
      HIP_VISIBLE_DEVICES: "1",
    });
    assert.deepEqual(deviceEnvironment(["1"], "ROCR_VISIBLE_DEVICES"), {
      BLOCKWISE_GPU: "1",
      ROCR_VISIBLE_DEVICES: "1",
    });
  });
});

describe("devices per worker", () => {
  it("refuses a pool smaller than one worker's need, or none, before anything runs", () => {
    const p = pipeline([predict({ requires: { gpu: 2 } })]);
    const launches = p.tasks.map((t) => t.launch);
    assert.throws(
      () => deviceSeats(p, launches, { kind: "ids", ids: ["5"] }, {}),
      /Task "predict" requires gpu=2 per worker but the run's GPU pool has 1 \(--resources gpu=5\); give more devices with --resources gpu=ID,ID,\.\.\. or lower the task's requires\.gpu to 1/,
    );
    assert.throws(
      () => deviceSeats(p, launches, null, {}),
      /Task "predict" requires gpu=2 per worker but this run found no GPUs .*name them with --resources gpu=0,1/,
    );
    // Web Workers share this process's devices: without a pool their gpu is not limited, as
    // before pools (with one, it bounds them: see the plan below).
    const js = pipeline([{ id: "js", requires: { cpu: 1, gpu: 1 }, process() {} }]);
    const threads = deviceSeats(js, js.tasks.map((t) => t.launch), null, {});
    assert.equal(threads.pool, null);
    assert.ok(threads.canSeat(0));
    assert.deepEqual(describeDevices(js, threads), []);
    // Tasks without GPUs, or whose workers SLURM places, need no pool here.
    const slurm = pipeline([{ id: "s", requires: { gpu: 1 }, process() {}, launch: "slurm" }]);
    assert.equal(deviceSeats(slurm, slurm.tasks.map((t) => t.launch), null, {}).pool, null);
  });

  it("refuses gpu: 0.5 with the value and the fix", () => {
    assert.throws(() => pipeline([predict({ requires: { gpu: 0.5 } })]), (e: Error) => {
      assert.ok(e instanceof PipelineError);
      assert.match(e.message, /gives gpu: 0\.5, a share of one device/);
      assert.match(e.message, /write gpu: 1 \(or more\)/);
      return true;
    });
  });

  it("holds a dead worker's devices until its process has exited", async () => {
    const p = pipeline([predict()]);
    const seats = deviceSeats(p, p.tasks.map((t) => t.launch), { kind: "count", count: 1 }, {});
    assert.ok(seats.canSeat(0));
    // CUDA numbers devices as nvidia-smi, NVML and SLURM do, unless blockwise's env says else.
    assert.deepEqual(seats.take(0, 4), {
      ids: ["0"],
      env: { BLOCKWISE_GPU: "0", CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: "0" },
    });
    assert.ok(!seats.canSeat(0));
    let exit = (): void => {};
    const exited = new Promise<void>((resolve) => (exit = resolve));
    seats.vacate({ id: 4, task: 0, exited } as unknown as Executor);
    await Promise.resolve();
    assert.ok(!seats.canSeat(0), "its process still runs");
    exit();
    await exited;
    await Promise.resolve();
    assert.ok(seats.canSeat(0), "back once it exited");
    const said: string[] = [];
    seats.announce(["first lines"], (m) => said.push(m));
    assert.deepEqual(seats.take(0, 5)?.ids, ["0"]);
    assert.deepEqual(said, [
      "first lines",
      `Task "predict": worker 5 starts on device 0, given back by worker 4`,
    ]);
  });

  it("plan says which worker gets which device, and how SLURM's get theirs", () => {
    const p = pipeline([
      predict({ maxWorkers: 3 }),
      { id: "js", requires: { gpu: 1 }, process() {} },
      {
        id: "remote",
        requires: { gpu: 2 },
        process() {},
        launch: { kind: "slurm", gpus: "gpus-per-task" },
      },
    ]);
    const launches = p.tasks.map((t) => t.launch);
    const seats = deviceSeats(p, launches, { kind: "ids", ids: ["0", "1"] }, {});
    assert.deepEqual(describeDevices(p, seats, launches), [
      `Task "predict" GPUs: worker 0 -> device 0, worker 1 -> device 1 (pool from --resources gpu=0,1)`,
      `Task "js" GPUs: worker 0 -> device 0 (pool from --resources gpu=0,1); its workers are threads of this process and share its CUDA_VISIBLE_DEVICES, so the pool only bounds how many run at once`,
      `Task "remote" GPUs: SLURM allocates 2 per worker job (--gpus-per-task=2); each worker sees its own`,
    ]);
    assert.ok(seats instanceof DeviceSeats);
    assert.deepEqual(taskDevices(p, seats, launches)[2], {
      task: "remote",
      per_worker: 2,
      by: "slurm",
      request: "--gpus-per-task=2",
    });
    const by = pipeline([
      {
        id: "lsf",
        requires: { gpu: 1 },
        process() {},
        launch: { kind: "command", argv: ["bsub", "{worker}"] },
      },
      { id: "hand", requires: { gpu: 1 }, process() {}, launch: "manual" },
    ]);
    const none = deviceSeats(by, by.tasks.map((t) => t.launch), null, {});
    assert.deepEqual(describeDevices(by, none), [
      `Task "lsf" GPUs: the launch command's jobs must request 1 per worker; each sees what its job was given`,
      `Task "hand" GPUs: workers join by hand: start each with its own CUDA_VISIBLE_DEVICES (1 per worker)`,
    ]);
  });
});

describe("SLURM workers ask for their GPUs", () => {
  const spec = {
    taskId: "predict",
    workerId: 3,
    argv: ["python3", "client.py"],
    env: {},
    logDir: "/tmp/logs",
  };
  const slurm = defaultLaunch("slurm") as SlurmLaunchConfig;

  it("with --gres=gpu:N by default, on every job, array and step", () => {
    const launch = withWorkerGpus("predict", slurm, 1);
    assert.ok(sbatchArgv(launch, spec, "/tmp/l").includes("--gres=gpu:1"));
    const array = sbatchArrayArgv(launch, spec, "/tmp/l", 2, "BLOCKWISE_WORKER_SLOT");
    assert.ok(array.includes("--array=0-1"));
    assert.equal(array.filter((a) => a.startsWith("--gres=")).length, 1);
    assert.ok(array.includes("--gres=gpu:1"), "per element: an array's options apply to each");
    assert.ok(srunArgv(launch, spec, true).includes("--gres=gpu:1"));
    assert.ok(!sbatchArgv(slurm, spec, "/tmp/l").some((a) => a.includes("gpu")), "none without");
  });

  it("with --gpus-per-task=N when the launch says so; other gres kept beside it", () => {
    const perTask = withWorkerGpus("predict", { ...slurm, gpus: "gpus-per-task" }, 2);
    const argv = sbatchArgv(perTask, spec, "/tmp/l");
    assert.ok(argv.includes("--gpus-per-task=2"));
    assert.ok(!argv.some((a) => a.startsWith("--gres")));
    const both = sbatchArgv(
      withWorkerGpus("predict", { ...slurm, gres: "shard:1" }, 1),
      spec,
      "/l",
    );
    assert.ok(both.includes("--gres=shard:1,gpu:1"));
  });

  it("keeps a typed gres that agrees with requires.gpu, refuses one that does not", () => {
    const typed = withWorkerGpus("predict", { ...slurm, gres: "gpu:a100:2" }, 2);
    assert.ok(sbatchArgv(typed, spec, "/l").includes("--gres=gpu:a100:2"));
    assert.throws(
      () => withWorkerGpus("predict", { ...slurm, gres: "gpu:a100:1" }, 2),
      /Task "predict" requires gpu=2 per worker but its launch\.gres "gpu:a100:1" asks for 1; make the two agree \(e\.g\. gres: "gpu:a100:2"\)/,
    );
  });

  it("refuses an unknown gpus option, naming it", () => {
    assert.throws(
      () => pipeline([{ id: "s", process() {}, launch: { kind: "slurm", gpus: "all" } }]),
      /option "gpus" must be "gres" .* or "gpus-per-task" .*; got "all"/,
    );
  });
});
