/**
 * Python tasks' workers: blockwise's Python client (one file, `workers/python/blockwise_worker.py`,
 * carried inside the binary as `PYTHON_CLIENT_SOURCE`) run by the task's interpreter. At the
 * start of a run the client is written to a cache folder under a name holding its SHA-256, so
 * runs of the same blockwise share one file, a different blockwise never overwrites it, and a
 * half-written file is never run (write to a temporary name, then rename). Remote workers need
 * the folder on a filesystem their nodes share: next to the tracking directory when there is one.
 */

import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import process from "node:process";
import { InputError } from "../errors.ts";
import type { PythonInit } from "../execute/protocol/messages.ts";
import type { LaunchConfig, PipelineConfig, PythonTaskConfig } from "../pipeline/spec.ts";
import { findProgram } from "../runtime/command_group.ts";
import { PYTHON_CLIENT_SOURCE } from "./python_client_source.ts";

/** Where the client is written when the run names no folder. */
export function defaultPythonClientDir(trackingDir: string | null): string {
  if (trackingDir !== null) return join(trackingDir, ".workers");
  let user = "user";
  try {
    user = String(os.userInfo().uid);
  } catch {
    // no user database entry: one shared name is still correct, just less tidy
  }
  return join(os.tmpdir(), `blockwise-python-${user}`);
}

/** Write the client into `dir` (once per content); returns its path. */
export function writePythonClient(dir: string): string {
  const sha = createHash("sha256").update(PYTHON_CLIENT_SOURCE).digest("hex");
  const file = join(dir, `blockwise_worker-${sha.slice(0, 16)}.py`);
  try {
    if (fs.readFileSync(file, "utf8") === PYTHON_CLIENT_SOURCE) return file;
  } catch {
    // not there yet
  }
  try {
    fs.mkdirSync(dir, { recursive: true });
    const temporary = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(temporary, PYTHON_CLIENT_SOURCE);
    fs.renameSync(temporary, file);
  } catch (error) {
    throw new InputError(
      `Cannot write blockwise's Python client to ${dir}: ${
        (error as Error).message
      }; make the folder writable, or pass --tracking-dir on a writable filesystem (the client is written under its .workers folder)`,
    );
  }
  return file;
}

/** Python tasks whose interpreter must exist here (their workers run on this machine). */
export function checkInterpreters(
  pipeline: PipelineConfig,
  launches: readonly LaunchConfig[],
): void {
  pipeline.tasks.forEach((task, t) => {
    if (task.kind !== "python" || launches[t]?.kind !== "local") return;
    if (task.python.embedded === true) return; // threads of the calling Python process
    const program = task.python.interpreter;
    if (findProgram(program, process.env["PATH"], process.cwd()) === null) {
      throw new InputError(
        `Task "${task.id}": the Python interpreter ${
          JSON.stringify(program)
        } (python.interpreter) was not found${
          program.includes("/") ? "" : " on PATH"
        }; install Python 3.8 or later, or give the interpreter's full path, e.g. python: { module: ${
          JSON.stringify(task.python.written)
        }, interpreter: "/opt/conda/bin/python" }`,
      );
    }
  });
}

/** What `init` tells the Python client about the task's module. */
export function pythonInit(task: PythonTaskConfig): PythonInit {
  let sha: string | null = null;
  try {
    sha = createHash("sha256").update(fs.readFileSync(task.python.module)).digest("hex");
  } catch {
    // the worker reports the unreadable module as a failed setup, naming it
  }
  return {
    module: task.python.module,
    moduleSha256: sha,
    process: task.python.process,
    setup: task.python.setup,
  };
}
