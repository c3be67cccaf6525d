/**
 * How a Web Worker reports fast blocks: one results message per batch, however long the worker
 * waited for the batch. With thousands of workers each waits 100 ms or more between batches;
 * counting that wait as work made every batch's first result go alone (two messages a batch).
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import type { Executor, ExecutorEvents } from "../lib/execute/executor.ts";
import type { ResultsMessage } from "../lib/execute/protocol/messages.ts";
import { WorkerExecutor } from "../lib/execute/worker_executor.ts";
import { makeRoi } from "../lib/geometry/mod.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("result-frames-");
const BLOCKS = 300;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe("Web Worker result messages", () => {
  it("report a batch of fast blocks in one message after the worker sat idle", async () => {
    const dir = newDir("idle");
    const pipeline = path.join(dir, "pipeline.ts");
    fs.writeFileSync(
      pipeline,
      `export default { tasks: [{ id: "fast", totalRoi: { offset: [0], shape: [${BLOCKS}] },
         readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
         readWriteConflict: false, process() {} }] };\n`,
    );
    const messages: ResultsMessage[] = [];
    let ready!: () => void;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    let problem: string | null = null;
    const events: ExecutorEvents = {
      ready: () => ready(),
      setupFailed: (_e: Executor, message: string) => (problem = `setup failed: ${message}`),
      results: (_e: Executor, m: ResultsMessage) => messages.push(m),
      returned: () => (problem = "blocks were handed back"),
      crashed: (_e: Executor, reason: string) => (problem = `crashed: ${reason}`),
      output: () => {},
      leaving: () => (problem = "the worker left"),
    };
    const executor = new WorkerExecutor({
      id: 0,
      task: 0,
      taskId: "fast",
      layout: {
        totalRoi: makeRoi([0], [BLOCKS]),
        readRoi: makeRoi([0], [1]),
        writeRoi: makeRoi([0], [1]),
        fit: "valid",
        readWriteConflict: false,
      },
      pipelinePath: pipeline,
      measure: false,
      timeout: null,
      outputs: [],
      runId: "result-frames",
      params: null,
      events,
    });
    try {
      await isReady;
      // Three batches, each after an idle wait. Without the rule every batch's first result
      // goes alone; a loaded machine may preempt the worker for 5 ms mid-batch once (then a
      // batch splits, and may even start with a lone result), so one such round is forgiven.
      const rounds: number[][] = [];
      for (let round = 1; round <= 3; round++) {
        messages.length = 0;
        // Idle for longer than the 5 ms after which finished blocks are reported early.
        await sleep(50);
        const batch = executor.batchBuffer(BLOCKS);
        for (let i = 0; i < BLOCKS; i++) {
          batch[2 * i] = i;
          batch[2 * i + 1] = round;
        }
        executor.send(batch, BLOCKS);
        const deadline = Date.now() + 20_000;
        const reported = () => messages.reduce((n, m) => n + m.count, 0);
        while (reported() < BLOCKS && problem === null && Date.now() < deadline) await sleep(5);
        assert.equal(problem, null);
        assert.equal(reported(), BLOCKS, `batch ${round}: every block reported`);
        rounds.push(messages.map((m) => m.count));
      }
      const whole = rounds.filter((counts) => counts.length === 1).length;
      const lone = rounds.filter((counts) => counts[0] === 1).length;
      assert.ok(whole >= 2, `most batches came in one message: ${JSON.stringify(rounds)}`);
      assert.ok(lone <= 1, `a batch's first result went alone: ${JSON.stringify(rounds)}`);
    } finally {
      executor.kill();
    }
  });
});
