/**
 * The launcher of embedded Python tasks: each worker is a thread of the Python process that
 * runs the daisy API. A launch is a `launch` event to that process; the thread connects back to
 * the run's worker server like any Python worker (slot and secret in `env`), and the process
 * says when the thread ended (`exited`), which is how a worker function that raised before it
 * connected counts as a failed worker, as in daisy.
 */

import type { LaunchHandle } from "../execute/stream_executor.ts";
import type { Launcher, WorkerLaunchSpec } from "../remote/launcher.ts";
import type { LineChannel } from "./json_lines.ts";

/** A worker function that fails at once must not burn its restarts faster than this (ms). */
const CONNECT_TIMEOUT_MS = 60_000;

class ThreadLaunch implements LaunchHandle {
  readonly label: string;
  #reason: string | null = null;

  constructor(
    readonly taskId: string,
    readonly workerId: number,
    readonly onCancel: () => void,
  ) {
    this.label = `worker thread ${workerId} of task "${taskId}"`;
  }

  phase(): "queued" | "running" | "ended" {
    return this.#reason === null ? "running" : "ended";
  }

  endReason(): string {
    return this.#reason ?? "";
  }

  cancel(): void {
    if (this.#reason !== null) return;
    this.#reason = "it was cancelled";
    this.onCancel();
  }

  ended(reason: string): void {
    this.#reason ??= reason;
  }
}

export class ThreadLauncher implements Launcher {
  readonly name = "threads of the Python process";
  readonly connectTimeoutMs = CONNECT_TIMEOUT_MS;
  readonly #channel: LineChannel;
  readonly #launches = new Map<string, ThreadLaunch>();

  constructor(channel: LineChannel) {
    this.#channel = channel;
  }

  launch(spec: WorkerLaunchSpec): LaunchHandle {
    const key = keyOf(spec.taskId, spec.workerId);
    const handle = new ThreadLaunch(spec.taskId, spec.workerId, () => {
      this.#launches.delete(key);
      this.#channel.send({ ev: "cancel", task: spec.taskId, worker: spec.workerId });
    });
    this.#launches.set(key, handle);
    this.#channel.send({
      ev: "launch",
      task: spec.taskId,
      worker: spec.workerId,
      env: spec.env,
    });
    return handle;
  }

  /** The Python process says a worker thread ended (`exited`). */
  exited(taskId: string, workerId: number, ok: boolean, error: string | null): void {
    const key = keyOf(taskId, workerId);
    const handle = this.#launches.get(key);
    if (handle === undefined) return;
    this.#launches.delete(key);
    handle.ended(
      ok
        ? "its thread ended"
        : `its thread ended with an exception: ${firstLines(error ?? "no traceback")}`,
    );
  }

  close(): Promise<void> {
    this.abort();
    return Promise.resolve();
  }

  abort(): void {
    for (const handle of [...this.#launches.values()]) handle.cancel();
  }
}

function keyOf(taskId: string, workerId: number): string {
  return `${workerId}\u0000${taskId}`;
}

/** The exception's last line first (what failed), the traceback after it, at most 20 lines. */
function firstLines(text: string): string {
  const lines = text.trimEnd().split("\n");
  const last = lines[lines.length - 1] ?? "";
  return [last, ...lines.slice(0, -1)].slice(0, 20).join("\n");
}
