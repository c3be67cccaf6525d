/**
 * The task field `python`: a process function written in Python. `{ module: "segment.py" }`
 * names the module (relative to the pipeline file); `process` (default "process") and `setup`
 * (optional) name its functions; `interpreter` (default "python3") runs the workers. Also the
 * rules that keep `python` apart from the other ways of running blocks.
 */

import * as fs from "node:fs";
import { resolve } from "node:path";
import { describeValue } from "./describe_value.ts";
import type { TaskFields } from "./task_fields.ts";
import type { PythonSettings } from "./spec.ts";

const KEYS = ["module", "process", "setup", "interpreter"];
const EXAMPLE =
  `python: { module: "segment.py", process: "process", setup: "setup" } (module relative to the pipeline file)`;
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const DEFAULT_PYTHON_PROCESS = "process";
export const DEFAULT_INTERPRETER = "python3";

/** The validated `python` field, or null when the task has none. */
export function readPython(t: TaskFields, pipelineDir: string): PythonSettings | null {
  const value = t.value("python");
  if (value === undefined) return null;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    t.fail("python", `must be an object; got ${describeValue(value)}. Write ${EXAMPLE}.`);
  }
  const fields = value as Record<string, unknown>;
  const extra = Object.keys(fields).find((k) => !KEYS.includes(k));
  if (extra !== undefined) {
    t.fail("python", `has no option "${extra}"; its options: ${KEYS.join(", ")}.`);
  }
  const written = fields["module"];
  if (typeof written !== "string" || written.trim() === "") {
    t.fail(
      "python",
      `needs "module", the path of a .py file; got ${describeValue(written)}. Write ${EXAMPLE}.`,
    );
  }
  const module = resolve(pipelineDir, written);
  let isFile = false;
  try {
    isFile = fs.statSync(module).isFile();
  } catch {
    // reported below
  }
  if (!isFile) {
    t.fail(
      "python",
      `option "module" names ${
        JSON.stringify(written)
      }, but there is no file at ${module}; give the path of the .py file relative to the pipeline file's folder.`,
    );
  }
  const name = (key: string, fallback: string | null): string | null => {
    const v = fields[key];
    if (v === undefined) return fallback;
    if (typeof v !== "string" || !IDENTIFIER.test(v)) {
      t.fail(
        "python",
        `option "${key}" must be the name of a function in the module (a Python identifier); got ${
          describeValue(v)
        }.`,
      );
    }
    return v;
  };
  const interpreter = fields["interpreter"] ?? DEFAULT_INTERPRETER;
  if (typeof interpreter !== "string" || interpreter.trim() === "") {
    t.fail(
      "python",
      `option "interpreter" must be a program name or path, e.g. "python3" or "/opt/env/bin/python"; got ${
        describeValue(interpreter)
      }.`,
    );
  }
  return {
    module,
    written,
    process: name("process", DEFAULT_PYTHON_PROCESS)!,
    setup: name("setup", null),
    interpreter,
  };
}

/** What else a task gives that says how its blocks run. */
export interface RunFields {
  readonly process: boolean;
  readonly setup: boolean;
  readonly command: boolean;
  readonly cwd: boolean;
}

/** Throws the PipelineError of a field that cannot go with `python`. */
export function checkPythonAlone(t: TaskFields, other: RunFields): void {
  const clash = other.process ? "process" : other.command ? "command" : null;
  if (clash !== null) {
    t.failRaw(
      clash,
      `fields "python" and "${clash}" cannot both be given; got both. Keep python to run a Python function in Python workers, or ${clash} instead.`,
    );
  }
  if (other.setup) {
    t.fail(
      "setup",
      `is a JavaScript function, but the task runs Python; name the Python setup function in python.setup instead, e.g. python: { module: "segment.py", setup: "setup" }.`,
    );
  }
  if (other.cwd) {
    t.fail(
      "cwd",
      `is only used with "command"; Python workers run in the folder blockwise runs in. Remove cwd and build paths from the module's __file__ instead.`,
    );
  }
}
