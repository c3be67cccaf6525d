/**
 * The run's GPUs: which devices local workers of `requires: { gpu: N }` tasks may have, and who
 * holds which. The pool is the first found of:
 *   1. `--resources gpu=0,1,3` (device ids) or `gpu=4` (a count: the first 4 ids of the next
 *      source that names ids, else 0..3),
 *   2. this process's `CUDA_VISIBLE_DEVICES`, then AMD's `HIP_VISIBLE_DEVICES` and
 *      `ROCR_VISIBLE_DEVICES`,
 *   3. SLURM's allocation (`SLURM_STEP_GPUS`, then `SLURM_JOB_GPUS`),
 *   4. the devices the NVIDIA management library reports (a `DeviceCounter`; unknown by default).
 * A worker takes N devices at its start, exclusively, and gives them back when it is gone. Pure
 * bookkeeping: reading the environment is the caller's (it passes the variables in).
 */

import { InputError } from "../errors.ts";

/** How many devices the NVIDIA management library sees, or null when it cannot tell. */
export interface DeviceCounter {
  deviceCount(): number | null;
}

/** The default counter: no library is asked, the count is unknown. */
export const UNKNOWN_DEVICE_COUNT: DeviceCounter = { deviceCount: () => null };

/** `--resources gpu=...` as given: a count, or device ids. */
export type GpuOption =
  | { readonly kind: "count"; readonly count: number }
  | { readonly kind: "ids"; readonly ids: readonly string[] };

/** The variable a pool's ids index into on the workers (AMD's, or CUDA's). */
export type DeviceVariable =
  | "CUDA_VISIBLE_DEVICES"
  | "HIP_VISIBLE_DEVICES"
  | "ROCR_VISIBLE_DEVICES";

export interface DevicePoolSource {
  readonly ids: readonly string[];
  /** Where the pool came from, for messages: "--resources gpu=0,1", "CUDA_VISIBLE_DEVICES=2,3". */
  readonly source: string;
  /** AMD's variable when the pool came from it (workers then get that one set too). */
  readonly amd: "HIP_VISIBLE_DEVICES" | "ROCR_VISIBLE_DEVICES" | null;
}

/** The environment variables of this process the pool may come from, in order. */
const ENV_SOURCES = [
  "CUDA_VISIBLE_DEVICES",
  "HIP_VISIBLE_DEVICES",
  "ROCR_VISIBLE_DEVICES",
  "SLURM_STEP_GPUS",
  "SLURM_JOB_GPUS",
] as const;

const DEVICE_ID = /^[A-Za-z0-9][A-Za-z0-9:._-]*$/;

/** Check a list of device ids (`where` names it in messages): well-formed and distinct. */
export function checkDeviceIds(ids: readonly string[], where: string, fix: string): void {
  const seen = new Set<string>();
  for (const id of ids) {
    if (!DEVICE_ID.test(id)) {
      throw new InputError(
        `Invalid GPU id ${JSON.stringify(id)} in ${where}; ${fix}`,
      );
    }
    if (seen.has(id)) {
      throw new InputError(`GPU ${id} is named twice in ${where}; ${fix}`);
    }
    seen.add(id);
  }
}

/** The ids a device variable lists; null when it names none to go by (unset, SLURM's NoDevFiles). */
function idsOf(name: string, value: string | undefined): string[] | null {
  if (value === undefined) return null;
  const text = value.trim();
  // SLURM sets NoDevFiles for gres without device files: no ids to give out.
  if (text === "NoDevFiles" || text === "") return text === "" ? [] : null;
  const ids = text.split(",").map((s) => s.trim());
  checkDeviceIds(
    ids,
    `${name}=${value}`,
    `give device ids separated by commas (e.g. ${name}=0,1), or set the pool with --resources gpu=0,1`,
  );
  return ids;
}

/** The run's device pool, or null when no source names one. */
export function resolveDevicePool(
  gpu: GpuOption | null,
  env: Readonly<Record<string, string | undefined>>,
  counter: DeviceCounter = UNKNOWN_DEVICE_COUNT,
): DevicePoolSource | null {
  let found: DevicePoolSource | null = null;
  for (const name of ENV_SOURCES) {
    const ids = idsOf(name, env[name]);
    if (ids === null) continue;
    const amd = name === "HIP_VISIBLE_DEVICES" || name === "ROCR_VISIBLE_DEVICES" ? name : null;
    found = { ids, source: `${name}=${env[name]}`, amd };
    break;
  }
  if (gpu !== null && gpu.kind === "ids") {
    checkDeviceIds(
      gpu.ids,
      `--resources gpu=${gpu.ids.join(",")}`,
      "give each device once, e.g. --resources gpu=0,1,3",
    );
    return {
      ids: gpu.ids,
      source: `--resources gpu=${gpu.ids.join(",")}`,
      amd: found?.amd ?? null,
    };
  }
  if (gpu !== null) {
    const given = `--resources gpu=${gpu.count}`;
    if (found === null) {
      const ids = Array.from({ length: gpu.count }, (_, i) => String(i));
      return { ids, source: given, amd: null };
    }
    if (found.ids.length < gpu.count) {
      throw new InputError(
        `${given} asks for ${gpu.count} GPUs but ${found.source} makes ${found.ids.length} visible; lower the count to ${found.ids.length}, or name the devices with --resources gpu=ID,ID,...`,
      );
    }
    return {
      ...found,
      ids: found.ids.slice(0, gpu.count),
      source: `${given} (of ${found.source})`,
    };
  }
  if (found !== null) return found;
  const count = counter.deviceCount();
  if (count === null || count <= 0) return null;
  const ids = Array.from({ length: count }, (_, i) => String(i));
  return { ids, source: `the NVIDIA management library (${count} devices)`, amd: null };
}

/** Who holds which device: a worker takes its devices whole and gives them back together. */
export class DevicePool {
  readonly source: DevicePoolSource;
  /** Per device in pool order: the worker holding it, or -1. */
  readonly #holder: number[];
  /** Per device: the last worker that gave it back, or -1. */
  readonly #given: number[];

  constructor(source: DevicePoolSource) {
    this.source = source;
    this.#holder = source.ids.map(() => -1);
    this.#given = source.ids.map(() => -1);
  }

  get size(): number {
    return this.#holder.length;
  }

  free(): number {
    return this.#holder.reduce((n, h) => n + (h < 0 ? 1 : 0), 0);
  }

  /** `count` free devices for `worker`, lowest first, or null when fewer are free. */
  take(worker: number, count: number): string[] | null {
    if (this.free() < count) return null;
    const ids: string[] = [];
    for (let i = 0; i < this.#holder.length && ids.length < count; i++) {
      if (this.#holder[i]! >= 0) continue;
      this.#holder[i] = worker;
      ids.push(this.source.ids[i]!);
    }
    return ids;
  }

  /** Give back every device `worker` holds (none: nothing happens). */
  give(worker: number): void {
    for (let i = 0; i < this.#holder.length; i++) {
      if (this.#holder[i] !== worker) continue;
      this.#holder[i] = -1;
      this.#given[i] = worker;
    }
  }

  /** The last worker that gave `id` back, or -1 (none has held it yet). */
  lastHolderOf(id: string): number {
    const i = this.source.ids.indexOf(id);
    return i < 0 ? -1 : this.#given[i]!;
  }

  /** The devices `worker` holds, in pool order. */
  heldBy(worker: number): string[] {
    return this.source.ids.filter((_, i) => this.#holder[i] === worker);
  }
}

/**
 * The variables a worker holding `ids` starts with, after the pool's `amd` variable. `order`:
 * set CUDA_DEVICE_ORDER=PCI_BUS_ID (when blockwise's environment does not set it), so that
 * CUDA numbers devices as nvidia-smi, NVML and SLURM do; CUDA's own default, fastest first,
 * can give index 1 to another device on a machine with mixed GPUs.
 */
export function deviceEnvironment(
  ids: readonly string[],
  amd: DevicePoolSource["amd"],
  order = false,
): Record<string, string> {
  const list = ids.join(",");
  const env: Record<string, string> = { BLOCKWISE_GPU: list };
  if (order && amd === null) env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  // ROCR's ids are physical; HIP (and CUDA_VISIBLE_DEVICES, which HIP also reads) would index
  // into the ones ROCR leaves, so a ROCR pool sets ROCR's variable alone.
  if (amd !== "ROCR_VISIBLE_DEVICES") env["CUDA_VISIBLE_DEVICES"] = list;
  if (amd !== null) env[amd] = list;
  return env;
}
