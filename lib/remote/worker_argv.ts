/**
 * The command a launched remote worker runs: blockwise itself for JavaScript tasks, the Python
 * client for `python:` tasks, and the daisy package's job runner for a daisy task whose workers
 * are launched elsewhere.
 */

import type { TaskConfig } from "../pipeline/spec.ts";
import { selfCommand } from "../runtime/mod.ts";

export function workerArgv(
  config: TaskConfig,
  connect: string,
  pythonClient: string | null,
): string[] {
  switch (config.kind) {
    case "process":
      return [...selfCommand(), "worker", "--connect", connect];
    case "python":
      if (config.python.embedded !== undefined) {
        // A daisy task's worker on another node: its function imported by the package's runner.
        return [
          config.python.interpreter,
          "-m",
          "blockwise.daisy._job",
          "--connect",
          connect,
          "--module",
          config.python.module,
          "--function",
          config.python.process,
          "--mode",
          config.python.embedded.mode,
          "--task",
          config.id,
        ];
      }
      return [config.python.interpreter, pythonClient!, "--connect", connect];
    case "command":
      throw new Error(`Internal error: command task "${config.id}" has remote workers`);
  }
}
