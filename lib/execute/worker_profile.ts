/**
 * The environment of the worker processes blockwise starts (Python workers, local and remote,
 * and command blocks): the worker profile, chosen for block work, then the task's own `env`.
 *
 * - The allocator keeps memory mapped between blocks: glibc's `MALLOC_TOP_PAD_` (256 MiB), so a
 *   block's large temporaries reuse the pages the last block used instead of being mapped,
 *   zero-filled page by page and unmapped again. Of the glibc settings measured it is the one
 *   that removes the faults and holds the least between blocks (docs/design/WORKERS.md).
 * - BLAS/OpenMP thread pools sized to the worker's share of the cores (`requires.cpu`, else the
 *   cores over the task's `maxWorkers`), so two workers do not run four BLAS threads on two
 *   cores. A remote worker with no figure to go by sizes them from its own CPU affinity (the
 *   cores its job was given), in the Python client.
 *
 * Remote JavaScript workers get the task's `env` only. What the user set wins: a variable in
 * blockwise's environment is left as it is (as is every allocator setting when `GLIBC_TUNABLES`
 * names a `glibc.malloc` tunable), and the task's `env` overrides both. `workerProfile: false`
 * turns the profile off; `env` still applies. Callers pass each task with the launch it really
 * has in this run (`--launcher` may override the pipeline's), see `withLaunch`.
 */

import * as os from "node:os";
import process from "node:process";
import type { LaunchConfig, PipelineConfig, TaskConfig } from "../pipeline/spec.ts";
import { keepAllocatorWarm } from "../runtime/allocator.ts";

/** The allocator part of the profile (glibc; other libcs ignore these variables). */
export const ALLOCATOR_PROFILE: Readonly<Record<string, string>> = {
  MALLOC_TOP_PAD_: "268435456",
};

/** The thread-pool variables of OpenMP, OpenBLAS, MKL and numexpr. */
export const THREAD_VARIABLES: readonly string[] = [
  "OMP_NUM_THREADS",
  "OPENBLAS_NUM_THREADS",
  "MKL_NUM_THREADS",
  "NUMEXPR_NUM_THREADS",
];

/**
 * Tells the Python client to size the thread pools from its CPU affinity (those of
 * THREAD_VARIABLES it finds unset), before it imports the task's module.
 */
export const AFFINITY_THREADS_ENV = "BLOCKWISE_THREADS_FROM_AFFINITY";

/** How many threads a worker's pools get: a count, or its own CPU affinity (remote workers). */
export type ThreadShare = number | "affinity";

export interface WorkerEnvironment {
  /** What to add to the inherited environment of each worker process of the task. */
  readonly variables: Readonly<Record<string, string>>;
  /** The profile's variables as applied (what the user set left out). */
  readonly applied: Readonly<Record<string, string>>;
  /** Profile variables left to the user's setting: name=value as the worker gets it. */
  readonly kept: Readonly<Record<string, string>>;
  readonly threads: ThreadShare | null;
  /** False when the task turned the profile off, or its workers are not processes. */
  readonly profiled: boolean;
}

/** The cores of this machine that this process may use. */
export function usableCores(): number {
  const parallelism = (os as { availableParallelism?: () => number }).availableParallelism;
  return Math.max(1, typeof parallelism === "function" ? parallelism() : os.cpus().length);
}

/** `task` as it runs when its workers are launched by `launch` (after `--launcher`). */
export function withLaunch(task: TaskConfig, launch: LaunchConfig | undefined): TaskConfig {
  return launch === undefined || launch === task.launch ? task : { ...task, launch };
}

/** Whether the task's workers are processes blockwise starts (the profile's reach). */
export function hasWorkerProcesses(task: TaskConfig): boolean {
  return task.kind === "python" || task.kind === "command" || task.launch.kind !== "local";
}

/** The thread share of one worker of `task`. */
export function threadShare(task: TaskConfig, cores: number): ThreadShare {
  const cpu = task.requires["cpu"];
  if (cpu !== undefined && cpu > 0) return Math.max(1, Math.floor(cpu));
  if (task.kind === "command" || task.launch.kind === "local") {
    return Math.max(1, Math.floor(cores / task.maxWorkers));
  }
  if (task.launch.kind === "slurm" && task.launch.cpusPerWorker !== null) {
    return task.launch.cpusPerWorker;
  }
  return "affinity";
}

/**
 * The environment to give `task`'s worker processes, given the environment blockwise runs in
 * (`inherited`) and the cores of this machine.
 */
export function workerEnvironment(
  task: TaskConfig,
  inherited: Readonly<Record<string, string | undefined>>,
  cores: number = usableCores(),
): WorkerEnvironment {
  const own = task.env ?? {};
  // Remote JavaScript workers get the task's env only: their blocks run in Web Workers, whose
  // allocation the glibc settings were not measured on.
  const profiled = task.workerProfile && task.kind !== "process";
  const applied: Record<string, string> = {};
  const kept: Record<string, string> = {};
  let threads: ThreadShare | null = null;
  if (profiled) {
    const userSet = (name: string): string | undefined => own[name] ?? inherited[name];
    const tunables = userSet("GLIBC_TUNABLES") ?? "";
    const allocatorByUser = /glibc\.malloc\./.test(tunables);
    for (const [name, value] of Object.entries(ALLOCATOR_PROFILE)) {
      const theirs = userSet(name);
      if (theirs !== undefined) kept[name] = theirs;
      else if (allocatorByUser) kept["GLIBC_TUNABLES"] = tunables;
      else applied[name] = value;
    }
    threads = threadShare(task, cores);
    for (const name of THREAD_VARIABLES) {
      const theirs = userSet(name);
      if (theirs !== undefined) kept[name] = theirs;
      else if (threads !== "affinity") applied[name] = String(threads);
    }
    if (threads === "affinity") applied[AFFINITY_THREADS_ENV] = "1";
  }
  return { variables: { ...applied, ...own }, applied, kept, threads, profiled };
}

/**
 * One line for `plan` and the run's first lines: what a task's worker processes get, or null
 * for a task whose workers are threads of blockwise (and that has no env).
 */
export function describeWorkerEnvironment(
  task: TaskConfig,
  environment: WorkerEnvironment,
): string | null {
  if (!hasWorkerProcesses(task)) return null;
  const what = task.kind === "python"
    ? "Python workers"
    : task.kind === "command"
    ? "command blocks"
    : "remote workers";
  const pairs = (record: Readonly<Record<string, string>>) =>
    Object.entries(record).map(([k, v]) => `${k}=${v}`).join(" ");
  const parts: string[] = [];
  if (task.kind === "process") {
    if (Object.keys(task.env ?? {}).length === 0) return null;
  } else if (!environment.profiled) {
    parts.push("worker profile off (workerProfile: false)");
  } else {
    const applied = Object.keys(environment.applied).length === 0
      ? "nothing (every setting is yours)"
      : pairs(environment.applied);
    parts.push(`worker profile ${applied}`);
    if (environment.threads === "affinity") {
      parts.push("thread pools sized from each worker's CPU affinity");
    }
    if (Object.keys(environment.kept).length > 0) {
      parts.push(`yours kept: ${pairs(environment.kept)}`);
    }
  }
  const own = task.env ?? {};
  if (Object.keys(own).length > 0) parts.push(`env: ${pairs(own)}`);
  return `Task "${task.id}" ${what}: ${parts.join("; ")}`;
}

/**
 * At a run's start: keep this process's allocator warm for its Web Workers (where the runtime
 * allows it) and say, one line each, what every task's worker processes get (`launches`: each
 * task's launch in this run, when `--launcher` overrides the pipeline's).
 */
export function prepareWorkers(
  pipeline: PipelineConfig,
  launches: readonly LaunchConfig[] = [],
): string[] {
  const lines: string[] = [];
  for (const [t, written] of pipeline.tasks.entries()) {
    // Threads of the Python process that runs the daisy API: it tunes its own allocator.
    if (written.kind === "python" && written.python.embedded !== undefined) continue;
    const task = withLaunch(written, launches[t]);
    const line = describeWorkerEnvironment(task, workerEnvironment(task, process.env));
    if (line !== null) lines.push(line);
  }
  if (pipeline.tasks.some((t) => t.kind === "process" && t.launch.kind === "local")) {
    const warm = keepAllocatorWarm();
    if (warm !== null) lines.push(warm);
  }
  return lines;
}
