/**
 * The run-wide resource budget (`--resources cpu=8,gpu=1`) and each task's per-worker cost
 * (`requires`). A worker may start only while every resource it requires still fits. Only the
 * resources the budget names are limited: with `--resources gpu=1`, a task's `cpu` is not
 * counted against anything (it used to count against an implicit cpu=0 and so refused every
 * task that required cpu). Without a budget, `requires` is not limiting at all and
 * `maxWorkers` alone bounds a task (daisy 2.x instead refuses `requires` without a budget).
 */

import { InputError } from "../errors.ts";
import { checkDeviceIds, type GpuOption } from "./device_pool.ts";

export type Resources = Readonly<Record<string, number>>;

export class ResourceBudget {
  readonly #budget: Resources | null;
  readonly #used = new Map<string, number>();

  constructor(budget: Resources | null) {
    this.#budget = budget;
  }

  /** The cap of `name`, or null when the budget does not limit it. */
  limitOf(name: string): number | null {
    if (this.#budget === null || !Object.hasOwn(this.#budget, name)) return null;
    return this.#budget[name]!;
  }

  /** Refuse, before anything runs, a task that could never start a single worker. */
  checkFits(taskId: string, requires: Resources): void {
    for (const [name, amount] of Object.entries(requires)) {
      const cap = this.limitOf(name);
      if (amount <= 0 || cap === null) continue;
      if (amount > cap) {
        throw new InputError(
          `Task "${taskId}" requires ${name}=${amount} per worker but the resource budget has ${name}=${cap}; ` +
            `raise it with --resources ${name}=${amount} or lower the task's requires.${name}`,
        );
      }
    }
  }

  canAdmit(requires: Resources): boolean {
    for (const [name, amount] of Object.entries(requires)) {
      const cap = this.limitOf(name);
      if (amount <= 0 || cap === null) continue;
      if ((this.#used.get(name) ?? 0) + amount > cap) return false;
    }
    return true;
  }

  acquire(requires: Resources): void {
    for (const [name, amount] of Object.entries(requires)) {
      if (amount > 0) this.#used.set(name, (this.#used.get(name) ?? 0) + amount);
    }
  }

  release(requires: Resources): void {
    for (const [name, amount] of Object.entries(requires)) {
      if (amount > 0) this.#used.set(name, Math.max(0, (this.#used.get(name) ?? 0) - amount));
    }
  }

  inUse(name: string): number {
    return this.#used.get(name) ?? 0;
  }
}

/** Parse `cpu=8,gpu=1` (or `gpu=0,1,3`: device ids, counted); throws InputError naming the bad entry. */
export function parseResources(text: string): Record<string, number> {
  const result: Record<string, number> = {};
  for (const [name, values] of resourceEntries(text)) {
    result[name] = values.length > 1 || !/^\d+$/.test(values[0]!)
      ? values.length
      : Number(values[0]);
  }
  return result;
}

/** `--resources` as the command line gives it: the counts, and the GPUs as given. */
export interface ResourcesOption {
  readonly counts: Record<string, number>;
  readonly gpu: GpuOption | null;
}

export function parseResourcesOption(text: string): ResourcesOption {
  return { counts: parseResources(text), gpu: parseGpuOption(text) };
}

/** The `gpu` of `--resources`: a count, device ids (`gpu=0,1,3`), or null when not given. */
export function parseGpuOption(text: string): GpuOption | null {
  const values = resourceEntries(text).get("gpu");
  if (values === undefined) return null;
  if (values.length === 1 && /^\d+$/.test(values[0]!)) {
    return { kind: "count", count: Number(values[0]) };
  }
  checkDeviceIds(
    values,
    `--resources "${text}"`,
    "give each device once, e.g. --resources gpu=0,1,3",
  );
  return { kind: "ids", ids: values };
}

/**
 * Each resource of `--resources` and its values: one count, or (gpu only) the device ids that
 * follow `gpu=` up to the next name=value entry.
 */
function resourceEntries(text: string): Map<string, string[]> {
  const result = new Map<string, string[]>();
  let gpu: string[] | null = null;
  for (const entry of text.split(",").map((e) => e.trim()).filter((e) => e !== "")) {
    const match = /^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$/.exec(entry);
    if (match === null && gpu !== null && /^[A-Za-z0-9][A-Za-z0-9:._-]*$/.test(entry)) {
      gpu.push(entry);
      continue;
    }
    const [name, value] = match === null ? ["", ""] : [match[1]!, match[2]!];
    const device = name === "gpu" && /^[A-Za-z0-9][A-Za-z0-9:._-]*$/.test(value);
    if (match === null || (!/^\d+$/.test(value) && !device)) {
      throw new InputError(
        `Invalid resource "${entry}" in --resources "${text}"; write name=count pairs separated by commas, e.g. --resources cpu=8,gpu=1 (GPUs may also be listed by id: gpu=0,1,3)`,
      );
    }
    if (result.has(name)) {
      throw new InputError(
        `Resource "${name}" is given twice in --resources "${text}"; give it once`,
      );
    }
    const values = [value];
    result.set(name, values);
    gpu = name === "gpu" ? values : null;
  }
  return result;
}
