/**
 * What `run` can check before any block runs, so that a mistake that would fail every block the
 * same way is one clear refusal (exit 2) instead of a failure per block per attempt:
 * - a command task's program exists (on PATH, or at the path given, from the task's folder);
 * - a Python task's module defines the functions it names (`process`, `setup`), read from the
 *   source without running it: a `def`, an assignment or an import of that name at the top
 *   level. A module that could define names another way (`from x import *`, a module
 *   `__getattr__`) is not judged here; its workers report it.
 */

import * as fs from "node:fs";
import process from "node:process";
import { InputError } from "../errors.ts";
import { findProgram } from "../runtime/command_group.ts";
import { closest } from "./describe_value.ts";
import type { PipelineConfig, PythonTaskConfig } from "./spec.ts";

/** Refuses (InputError) the first command program or Python function that is not there. */
export function preflight(pipeline: PipelineConfig, env = process.env): void {
  for (const task of pipeline.tasks) {
    if (task.kind === "command") checkProgram(task.id, task.command[0]!, task.cwd, env["PATH"]);
    if (task.kind === "python") checkPythonFunctions(task);
  }
}

function checkProgram(taskId: string, program: string, cwd: string | null, path?: string): void {
  if (program.includes("{")) return; // a placeholder: known per block only
  const folder = cwd ?? process.cwd();
  if (findProgram(program, path, folder) !== null) return;
  if (program.includes("/")) {
    throw new InputError(
      `Task "${taskId}": the program "${program}" of its command does not exist or is not executable (relative to ${folder}); check the path, or chmod +x it`,
    );
  }
  const near = closest(program, programsOnPath(path));
  throw new InputError(
    `Task "${taskId}": the program "${program}" of its command was not found on PATH. ${
      near === null ? "" : `Did you mean "${near}"? `
    }Install it, or give its full path in command[0]`,
  );
}

/** The names of the programs in PATH's folders (for "did you mean"). */
function programsOnPath(path: string | undefined): string[] {
  const names = new Set<string>();
  for (const dir of (path ?? "").split(":")) {
    try {
      for (const name of fs.readdirSync(dir === "" ? "." : dir)) names.add(name);
    } catch {
      // a PATH entry that is not a readable folder
    }
  }
  return [...names];
}

const DEFINITION =
  /^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)/;

/** The names a Python module binds at its top level, or null when it may bind others unseen. */
export function topLevelNames(source: string): Set<string> | null {
  const names = new Set<string>();
  const lines = source.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s/.test(line) || line.startsWith("#")) continue;
    const definition = DEFINITION.exec(line);
    if (definition !== null) {
      const name = definition[1] ?? definition[2]!;
      if (name === "__getattr__") return null;
      names.add(name);
      continue;
    }
    const imported = /^(?:from\s+\S+\s+)?import\s+(.*)$/.exec(line);
    if (imported === null) continue;
    let list = imported[1]!;
    // A parenthesised import list may run over several lines.
    if (list.includes("(") && !list.includes(")")) {
      while (++i < lines.length && !lines[i]!.includes(")")) list += ` ${lines[i]}`;
      list += ` ${lines[i] ?? ""}`;
    }
    for (const part of list.replace(/[()\\]/g, " ").split(",")) {
      const words = part.trim().split(/\s+/);
      if (words[0] === "*") return null;
      const bound = words[1] === "as" ? words[2] : words[0]?.split(".")[0];
      if (bound !== undefined && bound !== "") names.add(bound);
    }
  }
  return names;
}

function checkPythonFunctions(task: PythonTaskConfig): void {
  const { module, written } = task.python;
  let source: string;
  try {
    source = fs.readFileSync(module, "utf8");
  } catch {
    return; // the module is checked when the pipeline is validated; workers report the rest
  }
  const names = topLevelNames(source);
  if (names === null) return;
  const wanted: [string, string][] = [["process", task.python.process]];
  if (task.python.setup !== null) wanted.push(["setup", task.python.setup]);
  for (const [field, name] of wanted) {
    if (names.has(name)) continue;
    const functions = [...names].filter((n) => !n.startsWith("_"));
    const near = closest(name, functions);
    throw new InputError(
      `Task "${task.id}": the Python module ${written} defines no "${name}" (python.${field}). ${
        near === null
          ? `It defines ${
            functions.length === 0 ? "nothing at its top level" : functions.join(", ")
          }.`
          : `Did you mean "${near}"?`
      } Define def ${name}(...) there, or name the right function in python.${field}`,
    );
  }
}
