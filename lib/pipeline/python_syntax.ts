/**
 * `plan` compiles every Python task's module, so that a syntax error is refused before a run
 * (exit 2) at its file, line and column, instead of failing every worker's import. The module is
 * compiled by the task's interpreter when it is on this machine (else python3; with neither,
 * nothing is checked), with `compile()` as `python -m py_compile` does, but without writing a
 * `.pyc` into the user's folder. Nothing of the module runs.
 */

import { spawnSync } from "node:child_process";
import process from "node:process";
import { InputError } from "../errors.ts";
import { findProgram } from "../runtime/command_group.ts";
import type { PipelineConfig } from "./spec.ts";

/** Prints a syntax error as JSON and exits 1; exits 0 when the file compiles. */
const COMPILE = `
import json, sys
path = sys.argv[1]
try:
    with open(path, "rb") as f:
        source = f.read()
    compile(source, path, "exec", dont_inherit=True)
except SyntaxError as e:
    print(json.dumps({"type": type(e).__name__, "msg": e.msg, "line": e.lineno,
                      "column": e.offset, "text": e.text}))
    sys.exit(1)
except (OSError, ValueError):
    pass
`;

/** How long one compile may take (a cold interpreter on a network filesystem). */
const COMPILE_TIMEOUT_MS = 60_000;

interface SyntaxProblem {
  readonly type: string;
  readonly msg: string;
  readonly line: number | null;
  readonly column: number | null;
  readonly text: string | null;
}

/** Refuses (InputError) the first Python task whose module does not compile. */
export function checkPythonSyntax(pipeline: PipelineConfig, env = process.env): void {
  const checked = new Set<string>();
  for (const task of pipeline.tasks) {
    if (task.kind !== "python") continue;
    const { module, interpreter } = task.python;
    const program = findProgram(interpreter, env["PATH"], process.cwd()) ??
      findProgram("python3", env["PATH"], process.cwd());
    if (program === null || checked.has(`${program}\0${module}`)) continue;
    checked.add(`${program}\0${module}`);
    const r = spawnSync(program, ["-c", COMPILE, module], {
      encoding: "utf8",
      timeout: COMPILE_TIMEOUT_MS,
      env,
    });
    if (r.status !== 1) continue; // compiled, or the interpreter could not say (the run will)
    let problem: SyntaxProblem;
    try {
      problem = JSON.parse(r.stdout.trim().split("\n").pop() ?? "") as SyntaxProblem;
    } catch {
      continue;
    }
    throw new InputError(`Task "${task.id}": ${describeSyntaxError(module, problem)}`);
  }
}

/** `the Python module does not compile: FILE:LINE:COL: SyntaxError: MSG`, and the line marked. */
function describeSyntaxError(module: string, p: SyntaxProblem): string {
  const where = [module, p.line, p.column].filter((x) => x !== null).join(":");
  let text = `the Python module does not compile: ${where}: ${p.type}: ${p.msg}`;
  const line = p.text?.replace(/\r?\n$/, "");
  if (line !== undefined && line.trim() !== "") {
    const indent = line.length - line.trimStart().length;
    text += `\n    ${line.trim()}`;
    if (p.column !== null && p.column > indent) {
      text += `\n    ${" ".repeat(p.column - 1 - indent)}^`;
    }
  }
  return `${text}\nFix the line, then run plan again (nothing of the module ran)`;
}
