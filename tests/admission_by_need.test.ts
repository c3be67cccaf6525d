/**
 * Admission by need through `RemoteWorkers`: while a task waits for a worker but its demand
 * says the admitted ones idle, a worker that connects is held back (unread, its executor still
 * starting, the notice said once with the task's busy share), and it takes its place as soon as
 * the demand says yes. Once no executor waits for a connection any more (the run retired the
 * one still starting), a held worker is told the run needs no more workers and exits cleanly.
 * Before a task's first measure, it takes its first workers and holds the next until the
 * measure comes or FIRST_MEASURE_MS passes.
 * Real workers join by hand in this process (`runRemoteWorker --secret-file`), on loopback.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import { buildPipelineGraph, localExecutorFactory } from "../lib/execute/mod.ts";
import type {
  Executor,
  ExecutorEvents,
  ExecutorSpec,
  TaskDemand,
} from "../lib/execute/executor.ts";
import { SYSTEM_CLOCK } from "../lib/execute/run_clock.ts";
import { RemoteWorkers } from "../lib/remote/remote_workers.ts";
import { runRemoteWorker } from "../lib/remote/remote_worker.ts";
import { formatAddress } from "../lib/remote/address.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("admission");

class StubDemand implements TaskDemand {
  open = false;
  busyShare = 0.02;
  decided = true;
  wanted(): boolean {
    return this.open;
  }
}

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(ok(), `timed out waiting for ${what}`);
}

async function setUp(options: { firstClaims?: number; firstMeasureMs?: number } = {}) {
  const dir = newDir("manual");
  const file = path.join(dir, "pipeline.mjs");
  fs.writeFileSync(
    file,
    `export default { tasks: [{ id: "a", totalRoi: { offset: [0], shape: [100] },
       readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
       maxWorkers: 2, launch: "manual", process() {} }] };\n`,
  );
  const pipeline = await loadPipeline(file);
  const graph = buildPipelineGraph(pipeline);
  const notices: string[] = [];
  const remote = await RemoteWorkers.open({
    pipeline,
    logDir: path.join(dir, "logs"),
    runId: "admission",
    log: (m) => notices.push(m),
    ...options,
  });
  assert.ok(remote !== null);
  const ready: Executor[] = [];
  const events = {
    ready: (e: Executor) => ready.push(e),
    crashed: () => {},
    setupFailed: () => {},
    output: () => {},
  } as unknown as ExecutorEvents;
  const demand = new StubDemand();
  const factory = remote.factory(localExecutorFactory);
  let id = 0;
  const launch = (): Executor =>
    factory(
      {
        id: id++,
        task: 0,
        config: pipeline.tasks[0]!,
        layout: graph.layouts[0]!,
        pipelinePath: pipeline.path,
        measure: false,
        outputs: [],
        runId: "admission",
        clock: SYSTEM_CLOCK,
        events,
        demand,
      } satisfies ExecutorSpec,
    );
  const secretFile = notices.join("\n").match(/--secret-file (\S+)/)?.[1];
  assert.ok(secretFile !== undefined, notices.join("\n"));
  const join = () => {
    const log: string[] = [];
    const end = runRemoteWorker({
      connect: formatAddress(remote.connectAddress),
      secretFile,
      env: {},
      log: (m) => log.push(m),
    });
    return { end, log };
  };
  return { remote, notices, ready, demand, launch, join };
}

describe("admission by need, through the run's remote workers", () => {
  it("holds back a worker while its task's workers idle, and admits it once they are busy", async () => {
    const { remote, notices, ready, demand, launch, join } = await setUp();
    try {
      const executor = launch();
      const worker = join();
      await until("the worker to be held back", () => remote.server.waiting === 1);
      assert.equal(remote.server.holding, true, "its executor's connect timeout waits");
      assert.equal(executor.state, "starting");
      const held = notices.filter((n) => /^Holding back/.test(n));
      assert.deepEqual(held, [
        `Holding back the workers that connect from now on: the admitted ones spend under 50 % of their time in blocks (task "a": 2 %), so more would not make the run faster (the scheduler or the ready blocks set its pace); they are admitted as soon as the admitted ones are busier`,
      ]);
      demand.open = true;
      await until("the worker to set up", () => ready.includes(executor));
      assert.equal(remote.server.waiting, 0);
      executor.stop();
      const end = await worker.end;
      assert.equal(end.stopped, true, `${end.reason}\n${worker.log.join("\n")}`);
    } finally {
      await remote.close();
    }
  });

  it("takes its first workers before any measure, and holds the next until the measure comes", async () => {
    const { remote, notices, ready, demand, launch, join } = await setUp({
      firstClaims: 1,
      firstMeasureMs: 60_000,
    });
    try {
      demand.open = true;
      demand.decided = false; // no window has ended: the task has no results yet
      const executors = [launch(), launch()];
      const first = join();
      await until("the first worker to set up", () => ready.length === 1);
      const second = join();
      await until("the second worker to be held back", () => remote.server.waiting === 1);
      assert.equal(ready.length, 1);
      assert.ok(
        notices.includes(
          `Task "a" took its first 1 worker; the next wait, connected, until its first blocks show whether it can use them (60 s at most)`,
        ),
        notices.join("\n"),
      );
      assert.ok(!notices.some((n) => /^Holding back/.test(n)), "not for lack of need");
      demand.decided = true; // the first window says the workers are busy
      await until("the second worker to set up", () => ready.length === 2);
      for (const e of executors) e.stop();
      for (const w of [first, second]) assert.equal((await w.end).stopped, true);
    } finally {
      await remote.close();
    }
  });

  it("lets the next workers in without a measure once FIRST_MEASURE_MS has passed", async () => {
    const { ready, demand, launch, join, remote } = await setUp({
      firstClaims: 1,
      firstMeasureMs: 300,
    });
    try {
      demand.open = true;
      demand.decided = false; // blocks so long that no window ends
      const executors = [launch(), launch()];
      const first = join();
      await until("the first worker to set up", () => ready.length === 1);
      const firstAt = Date.now();
      const second = join();
      await until("the second worker to set up", () => ready.length === 2);
      assert.ok(Date.now() - firstAt >= 250, `admitted after ${Date.now() - firstAt} ms`);
      for (const e of executors) e.stop();
      for (const w of [first, second]) assert.equal((await w.end).stopped, true);
    } finally {
      await remote.close();
    }
  });

  it("tells a held worker the run needs no more workers once none waits for its connection", async () => {
    const { remote, launch, join } = await setUp();
    try {
      const executor = launch();
      const worker = join();
      await until("the worker to be held back", () => remote.server.waiting === 1);
      executor.kill(); // the run retired it while it started: nobody waits for a connection now
      const end = await worker.end;
      assert.deepEqual([end.stopped, end.later], [false, true], JSON.stringify(end));
      assert.ok(
        worker.log.some((l) => /the run needs no more workers/.test(l)),
        worker.log.join("\n"),
      );
      assert.equal(remote.server.refused, 0, "not a refusal: nobody is turned away in error");
    } finally {
      await remote.close();
    }
  });
});
