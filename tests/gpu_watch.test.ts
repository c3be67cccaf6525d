/**
 * GpuWatch (lib/execute/gpu_watch.ts) on a manual clock with a scripted NVML, no library: which
 * executors it watches, that it samples only workers holding blocks, drops dead ones and stops
 * its timer, and tells each problem once.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { GpuWatch } from "../lib/execute/gpu_watch.ts";
import type { Executor, ExecutorSpec, ExecutorState } from "../lib/execute/executor.ts";
import type { ProcessMatch } from "../lib/runtime/nvml.ts";
import { InFlightQueue } from "../lib/execute/in_flight.ts";
import { ManualClock } from "./fixtures/manual_clock.ts";

/** Two devices; utilisation 40 and 90 %, the process 7 holding 1000 bytes on each. */
class Nvml {
  samples = 0;
  lost = new Set<number>();
  deviceCount() {
    return 2;
  }
  uuid(i: number) {
    return `GPU-${i}`;
  }
  sample(i: number) {
    this.samples++;
    if (this.lost.has(i)) {
      return { error: `nvmlDeviceGetUtilizationRates(device ${i}): GPU is lost` };
    }
    return { utilPct: i === 0 ? 40 : 90 };
  }
  processMemory(i: number, pid: ProcessMatch) {
    if (this.lost.has(i)) {
      return { error: `nvmlDeviceGetComputeRunningProcesses_v3(device ${i}): GPU is lost` };
    }
    const match = typeof pid === "number" ? (p: number) => p === pid : pid;
    return match(7) ? 1000 : 0;
  }
}

class FakeExecutor implements Partial<Executor> {
  readonly inFlight = new InFlightQueue();
  state: ExecutorState = "ready";
  constructor(readonly spec: ExecutorSpec) {}
  gpuProcess(): ProcessMatch {
    return 7;
  }
}

function spec(id: number, devices: string[] | null, task = 0): ExecutorSpec {
  return {
    id,
    task,
    ...(devices === null ? {} : { devices: { ids: devices, env: {} } }),
  } as unknown as ExecutorSpec;
}

function setUp(measured = (_t: number) => true) {
  const clock = new ManualClock(0);
  const nvml = new Nvml();
  const notices: string[] = [];
  const watch = new GpuWatch(nvml, clock, (t) => notices.push(t), { measured });
  const factory = watch.factory((s) => new FakeExecutor(s) as unknown as Executor);
  return { clock, nvml, notices, watch, factory };
}

function busy(executor: Executor): void {
  executor.inFlight.push(0, 1, 0);
}

describe("GpuWatch", () => {
  it("watches executors with devices of measured tasks only, and passes sampleGpu to them", () => {
    const { watch, factory } = setUp((t) => t === 0);
    const a = factory(spec(0, ["1"]));
    const b = factory(spec(1, null));
    const c = factory(spec(2, ["0"], 1));
    assert.notEqual(watch.of(a), null);
    assert.equal(watch.of(b), null);
    assert.equal(watch.of(c), null, "task 1 keeps no resource figures");
    assert.equal(typeof (a as unknown as FakeExecutor).spec.sampleGpu, "function");
    assert.equal((b as unknown as FakeExecutor).spec.sampleGpu, undefined);
    watch.close();
  });

  it("samples a worker only while it holds blocks; its block's figures are its device's", () => {
    const { clock, nvml, watch, factory } = setUp();
    const a = factory(spec(0, ["1"]));
    clock.advance(500);
    assert.equal(nvml.samples, 0, "idle: not sampled");
    busy(a);
    clock.advance(500);
    assert.equal(nvml.samples, 5);
    const f = watch.of(a)!.figures(500, 1000);
    assert.equal(f.utilPct, 90);
    assert.equal(f.memBytes, 1000);
    watch.close();
  });

  it("drops a dead executor and stops its timer when none is left", () => {
    const { clock, nvml, watch, factory } = setUp();
    const a = factory(spec(0, ["0"]));
    busy(a);
    clock.advance(200);
    (a as unknown as FakeExecutor).state = "dead";
    clock.advance(100);
    assert.equal(watch.size, 0);
    const before = nvml.samples;
    const b = factory(spec(1, ["0"])); // a new worker starts the timer again
    busy(b);
    clock.advance(300);
    assert.equal(nvml.samples, before + 3);
    watch.close();
    clock.advance(300);
    assert.equal(nvml.samples, before + 3, "closed: no more samples");
  });

  it("tells each problem once, naming the worker for a device list NVML cannot read", () => {
    const { clock, nvml, notices, watch, factory } = setUp();
    const bad = factory(spec(0, ["MIG-abc"]));
    assert.equal(watch.of(bad), null);
    const a = factory(spec(1, ["1"]));
    busy(a);
    nvml.lost.add(1);
    clock.advance(1000);
    assert.deepEqual(notices, [
      "GPU figures: worker 0: CUDA_VISIBLE_DEVICES names MIG device MIG-abc; GPU figures need whole GPUs; the blocks record what could be read (NaN and 0 when nothing)",
      "GPU figures: nvmlDeviceGetUtilizationRates(device 1): GPU is lost; the blocks record what could be read (NaN and 0 when nothing)",
    ]);
    const f = watch.of(a)!.figures(0, 1000);
    assert.ok(Number.isNaN(f.utilPct));
    assert.equal(f.memBytes, 0);
    watch.close();
  });
});
