/**
 * How `blockwise worker` proves itself: a launched worker claims the slot its launcher gave it
 * (`BLOCKWISE_WORKER_SLOT`) with the secret from its environment; a worker joining by hand
 * (`--secret-file FILE`, `--task ID`) claims no slot, only a task, with the secret from a file
 * only its owner may read. The secret is never printed.
 */

import { InputError } from "../errors.ts";
import type { RelayAuth } from "../execute/worker_relay.ts";
import { readSecretFile, secretFromEnvironment } from "./auth.ts";
import { SLOT_ENV } from "./remote_workers.ts";

export interface WorkerAuthOptions {
  readonly secretFile?: string;
  readonly task?: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The handshake's secret and slot (or task to join); bad settings throw InputError. */
export function workerAuth(options: WorkerAuthOptions): { auth: RelayAuth; slot: string } {
  const { env, secretFile, task } = options;
  if (secretFile !== undefined || task !== undefined) {
    if (task !== undefined && task.trim() === "") {
      throw new InputError(`--task is empty; pass the id of the task to join, e.g. --task predict`);
    }
    const secret = secretFile !== undefined
      ? readSecretFile(secretFile, "--secret-file")
      : secretFromEnvironment(env);
    return { auth: { secret, slot: "", join: task ?? "" }, slot: "" };
  }
  const slot = env[SLOT_ENV];
  if (slot === undefined || !/^[0-9a-f]{8,64}$/.test(slot)) {
    throw new InputError(
      `No worker slot: ${SLOT_ENV} is ${
        slot === undefined ? "not set" : `"${slot}"`
      }; workers are started by the run's launcher (launch: "slurm" or "command"), which sets it. To join a run by hand, pass --secret-file PATH (the run prints "Workers can join: ...")`,
    );
  }
  return { auth: { secret: secretFromEnvironment(env), slot }, slot };
}
