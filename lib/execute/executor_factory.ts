/**
 * The executors of a run on this machine: a Web Worker per worker of a `process` task, a child
 * process slot per worker of a `command` task (Python tasks' workers are processes reached over
 * a socket: `lib/remote/remote_workers.ts` makes them). The run loop is handed a factory and never names
 * an executor kind, so other factories (byte-stream workers, remote workers) plug in unchanged.
 */

import { CommandExecutor } from "./command_executor.ts";
import type { Executor, ExecutorFactory, ExecutorSpec } from "./executor.ts";
import { webWorkerOptions, WorkerExecutor } from "./worker_executor.ts";

export const localExecutorFactory: ExecutorFactory = (spec: ExecutorSpec): Executor => {
  const config = spec.config;
  switch (config.kind) {
    case "process":
      return new WorkerExecutor(webWorkerOptions(spec));
    case "command":
      return new CommandExecutor(spec, config);
    case "python":
      throw new Error(
        `Internal error: Python task "${config.id}" has no Python workers (they come from RemoteWorkers)`,
      );
  }
};
