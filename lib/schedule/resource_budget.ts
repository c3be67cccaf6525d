/**
 * The run-wide resource budget (`--resources cpu=8,gpu=1`) and each task's per-worker cost
 * (`requires`). A worker may start only while every resource it requires still fits; without a
 * budget, `requires` is not limiting and `maxWorkers` alone bounds a task (daisy 2.x instead
 * refuses `requires` without a budget).
 */

import { InputError } from "../errors.ts";

export type Resources = Readonly<Record<string, number>>;

export class ResourceBudget {
  private readonly used = new Map<string, number>();

  constructor(readonly budget: Resources | null) {}

  /** Refuse, before anything runs, a task that could never start a single worker. */
  checkFits(taskId: string, requires: Resources): void {
    if (this.budget === null) return;
    for (const [name, amount] of Object.entries(requires)) {
      if (amount <= 0) continue;
      const cap = this.budget[name] ?? 0;
      if (amount > cap) {
        throw new InputError(
          `Task "${taskId}" requires ${name}=${amount} per worker but the resource budget has ${name}=${cap}; ` +
            `raise it with --resources ${name}=${amount} or lower the task's requires.${name}`,
        );
      }
    }
  }

  canAdmit(requires: Resources): boolean {
    if (this.budget === null) return true;
    for (const [name, amount] of Object.entries(requires)) {
      if (amount <= 0) continue;
      if ((this.used.get(name) ?? 0) + amount > (this.budget[name] ?? 0)) return false;
    }
    return true;
  }

  acquire(requires: Resources): void {
    for (const [name, amount] of Object.entries(requires)) {
      if (amount > 0) this.used.set(name, (this.used.get(name) ?? 0) + amount);
    }
  }

  release(requires: Resources): void {
    for (const [name, amount] of Object.entries(requires)) {
      if (amount > 0) this.used.set(name, Math.max(0, (this.used.get(name) ?? 0) - amount));
    }
  }

  inUse(name: string): number {
    return this.used.get(name) ?? 0;
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
    if (match[1]! in result) {
      throw new InputError(
        `Resource "${match[1]}" is given twice in --resources "${text}"; give it once`,
      );
    }
    result[match[1]!] = Number(match[2]);
  }
  return result;
}
