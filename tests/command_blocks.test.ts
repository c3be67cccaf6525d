/**
 * Command tasks: argv templates and the block's environment (unit), and runs of command tasks
 * through runParallel: success, a non-zero exit, a missing program, a timeout (on a manual
 * clock), and output.
 */

import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import {
  buildPipelineGraph,
  commandEnvironment,
  expandCommand,
  type ParallelRunOptions,
  runParallel,
} from "../lib/execute/mod.ts";
import type { BlockFailure, RunResult } from "../lib/run/run_types.ts";
import type { Block } from "../lib/pipeline/spec.ts";
import {
  assertAllBalanced,
  countersOf,
  utilizationOf,
  waitUntil,
  withTimeout,
  writePipeline,
} from "./fixtures/parallel/harness.ts";
import { ManualClock } from "./fixtures/manual_clock.ts";

const newDir = scratchDirs("");

const block: Block = {
  taskId: "export",
  id: 42,
  index: [3, 1],
  readRoi: { offset: [-8, 2], shape: [80, 16] },
  writeRoi: { offset: [0, 10], shape: [64, 8] },
  attempt: 2,
};

describe("expandCommand", () => {
  it("replaces every placeholder", () => {
    assert.deepEqual(
      expandCommand(
        [
          "prog",
          "{task_id}",
          "{block_id}",
          "{index}",
          "{read_offset}",
          "{read_shape}",
          "{write_offset}",
          "{write_shape}",
          "{attempt}",
        ],
        block,
      ),
      ["prog", "export", "42", "3,1", "-8,2", "80,16", "0,10", "64,8", "2"],
    );
  });

  it("replaces several placeholders inside one argument and keeps the rest verbatim", () => {
    assert.deepEqual(
      expandCommand(["--roi={write_offset}:{write_shape}", "out_{block_id}.zarr", "plain"], block),
      ["--roi=0,10:64,8", "out_42.zarr", "plain"],
    );
  });

  it("turns {{ and }} into literal braces", () => {
    assert.deepEqual(expandCommand(["{{block_id}}", "{{{block_id}}}", "a}}b{{"], block), [
      "{block_id}",
      "{42}",
      "a}b{",
    ]);
  });

  it("prints a bigint block ID exactly", () => {
    const big: Block = { ...block, id: 2n ** 70n + 1n };
    assert.deepEqual(expandCommand(["{block_id}"], big), ["1180591620717411303425"]);
  });

  it("does not touch the template", () => {
    const template = ["x", "{block_id}"] as const;
    expandCommand(template, block);
    assert.deepEqual(template, ["x", "{block_id}"]);
  });

  it("rejects an unknown placeholder, naming it and the known ones", () => {
    assert.throws(
      () => expandCommand(["run", "--id={blok_id}"], block),
      (error: unknown) => {
        assert.ok(error instanceof Error);
        assert.match(error.message, /\{blok_id\}/);
        assert.match(error.message, /--id=\{blok_id\}/);
        assert.match(error.message, /\{block_id\}/);
        assert.match(error.message, /\{write_shape\}/);
        return true;
      },
    );
  });
});

describe("commandEnvironment", () => {
  it("passes the block in BLOCKWISE_* variables", () => {
    assert.deepEqual(commandEnvironment(block), {
      BLOCKWISE_TASK_ID: "export",
      BLOCKWISE_BLOCK_ID: "42",
      BLOCKWISE_INDEX: "3,1",
      BLOCKWISE_READ_OFFSET: "-8,2",
      BLOCKWISE_READ_SHAPE: "80,16",
      BLOCKWISE_WRITE_OFFSET: "0,10",
      BLOCKWISE_WRITE_SHAPE: "64,8",
      BLOCKWISE_ATTEMPT: "2",
    });
  });
});

interface CommandRun {
  readonly result: RunResult;
  readonly failures: BlockFailure[];
  readonly output: { taskId: string; stream: string; text: string }[];
}

async function runFile(file: string, options: ParallelRunOptions = {}): Promise<CommandRun> {
  const pipeline = await loadPipeline(file);
  const failures: BlockFailure[] = [];
  const output: { taskId: string; stream: string; text: string }[] = [];
  const result = await withTimeout(
    runParallel(pipeline, buildPipelineGraph(pipeline), {
      ...options,
      observer: { blockFailed: (f) => failures.push(f) },
      output: (taskId, _worker, stream, text) => output.push({ taskId, stream, text }),
    }),
    20_000,
    "runParallel",
  );
  assertAllBalanced(result);
  return { result, failures, output };
}

function commandTask(id: string, command: readonly string[], fields = ""): string {
  return `{
    id: ${JSON.stringify(id)},
    totalRoi: { offset: [0, 0], shape: [20, 30] },
    readRoi: { offset: [0, 0], shape: [10, 10] },
    writeRoi: { offset: [0, 0], shape: [10, 10] },
    readWriteConflict: false,
    command: ${JSON.stringify(command)},
    ${fields}
  }`;
}

describe("command tasks through runParallel", () => {
  it("runs the command once per block with placeholders and environment", async () => {
    const dir = newDir("cmd-ok");
    const out = path.join(dir, "out");
    fs.mkdirSync(out);
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${
        commandTask("write", [
          "sh",
          "-c",
          `printf '%s %s\\n' "$BLOCKWISE_BLOCK_ID" "$1" > ${out}/"$BLOCKWISE_BLOCK_ID"; echo "wrote $BLOCKWISE_BLOCK_ID"`,
          "sh",
          "{write_offset}",
        ], "maxWorkers: 2,")
      },
  ${commandTask("after", ["sh", "-c", `test -f ${out}/{block_id}`], `upstream: ["write"],`)},
] };
`,
    );
    const { result, failures, output } = await runFile(file);
    assert.deepEqual(failures, []);
    const c = countersOf(result, "write");
    assert.deepEqual([c.phase, c.total, c.completed, c.failed], ["done", 6, 6, 0]);
    assert.equal(countersOf(result, "after").completed, 6);
    assert.ok(utilizationOf(result, "write").maxConcurrent <= 2);

    const pipeline = await loadPipeline(file);
    const layout = buildPipelineGraph(pipeline).layouts[0]!;
    const expected = new Map<string, string>();
    for (const p of layout.allPositions()) {
      expected.set(
        String(layout.blockIdOf(p)),
        `${String(layout.blockIdOf(p))} ${layout.writeRoiOf(p).offset.join(",")}\n`,
      );
    }
    assert.deepEqual(fs.readdirSync(out).sort(), [...expected.keys()].sort());
    for (const [id, text] of expected) {
      assert.equal(fs.readFileSync(path.join(out, id), "utf8"), text, `block ${id}`);
    }
    const stdout = output.filter((o) => o.taskId === "write" && o.stream === "stdout")
      .map((o) => o.text).join("");
    for (const id of expected.keys()) assert.match(stdout, new RegExp(`wrote ${id}\\n`));
  });

  it("fails a block whose command exits non-zero, with the status and the stderr tail", async () => {
    const dir = newDir("cmd-exit");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${
        commandTask(
          "bad",
          [
            "sh",
            "-c",
            `if [ "$BLOCKWISE_BLOCK_ID" = "{block_id}" ] && [ {index} = 1,2 ]; then echo "line one" >&2; echo "cannot open input-$BLOCKWISE_ATTEMPT" >&2; exit 3; fi`,
          ],
          "maxRetries: 1,",
        )
      },
  ${commandTask("down", ["true"], `upstream: ["bad"],`)},
] };
`,
    );
    const { result, failures } = await runFile(file);
    const bad = countersOf(result, "bad");
    assert.deepEqual([bad.phase, bad.completed, bad.failed, bad.failedAttempts], ["done", 5, 1, 2]);
    const down = countersOf(result, "down");
    assert.deepEqual([down.completed, down.orphaned], [5, 1]);
    assert.deepEqual(failures.map((f) => [f.attempt, f.permanent]), [[1, false], [2, true]]);
    assert.equal(result.failures.length, 1);
    const f = result.failures[0]!;
    assert.deepEqual(f.index, [1, 2]);
    assert.match(f.message, /exited with status 3/);
    assert.match(f.message, /line one\ncannot open input-2/);
    assert.match(failures[0]!.message, /cannot open input-1/);
  });

  it("names a missing program and says how to fix PATH", async () => {
    const dir = newDir("cmd-missing");
    const file = writePipeline(
      dir,
      `export default { tasks: [
  ${commandTask("missing", ["blockwise-no-such-program-x7", "{block_id}"], "maxRetries: 0,")},
] };
`,
    );
    const { result } = await runFile(file);
    const c = countersOf(result, "missing");
    assert.deepEqual([c.phase, c.completed, c.failed], ["done", 0, 6]);
    assert.equal(result.failures.length, 6);
    for (const f of result.failures) {
      assert.match(f.message, /blockwise-no-such-program-x7/);
      assert.match(f.message, /PATH/);
    }
  });

  it("kills a command that runs past the timeout (manual clock) and retries it", async () => {
    const dir = newDir("cmd-timeout");
    const started = path.join(dir, "started");
    // The first attempt marks that it runs, then sleeps far longer than the test's hang guard:
    // only the kill can end it in time.
    const script = 'if [ "$1" = 1 ]; then : > "$2"; exec sleep 600; fi';
    const file = writePipeline(
      dir,
      `export default { tasks: [
  {
    id: "slow",
    totalRoi: { offset: [0], shape: [10] },
    readRoi: { offset: [0], shape: [10] },
    writeRoi: { offset: [0], shape: [10] },
    command: ${JSON.stringify(["sh", "-c", script, "sh", "{attempt}", started])},
    timeout: 0.3,
  },
] };
`,
    );
    const clock = new ManualClock();
    const running = runFile(file, { clock });
    await waitUntil(() => fs.existsSync(started), "the first attempt to start");
    // Health ticks every 200 ms of run clock: the one at 400 ms finds the command past 0.3 s.
    clock.advance(400);
    const { result, failures } = await running;
    const c = countersOf(result, "slow");
    assert.deepEqual([c.phase, c.completed, c.failed, c.failedAttempts], ["done", 1, 0, 1]);
    assert.equal(failures.length, 1);
    assert.match(failures[0]!.message, /timed out after 0.3 s/);
  });
});
