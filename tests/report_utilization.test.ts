import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { UtilizationReport, WorkerStats } from "../lib/run/run_types.ts";
import { formatBytes, formatUtilization } from "../lib/report/utilization.ts";

const KB = 1024;
const MB = KB * 1024;
const GB = MB * 1024;
const TB = GB * 1024;

function worker(taskId: string, workerId: number, startedAt: number, endedAt: number): WorkerStats {
  return {
    workerId,
    taskId,
    startedAt,
    endedAt,
    blocks: 1,
    failedBlocks: 0,
    cpuSeconds: 0,
    parkedSeconds: 0,
    exit: "clean",
  };
}

function report(overrides: Partial<UtilizationReport> = {}): UtilizationReport {
  return {
    wallSeconds: 38.7,
    processCpuSeconds: 142.3,
    peakRssBytes: 1.2 * GB,
    ioReadBytes: 2.4 * GB,
    ioWriteBytes: 510 * MB,
    tasks: [
      {
        id: "extract",
        blocks: 12,
        workersSpawned: 4,
        maxConcurrent: 4,
        restarts: 0,
        workerFailures: 0,
        meanMs: 41.6667,
        slopeMs: 0.0012,
        busySeconds: 2,
        cpuSeconds: 1.9,
        wallSeconds: 0.8,
        faultsPerBlock: Number.NaN,
      },
      {
        id: "predict_long_name",
        blocks: 13,
        workersSpawned: 3,
        maxConcurrent: 2,
        restarts: 1,
        workerFailures: 1,
        meanMs: 153.846,
        slopeMs: -1.25,
        busySeconds: 2,
        cpuSeconds: 2.5,
        wallSeconds: 3,
        faultsPerBlock: Number.NaN,
      },
      {
        id: "never_ran",
        blocks: 0,
        workersSpawned: 0,
        maxConcurrent: 0,
        restarts: 0,
        workerFailures: 0,
        meanMs: 0,
        slopeMs: 0,
        busySeconds: 0,
        cpuSeconds: 0,
        wallSeconds: 0,
        faultsPerBlock: Number.NaN,
      },
    ],
    // extract: 4 workers of 1 s each -> 2 s busy of 4 s = 50%; predict has no finished worker.
    workers: [
      worker("extract", 0, 100, 101),
      worker("extract", 1, 100, 101),
      worker("extract", 2, 100, 101),
      worker("extract", 3, 100, 101),
      worker("predict_long_name", 4, 100, Number.NaN),
    ],
    ...overrides,
  };
}

describe("formatBytes", () => {
  test("base 1024, one decimal, B to TB", () => {
    assert.equal(formatBytes(0), "0 B");
    assert.equal(formatBytes(512), "512 B");
    assert.equal(formatBytes(1023), "1023 B");
    assert.equal(formatBytes(1024), "1.0 KB");
    assert.equal(formatBytes(1536), "1.5 KB");
    assert.equal(formatBytes(510 * MB), "510.0 MB");
    assert.equal(formatBytes(1.2 * GB), "1.2 GB");
    assert.equal(formatBytes(3 * TB), "3.0 TB");
    assert.equal(formatBytes(2048 * TB), "2048.0 TB");
  });

  test("a value that would round to 1024.0 moves up a unit", () => {
    assert.equal(formatBytes(1023.96 * KB), "1.0 MB");
  });

  test("not a number", () => {
    assert.equal(formatBytes(Number.NaN), "n/a");
    assert.equal(formatBytes(Number.POSITIVE_INFINITY), "n/a");
  });
});

describe("formatUtilization", () => {
  test("process figures", () => {
    const text = formatUtilization(report());
    const lines = text.split("\n");
    assert.equal(lines[0], "Resource utilization");
    assert.match(text, /peak RSS\s+1\.2 GB\n/);
    assert.match(text, /total CPU\s+142\.30 s \(all threads\)\n/);
    assert.match(text, /wall time\s+38\.70 s\n/);
    assert.match(text, /cpu efficiency\s+3\.68x \(≈ 3\.7 cores busy on average\)\n/);
    assert.match(text, /disk read\s+2\.4 GB\n/);
    assert.match(text, /disk write\s+510\.0 MB\n/);
    // Values of the process block start in one column.
    const starts = ["1.2 GB", "142.30 s", "38.70 s", "3.68x", "2.4 GB", "510.0 MB"].map((v) =>
      lines.find((l) => l.includes(v))!.indexOf(v)
    );
    assert.equal(new Set(starts).size, 1, String(starts));
  });

  test("per-task rows: values, alignment, tasks without workers left out", () => {
    const text = formatUtilization(report());
    const lines = text.split("\n");
    const header = lines.find((l) => l.includes("mean ms ∠ slope"));
    assert.ok(header !== undefined, text);
    for (
      const title of ["task", "attempts", "workers", "max conc", "restarts", "cpu busy", "wall s"]
    ) {
      assert.ok(header.includes(title), `${title} in ${header}`);
    }
    const extract = lines.find((l) => l.trimStart().startsWith("extract"));
    const predict = lines.find((l) => l.trimStart().startsWith("predict_long_name"));
    assert.ok(extract !== undefined && predict !== undefined, text);
    assert.deepEqual(extract.trim().split(/\s{2,}/), [
      "extract",
      "12",
      "4",
      "4",
      "0",
      "41.67 ∠ +0.0012",
      "50%",
      "2.00",
      "1.90",
      "0.80",
    ]);
    // No finished worker: busy falls back to the task's wall span (2 s of 3 s).
    assert.deepEqual(predict.trim().split(/\s{2,}/), [
      "predict_long_name",
      "13",
      "3",
      "2",
      "1",
      "153.85 ∠ -1.2500",
      "67%",
      "n/a",
      "2.50",
      "3.00",
    ]);
    assert.ok(!text.includes("never_ran"));
    // Right-aligned columns end at the same place in the header and in every row.
    const end = header.length;
    assert.equal(extract.length, end);
    assert.equal(predict.length, end);
  });

  test("labels the attempts column and explains the columns under the table", () => {
    const text = formatUtilization(report());
    const header = text.split("\n").find((l) => l.includes("mean ms ∠ slope"))!;
    assert.match(header, /^ {2}task +attempts {2}workers/);
    assert.ok(!/\bblocks\b/.test(header), header);
    const legend = text.split("\n").slice(-3).map((l) => l.trim()).join(" ");
    assert.match(legend, /attempts: blocks run, retries included/);
    assert.match(legend, /mean ms ∠ slope: mean time of an attempt and its trend/);
    assert.match(legend, /in ms per attempt \(\+ means blocks get slower\)/);
    assert.match(legend, /cpu busy: share of the workers' lifetime spent inside blocks/);
    assert.match(legend, /idle s: worker time outside blocks/);
    assert.ok(!text.includes("faults/block"), "no faults column without resource tracking");
  });

  test("faults per block with resource tracking; n/a for a task that could not tell", () => {
    const base = report();
    const tasks = base.tasks.map((t, i) => ({
      ...t,
      faultsPerBlock: i === 0 ? 412.4 : Number.NaN,
    }));
    const text = formatUtilization({ ...base, tasks });
    const lines = text.split("\n");
    assert.match(lines.find((l) => l.includes("mean ms ∠ slope"))!, /faults\/block$/);
    assert.match(lines.find((l) => l.trimStart().startsWith("extract"))!, / 412$/);
    assert.match(lines.find((l) => l.trimStart().startsWith("predict_long_name"))!, / n\/a$/);
    assert.match(text, /faults\/block: minor page faults per block/);
  });

  test("no task ran a worker", () => {
    const text = formatUtilization(report({ tasks: [], workers: [] }));
    assert.match(text, /\(no task ran a worker\)$/);
  });

  test("zero wall time does not divide by zero", () => {
    const text = formatUtilization(report({ wallSeconds: 0 }));
    assert.match(text, /cpu efficiency\s+n\/a/);
  });
});
