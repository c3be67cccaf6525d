/**
 * Which store folder `/zarr/<task>/` names: the stores `findStores(target)` finds, each under
 * its task ID (`attributes.blockwise.task_id` of its `zarr.json`, else the folder's name). A run
 * creates stores as it goes, so the list is looked up again every few seconds, and at once
 * (at most four times a second) when a task is not in it.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { isRecord } from "../errors.ts";
import { findStores } from "../tracking/find_stores.ts";

export interface ServedStore {
  readonly task: string;
  /** Absolute path of the store folder. */
  readonly folder: string;
}

/** Milliseconds a list of stores is used before it is looked up again. */
const LIST_MAX_AGE_MS = 2000;
/** The least milliseconds between two look-ups for a task that is not in the list. */
const MISS_MIN_AGE_MS = 250;

function taskIdOf(folder: string): string {
  try {
    const doc: unknown = JSON.parse(fs.readFileSync(path.join(folder, "zarr.json"), "utf8"));
    const attributes = isRecord(doc) ? doc["attributes"] : undefined;
    const blockwise = isRecord(attributes) ? attributes["blockwise"] : undefined;
    const id = isRecord(blockwise) ? blockwise["task_id"] : undefined;
    if (typeof id === "string" && id !== "") return id;
  } catch {
    // A damaged or half-written store: named after its folder.
  }
  return path.basename(folder);
}

/**
 * The stores of `target` with their task IDs, in `findStores` order (throws as it does). When
 * two stores claim one task ID, the one whose folder is named after it is served under it.
 */
export function servedStores(target: string): ServedStore[] {
  const stores = findStores(target).map((folder) => ({ task: taskIdOf(folder), folder }));
  const byTask = new Map<string, ServedStore>();
  for (const s of stores) {
    const seen = byTask.get(s.task);
    if (
      seen === undefined ||
      (path.basename(seen.folder) !== s.task && path.basename(s.folder) === s.task)
    ) {
      byTask.set(s.task, s);
    }
  }
  return stores.filter((s) => byTask.get(s.task) === s);
}

/** Task ID to store folder, refreshed as the module comment says. */
export class StoreIndex {
  readonly #target: string;
  readonly #now: () => number;
  #stores = new Map<string, string>();
  #at = -Infinity;

  constructor(target: string, now: () => number = Date.now) {
    this.#target = target;
    this.#now = now;
  }

  /** The store folder of `task`, or null when the target has no such store (now). */
  folderOf(task: string): string | null {
    const age = this.#now() - this.#at;
    if (age > LIST_MAX_AGE_MS || (!this.#stores.has(task) && age > MISS_MIN_AGE_MS)) {
      this.#refresh();
    }
    return this.#stores.get(task) ?? null;
  }

  #refresh(): void {
    this.#at = this.#now();
    try {
      this.#stores = new Map(servedStores(this.#target).map((s) => [s.task, s.folder]));
    } catch {
      // The target went away or cannot be read: nothing is served until it is back.
      this.#stores = new Map();
    }
  }
}
