/**
 * Python tasks' workers: blockwise's Python client (`workers/python/blockwise_worker.py`, carried
 * inside the binary as `PYTHON_CLIENT_SOURCE`) run by the task's interpreter, beside the geometry
 * module it imports (`python/blockwise/geometry.py` as `blockwise_geometry.py`,
 * `PYTHON_GEOMETRY_SOURCE`: blocks' ROIs are its Roi). At the start of a run both are written
 * into one folder of a cache folder, `blockwise-client-<sha>`, named by their SHA-256: runs of
 * the same blockwise share it, a different blockwise never overwrites it, and nobody runs half of
 * it (the folder is written under a temporary name, then renamed). Remote workers need it on a
 * filesystem their nodes share: next to the tracking directory when there is one.
 */

import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import process from "node:process";
import { InputError } from "../errors.ts";
import type { PythonInit } from "../execute/protocol/messages.ts";
import type { LaunchConfig, PipelineConfig, PythonTaskConfig } from "../pipeline/spec.ts";
import { findProgram } from "../runtime/command_group.ts";
import { PYTHON_CLIENT_SOURCE, PYTHON_GEOMETRY_SOURCE } from "./python_client_source.ts";

/** The client's file name in its folder (the program the interpreter runs). */
export const PYTHON_CLIENT_FILE = "blockwise_worker.py";
/** The geometry module's file name beside it (the client imports it as `blockwise_geometry`). */
export const PYTHON_GEOMETRY_FILE = "blockwise_geometry.py";

/** The client folder's files: name and text. */
const CLIENT_FILES: readonly (readonly [string, string])[] = [
  [PYTHON_CLIENT_FILE, PYTHON_CLIENT_SOURCE],
  [PYTHON_GEOMETRY_FILE, PYTHON_GEOMETRY_SOURCE],
];

/** The client folder's name: `blockwise-client-` and the start of its files' SHA-256. */
export function pythonClientFolderName(): string {
  const hash = createHash("sha256");
  for (const [name, text] of CLIENT_FILES) {
    hash.update(`${name}\0`).update(text).update("\0");
  }
  return `blockwise-client-${hash.digest("hex").slice(0, 16)}`;
}

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

/** Whether `folder` holds every client file with the right text. */
function complete(folder: string): boolean {
  try {
    return CLIENT_FILES.every(([name, text]) =>
      fs.readFileSync(join(folder, name), "utf8") === text
    );
  } catch {
    return false; // not there (yet)
  }
}

/**
 * Write the client folder into `dir` (once per content); returns the path of the client file in
 * it, `<dir>/blockwise-client-<sha>/blockwise_worker.py`.
 */
export function writePythonClient(dir: string): string {
  const name = pythonClientFolderName();
  const folder = join(dir, name);
  const file = join(folder, PYTHON_CLIENT_FILE);
  if (complete(folder)) return file;
  try {
    fs.mkdirSync(dir, { recursive: true });
    for (let attempt = 0;; attempt++) {
      const temporary = join(
        dir,
        `.${name}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`,
      );
      fs.mkdirSync(temporary);
      try {
        for (const [entry, text] of CLIENT_FILES) fs.writeFileSync(join(temporary, entry), text);
        fs.renameSync(temporary, folder);
        return file;
      } catch (error) {
        fs.rmSync(temporary, { recursive: true, force: true });
        // A rename onto a folder that has files fails: another run wrote it first.
        if (complete(folder)) return file;
        const code = (error as NodeJS.ErrnoException).code;
        if ((code !== "ENOTEMPTY" && code !== "EEXIST") || attempt >= 2) throw error;
        // A damaged folder (a file edited or missing): move it aside, then write ours.
        const aside = `${temporary}.damaged`;
        try {
          fs.renameSync(folder, aside);
          fs.rmSync(aside, { recursive: true, force: true });
        } catch {
          // another run moved it first
        }
      }
    }
  } catch (error) {
    throw new InputError(
      `Cannot write blockwise's Python client to ${dir}: ${
        (error as Error).message
      }; make the folder writable, or pass --tracking-dir on a writable filesystem (the client is written under its .workers folder)`,
    );
  }
}

/** Python tasks whose interpreter must exist here (their workers run on this machine). */
export function checkInterpreters(
  pipeline: PipelineConfig,
  launches: readonly LaunchConfig[],
): void {
  pipeline.tasks.forEach((task, t) => {
    if (task.kind !== "python" || launches[t]?.kind !== "local") return;
    if (task.python.embedded !== undefined) return; // threads of the calling Python process
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
