/** SLURM launcher (being built). */

import type { LaunchHandle } from "../execute/stream_executor.ts";
import type { SlurmLaunchConfig } from "../pipeline/spec.ts";
import { InputError } from "../errors.ts";
import type { Launcher, WorkerLaunchSpec } from "./launcher.ts";

export interface SlurmContext {
  readonly logDir: string;
  readonly runId: string;
}

export class SlurmLauncher implements Launcher {
  readonly name = "SLURM";
  constructor(_config: SlurmLaunchConfig, _context: SlurmContext) {
    throw new InputError("The SLURM launcher is not built yet");
  }
  launch(_spec: WorkerLaunchSpec): LaunchHandle {
    throw new Error("unreachable");
  }
  abort(): void {}
  close(): Promise<void> {
    return Promise.resolve();
  }
}
