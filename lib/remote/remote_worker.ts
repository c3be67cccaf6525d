/**
 * `blockwise worker --connect HOST:PORT`: one remote worker. It connects to the scheduler
 * (retrying for a while: a job may start before the scheduler listens, or while it is busy),
 * proves it knows the run's secret, runs the task it is told in a local Web Worker through the
 * relay, and ends when the scheduler stops it or the connection goes. Everything it says about
 * itself goes to stderr, which a launcher sends to the worker's log.
 */

import process from "node:process";
import { connectionChannel } from "../execute/byte_channel.ts";
import { connectTcp, type TcpConnection } from "../runtime/tcp.ts";
import { type RelayEnd, serveWorker } from "../execute/worker_relay.ts";
import { InputError } from "../errors.ts";
import { versionLine } from "../version.ts";
import { formatAddress, type HostPort, parseHostPort } from "./address.ts";
import { workerAuth } from "./join_worker.ts";
import { CONNECT_ENV } from "./remote_workers.ts";
import { jobEndTime, walltimeMargin } from "./walltime.ts";

/** How long a worker keeps trying to reach its scheduler. */
const CONNECT_PATIENCE_MS = 30_000;
/** How long a worker keeps coming back to a scheduler that says it is busy. */
const BUSY_PATIENCE_MS = 120_000;

export interface RemoteWorkerOptions {
  /** `--connect`, else BLOCKWISE_CONNECT. */
  readonly connect?: string;
  /** `--secret-file`: join the run by hand with the secret in this file (no slot). */
  readonly secretFile?: string;
  /** `--task`: the task a worker joining by hand asks for (default: the run's only one). */
  readonly task?: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly log: (message: string) => void;
}

/** Serve one run; resolves with how the session ended. Bad settings throw InputError. */
export async function runRemoteWorker(options: RemoteWorkerOptions): Promise<RelayEnd> {
  const { env } = options;
  const target = options.connect ?? env[CONNECT_ENV];
  if (target === undefined || target === "") {
    throw new InputError(
      `No scheduler to connect to: pass --connect HOST:PORT (or set ${CONNECT_ENV}); the run prints where it listens`,
    );
  }
  const address = parseHostPort(target, "--connect", false);
  const { auth, slot } = workerAuth(options);
  const secret = auth.secret;
  const endsAt = jobEndTime(env);
  // A scheduler busy with other connections' handshakes says so: come back, not a crash.
  const deadline = Date.now() + BUSY_PATIENCE_MS;
  let wait = 250;
  for (;;) {
    const socket = await connectWithRetry(address, options.log);
    options.log(`Connected to the scheduler at ${formatAddress(address)}`);
    const end = await serveWorker({
      channel: connectionChannel(socket),
      client: versionLine(),
      auth: auth.join === undefined ? { secret, slot } : auth,
      log: options.log,
      ...(endsAt === null ? {} : { walltime: { endsAt, marginSeconds: walltimeMargin(env) } }),
    });
    if (end.retry !== true || Date.now() + wait > deadline) return end;
    const pause = wait / 2 + Math.random() * wait / 2; // jitter: refused workers spread out
    options.log(`The scheduler is busy; connecting again in ${Math.round(pause)} ms`);
    await new Promise((r) => setTimeout(r, pause));
    wait = Math.min(2 * wait, 5_000);
  }
}

async function connectWithRetry(
  address: HostPort,
  log: (message: string) => void,
): Promise<TcpConnection> {
  const deadline = Date.now() + CONNECT_PATIENCE_MS;
  let wait = 200;
  for (;;) {
    try {
      return await connectTcp({ host: address.host, port: address.port, timeoutMs: 10_000 });
    } catch (error) {
      if (Date.now() + wait > deadline) {
        throw new InputError(
          `Cannot connect to the scheduler at ${formatAddress(address)}: ${
            (error as Error).message
          } (tried for ${
            CONNECT_PATIENCE_MS / 1000
          } s); check that the run is still going and that this node can reach it (a scheduler on a login node must listen on an address the compute nodes reach: --listen 0.0.0.0:0)`,
        );
      }
      log(`Cannot reach the scheduler yet (${(error as Error).message}); retrying`);
      await new Promise((r) => setTimeout(r, wait));
      wait = Math.min(2 * wait, 2000);
    }
  }
}

export function workerLog(message: string): void {
  process.stderr.write(`[blockwise worker ${process.pid}] ${message}\n`);
}
