/**
 * The resource-utilisation report printed after a parallel run. It shows what daisy's "Resource
 * Utilization" section shows (daisy reference §7.3) in an aligned layout:
 *
 * ```
 * Resource utilization
 *   process
 *     peak RSS        1.2 GB
 *     total CPU       142.30 s (all threads)
 *     wall time       38.70 s
 *     cpu efficiency  3.68x (≈ 3.7 cores busy on average)
 *     disk read       2.4 GB
 *     disk write      510.0 MB
 *
 *   task     attempts  workers  max conc  restarts  mean ms ∠ slope  cpu busy  idle s  cpu s  wall s
 *   ───────  ────────  ───────  ────────  ────────  ───────────────  ────────  ──────  ─────  ──────
 *   extract        12        4         4         0  41.67 ∠ +0.0012       62%    1.20   1.90    0.80
 *
 *   attempts: blocks run, retries included · mean ms ∠ slope: mean time of an attempt and its
 *   trend in ms per attempt (+ means blocks get slower) · cpu busy: share of the workers'
 *   lifetime spent inside blocks
 * ```
 *
 * Per task: `attempts` is the number of block durations recorded (every attempt, a retried
 * block counts once per attempt, so it can exceed the task's blocks), `workers` the workers spawned
 * (restarts included), `max conc` the peak of workers alive at once, `mean ms ∠ slope` the mean
 * block time and its least-squares change per block (positive: blocks get slower), `cpu busy`
 * the share of worker lifetime spent inside blocks (daisy: total block time / total worker
 * wall time), `idle s` the rest of the workers' lifetime (start-up, import and `setup`, waiting
 * for blocks), `faults/block` (with resource tracking) the mean minor page faults of a block,
 * `cpu s` the CPU seconds the task's workers used and `wall s` the time from the
 * task's first worker start to its last worker end. Tasks that never had a worker nor a
 * recorded block are left out, as in daisy.
 */

import type { UtilizationReport } from "../run/run_types.ts";
import { formatTable } from "./table.ts";

const BYTE_UNITS = ["B", "KB", "MB", "GB", "TB"] as const;

/** What the columns that are not self-explanatory mean, under the table. */
const LEGEND: readonly string[] = [
  "  attempts: blocks run, retries included · mean ms ∠ slope: mean time of an attempt and its",
  "  trend in ms per attempt (+ means blocks get slower) · cpu busy: share of the workers'",
  "  lifetime spent inside blocks · idle s: worker time outside blocks (start-up, waiting)",
];
const FAULTS_LEGEND =
  "  faults/block: minor page faults per block (memory mapped afresh; see WORKERS.md)";

/**
 * Bytes in base 1024 with one decimal: `512 B`, `1.5 KB`, `510.0 MB`, `1.2 GB`; TB is the
 * largest unit. Whole bytes have no decimal; a value that is not a finite number is `n/a`.
 */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n)) return "n/a";
  const sign = n < 0 ? "-" : "";
  let value = Math.abs(n);
  if (value < 1024) return `${sign}${Math.round(value)} B`;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  // 1023.96 KB would print as "1024.0 KB": move it up a unit.
  if (Number(value.toFixed(1)) >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${sign}${value.toFixed(1)} ${BYTE_UNITS[unit]}`;
}

function seconds(n: number, digits = 2): string {
  return Number.isFinite(n) ? n.toFixed(digits) : "n/a";
}

function signed(n: number, digits: number): string {
  if (!Number.isFinite(n)) return "n/a";
  const text = n.toFixed(digits);
  // -0.0000 reads as a trend that is not there.
  if (Number(text) === 0) return `+${(0).toFixed(digits)}`;
  return n > 0 ? `+${text}` : text;
}

type TaskFigures = UtilizationReport["tasks"][number];

/** Seconds the task's workers were alive and working (parked time left out), 0 if unknown. */
function workerSecondsOf(report: UtilizationReport, task: TaskFigures): number {
  let workerSeconds = 0;
  for (const w of report.workers) {
    if (w.taskId !== task.id) continue;
    // A worker's parked time (idle, out of the `--resources` budget) is not its working time.
    if (Number.isFinite(w.endedAt) && w.endedAt > w.startedAt) {
      workerSeconds += w.endedAt - w.startedAt - w.parkedSeconds;
    }
  }
  return workerSeconds;
}

/** `idle s`: the task's workers' time outside blocks (start-up, setup, waiting for work). */
function idleSeconds(report: UtilizationReport, task: TaskFigures): string {
  const workerSeconds = workerSecondsOf(report, task);
  if (!(workerSeconds > 0) || !Number.isFinite(task.busySeconds)) return "n/a";
  return seconds(Math.max(0, workerSeconds - task.busySeconds));
}

/** `cpu busy`: block time over the lifetime of the task's workers, in percent. */
function busyPercent(report: UtilizationReport, task: TaskFigures): string {
  const workerSeconds = workerSecondsOf(report, task);
  // Without finished worker lifetimes, fall back to the task's wall span.
  const denominator = workerSeconds > 0 ? workerSeconds : task.wallSeconds;
  if (!(denominator > 0) || !Number.isFinite(task.busySeconds)) return "n/a";
  return `${Math.round((task.busySeconds / denominator) * 100)}%`;
}

function efficiency(report: UtilizationReport): string {
  const { processCpuSeconds: cpu, wallSeconds: wall } = report;
  if (!(wall > 0) || !Number.isFinite(cpu)) return "n/a";
  const ratio = cpu / wall;
  return `${ratio.toFixed(2)}x (≈ ${ratio.toFixed(1)} cores busy on average)`;
}

/** The whole report as lines joined by "\n" (no trailing newline). */
export function formatUtilization(report: UtilizationReport): string {
  const processRows: [string, string][] = [
    ["peak RSS", formatBytes(report.peakRssBytes)],
    ["total CPU", `${seconds(report.processCpuSeconds)} s (all threads)`],
    ["wall time", `${seconds(report.wallSeconds)} s`],
    ["cpu efficiency", efficiency(report)],
    ["disk read", formatBytes(report.ioReadBytes)],
    ["disk write", formatBytes(report.ioWriteBytes)],
  ];
  const keyWidth = Math.max(...processRows.map(([k]) => k.length));
  const lines = [
    "Resource utilization",
    "  process",
    ...processRows.map(([k, v]) => `    ${k.padEnd(keyWidth)}  ${v}`),
    "",
  ];

  const tasks = report.tasks.filter((t) => t.workersSpawned > 0 || t.blocks > 0);
  if (tasks.length === 0) {
    lines.push("  (no task ran a worker)");
    return lines.join("\n");
  }
  const trends = tasks.map((t) => `${seconds(t.meanMs)} ∠ ${signed(t.slopeMs, 4)}`);
  const faults = tasks.some((t) => Number.isFinite(t.faultsPerBlock));
  lines.push(formatTable(
    [
      { header: "task" },
      { header: "attempts", align: "right" },
      { header: "workers", align: "right" },
      { header: "max conc", align: "right" },
      { header: "restarts", align: "right" },
      { header: "mean ms ∠ slope", align: "right" },
      { header: "cpu busy", align: "right" },
      { header: "idle s", align: "right" },
      { header: "cpu s", align: "right" },
      { header: "wall s", align: "right" },
      ...(faults ? [{ header: "faults/block", align: "right" as const }] : []),
    ],
    tasks.map((t, i) => [
      t.id,
      String(t.blocks),
      String(t.workersSpawned),
      String(t.maxConcurrent),
      String(t.restarts),
      trends[i]!,
      busyPercent(report, t),
      idleSeconds(report, t),
      seconds(t.cpuSeconds),
      seconds(t.wallSeconds),
      ...(faults ? [Number.isFinite(t.faultsPerBlock) ? t.faultsPerBlock.toFixed(0) : "n/a"] : []),
    ]),
    2,
  ));
  lines.push("", ...LEGEND, ...(faults ? [FAULTS_LEGEND] : []));
  return lines.join("\n");
}
