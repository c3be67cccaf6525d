/**
 * One worker as an `srun`: a job step inside the run's allocation, or a job of its own. srun
 * stays in the foreground for as long as its worker runs, so the step lives while the process
 * does. Whether a step waits for resources shows in squeue (a step is listed once created; srun
 * says "step creation temporarily disabled" only after the wait); srun outside an allocation
 * says at once that its job is "queued and waiting for resources".
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
  /** Its step name, when squeue tells whether the step exists yet (inside an allocation). */
  readonly stepName: string | null;
  readonly #step: StepProcess;
  readonly #logPath: string;
  readonly #pollSoon: () => void;
  #waiting = false;
  /** Whether squeue listed the step (null: not asked since the launch). */
  #listed: boolean | null = null;
  #ended = false;
  #reason = "";
  #partial = "";
  readonly #errors: string[] = [];
  #killTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    step: StepProcess,
    logPath: string,
    stepName: string | null = null,
    pollSoon: () => void = () => {},
  ) {
    this.#step = step;
    this.#logPath = logPath;
    this.stepName = stepName;
    this.#pollSoon = pollSoon;
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
    if (this.stepName !== null && this.#listed !== true) {
      this.#pollSoon();
      return "queued";
    }
    return this.#waiting ? "queued" : "running";
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** What one squeue of the allocation's steps said: listed (created) or not (yet). */
  observe(listed: boolean): void {
    // A step once created stays so until srun exits.
    if (this.#listed !== true) this.#listed = listed;
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
