/** `blockwise run`'s remote workers: opened when some task's workers run elsewhere. */

import * as fs from "node:fs";
import { resolve } from "node:path";
import type { LaunchKind, PipelineConfig } from "../pipeline/spec.ts";
import { defaultWorkerLogDir, effectiveLaunches, RemoteWorkers } from "../remote/remote_workers.ts";
import { defaultPythonClientDir } from "../remote/python_client.ts";
import { pruneWorkerLogFolders } from "../remote/worker_log_folders.ts";
import type { Launcher } from "../remote/launcher.ts";

/** The run options remote workers depend on. */
export interface RemoteRunOptions {
  readonly serial?: boolean;
  readonly launcher?: LaunchKind;
  readonly listen?: string;
  readonly lease?: number;
  readonly logDir?: string;
  readonly trackingDir?: string;
  /** Starts the workers of embedded Python tasks (the daisy session's threads). */
  readonly embeddedLauncher?: Launcher;
}

/** Remote workers when some task's run elsewhere; none with --serial (every block runs here). */
export async function openRemoteWorkers(
  pipeline: PipelineConfig,
  options: RemoteRunOptions,
  runId: string,
  log: (message: string) => void,
): Promise<RemoteWorkers | null> {
  if (options.serial === true) {
    if (options.launcher !== undefined && options.launcher !== "local") {
      log(`warning: --serial runs every block here; --launcher ${options.launcher} is ignored`);
    }
    return null;
  }
  const trackingDir = options.trackingDir === undefined ? null : resolve(options.trackingDir);
  const logDir = options.logDir === undefined
    ? defaultWorkerLogDir(trackingDir, runId)
    : resolve(options.logDir, "workers");
  if (options.logDir === undefined) pruneWorkerLogFolders(logDir);
  return await RemoteWorkers.open({
    pipeline,
    pythonClientDir: defaultPythonClientDir(trackingDir),
    ...(options.listen === undefined ? {} : { listen: options.listen }),
    ...(options.launcher === undefined ? {} : { launcher: options.launcher }),
    ...(options.lease === undefined ? {} : { leaseMs: options.lease * 1000 }),
    ...(options.embeddedLauncher === undefined
      ? {}
      : { embeddedLauncher: options.embeddedLauncher }),
    logDir,
    runId,
    log,
  });
}

/**
 * The summary's line for worker processes' own logs: named only when the folder exists (a run
 * whose blocks were all skipped started no worker), and called what they were.
 */
export function workerLogLocation(
  remote: RemoteWorkers | null,
  pipeline: PipelineConfig,
  launcher: LaunchKind | undefined,
): { remoteLogDir?: string; localWorkerLogs?: boolean } {
  if (remote === null || !fs.existsSync(remote.logDir)) return {};
  const local = effectiveLaunches(pipeline, launcher).every((l) => l.kind === "local");
  return { remoteLogDir: remote.logDir, localWorkerLogs: local };
}
