/**
 * Recipes: the semantic part of a task's definition (`version`, canonical `params`, declared
 * `inputs`), one per line of `recipes.jsonl` in its store. A block's `recipe` cell holds the
 * line it was made with, so a changed version or parameter is found with one integer compare
 * per block, and `plan` can say what changed.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import { StoreError } from "../errors.ts";
import type { JsonValue, TaskConfig } from "../pipeline/spec.ts";

export const RECIPES_FILE = "recipes.jsonl";

export interface Recipe {
  readonly version: string | null;
  readonly params: Readonly<Record<string, JsonValue>> | null;
  readonly inputs: readonly {
    readonly kind: string;
    readonly target: string;
    readonly compare: string;
  }[];
}

export function recipeOf(task: TaskConfig): Recipe {
  return {
    version: task.version,
    params: task.params,
    inputs: task.inputs.map((i) => ({ kind: i.kind, target: i.written, compare: i.compare })),
  };
}

/** JSON with object keys sorted at every level: equal data, equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sorted(value));
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      out[key] = sorted((value as Record<string, unknown>)[key]);
    }
    return out;
  }
  return value;
}

/** A line a run writes: a JSON object (`{}` marks a recipe replaced by hand). */
function recipeLine(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

export class RecipeBook {
  readonly #file: string;
  readonly #texts: string[];

  private constructor(file: string, texts: string[]) {
    this.#file = file;
    this.#texts = texts;
  }

  static read(storeDir: string): RecipeBook {
    const file = path.join(storeDir, RECIPES_FILE);
    let text = "";
    try {
      text = fs.readFileSync(file, "utf8");
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
    }
    // Indices must never shift: a torn last line (a kill mid-append) keeps its place, as it
    // will once the next append ends it; it matches no recipe.
    const lines = text.split("\n");
    const torn = !text.endsWith("\n") && text !== "";
    if (!torn) lines.pop();
    // Every whole line is a recipe: another one means the file was damaged, and reading it as
    // "no recipe" would make every block made with it stale, a silent full rebuild.
    const last = torn ? lines.length - 1 : lines.length;
    for (let i = 0; i < last; i++) {
      if (recipeLine(lines[i]!)) continue;
      throw new StoreError(
        `${file} line ${i + 1} is not a recipe (${
          JSON.stringify(lines[i]!.slice(0, 60))
        }): the file records what each block was made with, and blockwise will not rebuild the blocks it cannot read it for. Restore the file from a backup; or replace that line with {} (keep the line, so the others keep their numbers) and run blockwise accept to record the blocks as made by the current code, or let them rebuild`,
        storeDir,
      );
    }
    return new RecipeBook(file, lines);
  }

  /** The line of `text`; appended (durably) when new and `add`, else -1 when absent. */
  indexOf(text: string, add: boolean): number {
    const at = this.#texts.indexOf(text);
    if (at >= 0 || !add) return at < 0 ? 2 ** 32 - 1 : at;
    const fd = fs.openSync(this.#file, "a+");
    try {
      const size = fs.fstatSync(fd).size;
      const tail = new Uint8Array(1);
      if (size > 0) fs.readSync(fd, tail, 0, 1, size - 1);
      fs.writeSync(fd, (size > 0 && tail[0] !== 0x0a ? "\n" : "") + text + "\n");
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    this.#texts.push(text);
    return this.#texts.length - 1;
  }

  recipe(index: number): Recipe | null {
    const text = this.#texts[index];
    if (text === undefined) return null;
    try {
      return JSON.parse(text) as Recipe;
    } catch {
      return null;
    }
  }
}
