/** `blockwise worker --connect HOST:PORT`: serve one run as a remote worker. */

import process from "node:process";
import { runRemoteWorker, workerLog } from "../remote/remote_worker.ts";
import { EXIT_BLOCKS_FAILED, EXIT_OK } from "./exit_codes.ts";

export interface WorkerCommandOptions {
  readonly connect?: string;
}

export async function workerCommand(options: WorkerCommandOptions): Promise<number> {
  const end = await runRemoteWorker({
    ...(options.connect === undefined ? {} : { connect: options.connect }),
    env: process.env,
    log: workerLog,
  });
  if (end.stopped) {
    workerLog("The scheduler stopped this worker; exiting");
    return EXIT_OK;
  }
  workerLog(`The session ended: ${end.reason}`);
  return EXIT_BLOCKS_FAILED;
}
