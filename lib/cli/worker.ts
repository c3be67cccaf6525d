/**
 * `blockwise worker --connect HOST:PORT`: serve one run as a remote worker.
 * `blockwise worker --python-client`: print the Python client that runs Python tasks' workers.
 */

import process from "node:process";
import { runRemoteWorker, workerLog } from "../remote/remote_worker.ts";
import { PYTHON_CLIENT_SOURCE } from "../remote/python_client_source.ts";
import { EXIT_BLOCKS_FAILED, EXIT_OK } from "./exit_codes.ts";
import { keepAllocatorWarm } from "../runtime/allocator.ts";

export interface WorkerCommandOptions {
  readonly connect?: string;
  readonly secretFile?: string;
  readonly task?: string;
  readonly pythonClient?: boolean;
}

export async function workerCommand(options: WorkerCommandOptions): Promise<number> {
  if (options.pythonClient === true) {
    await new Promise<void>((resolve) =>
      process.stdout.write(PYTHON_CLIENT_SOURCE, () => resolve())
    );
    return EXIT_OK;
  }
  keepAllocatorWarm();
  const end = await runRemoteWorker({
    ...(options.connect === undefined ? {} : { connect: options.connect }),
    ...(options.secretFile === undefined ? {} : { secretFile: options.secretFile }),
    ...(options.task === undefined ? {} : { task: options.task }),
    env: process.env,
    log: workerLog,
  });
  if (end.stopped) {
    workerLog("The scheduler stopped this worker; exiting");
    return EXIT_OK;
  }
  if (end.later === true) {
    workerLog("The run needs no more workers now (see above); exiting");
    return EXIT_OK;
  }
  workerLog(`The session ended: ${end.reason}`);
  return EXIT_BLOCKS_FAILED;
}
