import { describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  type FailedBlockReport,
  formatCountersLine,
  formatExecutionSummary,
  formatLocations,
  statusSymbol,
  type TaskSummaryRow,
} from "../lib/report/summary.ts";
import type { CounterSnapshot } from "../lib/schedule/counters.ts";

function counters(overrides: Partial<CounterSnapshot>): CounterSnapshot {
  return {
    phase: "done",
    total: 0,
    ready: 0,
    processing: 0,
    pending: 0,
    completed: 0,
    skipped: 0,
    failed: 0,
    orphaned: 0,
    failedAttempts: 0,
    started: true,
    ...overrides,
  };
}

function failure(i: number, overrides: Partial<FailedBlockReport> = {}): FailedBlockReport {
  return {
    taskId: "predict",
    blockId: i,
    index: [i, 0, 1],
    attempts: 3,
    message: `RangeError: bad block ${i}\nsecond line`,
    ...overrides,
  };
}

/** Options for a run that completed, and one that did not (the caller decides, not the rows). */
const COMPLETE = { color: false, outcome: "complete", exitCode: 0 } as const;
const INCOMPLETE = { color: false, outcome: "incomplete", exitCode: 1 } as const;

const ROWS: TaskSummaryRow[] = [
  { id: "extract", counters: counters({ total: 16, completed: 16, skipped: 4 }) },
  { id: "predict", counters: counters({ total: 16, completed: 12, failed: 1, orphaned: 3 }) },
  {
    id: "label",
    counters: counters({
      phase: "abandoned",
      total: 16,
      orphaned: 16,
      abandonReason: { kind: "workers-failed", failures: 11, maxWorkerRestarts: 10 },
    }),
  },
  { id: "aux", counters: counters({ total: 4, completed: 4 }) },
];

describe("formatExecutionSummary", () => {
  test("exact output for a small fixed case", () => {
    const text = formatExecutionSummary(ROWS, [failure(7, { index: [1, 0, 2] })], INCOMPLETE);
    const expected = [
      "Execution summary",
      "    task     blocks  completed  skipped  failed  orphaned",
      "  ✔ extract      16         16        4       0         0",
      "  ✗ predict      16         12        0       1         3",
      "  ∅ label        16          0        0       0        16",
      "      abandoned: its workers failed 11 times and maxWorkerRestarts (10) is spent",
      "  ✔ aux           4          4        0       0         0",
      "    ───────  ────────────────────────────────────────────",
      "    total        52         32        4       1        19",
      "",
      "Failed blocks (1):",
      "  predict/7 index (1, 0, 2) after 3 attempts: RangeError: bad block 7",
      "",
      "1 block failed, 19 orphaned, 1 task abandoned: exit 1",
    ].join("\n");
    assert.equal(text, expected);
  });

  test("all completed: verdict counts blocks and skipped ones, exit code 0", () => {
    const rows = [ROWS[0]!, ROWS[3]!];
    const text = formatExecutionSummary(rows, [], COMPLETE);
    assert.equal(text.split("\n").at(-1), "All 20 blocks completed (4 skipped).");
    assert.ok(!text.includes("Failed blocks"));
    const none = formatExecutionSummary([ROWS[3]!], [], COMPLETE);
    assert.equal(none.split("\n").at(-1), "All 4 blocks completed.");
    // The verdict names the outcome and exit code it is given: a run stopped by SIGTERM after
    // its last block is not reported as a success.
    const stopped = formatExecutionSummary(rows, [], {
      color: false,
      outcome: "interrupted-sigterm",
      exitCode: 143,
    });
    assert.equal(stopped.split("\n").at(-1), "20 of 20 blocks completed: exit 143");
  });

  test("columns widen to fit long names and large counts", () => {
    const rows = [
      { id: "a-very-long-task-name", counters: counters({ total: 1234567, completed: 1234567 }) },
      { id: "b", counters: counters({ total: 3, completed: 3 }) },
    ];
    const lines = formatExecutionSummary(rows, [], COMPLETE).split("\n");
    assert.equal(
      lines[1],
      "    task                    blocks  completed  skipped  failed  orphaned",
    );
    assert.equal(
      lines[2],
      "  ✔ a-very-long-task-name  1234567    1234567        0       0         0",
    );
    assert.equal(
      lines[3],
      "  ✔ b                            3          3        0       0         0",
    );
    assert.equal(
      lines[5],
      "    total                  1234570    1234570        0       0         0",
    );
    // Every table line ends at the same column.
    const widths = new Set(lines.slice(1, 6).map((l) => l.length));
    assert.equal(widths.size, 1);
  });

  test("pending and processing columns appear only when non-zero", () => {
    const rows = [
      {
        id: "a",
        counters: counters({
          phase: "running",
          total: 10,
          completed: 4,
          processing: 2,
          pending: 4,
        }),
      },
      { id: "b", counters: counters({ phase: "running", total: 5, ready: 1, pending: 4 }) },
    ];
    const lines = formatExecutionSummary(rows, [], {
      color: false,
      outcome: "interrupted-sigint",
      exitCode: 130,
    }).split("\n");
    assert.equal(
      lines[1],
      "    task   blocks  completed  skipped  failed  orphaned  pending  processing",
    );
    assert.equal(
      lines[2],
      "  … a          10          4        0       0         0        4           2",
    );
    assert.equal(
      lines[3],
      "  … b           5          0        0       0         0        5           0",
    );
    assert.equal(lines.at(-1), "11 blocks not finished: exit 130");
  });

  test("failed blocks list is truncated at maxFailures (default 10)", () => {
    const failures = Array.from({ length: 14 }, (_, i) => failure(i));
    const rows = [{ id: "predict", counters: counters({ total: 20, completed: 6, failed: 14 }) }];
    const lines = formatExecutionSummary(rows, failures, INCOMPLETE).split("\n");
    const start = lines.indexOf("Failed blocks (14):");
    assert.ok(start > 0);
    const listed = lines.slice(start + 1, lines.indexOf("", start));
    assert.equal(listed.length, 11);
    assert.equal(
      listed[0],
      "  predict/0 index (0, 0, 1) after 3 attempts: RangeError: bad block 0",
    );
    assert.equal(
      listed[9],
      "  predict/9 index (9, 0, 1) after 3 attempts: RangeError: bad block 9",
    );
    assert.equal(listed[10], "  ... and 4 more");
    assert.equal(lines.at(-1), "14 blocks failed: exit 1");

    const three = formatExecutionSummary(rows, failures, { ...INCOMPLETE, maxFailures: 3 });
    assert.ok(three.includes("  predict/2 index"));
    assert.ok(!three.includes("  predict/3 index"));
    assert.ok(three.includes("  ... and 11 more"));

    const all = formatExecutionSummary(rows, failures.slice(0, 10), INCOMPLETE);
    assert.ok(!all.includes("... and"));
  });

  test("failure lines: one attempt, empty message, stack not printed", () => {
    const text = formatExecutionSummary(
      [{ id: "t", counters: counters({ total: 2, completed: 0, failed: 2 }) }],
      [
        failure(1, { taskId: "t", attempts: 1, message: "", stack: "Error\n    at f (x.ts:1)" }),
        failure(2, { taskId: "t", message: "  boom  \n  at somewhere" }),
      ],
      INCOMPLETE,
    );
    assert.ok(text.includes("  t/1 index (1, 0, 1) after 1 attempt: (no message)"));
    assert.ok(text.includes("  t/2 index (2, 0, 1) after 3 attempts: boom\n"));
    assert.ok(!text.includes("x.ts:1"));
    assert.ok(!text.includes("somewhere"));
  });

  test("abandoned task shows its reason under its row", () => {
    const rows = [{
      id: "segment",
      counters: counters({
        phase: "abandoned",
        total: 8,
        completed: 2,
        orphaned: 6,
        abandonReason: {
          kind: "setup-failed",
          message: "worker crashed 11 times\n(details in the log)",
        },
      }),
    }];
    const lines = formatExecutionSummary(rows, [], INCOMPLETE).split("\n");
    assert.equal(lines[2], "  ∅ segment       8          2        0       0         6");
    assert.equal(lines[3], "      abandoned: setup failed: worker crashed 11 times");
    assert.equal(lines.at(-1), "6 blocks orphaned, 1 task abandoned: exit 1");
  });

  test("zero tasks", () => {
    const text = formatExecutionSummary([], [], COMPLETE);
    assert.equal(text, "Execution summary\n  (no tasks)\n\nNo blocks to run.");
  });

  test("bigint block ids are printed exactly", () => {
    const id = 2n ** 64n + 1n;
    const text = formatExecutionSummary(
      [{ id: "huge", counters: counters({ total: 1, failed: 1 }) }],
      [failure(0, { taskId: "huge", blockId: id, index: [4294967296, 7, 0] })],
      INCOMPLETE,
    );
    assert.ok(
      text.includes("  huge/18446744073709551617 index (4294967296, 7, 0) after 3 attempts:"),
    );
  });

  test("colour only when asked", () => {
    const plain = formatExecutionSummary(ROWS, [failure(1)], INCOMPLETE);
    assert.ok(!plain.includes("\x1b["));
    const coloured = formatExecutionSummary(ROWS, [failure(1)], { ...INCOMPLETE, color: true });
    assert.ok(coloured.includes("\x1b[32m✔\x1b[39m"));
    assert.ok(coloured.includes("\x1b[31m✗\x1b[39m"));
    assert.ok(coloured.includes("\x1b[33m∅\x1b[39m"));
    // Without the escapes the text is the plain summary: colour never shifts the columns.
    // deno-lint-ignore no-control-regex
    assert.equal(coloured.replace(/\x1b\[\d+m/g, ""), plain);
  });
});

describe("where the run left its files", () => {
  test("the summary ends with the tracking stores, events file and worker logs", () => {
    const text = formatExecutionSummary([ROWS[3]!], [], {
      ...COMPLETE,
      locations: {
        stores: [
          { task: "extract", path: "/data/trk/extract" },
          { task: "label", path: "/data/trk/label" },
          { task: "mask", path: "/elsewhere/mask-store" },
          { task: "export", path: null },
        ],
        events: "/data/run/events.jsonl",
        logDir: "/data/logs",
      },
    });
    assert.deepEqual(text.split("\n").slice(-5), [
      "All 4 blocks completed.",
      "",
      "tracking     /data/trk/<task>: extract, label; mask at /elsewhere/mask-store; no store: export",
      "events       /data/run/events.jsonl",
      "worker logs  /data/logs/<task>/worker_<n>.out, .err",
    ]);
  });

  test("a run with remote workers also says where their own logs are", () => {
    const lines = formatLocations({
      stores: [{ task: "predict", path: "/data/trk/predict" }],
      events: null,
      logDir: null,
      remoteLogDir: "/data/trk/.workers/run-1",
    });
    assert.deepEqual(lines, [
      "",
      "tracking            /data/trk/<task>: predict",
      "remote worker logs  /data/trk/.workers/run-1/<task>-worker-<n>[-<job id>].log",
    ]);
  });

  test("local Python workers' logs are not called remote", () => {
    const lines = formatLocations({
      stores: [{ task: "seg", path: "/data/trk/seg" }],
      events: null,
      logDir: null,
      remoteLogDir: "/data/trk/.workers/run-2",
      localWorkerLogs: true,
    });
    assert.equal(
      lines.at(-1),
      "Python worker logs  /data/trk/.workers/run-2/<task>-worker-<n>[-<job id>].log",
    );
  });

  test("a run without any store says that a rerun starts over", () => {
    assert.deepEqual(
      formatLocations({ stores: [{ task: "a", path: null }], events: null, logDir: null }),
      [
        "",
        "tracking  none: a rerun runs every block again (--tracking-dir DIR keeps a ledger to resume from)",
      ],
    );
  });
});

describe("statusSymbol", () => {
  test("daisy's precedence: failed, orphaned, in progress, done", () => {
    assert.equal(statusSymbol(counters({ total: 3, failed: 1, orphaned: 1, ready: 1 })), "✗");
    assert.equal(statusSymbol(counters({ total: 3, orphaned: 1, processing: 1 })), "∅");
    assert.equal(statusSymbol(counters({ total: 3, ready: 1 })), "…");
    assert.equal(statusSymbol(counters({ total: 3, pending: 1 })), "…");
    assert.equal(statusSymbol(counters({ total: 3, processing: 1 })), "…");
    assert.equal(statusSymbol(counters({ total: 3, completed: 3 })), "✔");
  });
});

describe("formatCountersLine", () => {
  test("one compact line", () => {
    const c = counters({
      phase: "running",
      total: 64,
      completed: 12,
      skipped: 3,
      processing: 4,
      ready: 8,
      pending: 40,
    });
    assert.equal(
      formatCountersLine("extract", c),
      "extract: 12/64 done, 4 running, 0 failed, 0 orphaned, 3 skipped",
    );
  });

  test("abandoned tasks carry their reason", () => {
    const c = counters({
      phase: "abandoned",
      total: 4,
      completed: 1,
      orphaned: 3,
      abandonReason: { kind: "upstream-abandoned", upstream: "a" },
    });
    assert.equal(
      formatCountersLine("b", c),
      'b: 1/4 done, 0 running, 0 failed, 3 orphaned, 0 skipped, abandoned: upstream task "a" was abandoned',
    );
  });
});
