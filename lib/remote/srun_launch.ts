/**
 * One worker as an `srun`: a job step inside the run's allocation, or a job of its own. srun
 * stays in the foreground for as long as its worker runs, so the step lives while the process
 * does. Whether it waits for resources shows only in SLURM's messages on srun's stderr.
 */

import type { LaunchHandle } from "../execute/stream_executor.ts";
import type { StepProcess } from "./slurm_commands.ts";

/** Seconds between SIGTERM (srun cancels its step) and SIGKILL. */
const KILL_GRACE_MS = 5000;
/** SLURM's own error lines kept for the end reason. */
const KEPT_ERRORS = 3;

const WAITING = /step creation temporarily disabled|queued and waiting for resources/;
const STARTED = /Step created for|has been allocated resources/;
const ERROR = /^srun: error: (.*)$/;

export class SrunLaunch implements LaunchHandle {
  readonly label: string;
  readonly exited: Promise<void>;
  readonly #step: StepProcess;
  readonly #logPath: string;
  #waiting = false;
  #ended = false;
  #reason = "";
  #partial = "";
  readonly #errors: string[] = [];
  #killTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(step: StepProcess, logPath: string) {
    this.#step = step;
    this.#logPath = logPath;
    this.label = `srun (pid ${step.pid ?? "?"})`;
    step.onStderr((text) => this.#read(text));
    this.exited = step.exited.then((how) => {
      this.#read("\n");
      this.#ended = true;
      const said = this.#errors.length === 0 ? "" : `: ${this.#errors.join("; ")}`;
      this.#reason = `${how}${said} (its output: ${this.#logPath})`;
      if (this.#killTimer !== null) clearTimeout(this.#killTimer);
    });
  }

  phase(): "queued" | "running" | "ended" {
    if (this.#ended) return "ended";
    return this.#waiting ? "queued" : "running";
  }

  endReason(): string {
    return this.#reason;
  }

  cancel(): void {
    if (this.#ended || this.#killTimer !== null) return;
    this.#step.signal("SIGTERM");
    this.#killTimer = setTimeout(() => {
      if (!this.#ended) this.#step.signal("SIGKILL");
    }, KILL_GRACE_MS);
    (this.#killTimer as { unref?: () => void }).unref?.();
  }

  #read(text: string): void {
    const lines = (this.#partial + text).split("\n");
    // A worker's endless line without a newline is its own business, not SLURM's message.
    this.#partial = (lines.pop() ?? "").slice(-4096);
    for (const line of lines) {
      if (WAITING.test(line)) this.#waiting = true;
      else if (STARTED.test(line)) this.#waiting = false;
      const error = ERROR.exec(line.trim());
      if (error !== null) {
        this.#errors.push(error[1]!);
        if (this.#errors.length > KEPT_ERRORS) this.#errors.shift();
      }
    }
  }
}
