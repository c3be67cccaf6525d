/**
 * The GPU part of a report's block statistics (block_stats.ts): the distributions of
 * `gpu_util_pct` and `gpu_mem_bytes` over the blocks that have them, and each worker's device
 * utilisation for the timeline. Nothing is allocated before the first block with a GPU figure,
 * so a store of a task without GPUs costs nothing here.
 */

import { type Distribution, type MetricName, type MetricUnit } from "./report_data.ts";

/** What the page shows of a `gpu_util_pct` (a float32): its shortest decimal, 37.5 not 37.49999. */
export function float32Figure(v: number): number {
  for (let digits = 1; digits < 9; digits++) {
    const x = Number(v.toPrecision(digits));
    if (Math.fround(x) === v) return x;
  }
  return v;
}

const GPU_DISTRIBUTED: readonly { name: MetricName; unit: MetricUnit }[] = [
  { name: "gpu_util_pct", unit: "percent" },
  { name: "gpu_mem_bytes", unit: "bytes" },
];

export type Distribute = (name: MetricName, unit: MetricUnit, values: Float64Array) => Distribution;

export class GpuStats {
  /**
   * Utilisation and memory of every `stride`-th block with a figure (NaN where one of the two
   * is not recorded), as many as `size`; null before the first.
   */
  #samples: Float64Array[] | null = null;
  #seen = 0;
  #sampled = 0;
  /** Per worker: utilisation times seconds ran, and seconds ran, over blocks with a figure. */
  readonly #workers = new Map<number, { weighted: number; seconds: number }>();

  /** `size`, `stride`: those of the other distributions' samples. */
  constructor(private readonly size: number, private readonly stride: number) {}

  /** A block's figures (NaN, 0: not recorded), kept when it has one and its turn has come. */
  sample(util: number, mem: number): void {
    if (util !== util && !(mem > 0)) return;
    if (this.#seen++ % this.stride !== 0 || this.#sampled >= this.size) return;
    this.#samples ??= GPU_DISTRIBUTED.map(() => new Float64Array(this.size));
    const s = this.#sampled++;
    this.#samples[0]![s] = util;
    this.#samples[1]![s] = mem > 0 ? mem : Number.NaN;
  }

  /** A timed block of `worker` ran `seconds` at utilisation `util` (NaN: not recorded). */
  time(worker: number, util: number, seconds: number): void {
    if (util !== util || !(seconds >= 0)) return;
    let w = this.#workers.get(worker);
    if (w === undefined) {
      w = { weighted: 0, seconds: 0 };
      this.#workers.set(worker, w);
    }
    // A block of no measurable length still counts, as a millisecond.
    const weight = Math.max(seconds, 1e-3);
    w.weighted += util * weight;
    w.seconds += weight;
  }

  /** The distributions of the figures recorded, each only when there is one. */
  distributions(distribute: Distribute): Distribution[] {
    const samples = this.#samples;
    if (samples === null) return [];
    return GPU_DISTRIBUTED
      .map(({ name, unit }, k) => distribute(name, unit, samples[k]!.subarray(0, this.#sampled)))
      .filter((d) => d.count > 0);
  }

  /** Each of `workers`' time-weighted utilisation, or null for one without a figure. */
  workerUtil(workers: readonly number[]): (number | null)[] {
    return workers.map((worker) => {
      const w = this.#workers.get(worker);
      return w === undefined ? null : Math.round((100 * w.weighted) / w.seconds) / 100;
    });
  }
}
