/**
 * A systematic failure does not flood the terminal: identical errors are printed once in full, a
 * few times as "same error as", then counted; the summary lists each distinct error once with
 * the blocks that share it.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import type { BlockFailure } from "../lib/run/run_types.ts";
import { RepeatedFailures, REPEATS_SHOWN } from "../lib/report/failure_groups.ts";
import {
  type FailedBlockReport,
  formatExecutionSummary,
  groupFailures,
} from "../lib/report/summary.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("failure-groups");

function failure(id: number, message: string, permanent: boolean, task = "t"): BlockFailure {
  return { taskId: task, blockId: id, index: [id], attempt: permanent ? 3 : 1, message, permanent };
}

describe("RepeatedFailures", () => {
  it("prints the first in full, then 'same error as', then counts", () => {
    const r = new RepeatedFailures();
    const printed: string[] = [];
    const show = (f: BlockFailure) => {
      const line = r.line(f, false);
      if (line !== null) printed.push(line);
    };
    show(failure(0, "disk gone", false));
    show(failure(1, "disk gone", false)); // a retry of a known error: counted only
    for (let id = 0; id < 10; id++) show(failure(id, "disk gone", true));
    show(failure(20, "other error", true));
    show(failure(21, "disk gone", true, "u")); // another task: its own group
    assert.deepEqual(printed, [
      "↻ t/0 (0) attempt 1 failed, retrying: disk gone",
      "✗ t/0 (0) failed after 3 attempts: disk gone",
      ...Array.from(
        { length: REPEATS_SHOWN },
        (_, i) => `✗ t/${i + 1} (${i + 1}) failed after 3 attempts: same error as t/0`,
      ),
      "✗ t/20 (20) failed after 3 attempts: other error",
      "✗ u/21 (21) failed after 3 attempts: disk gone",
    ]);
    assert.deepEqual(r.closing(false), [
      `✗ ${9 - REPEATS_SHOWN} more blocks of "t" failed with the same error as t/0 (10 in all)`,
    ]);
  });
});

describe("the summary's failed blocks", () => {
  it("lists each distinct error once with the blocks that share it", () => {
    const failures: FailedBlockReport[] = [
      ...Array.from({ length: 8 }, (_, i) => ({
        taskId: "t",
        blockId: i,
        index: [i],
        attempts: 3,
        message: `no such file\n(detail ${i})`,
      })),
      { taskId: "t", blockId: 9, index: [9], attempts: 1, message: "out of memory" },
    ];
    assert.equal(groupFailures(failures).length, 2);
    const text = formatExecutionSummary([], failures, {
      color: false,
      outcome: "incomplete",
      exitCode: 1,
    });
    assert.match(
      text,
      /Failed blocks \(9\):\n {2}t\/0 index \(0\) after 3 attempts: no such file\n {4}and 7 more with the same error: t\/1, t\/2, t\/3, t\/4, t\/5, \.\.\.\n {2}t\/9 index \(9\) after 1 attempt: out of memory\n/,
    );
  });
});

describe("a run whose blocks all fail the same way", () => {
  it("prints a handful of failure lines, not one per block and attempt", async () => {
    const dir = newDir("flood");
    const file = path.join(dir, "p.mjs");
    fs.writeFileSync(
      file,
      `const roi = (n) => ({ offset: [0], shape: [n] });
export default { tasks: [{ id: "threshold", totalRoi: roi(60), readRoi: roi(1), writeRoi: roi(1),
  maxWorkers: 2, process() { throw new Error("cannot open volume.zarr"); } }] };
`,
    );
    const r = await runCli(["run", file, "--no-progress"]);
    assert.equal(r.code, 1, describeRun(r));
    const failureLines = r.stderr.split("\n").filter((l) => /^[✗↻] /.test(l));
    assert.ok(failureLines.length <= 2 + REPEATS_SHOWN + 1, failureLines.join("\n"));
    assert.match(
      r.stderr,
      /✗ \d+ more blocks of "threshold" failed with the same error as threshold\/\d+ \(60 in all\)/,
    );
    assert.match(
      r.stderr,
      /Failed blocks \(60\):\n.*cannot open volume\.zarr\n {4}and 59 more with the same error/,
    );
  });
});
