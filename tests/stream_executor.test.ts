/**
 * Workers at the far end of a byte stream: the run loop drives `StreamExecutor`s whose other end
 * is the worker relay (`serveWorker`) running real Web Workers, over in-process channels. The
 * same pipelines give the same counters as local Web Workers; crashes, failed setup, a wrong
 * pipeline file, a silent worker (lease, on a manual clock), a protocol mismatch, garbage and a
 * stop request are each handled without disturbing the rest of the run. A launched worker that
 * never connects is lost after the connect timeout, which waits while the worker server holds
 * connections back for lack of need.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { createHash } from "node:crypto";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { channelPair } from "./fixtures/channel_pair.ts";
import { ManualClock } from "./fixtures/manual_clock.ts";
import {
  assertAllBalanced,
  countersOf,
  withTimeout,
  writePipeline,
} from "./fixtures/parallel/harness.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import {
  buildPipelineGraph,
  type ExecutorFactory,
  localExecutorFactory,
  type ParallelRunOptions,
  runParallel,
} from "../lib/execute/mod.ts";
import type { RunResult, StopReason } from "../lib/run/run_types.ts";
import type { ByteChannel } from "../lib/execute/byte_channel.ts";
import type { ExecutorSpec } from "../lib/execute/executor.ts";
import { StreamExecutor } from "../lib/execute/stream_executor.ts";
import { serveWorker } from "../lib/execute/worker_relay.ts";
import { encodeFrame, workerSideDecoder } from "../lib/execute/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../lib/execute/protocol/messages.ts";

const newDir = scratchDirs("stream");

function sha256(file: string): string {
  return createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

/** Every process task's workers behind a relay; command tasks stay local. */
function relayFactory(sha: string | null, options: { leaseMs?: number } = {}): ExecutorFactory {
  return (spec) => {
    if (spec.config.kind !== "process") return localExecutorFactory(spec);
    const [scheduler, worker] = channelPair();
    void serveWorker({ channel: worker, client: "test relay" });
    return new StreamExecutor({ spec, channel: scheduler, pipelineSha256: sha, ...options });
  };
}

/** A worker end that the test scripts: it answers frames with `reply`. */
function scriptedFactory(
  reply: (channel: ByteChannel, kind: string) => void,
  options: { leaseMs?: number } = {},
): ExecutorFactory {
  return (spec) => {
    const [scheduler, worker] = channelPair();
    const decoder = workerSideDecoder();
    worker.onData((chunk) => {
      for (const m of decoder.push(chunk)) reply(worker, m.kind);
    });
    queueMicrotask(() => reply(worker, "connected"));
    return new StreamExecutor({ spec, channel: scheduler, pipelineSha256: null, ...options });
  };
}

async function run(
  file: string,
  options: ParallelRunOptions,
): Promise<{ result: RunResult; notices: string[] }> {
  const pipeline = await loadPipeline(file);
  const notices: string[] = [];
  const result = await withTimeout(
    runParallel(pipeline, buildPipelineGraph(pipeline), {
      ...options,
      observer: { notice: (m) => notices.push(m) },
    }),
    60_000,
    "the run",
  );
  return { result, notices };
}

const TWO_TASKS = `export default { tasks: [
  {
    id: "a",
    totalRoi: { offset: [0, 0], shape: [12, 12] },
    readRoi: { offset: [0, 0], shape: [4, 4] },
    writeRoi: { offset: [1, 1], shape: [2, 2] },
    maxWorkers: 2,
    maxRetries: 1,
    process(block) {
      log("a", block, now());
      if (block.index[0] === 1 && block.attempt === 1) throw new Error("flaky " + block.id);
      if (block.index[0] === 2 && block.index[1] === 2) throw new Error("always " + block.id);
    },
  },
  {
    id: "b",
    upstream: ["a"],
    totalRoi: { offset: [0, 0], shape: [12, 12] },
    readRoi: { offset: [0, 0], shape: [4, 4] },
    writeRoi: { offset: [1, 1], shape: [2, 2] },
    maxWorkers: 2,
    process(block) { log("b", block, now()); },
  },
] };
`;

describe("stream workers behind a relay", () => {
  it("give the same counters and failures as local Web Workers", async () => {
    const dir = newDir("same");
    const file = writePipeline(dir, TWO_TASKS);
    const local = await run(file, { executorFactory: localExecutorFactory });
    const remote = await run(file, { executorFactory: relayFactory(sha256(file)) });
    assertAllBalanced(remote.result);
    assert.deepEqual(remote.result.tasks, local.result.tasks);
    assert.equal(remote.result.outcome, "incomplete");
    assert.deepEqual(
      remote.result.failures.map((f) => [f.taskId, String(f.blockId), f.message, f.attempt]),
      local.result.failures.map((f) => [f.taskId, String(f.blockId), f.message, f.attempt]),
    );
    assert.match(remote.result.failures[0]!.stack ?? "", /always/);
  });

  it("a worker that exits mid-block costs that attempt, and a replacement carries on", async () => {
    const dir = newDir("exit");
    const file = writePipeline(
      dir,
      `import process from "node:process";
export default { tasks: [{
  id: "t",
  totalRoi: { offset: [0], shape: [20] }, readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
  maxWorkers: 2, maxRetries: 2, maxWorkerRestarts: 5,
  process(block) { if (block.index[0] === 7 && block.attempt === 1) process.exit(3); },
}] };
`,
    );
    const { result, notices } = await run(file, { executorFactory: relayFactory(sha256(file)) });
    assertAllBalanced(result);
    const c = countersOf(result, "t");
    assert.equal(c.completed, 20);
    assert.equal(c.failedAttempts, 1);
    assert.ok(notices.some((n) => /process\.exit\(3\)/.test(n)), notices.join("\n"));
  });

  it("a pipeline file that differs on the worker's side fails setup, naming both hashes", async () => {
    const dir = newDir("sha");
    const file = writePipeline(dir, TWO_TASKS);
    const { result, notices } = await run(file, { executorFactory: relayFactory("00".repeat(32)) });
    assertAllBalanced(result);
    assert.equal(countersOf(result, "a").phase, "abandoned");
    assert.ok(
      notices.some((n) => /differs from the scheduler's .*instead of 000000000000/.test(n)),
      notices.join("\n"),
    );
  });

  it("a setup that throws is reported with its message", async () => {
    const dir = newDir("setup");
    const file = writePipeline(
      dir,
      `export default { tasks: [{
  id: "t", totalRoi: { offset: [0], shape: [4] }, readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
  maxWorkerRestarts: 1,
  setup() { throw new Error("model file missing"); },
  process() {},
}] };
`,
    );
    const { result, notices } = await run(file, { executorFactory: relayFactory(null) });
    assertAllBalanced(result);
    assert.equal(countersOf(result, "t").phase, "abandoned");
    assert.ok(notices.some((n) => n.includes("model file missing")), notices.join("\n"));
  });

  it("a stop request recalls the unstarted blocks and ends interrupted, balanced", async () => {
    const dir = newDir("stop");
    const file = writePipeline(
      dir,
      `export default { tasks: [{
  id: "t", totalRoi: { offset: [0], shape: [400] }, readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
  maxWorkers: 2,
  process(block) { log("t", block, now()); sleep(2); },
}] };
`,
    );
    let stop: ((reason: StopReason) => void) | null = null;
    const pipeline = await loadPipeline(file);
    const running = runParallel(pipeline, buildPipelineGraph(pipeline), {
      executorFactory: relayFactory(sha256(file)),
      onStopRequest: (listener) => (stop = listener),
    });
    // Stop once some blocks ran (waiting for the blocks, not for a timer).
    for (let i = 0; i < 10_000 && !fs.existsSync(`${dir}/t`); i++) {
      await new Promise((r) => setImmediate(r));
    }
    stop!("SIGINT");
    const result = await withTimeout(running, 30_000, "the stopped run");
    assert.equal(result.outcome, "interrupted-sigint");
    const c = countersOf(result, "t");
    assert.equal(c.ready + c.processing + c.pending + c.completed, 400);
    assert.ok(c.completed < 400, JSON.stringify(c));
  });
});

describe("stream workers that misbehave", () => {
  const ONE = `export default { tasks: [{
  id: "t", totalRoi: { offset: [0], shape: [3] }, readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
  maxWorkerRestarts: 1, process() {},
}] };
`;

  it("a worker that goes silent past its lease is lost (manual clock)", async () => {
    const dir = newDir("lease");
    const file = writePipeline(dir, ONE);
    const clock = new ManualClock();
    let blocksSeen = 0;
    const factory = scriptedFactory((channel, kind) => {
      if (kind === "connected") {
        channel.write(
          encodeFrame({
            kind: "hello",
            protocol: PROTOCOL_VERSION,
            client: "mute",
            pid: 1,
            host: "h",
          }),
        );
      } else if (kind === "init") channel.write(encodeFrame({ kind: "ready" }));
      else if (kind === "blocks") blocksSeen++;
      // ... and then nothing: no results, no heartbeats.
    }, { leaseMs: 5_000 });
    const pipeline = await loadPipeline(file);
    const notices: string[] = [];
    const running = runParallel(pipeline, buildPipelineGraph(pipeline), {
      executorFactory: factory,
      clock,
      observer: { notice: (m) => notices.push(m) },
    });
    const settle = async (n: number) => {
      for (let i = 0; i < 10_000 && blocksSeen < n; i++) await new Promise((r) => setImmediate(r));
      assert.equal(blocksSeen, n, `worker ${n} got a block: ${notices.join("\n")}`);
    };
    // The worker is lost after its lease, so is its replacement; then the task is abandoned.
    await settle(1);
    clock.advance(6_000);
    await settle(2);
    clock.advance(6_000);
    const result = await withTimeout(running, 10_000, "the run");
    assertAllBalanced(result);
    assert.equal(countersOf(result, "t").phase, "abandoned");
    assert.ok(
      notices.some((n) => /sent nothing for \d+ s \(its lease is 5 s\)/.test(n)),
      notices.join("\n"),
    );
  });

  it("a worker speaking another protocol version is refused, naming both versions", async () => {
    const dir = newDir("version");
    const file = writePipeline(dir, ONE);
    const refusals: string[] = [];
    const factory = scriptedFactory((channel, kind) => {
      if (kind === "connected") {
        channel.write(
          encodeFrame({ kind: "hello", protocol: 99, client: "future", pid: 1, host: "h" }),
        );
      }
      if (kind === "error") refusals.push(kind);
    });
    const { result, notices } = await run(file, { executorFactory: factory });
    assert.equal(countersOf(result, "t").phase, "abandoned");
    assert.ok(
      notices.some((n) => /speaks protocol 99 but this blockwise speaks 1/.test(n)),
      notices.join("\n"),
    );
    assert.ok(refusals.length > 0, "the worker was told why");
  });

  it("garbage bytes from a worker end it with a protocol error", async () => {
    const dir = newDir("garbage");
    const file = writePipeline(dir, ONE);
    const factory = scriptedFactory((channel, kind) => {
      if (kind === "connected") channel.write(new TextEncoder().encode("SSH-2.0-OpenSSH_9.2\r\n"));
    });
    const { result, notices } = await run(file, { executorFactory: factory });
    assert.equal(countersOf(result, "t").phase, "abandoned");
    assert.ok(notices.some((n) => /broke the protocol/.test(n)), notices.join("\n"));
  });
});

describe("a launched worker that has not connected", () => {
  /** A StreamExecutor of a running launch on a manual clock; `crashes` collects its end. */
  function launched(held: { now: boolean }) {
    const clock = new ManualClock();
    const crashes: string[] = [];
    const events = { crashed: (_e: unknown, reason: string) => crashes.push(reason) };
    const spec = {
      id: 0,
      task: 0,
      config: { timeout: null },
      clock,
      events,
    } as unknown as ExecutorSpec;
    const executor = new StreamExecutor({
      spec,
      channel: null,
      pipelineSha256: null,
      launch: { label: "job 7", phase: () => "running", endReason: () => "", cancel: () => {} },
      connectTimeoutMs: 120_000,
      connectHeld: () => held.now,
    });
    const tick = (ms: number) => {
      clock.advance(ms);
      executor.checkHealth(clock.now());
    };
    return { crashes, tick };
  }

  it("is lost when it does not connect within the connect timeout", () => {
    const { crashes, tick } = launched({ now: false });
    tick(0);
    tick(119_000);
    assert.deepEqual(crashes, []);
    tick(2_000);
    assert.match(crashes.join(), /job 7 started but its worker did not connect within 120 s/);
  });

  it("is not timed out while the server holds connections back (it may be one), and is after", () => {
    const held = { now: true };
    const { crashes, tick } = launched(held);
    for (let i = 0; i < 10; i++) tick(60_000);
    assert.deepEqual(crashes, [], "ten minutes held back: not lost");
    held.now = false;
    tick(60_000);
    assert.deepEqual(crashes, [], "the timeout counts from when holding ended");
    tick(61_000);
    assert.equal(crashes.length, 1);
  });
});
