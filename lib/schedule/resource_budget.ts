/**
 * The run-wide resource budget (`--resources cpu=8,gpu=1`) and each task's per-worker cost
 * (`requires`). A worker may start only while every resource it requires still fits. Only the
 * resources the budget names are limited: with `--resources gpu=1`, a task's `cpu` is not
 * counted against anything (it used to count against an implicit cpu=0 and so refused every
 * task that required cpu). Without a budget, `requires` is not limiting at all and
 * `maxWorkers` alone bounds a task (daisy 2.x instead refuses `requires` without a budget).
 */

import { InputError } from "../errors.ts";

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

/** Parse `cpu=8,gpu=1`; throws InputError naming the bad entry. */
export function parseResources(text: string): Record<string, number> {
  const result: Record<string, number> = {};
  for (const entry of text.split(",").map((e) => e.trim()).filter((e) => e !== "")) {
    const match = /^([A-Za-z_][A-Za-z0-9_.-]*)=(\d+)$/.exec(entry);
    if (match === null) {
      throw new InputError(
        `Invalid resource "${entry}" in --resources "${text}"; write name=count pairs separated by commas, e.g. --resources cpu=8,gpu=1`,
      );
    }
    if (Object.hasOwn(result, match[1]!)) {
      throw new InputError(
        `Resource "${match[1]}" is given twice in --resources "${text}"; give it once`,
      );
    }
    result[match[1]!] = Number(match[2]);
  }
  return result;
}
