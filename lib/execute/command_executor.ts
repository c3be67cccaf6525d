/**
 * An executor for command tasks: a slot that runs one block's command at a time as a child
 * process. No Web Worker is needed; the main thread only waits for the children.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { makeBlock } from "./block.ts";
import { CommandFailure, runCommandBlock } from "./command_block.ts";
import type { Executor, ExecutorEvents, ExecutorState, InFlightBlock } from "./executor.ts";
import { errorParts } from "./run_types.ts";

export interface CommandExecutorOptions {
  readonly id: number;
  readonly task: number;
  readonly taskId: string;
  readonly layout: TaskLayout;
  readonly command: readonly string[];
  /** The folder the command runs in, or null for the process's. */
  readonly cwd: string | null;
  /** Seconds per block, or null. */
  readonly timeout: number | null;
  readonly events: ExecutorEvents;
}

export class CommandExecutor implements Executor {
  readonly id: number;
  readonly task: number;
  readonly inFlight = new Map<number, InFlightBlock>();
  window = 1;
  private stateValue: ExecutorState = "starting";
  private readonly queue: number[] = [];
  private running = -1;
  private startedAt = Number.NaN;
  private abort: AbortController | null = null;
  private readonly options: CommandExecutorOptions;

  constructor(options: CommandExecutorOptions) {
    this.id = options.id;
    this.task = options.task;
    this.options = options;
    queueMicrotask(() => {
      if (this.stateValue !== "starting") return;
      this.stateValue = "ready";
      options.events.ready(this);
    });
  }

  get state(): ExecutorState {
    return this.stateValue;
  }

  send(blocks: readonly number[]): void {
    for (const b of blocks) this.queue.push(b);
    if (this.running < 0) void this.next();
  }

  runningPosition(): number {
    return this.running;
  }

  runningSince(): number {
    return this.startedAt;
  }

  recall(): void {
    if (this.queue.length === 0) return;
    const positions: number[] = [];
    for (let i = 0; i < this.queue.length; i += 2) positions.push(this.queue[i]!);
    this.queue.length = 0;
    this.options.events.returned(this, Float64Array.from(positions));
  }

  stop(): void {
    this.stateValue = "dead";
  }

  kill(): void {
    this.stateValue = "dead";
    this.abort?.abort();
  }

  private isDead(): boolean {
    return this.stateValue === "dead";
  }

  private async next(): Promise<void> {
    const { events, taskId, layout, command, cwd, timeout } = this.options;
    while (this.queue.length > 0 && this.stateValue !== "dead") {
      const position = this.queue.shift()!;
      const attempt = this.queue.shift()!;
      const block = makeBlock(taskId, layout, position, attempt);
      this.running = position;
      this.startedAt = Date.now();
      this.abort = new AbortController();
      let timedOut = false;
      const timer = timeout === null ? null : setTimeout(() => {
        timedOut = true;
        this.abort?.abort();
      }, timeout * 1000);
      const t0 = performance.now();
      let failure: { message: string; stack?: string } | null = null;
      try {
        await runCommandBlock(command, block, {
          onStdout: (text) => events.output(this, "stdout", text),
          onStderr: (text) => events.output(this, "stderr", text),
          signal: this.abort.signal,
          cwd,
        });
      } catch (error) {
        failure = timedOut
          ? { message: `Command timed out after ${timeout} s and was killed` }
          : error instanceof CommandFailure
          ? { message: error.message }
          : errorParts(error);
      } finally {
        if (timer !== null) clearTimeout(timer);
      }
      const seconds = (performance.now() - t0) / 1000;
      this.running = -1;
      this.startedAt = Number.NaN;
      // kill() may have been called while the command ran.
      if (this.isDead()) return;
      if (failure === null) {
        events.results(
          this,
          Float64Array.of(position),
          Float64Array.of(seconds),
          new Float64Array(0),
          [],
          Number.NaN,
        );
      } else {
        events.results(this, new Float64Array(0), new Float64Array(0), new Float64Array(0), [
          { position, seconds, ...failure, usage: [] },
        ], Number.NaN);
      }
    }
  }
}
