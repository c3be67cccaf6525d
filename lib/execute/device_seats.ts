/**
 * GPUs per worker on this machine (`requires: { gpu: N }`, docs/guide/gpus.md). Each local
 * worker of such a task takes N devices of the run's pool when it starts and holds them alone;
 * they come back when the worker is gone: at once for a Web Worker or a worker that was never
 * a process, else once its process has exited (`Executor.exited`), so that the next worker on
 * that device never meets the last one's memory. Worker processes (command blocks, Python
 * workers) start with `CUDA_VISIBLE_DEVICES` (and AMD's variable when the pool is AMD's) naming
 * their devices, and `BLOCKWISE_GPU`. Web Workers share this process and its environment: the
 * pool bounds how many run at once, but their devices cannot be told apart by the environment.
 * Workers launched elsewhere (SLURM, a launch command) get their devices from the cluster.
 */

import { InputError } from "../errors.ts";
import type { LaunchConfig, PipelineConfig, TaskConfig } from "../pipeline/spec.ts";
import {
  type DeviceCounter,
  deviceEnvironment,
  DevicePool,
  type DevicePoolSource,
  type GpuOption,
  resolveDevicePool,
} from "../schedule/mod.ts";
import type { Executor, WorkerDevices } from "./executor.ts";

/** GPUs each worker of `task` takes from this machine's pool (0: none, or not from here). */
export function localGpus(task: TaskConfig, launch: LaunchConfig = task.launch): number {
  const gpu = task.requires["gpu"] ?? 0;
  return task.kind === "command" || launch.kind === "local" ? gpu : 0;
}

/** Whether the task's local workers are processes of their own (they get the variables). */
function ownProcesses(task: TaskConfig): boolean {
  return task.kind === "command" || (task.kind === "python" && task.python.embedded === undefined);
}

export class DeviceSeats {
  readonly pool: DevicePool | null;
  readonly #need: readonly number[];
  readonly #taskIds: readonly string[];
  /** Workers get CUDA_DEVICE_ORDER=PCI_BUS_ID (blockwise's environment does not set one). */
  readonly #order: boolean;
  /** Told when a worker starts on devices another gave back (the run's notices). */
  onNotice: ((message: string) => void) | null = null;

  /** `need`: per task, the devices each of its workers takes here (`localGpus`). */
  constructor(
    pool: DevicePool | null,
    need: readonly number[],
    taskIds: readonly string[] = [],
    order = false,
  ) {
    this.pool = pool;
    this.#need = need;
    this.#taskIds = taskIds;
    this.#order = order;
  }

  /** Say `lines` (which worker gets which device) and, from now on, every later assignment. */
  announce(lines: readonly string[], notice: (message: string) => void): void {
    for (const line of lines) notice(line);
    this.onNotice = notice;
  }

  /** Whether a worker of task `t` could have its devices now. */
  canSeat(t: number): boolean {
    const need = this.#need[t] ?? 0;
    return need === 0 || (this.pool !== null && this.pool.free() >= need);
  }

  /** Devices for worker `worker` of task `t`, or undefined when the task takes none. */
  take(t: number, worker: number): WorkerDevices | undefined {
    const need = this.#need[t] ?? 0;
    if (need === 0 || this.pool === null) return undefined;
    const ids = this.pool.take(worker, need);
    if (ids === null) {
      throw new Error(`Internal error: worker ${worker} started without ${need} free GPUs`);
    }
    const before = [...new Set(ids.map((id) => this.pool!.lastHolderOf(id)).filter((w) => w >= 0))];
    if (before.length > 0) {
      this.onNotice?.(
        `Task "${this.#taskIds[t] ?? t}": worker ${worker} starts on device ${
          ids.join(",")
        }, given back by worker ${before.join(", ")}`,
      );
    }
    return { ids, env: deviceEnvironment(ids, this.pool.source.amd, this.#order) };
  }

  /** The executor left the run: its devices come back once its process is gone. */
  vacate(executor: Executor): void {
    const pool = this.pool;
    if (pool === null || (this.#need[executor.task] ?? 0) === 0) return;
    if (executor.exited === undefined) pool.give(executor.id);
    else void executor.exited.then(() => pool.give(executor.id));
  }
}

/**
 * The run's seats: the pool (when some task takes GPUs here), checked against every such task
 * before anything runs. `launches`: each task's launch in this run (after `--launcher`).
 */
export function deviceSeats(
  pipeline: PipelineConfig,
  launches: readonly LaunchConfig[],
  gpu: GpuOption | null,
  env: Readonly<Record<string, string | undefined>>,
  counter?: DeviceCounter,
): DeviceSeats {
  let need = pipeline.tasks.map((task, t) => localGpus(task, launches[t]));
  const ids = pipeline.tasks.map((task) => task.id);
  if (need.every((n) => n === 0)) return new DeviceSeats(null, need, ids);
  const source = resolveDevicePool(gpu, env, counter);
  // Without a pool, threads of this process (Web Workers, a daisy script's) count no GPUs, as
  // before pools: their devices were never theirs to be given. Processes are refused below.
  if (source === null) need = need.map((n, t) => ownProcesses(pipeline.tasks[t]!) ? n : 0);
  checkPool(pipeline, need, source);
  const order = env["CUDA_DEVICE_ORDER"] === undefined;
  return new DeviceSeats(source === null ? null : new DevicePool(source), need, ids, order);
}

function checkPool(
  pipeline: PipelineConfig,
  need: readonly number[],
  source: DevicePoolSource | null,
): void {
  for (const [t, n] of need.entries()) {
    if (n === 0) continue;
    const id = pipeline.tasks[t]!.id;
    if (source === null) {
      throw new InputError(
        `Task "${id}" requires gpu=${n} per worker but this run found no GPUs (no --resources gpu, CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS or NVIDIA management library); name them with --resources gpu=0,1 (or gpu=COUNT), or remove gpu from the task's requires`,
      );
    }
    if (source.ids.length < n) {
      throw new InputError(
        `Task "${id}" requires gpu=${n} per worker but the run's GPU pool has ${source.ids.length} (${source.source}); give more devices with --resources gpu=ID,ID,... or lower the task's requires.gpu to ${source.ids.length}`,
      );
    }
  }
}

/** How a task's workers get their GPUs, for `plan` (its text and `--json`) and the run. */
export interface TaskDevices {
  readonly task: string;
  readonly per_worker: number;
  /** "pool": from this run's pool; "slurm": SLURM allocates; else the launch's own business. */
  readonly by: "pool" | "slurm" | "command" | "manual";
  /** "pool": the first workers' devices in start order, and where the pool came from. */
  readonly workers?: readonly (readonly string[])[];
  readonly pool?: string;
  /** "pool": its workers are threads of this process (Web Workers): they share one environment. */
  readonly shared?: boolean;
  /** "slurm": the request each worker job or step makes. */
  readonly request?: string;
}

/** Per task with `requires.gpu`, how its workers get their GPUs (`launches`: as in the run). */
export function taskDevices(
  pipeline: PipelineConfig,
  seats: DeviceSeats,
  launches: readonly LaunchConfig[] = [],
): TaskDevices[] {
  const out: TaskDevices[] = [];
  for (const [t, task] of pipeline.tasks.entries()) {
    const launch = launches[t] ?? task.launch;
    const gpu = task.requires["gpu"] ?? 0;
    if (gpu === 0) continue;
    const n = localGpus(task, launch);
    const base = { task: task.id, per_worker: gpu };
    if (n === 0) {
      const by = launch.kind === "slurm" || launch.kind === "manual" ? launch.kind : "command";
      out.push({ ...base, by, ...(by === "slurm" ? { request: gpuRequest(launch, gpu) } : {}) });
      continue;
    }
    const pool = seats.pool;
    if (pool === null) continue; // threads, no pool: not limited, nothing to say
    const ids = pool.source.ids;
    const count = Math.min(task.maxWorkers, Math.floor(pool.size / n));
    const workers = Array.from({ length: count }, (_, w) => ids.slice(w * n, w * n + n));
    out.push({
      ...base,
      by: "pool",
      workers,
      pool: pool.source.source,
      shared: !ownProcesses(task),
    });
  }
  return out;
}

/**
 * One line per task with GPUs, for `plan` and the run's first lines: which worker gets which
 * devices, in the order the workers start (replacements take those given back).
 */
export function describeDevices(
  pipeline: PipelineConfig,
  seats: DeviceSeats,
  launches: readonly LaunchConfig[] = [],
): string[] {
  return taskDevices(pipeline, seats, launches).map((d) => {
    const head = `Task "${d.task}" GPUs: `;
    switch (d.by) {
      case "slurm":
        return `${head}SLURM allocates ${d.per_worker} per worker job (${d.request}); each worker sees its own`;
      case "command":
        return `${head}the launch command's jobs must request ${d.per_worker} per worker; each sees what its job was given`;
      case "manual":
        return `${head}workers join by hand: start each with its own CUDA_VISIBLE_DEVICES (${d.per_worker} per worker)`;
      case "pool": {
        const pairs = d.workers!.map((ids, w) => `worker ${w} -> device ${ids.join(",")}`);
        const shared = d.shared === true
          ? "; its workers are threads of this process and share its CUDA_VISIBLE_DEVICES, so the pool only bounds how many run at once"
          : "";
        return `${head}${pairs.join(", ")} (pool from ${d.pool})${shared}`;
      }
    }
  });
}

/** What a SLURM worker asks for: `--gres=gpu:N` or `--gpus-per-task=N`. */
export function gpuRequest(launch: LaunchConfig, gpu: number): string {
  const perTask = launch.kind === "slurm" && launch.gpus === "gpus-per-task";
  return perTask ? `--gpus-per-task=${gpu}` : `--gres=gpu:${gpu}`;
}

/** The variables a worker with `devices` starts with (none without). */
export function devicesEnv(devices: WorkerDevices | undefined): Readonly<Record<string, string>> {
  return devices?.env ?? {};
}
