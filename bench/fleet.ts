/**
 * A fleet of remote workers (issue 33): one scheduler, the real run loop (`runParallel` with
 * the remote executor factory of `RemoteWorkers`, its `WorkerServer` and `StreamExecutor`s), and
 * thousands of workers simulated by a few processes (`bench/fleet_sim.ts`, launched through
 * `bench/fleet_launcher.ts`), each holding hundreds of authenticated TCP connections on
 * loopback that speak the real protocol: the same handshake, frames, batches and results a
 * `blockwise worker` sends, with heartbeats. A block is a no-op, or a timer per connection.
 * Each simulated node (32 workers) connects from its own loopback address (127.x.y.z), as nodes
 * of a cluster would, so the server's per-address handshake cap sees nodes.
 *
 * Every case runs in a fresh scheduler process (this script with --case), so its peak resident
 * size (VmHWM) and CPU time (/proc/PID/stat, all threads) are its own; the simulators' CPU is
 * read the same way, and the scheduler's event-loop thread's time on a core and time runnable
 * but waiting for one (/proc/thread-self/schedstat): on two cores the scheduler, its JIT
 * threads and the simulators share them. A run still going after 90 s is stopped as by
 * SIGTERM, and its figures are over what it did. Measured at 2,000 workers, then 200, and 20,000
 * when file descriptors (ulimit -n) and memory allow (else as many as the descriptors allow,
 * rounded down to a thousand, with timed blocks for a fifth of the time):
 *   - 2,000,000 no-op blocks: blocks per second over the whole run, handshakes included, the
 *     median of three runs (the 2-worker reference too; the peak resident size is the runs').
 *     Budget: >= 200,000/s and >= 80 % of 2 workers' figure with the same simulator, this run.
 *     At the main size also ten times the blocks, against 2 workers on as many: how much of the
 *     gap is the fleet's start. The scheduler admits workers only while the admitted ones are
 *     busy (admission by need, docs/design/REMOTE.md): no-op blocks keep them idle, so most of
 *     the fleet waits, connected, held back; the figure says how many.
 *   - blocks of 10 ms: fleet utilisation, the workers' time inside blocks over their time from
 *     the last admission to the last block's end (or from the first launch, when some worker was
 *     never admitted: it counts as idle). A simulator's late timer lengthens its block, as the
 *     block's record says; the mean lateness is printed beside. Budget: >= 95 %. At the main size also 50 and 200 ms, until 95 % is
 *     reached: the trade-off on this machine. The scheduler's and the simulators' CPU tell
 *     which side limits.
 *   - handshakes, in the 10 ms run (it outlasts them; a no-op run may not): first launch to
 *     every worker admitted (it got `init`). Budget: < 10 s.
 *   - the scheduler's peak resident size over the cases of a size: budget < 1 GB.
 * Exits 1 when a budget is missed.
 *
 *   bun bench/fleet.ts [--workers 2000] [--blocks N] [--quick] [--sims N] [--seconds 10]
 *   deno run -A bench/fleet.ts [same options]
 *
 * --seconds: how long a timed case would last with every worker always busy (its blocks are
 * workers x seconds / block time); --sims: simulator processes (default: one per core, at
 * least 2); --per-node: workers per
 * simulated node (0: all from 127.0.0.1); --quick: 200 workers (and 20), 200,000 blocks, 2 s.
 */

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { buildPipelineGraph, localExecutorFactory, runParallel } from "../lib/execute/mod.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import { RemoteWorkers } from "../lib/remote/remote_workers.ts";
import { runtimeName } from "../lib/runtime/mod.ts";
import { FleetLauncher, type SimReport } from "./fleet_launcher.ts";
import { statusKb } from "./proc_status.ts";

const THROUGHPUT_BUDGET = 200_000;
const SHARE_OF_TWO = 0.8;
const HANDSHAKE_BUDGET_S = 10;
const RSS_BUDGET_MB = 1024;
const UTILISATION_BUDGET = 0.95;
const SWEEP_MS = [10, 50, 200];
/** A run still going after this is stopped (as by SIGTERM): figures are over what it did. */
const RUN_LIMIT_S = 90;
/** A case process that takes longer is killed and reported as skipped for time. */
const CASE_LIMIT_S = 170;
/** File descriptors the scheduler uses besides one per worker (runtime, pipes, listener). */
const FD_MARGIN = 100;
/** /proc/PID/stat counts CPU time in USER_HZ ticks, 100 per second on Linux. */
const CLOCK_TICKS = 100;

/** Milliseconds since the epoch, comparable with the simulators' clocks. */
const epoch = (): number => performance.timeOrigin + performance.now();

interface CaseSpec {
  readonly workers: number;
  readonly blocks: number;
  /** 0: no-op blocks. */
  readonly blockMs: number;
  readonly sims: number;
  readonly perNode: number;
}

interface CaseResult {
  readonly spec: CaseSpec;
  /**
   * The scheduler's process, and the run's start and end in ms since the epoch: a profiler of
   * the case (bench/fleet_profile.ts) keeps the samples between them.
   */
  readonly pid: number;
  readonly startedAtMs: number;
  readonly endedAtMs: number;
  /** Blocks completed: all of them, unless the run was stopped at RUN_LIMIT_S. */
  readonly completed: number;
  readonly stopped: boolean;
  readonly wallSeconds: number;
  /** First launch to the last worker admitted; NaN when not all were before the run ended. */
  readonly handshakeSeconds: number;
  readonly admitted: number;
  readonly schedulerCpuSeconds: number;
  /**
   * The scheduler's event-loop thread over the run: seconds on a core, and seconds it was ready
   * to run but waited for one (the simulators, the runtime's JIT threads and the kernel had
   * them); NaN without /proc/thread-self/schedstat.
   */
  readonly loopOnCpuSeconds: number;
  readonly loopWaitingSeconds: number;
  /** The runtime's JIT compiler threads over the run, seconds on a core (NaN where unknown). */
  readonly jitOnCpuSeconds: number;
  readonly simCpuSeconds: number;
  readonly hwmMb: number;
  readonly rssMb: number;
  /** Timed blocks only, else NaN. */
  readonly utilisation: number;
  /** Blocks per second from the last admission to the end; NaN when not all were admitted. */
  readonly steadyRate: number;
  /**
   * Where a short run's time goes besides its blocks: from the run's start to the first worker
   * admitted, and from the last block's end (in a simulator) to the run's end (ms; NaN when no
   * worker was admitted or ran a block).
   */
  readonly firstAdmittedMs: number;
  readonly tailMs: number;
  readonly lateMs: number;
  readonly busyRetries: number;
  /**
   * Connections the kernel dropped because the listener's accept queue was full (TcpExt
   * ListenOverflows, counted for the whole machine over the case); each waits 1 s or more for
   * TCP to try again. NaN where /proc/net/netstat is not there.
   */
  readonly queueDrops: number;
  readonly batches: number;
  readonly resultFrames: number;
  readonly refused: number;
  /** Connections still waiting, not admitted, when the run ended (held back for lack of need). */
  readonly waiting: number;
  readonly endings: Readonly<Record<string, number>>;
}

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const here = fileURLToPath(import.meta.url);
const self = (extra: readonly string[]): string[] =>
  runtimeName() === "deno" ? ["run", "-A", "--quiet", here, ...extra] : [here, ...extra];

/** The machine's count of connections dropped by full accept queues (TcpExt ListenOverflows). */
function listenOverflows(): number {
  try {
    const lines = fs.readFileSync("/proc/net/netstat", "utf8").split("\n");
    const at = lines.findIndex((l) => l.startsWith("TcpExt:"));
    const names = lines[at]!.split(/\s+/);
    return Number(lines[at + 1]!.split(/\s+/)[names.indexOf("ListenOverflows")]);
  } catch {
    return Number.NaN;
  }
}

/** This thread's seconds on a core and seconds runnable but waiting for one, since it began. */
function threadSchedule(): { onCpu: number; waiting: number } {
  try {
    const [onCpu, waiting] = fs.readFileSync("/proc/thread-self/schedstat", "utf8").split(" ");
    return { onCpu: Number(onCpu) / 1e9, waiting: Number(waiting) / 1e9 };
  } catch {
    return { onCpu: Number.NaN, waiting: Number.NaN };
  }
}

/**
 * Seconds on a core of this process's JIT compiler threads since they began: JavaScriptCore's
 * are named "JITWorker", V8's (Deno) have no name of their own, so Deno gets NaN.
 */
function jitOnCpu(): number {
  try {
    let seconds = 0;
    let found = false;
    for (const task of fs.readdirSync("/proc/self/task")) {
      try {
        const comm = fs.readFileSync(`/proc/self/task/${task}/comm`, "utf8").trim();
        if (!comm.startsWith("JITWorker")) continue;
        const onCpu = fs.readFileSync(`/proc/self/task/${task}/schedstat`, "utf8").split(" ")[0];
        seconds += Number(onCpu) / 1e9;
        found = true;
      } catch {
        // the thread ended between the listing and the read
      }
    }
    return found ? seconds : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** CPU seconds of a process (all its threads), user and system. */
function cpuSeconds(pid: number | "self"): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}

// ---- one case, in its own scheduler process ---------------------------------------------------

async function runCase(spec: CaseSpec): Promise<CaseResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-bench-fleet-"));
  const file = path.join(dir, "fleet.ts");
  fs.writeFileSync(
    file,
    `export default { tasks: [{ id: "fleet", totalRoi: { offset: [0], shape: [${spec.blocks}] },
       readRoi: { offset: [0], shape: [1] }, writeRoi: { offset: [0], shape: [1] },
       readWriteConflict: false, maxWorkers: ${spec.workers},
       launch: { kind: "command", argv: ["{worker}"] }, process() {} }] };\n`,
  );
  const fleet = await FleetLauncher.start({
    processes: spec.sims,
    perNode: spec.perNode,
    blockMs: spec.blockMs,
  });
  fleet.takeOverCommandLaunches();
  const pipeline = await loadPipeline(file);
  const graph = buildPipelineGraph(pipeline);
  const notices: string[] = [];
  const simCpu = () => fleet.pids.reduce((s, pid) => s + cpuSeconds(pid), 0);
  const drops0 = listenOverflows();
  const cpu0 = cpuSeconds("self");
  const loop0 = threadSchedule();
  const jit0 = jitOnCpu();
  const sim0 = simCpu();
  const started = performance.now();
  const startedAt = epoch();
  const remote = await RemoteWorkers.open({
    pipeline,
    logDir: path.join(dir, "logs"),
    runId: "fleet",
    log: (m) => notices.push(m),
  });
  if (remote === null) throw new Error("The fleet task has no remote workers");
  let stopAt = Number.NaN;
  let stopTimer: ReturnType<typeof setTimeout> | undefined;
  const result = await runParallel(pipeline, graph, {
    executorFactory: remote.factory(localExecutorFactory),
    observer: { notice: (m) => notices.push(m) },
    onStopRequest: (stop) => {
      stopTimer = setTimeout(() => {
        stopAt = epoch();
        stop("SIGTERM");
      }, RUN_LIMIT_S * 1000);
    },
    graceSeconds: 5,
  });
  clearTimeout(stopTimer);
  const wallSeconds = (performance.now() - started) / 1000;
  const endedAt = epoch();
  const schedulerCpuSeconds = cpuSeconds("self") - cpu0;
  const loop1 = threadSchedule();
  const jit1 = jitOnCpu();
  const queueDrops = listenOverflows() - drops0;
  const simCpuSeconds = simCpu() - sim0;
  const hwmMb = statusKb(process.pid, "VmHWM") / 1024;
  const rssMb = statusKb(process.pid, "VmRSS") / 1024;
  const refused = remote.server.refused;
  const waiting = remote.server.waiting;
  await remote.close();
  const reports = await fleet.reports();
  await fleet.quit();
  fs.rmSync(dir, { recursive: true, force: true });
  const done = result.tasks.reduce((n, t) => n + t.counters.completed, 0);
  const stopped = result.stoppedBy !== null;
  if (done !== spec.blocks && !stopped) {
    throw new Error(
      `only ${done} of ${spec.blocks} blocks completed:\n${notices.slice(0, 20).join("\n")}`,
    );
  }
  const upAt = fleet.upAt;
  const allUp = upAt.length >= spec.workers ? Math.max(...upAt) : Number.NaN;
  const blocksRun = reports.reduce((n, r) => n + r.blocks, 0);
  const lastBlockEnd = Math.max(...reports.map((r) => r.lastBlockEnd));
  const end = Number.isNaN(stopAt) ? lastBlockEnd : Math.min(stopAt, lastBlockEnd);
  return {
    spec,
    pid: process.pid,
    startedAtMs: startedAt,
    endedAtMs: endedAt,
    completed: done,
    stopped,
    wallSeconds,
    handshakeSeconds: (allUp - fleet.firstLaunchAt) / 1000,
    admitted: upAt.length,
    schedulerCpuSeconds,
    loopOnCpuSeconds: loop1.onCpu - loop0.onCpu,
    loopWaitingSeconds: loop1.waiting - loop0.waiting,
    // A JIT thread started during the run counts from zero.
    jitOnCpuSeconds: jit1 - (Number.isNaN(jit0) ? 0 : jit0),
    simCpuSeconds,
    hwmMb,
    rssMb,
    utilisation: spec.blockMs > 0
      ? utilisation(reports, Number.isNaN(allUp) ? fleet.firstLaunchAt : allUp, end, spec.workers)
      : Number.NaN,
    firstAdmittedMs: upAt.length === 0 ? Number.NaN : Math.min(...upAt) - startedAt,
    tailMs: blocksRun === 0 ? Number.NaN : endedAt - lastBlockEnd,
    steadyRate: end > allUp
      ? overWindow(reports, "finished", allUp, end) / (end - allUp) * 1000
      : Number.NaN,
    lateMs: blocksRun === 0 ? 0 : reports.reduce((s, r) => s + r.lateMs * r.blocks, 0) / blocksRun,
    busyRetries: reports.reduce((n, r) => n + r.busyRetries, 0),
    queueDrops,
    batches: reports.reduce((n, r) => n + r.batches, 0),
    resultFrames: reports.reduce((n, r) => n + r.resultFrames, 0),
    refused,
    waiting,
    endings: Object.fromEntries(fleet.endings),
  };
}

/** The sum of a per-bucket figure over [from, to) (a bucket cut by an end counts in part). */
function overWindow(
  reports: readonly SimReport[],
  figure: "busy" | "finished",
  from: number,
  to: number,
): number {
  let sum = 0;
  for (const r of reports) {
    r[figure].forEach((v, i) => {
      const start = r.bucketsFrom + i * r.bucketMs;
      const overlap = Math.min(start + r.bucketMs, to) - Math.max(start, from);
      if (overlap > 0) sum += v * Math.min(1, overlap / r.bucketMs);
    });
  }
  return sum;
}

/**
 * Busy time over worker time, from the last admission to the last block's end (or to
 * the stop of a run cut short). When not every worker was admitted, `from` is the first launch
 * and workers never admitted count as idle: a fleet the scheduler cannot admit is not busy.
 */
function utilisation(
  reports: readonly SimReport[],
  from: number,
  to: number,
  workers: number,
): number {
  return to > from ? overWindow(reports, "busy", from, to) / (workers * (to - from)) : Number.NaN;
}

// ---- the driver: cases in child processes, then the table ------------------------------------

/** Run one case in a fresh process; null with why when it could not finish. */
function spawnCase(spec: CaseSpec): Promise<CaseResult | string> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, self(["--case", JSON.stringify(spec)]), {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (c: string) => (out += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), CASE_LIMIT_S * 1000);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      const last = out.trim().split("\n").pop() ?? "";
      // JSON writes NaN (a figure that does not apply) as null.
      const nan = (_key: string, v: unknown) => v === null ? Number.NaN : v;
      if (code === 0 && last.startsWith("{")) resolve(JSON.parse(last, nan) as CaseResult);
      else if (signal === "SIGKILL") resolve(`time: not done within ${CASE_LIMIT_S} s`);
      else resolve(`the case failed (status ${code ?? signal}): ${last.slice(0, 300)}`);
    });
  });
}

/** The soft and hard limits on open files of this process. */
function openFileLimits(): { soft: number; hard: number } {
  const limits = fs.readFileSync("/proc/self/limits", "utf8");
  const m = /Max open files\s+(\S+)\s+(\S+)/.exec(limits);
  const n = (s: string | undefined) => s === "unlimited" ? Infinity : Number(s);
  return { soft: n(m?.[1]), hard: n(m?.[2]) };
}

function memAvailableMb(): number {
  const m = /MemAvailable:\s+(\d+) kB/.exec(fs.readFileSync("/proc/meminfo", "utf8"));
  return m === null ? Infinity : Number(m[1]) / 1024;
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
/** Sessions that ended neither stopped by the run nor cancelled at its end (lost workers). */
const lost = (r: CaseResult) =>
  fmt(
    Object.entries(r.endings).reduce(
      (n, [why, count]) => why === "stopped" || why === "cancelled by the launcher" ? n : n + count,
      0,
    ),
  );
/** "2,000,000 blocks", or what a run stopped at RUN_LIMIT_S did. */
const done = (r: CaseResult) =>
  r.stopped && r.completed < r.spec.blocks
    ? `stopped at ${RUN_LIMIT_S} s: ${fmt(r.completed)} of ${fmt(r.spec.blocks)} blocks`
    : `${fmt(r.completed)} blocks`;
const fixed = (n: number, d: number) => Number.isFinite(n) ? n.toFixed(d) : "-";

interface Row {
  readonly workers: string;
  readonly measure: string;
  readonly figure: string;
  readonly budget: string;
  /** null: no budget on this line. */
  readonly ok: boolean | null;
}

async function drive(): Promise<void> {
  const quick = args.includes("--quick");
  const workers = option("--workers", quick ? 200 : 2000);
  const blocks = option("--blocks", quick ? 200_000 : 2_000_000);
  const seconds = option("--seconds", quick ? 2 : 10);
  // One simulator per core: more only switch contexts on the cores the scheduler needs (four
  // on two cores took the 2,000-worker no-op run 0.65 s against 0.59 s with two; the 2-worker
  // reference, two processes either way, the same).
  const sims = option("--sims", Math.max(2, os.cpus().length));
  const perNode = option("--per-node", 32);
  const limits = openFileLimits();
  // The largest size is ten times the main one, or as many as the scheduler's descriptors allow
  // (rounded down to a thousand) when that is still well above the main size: the next order
  // of magnitude as far as this machine lets it be measured.
  const mostByDescriptors = Math.floor((limits.soft - FD_MARGIN) / 1000) * 1000;
  const largest = workers * 10 + FD_MARGIN > limits.soft && mostByDescriptors >= 2 * workers
    ? mostByDescriptors
    : workers * 10;
  const sizes = [Math.max(2, Math.round(workers / 10)), workers, largest];
  const spec = (w: number, blockMs: number): CaseSpec => ({
    workers: w,
    // Timed blocks at the largest size: a fifth of the time (the simulators, not the scheduler,
    // limit it there, and a full-length run would only be stopped at RUN_LIMIT_S).
    blocks: blockMs === 0
      ? blocks
      : Math.round(w * (w === largest ? seconds / 5 : seconds) * 1000 / blockMs),
    blockMs,
    sims: Math.min(sims, w),
    perNode,
  });
  const load = os.loadavg().map((l) => l.toFixed(2)).join(" ");
  console.log(
    `blockwise fleet benchmark (${runtimeName()}): ${os.cpus().length} cores, load average ${load}, ${
      Math.round(os.totalmem() / 2 ** 30)
    } GB; ${sims} simulator processes, ${perNode} workers per simulated node`,
  );
  const rows: Row[] = [];
  const say = (
    workers: string,
    measure: string,
    figure = "",
    budget = "",
    ok: boolean | null = null,
  ) => {
    rows.push({ workers, measure, figure, budget, ok });
    console.error(`  [fleet] ${workers} ${measure}: ${figure}`);
  };
  const cores = (cpu: number, wall: number) => `${fixed(cpu, 1)} s = ${fixed(cpu / wall, 2)} cores`;
  const resources = (r: CaseResult) =>
    `${cores(r.schedulerCpuSeconds, r.wallSeconds)} (event loop ${
      fixed(r.loopOnCpuSeconds, 2)
    } s on a core, ${fixed(r.loopWaitingSeconds, 2)} s waiting for one; JIT threads ${
      fixed(r.jitOnCpuSeconds, 2)
    } s) / ${cores(r.simCpuSeconds, r.wallSeconds)}; scheduler peak ${fmt(r.hwmMb)} MB`;
  // What a fleet adds to a short run: workers to start before the first block, and to stop after
  // the last (docs/design/REMOTE.md, "Where a fleet's half second goes").
  const startAndEnd = (r: CaseResult) =>
    `first worker admitted ${
      fixed(r.firstAdmittedMs, 0)
    } ms after the start; last block to the end ${fixed(r.tailMs, 0)} ms`;

  // No-op runs are short (half a second) on a noisy machine: each figure is the median of three.
  const medianOfThree = async (s: CaseSpec): Promise<CaseResult | string> => {
    const runs: CaseResult[] = [];
    for (let run = 0; run < 3; run++) {
      const r = await spawnCase(s);
      if (typeof r === "string") return r;
      runs.push(r);
    }
    runs.sort((a, b) => a.completed / a.wallSeconds - b.completed / b.wallSeconds);
    return { ...runs[1]!, hwmMb: Math.max(...runs.map((r) => r.hwmMb)) };
  };
  const ref = await medianOfThree(spec(2, 0));
  if (typeof ref === "string") throw new Error(`The 2-worker reference failed: ${ref}`);
  const refRate = ref.completed / ref.wallSeconds;
  say(
    "2",
    "no-op throughput (reference, median of 3)",
    `${fmt(refRate)} blocks/s (${done(ref)} in ${fixed(ref.wallSeconds, 2)} s; ${
      fixed(ref.completed / ref.batches, 1)
    } blocks per batch)`,
    `>= ${fmt(THROUGHPUT_BUDGET)}/s`,
    refRate >= THROUGHPUT_BUDGET,
  );
  say("2", "  scheduler / simulator CPU", resources(ref));
  say("2", "  start and end", startAndEnd(ref));

  let perWorkerMb = Number.NaN;
  for (const [i, w] of sizes.entries()) {
    const name = fmt(w);
    // A size cut down to what the descriptors allow is measured, not judged: there the
    // simulators, not the scheduler, run out of the machine first (bench/fleet.ts's note).
    const capped = i === 2 && largest !== workers * 10;
    const sayHere: typeof say = (who, measure, figure = "", budget = "", ok = null) =>
      capped
        ? say(who, measure, figure, budget === "" ? "" : "(none: size capped by ulimit -n)", null)
        : say(who, measure, figure, budget, ok);
    if (capped && !quick) {
      say(
        fmt(workers * 10),
        `measured at ${name}`,
        `file descriptors: the scheduler holds one per worker and ulimit -n is ${
          fmt(limits.soft)
        } (hard ${fmt(limits.hard)}), so ${name} is the most it allows`,
      );
    }
    if (i === 2 && quick) {
      sayHere(name, "skipped", "--quick");
      continue;
    }
    if (w + FD_MARGIN > limits.soft) {
      sayHere(
        name,
        "skipped",
        `file descriptors: the scheduler holds one per worker, ${
          fmt(w + FD_MARGIN)
        } with its own, but ulimit -n is ${fmt(limits.soft)} (hard ${fmt(limits.hard)})`,
      );
      continue;
    }
    const needMb = perWorkerMb * w * 2; // scheduler and simulators, about alike
    if (needMb > 0.8 * memAvailableMb()) {
      sayHere(
        name,
        "skipped",
        `memory: about ${fmt(needMb)} MB needed, ${fmt(memAvailableMb())} MB available`,
      );
      continue;
    }
    const peaks: number[] = [];
    const noop = await medianOfThree(spec(w, 0));
    if (typeof noop === "string") sayHere(name, "no-op throughput: skipped", noop, "", false);
    else {
      const rate = noop.completed / noop.wallSeconds;
      sayHere(
        name,
        "no-op throughput (median of 3)",
        `${fmt(rate)} blocks/s (${done(noop)} in ${fixed(noop.wallSeconds, 2)} s; ${
          fixed(100 * rate / refRate, 0)
        } % of 2 workers; ${fixed(noop.completed / noop.batches, 1)} blocks per batch; ${
          Number.isFinite(noop.steadyRate)
            ? `${fmt(noop.steadyRate)}/s once all were admitted`
            : noop.admitted < w
            ? `only ${fmt(noop.admitted)} admitted, ${fmt(noop.waiting)} held back`
            : "the last admitted as the run ended"
        })`,
        `>= ${fmt(THROUGHPUT_BUDGET)}/s, >= 80 % of 2 (${fmt(SHARE_OF_TWO * refRate)})`,
        rate >= Math.max(THROUGHPUT_BUDGET, SHARE_OF_TWO * refRate),
      );
      sayHere(name, "  scheduler / simulator CPU", resources(noop));
      sayHere(name, "  start and end", startAndEnd(noop));
      peaks.push(noop.hwmMb);
      if (i === 1) perWorkerMb = noop.hwmMb / w;
    }
    if (i === 1) {
      // The same with ten times the blocks: how far the fleet's start is amortised.
      const blocksLong = 10 * blocks;
      const long = { ...spec(w, 0), blocks: blocksLong };
      const refLong = await spawnCase({ ...spec(2, 0), blocks: blocksLong });
      const fleetLong = await spawnCase(long);
      if (typeof refLong === "string" || typeof fleetLong === "string") {
        const why = typeof refLong === "string" ? `2 workers: ${refLong}` : String(fleetLong);
        sayHere(name, `no-op throughput, ${fmt(blocksLong)} blocks: skipped`, why);
      } else {
        const rate = fleetLong.completed / fleetLong.wallSeconds;
        const twoRate = refLong.completed / refLong.wallSeconds;
        sayHere(
          name,
          `no-op throughput, ${fmt(blocksLong)} blocks`,
          `${fmt(rate)} blocks/s (${done(fleetLong)} in ${fixed(fleetLong.wallSeconds, 2)} s; ${
            fixed(100 * rate / twoRate, 0)
          } % of 2 workers on as many, ${fmt(twoRate)}/s; ${
            Number.isFinite(fleetLong.steadyRate)
              ? `${fmt(fleetLong.steadyRate)}/s once all were admitted`
              : `${fmt(fleetLong.admitted)} admitted, ${fmt(fleetLong.waiting)} held back`
          })`,
          "(the start amortised)",
        );
        sayHere(name, "  scheduler / simulator CPU", resources(fleetLong));
        peaks.push(fleetLong.hwmMb);
      }
    }
    // Utilisation: 10 ms blocks at every size; longer ones at the main size until 95 % is reached.
    for (const ms of i === 1 ? SWEEP_MS : SWEEP_MS.slice(0, 1)) {
      const first = ms === SWEEP_MS[0];
      const timed = await spawnCase(spec(w, ms));
      if (typeof timed === "string") {
        sayHere(name, `utilisation, ${ms} ms blocks: skipped`, timed, "", first ? false : null);
        break;
      }
      const rate = timed.completed / timed.wallSeconds;
      sayHere(
        name,
        `utilisation, ${ms} ms blocks`,
        `${fixed(100 * timed.utilisation, 1)} % (${fmt(rate)} blocks/s of ${
          fmt(w * 1000 / ms)
        } needed; ${done(timed)}; timers ${fixed(timed.lateMs, 2)} ms late${
          timed.admitted < w
            ? `; over the whole run: only ${fmt(timed.admitted)} admitted, ${
              fmt(timed.waiting)
            } held back`
            : ""
        })`,
        // The budget is for 10 ms blocks; longer ones show where this machine gets there.
        first ? `>= ${100 * UTILISATION_BUDGET} %` : "(trade-off)",
        first ? timed.utilisation >= UTILISATION_BUDGET : null,
      );
      sayHere(name, `  scheduler / simulator CPU (${ms} ms)`, resources(timed));
      peaks.push(timed.hwmMb);
      if (first) {
        // Measured here, where the run outlasts the handshakes (a no-op run may not).
        sayHere(
          name,
          "handshake: first launch to all admitted (10 ms run)",
          `${
            Number.isFinite(timed.handshakeSeconds)
              ? `${fixed(timed.handshakeSeconds, 2)} s`
              : `only ${fmt(timed.admitted)} of ${name} ever admitted`
          } (${fmt(timed.busyRetries)} busy refusals retried; ${
            fixed(timed.queueDrops, 0)
          } dropped by a full accept queue; ${lost(timed)} sessions lost)`,
          `< ${HANDSHAKE_BUDGET_S} s`,
          timed.handshakeSeconds < HANDSHAKE_BUDGET_S,
        );
      }
      if (timed.utilisation >= UTILISATION_BUDGET) break;
    }
    if (peaks.length > 0) {
      const peak = Math.max(...peaks);
      sayHere(
        name,
        "scheduler peak resident (VmHWM), any case",
        `${fmt(peak)} MB`,
        `< ${fmt(RSS_BUDGET_MB)} MB`,
        peak < RSS_BUDGET_MB,
      );
    }
  }

  const width = (k: keyof Row) => Math.max(...rows.map((r) => String(r[k]).length), k.length);
  const w = { workers: width("workers"), measure: width("measure"), figure: width("figure") };
  const b = width("budget");
  console.log(
    `${"workers".padStart(w.workers)}  ${"measure".padEnd(w.measure)}  ${
      "figure".padEnd(w.figure)
    }  ${"budget".padEnd(b)}  result`,
  );
  for (const r of rows) {
    console.log(
      `${r.workers.padStart(w.workers)}  ${r.measure.padEnd(w.measure)}  ${
        r.figure.padEnd(w.figure)
      }  ${r.budget.padEnd(b)}  ${r.ok === null ? "" : r.ok ? "PASS" : "FAIL"}`,
    );
  }
  if (rows.some((r) => r.ok === false)) process.exitCode = 1;
}

const caseAt = args.indexOf("--case");
if (caseAt >= 0) {
  const result = await runCase(JSON.parse(args[caseAt + 1]!) as CaseSpec);
  console.log(JSON.stringify(result));
  process.exit(0);
} else {
  await drive();
}
