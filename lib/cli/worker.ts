/**
 * `blockwise worker --connect HOST:PORT`: serve one run as a remote worker.
 * `blockwise worker --python-client`: print the Python client that runs Python tasks' workers.
 * `blockwise worker --python-client-dir DIR`: write the client's folder (the client and the
 * geometry module it imports) into DIR and print the client's path.
 */

import { resolve } from "node:path";
import process from "node:process";
import { InputError } from "../errors.ts";
import { runRemoteWorker, workerLog } from "../remote/remote_worker.ts";
import { writePythonClient } from "../remote/python_client.ts";
import { PYTHON_CLIENT_SOURCE } from "../remote/python_client_source.ts";
import { EXIT_BLOCKS_FAILED, EXIT_OK } from "./exit_codes.ts";
import { keepAllocatorWarm } from "../runtime/allocator.ts";

export interface WorkerCommandOptions {
  readonly connect?: string;
  readonly secretFile?: string;
  readonly task?: string;
  readonly pythonClient?: boolean;
  readonly pythonClientDir?: string;
}

function print(text: string): Promise<void> {
  return new Promise<void>((done) => process.stdout.write(text, () => done()));
}

export async function workerCommand(options: WorkerCommandOptions): Promise<number> {
  if (options.pythonClientDir !== undefined) {
    if (options.pythonClient === true) {
      throw new InputError(
        "Give one of --python-client (print the client file) and --python-client-dir DIR (write the client's folder, print its path)",
      );
    }
    await print(`${writePythonClient(resolve(options.pythonClientDir))}\n`);
    return EXIT_OK;
  }
  if (options.pythonClient === true) {
    await print(PYTHON_CLIENT_SOURCE);
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
