/**
 * An executor for command tasks: a slot that runs one block's command at a time as a child
 * process. No Web Worker is needed; the main thread only waits for the children. A command that
 * runs past the task's timeout is killed on the next health tick and fails that attempt; the
 * slot lives on.
 */

import process from "node:process";
import type { CommandTaskConfig } from "../pipeline/spec.ts";
import { makeBlock } from "./block.ts";
import { CommandFailure, runCommandBlock } from "./command_block.ts";
import { type Executor, type ExecutorSpec, type ExecutorState } from "./executor.ts";
import { InFlightQueue } from "./in_flight.ts";
import {
  RECORD_STRIDE_PLAIN,
  type ResultsMessage,
  STATUS_DONE,
  STATUS_FAILED,
} from "./protocol/messages.ts";
import { errorParts } from "../run/run_types.ts";
import { BlockOutputs } from "../outputs/block_outputs.ts";
import type { BlockCommit } from "../run/block_report.ts";
import { workerEnvironment } from "./worker_profile.ts";
import { inProcessGroup, type ProcessMatch } from "../runtime/nvml.ts";

export class CommandExecutor implements Executor {
  readonly id: number;
  readonly task: number;
  readonly inFlight = new InFlightQueue();
  window = 1;
  #state: ExecutorState = "starting";
  readonly #spec: ExecutorSpec;
  readonly #command: readonly string[];
  readonly #cwd: string | null;
  readonly #outputs: BlockOutputs;
  /** The commands' environment before the block's own variables (made once per slot). */
  readonly #env: Readonly<Record<string, string | undefined>>;
  /** Blocks sent and not started: (position, attempt) pairs from `#queueHead`. */
  #queue: number[] = [];
  #queueHead = 0;
  #running = -1;
  #startedAt = Number.NaN;
  #timedOut = false;
  #abort: AbortController | null = null;
  #looping = false;
  /** The command running now, settled or not (its process may outlive `kill` briefly). */
  #runningCommand: Promise<void> | null = null;
  /** The running command's process group, for its GPU figures (null between commands). */
  #group: ProcessMatch | null = null;

  constructor(spec: ExecutorSpec, config: CommandTaskConfig) {
    this.#spec = spec;
    this.#command = config.command;
    this.#cwd = config.cwd;
    this.#env = {
      ...process.env,
      ...workerEnvironment(config, process.env).variables,
      ...spec.devices?.env,
    };
    this.#outputs = new BlockOutputs(spec.outputs, spec.runId);
    this.id = spec.id;
    this.task = spec.task;
    queueMicrotask(() => {
      if (this.#state !== "starting") return;
      this.#state = "ready";
      spec.events.ready(this);
    });
  }

  get state(): ExecutorState {
    return this.#state;
  }

  batchBuffer(pairs: number): Float64Array {
    return new Float64Array(2 * pairs);
  }

  send(batch: Float64Array, count: number): void {
    for (let i = 0; i < 2 * count; i++) this.#queue.push(batch[i]!);
    // One loop at a time: a send from inside a result (the loop is between two commands) must
    // not start a second one, or the slot would run two commands at once.
    if (!this.#looping) void this.#next();
  }

  runningPosition(): number {
    return this.#running;
  }

  gpuProcess(): ProcessMatch | null {
    return this.#group;
  }

  checkHealth(now: number): void {
    const timeout = this.#spec.config.timeout;
    if (timeout === null || this.#running < 0 || this.#timedOut) return;
    if (now - this.#startedAt > timeout * 1000) {
      this.#timedOut = true;
      this.#abort?.abort();
    }
  }

  recall(): void {
    const left = (this.#queue.length - this.#queueHead) / 2;
    const positions = new Float64Array(left);
    for (let i = 0; i < left; i++) positions[i] = this.#queue[this.#queueHead + 2 * i]!;
    this.#queue = [];
    this.#queueHead = 0;
    this.#spec.events.returned(this, positions, left);
  }

  stop(): void {
    this.#state = "dead";
  }

  /** Settles once no command of this slot runs (its GPUs may then go to another worker). */
  get exited(): Promise<void> {
    return this.#runningCommand ?? Promise.resolve();
  }

  kill(): void {
    this.#state = "dead";
    this.#abort?.abort();
  }

  #isDead(): boolean {
    return this.#state === "dead";
  }

  async #next(): Promise<void> {
    this.#looping = true;
    try {
      await this.#loop();
    } finally {
      this.#looping = false;
    }
  }

  async #loop(): Promise<void> {
    const { events, config, layout, clock } = this.#spec;
    while (this.#queueHead < this.#queue.length && this.#state !== "dead") {
      const position = this.#queue[this.#queueHead++]!;
      const attempt = this.#queue[this.#queueHead++]!;
      if (this.#queueHead === this.#queue.length) {
        this.#queue = [];
        this.#queueHead = 0;
      }
      const block = makeBlock(config.id, layout, position, attempt);
      this.#running = position;
      this.#startedAt = clock.now();
      this.#timedOut = false;
      this.#abort = new AbortController();
      const t0 = performance.now();
      let failure: { message: string; stack?: string } | null = null;
      let commit: BlockCommit | null = null;
      try {
        const outputs = this.#outputs.empty ? {} : this.#outputs.prepare(block);
        const running = runCommandBlock(this.#command, block, {
          outputs,
          onStdout: (text) => events.output(this, "stdout", text),
          onStderr: (text) => events.output(this, "stderr", text),
          signal: this.#abort.signal,
          cwd: this.#cwd,
          env: this.#env,
          ...(this.#spec.sampleGpu === undefined ? {} : {
            onStart: (pid: number) => {
              this.#group = inProcessGroup(pid);
              this.#spec.sampleGpu!();
            },
          }),
        });
        this.#runningCommand = running.then(() => {}, () => {});
        await running;
        // The command's files are hashed here: the slot's thread is where the data is.
        if (!this.#outputs.empty) commit = this.#outputs.collect(block, position);
      } catch (error) {
        if (!this.#outputs.empty) this.#outputs.discard(block);
        failure = this.#timedOut
          ? { message: `Command timed out after ${config.timeout} s and was killed` }
          : error instanceof CommandFailure
          ? { message: error.message }
          : errorParts(error);
      }
      if (this.#group !== null) {
        this.#spec.sampleGpu?.(); // the block's last sample, its group still named
        this.#group = null;
      }
      const seconds = (performance.now() - t0) / 1000;
      this.#running = -1;
      this.#startedAt = Number.NaN;
      // kill() may have been called while the command ran.
      if (this.#isDead()) return;
      const result: ResultsMessage = {
        kind: "results",
        count: 1,
        stride: RECORD_STRIDE_PLAIN,
        records: Float64Array.of(
          position,
          failure === null ? STATUS_DONE : STATUS_FAILED,
          seconds,
        ),
        errors: failure === null ? [] : [{ position, ...failure }],
        cpuSeconds: Number.NaN,
        ...(this.#outputs.empty ? {} : { commits: commit === null ? [] : [commit] }),
      };
      events.results(this, result);
    }
  }
}
