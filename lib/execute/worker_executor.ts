/** An executor backed by a Web Worker running `workers/block_worker.ts`. */

import { pathToFileURL } from "node:url";
import type { LayoutSpec } from "../blocks/mod.ts";
import { spawnWorker } from "../runtime/mod.ts";
import type { Executor, ExecutorEvents, ExecutorState, InFlightBlock } from "./executor.ts";
import { type FromWorker, STATUS_SLOTS, StatusSlot, type ToWorker } from "./worker_protocol.ts";

export interface WorkerExecutorOptions {
  readonly id: number;
  readonly task: number;
  readonly taskId: string;
  readonly pipelinePath: string;
  readonly layout: LayoutSpec;
  readonly measure: boolean;
  readonly events: ExecutorEvents;
}

export class WorkerExecutor implements Executor {
  readonly id: number;
  readonly task: number;
  readonly inFlight = new Map<number, InFlightBlock>();
  // One block until the first result tells how long blocks take (then `window` adapts).
  window = 1;
  private stateValue: ExecutorState = "starting";
  private readonly worker: Worker;
  private readonly status: Float64Array;
  private readonly events: ExecutorEvents;

  constructor(options: WorkerExecutorOptions) {
    this.id = options.id;
    this.task = options.task;
    this.events = options.events;
    const shared = new SharedArrayBuffer(STATUS_SLOTS * Float64Array.BYTES_PER_ELEMENT);
    this.status = new Float64Array(shared);
    this.worker = spawnWorker(`${options.taskId}:${options.id}`);
    this.worker.onmessage = (event: MessageEvent<FromWorker>) => this.receive(event.data);
    this.worker.onerror = (event: ErrorEvent) => {
      // Without preventDefault an uncaught error in a worker takes the main thread down (Deno).
      event.preventDefault();
      const where = event.filename ? ` (${event.filename}:${event.lineno})` : "";
      this.die(`uncaught error in the worker: ${event.message || "unknown error"}${where}`);
    };
    this.worker.onmessageerror = () => this.die("a message from the worker could not be read");
    // Bun reports every worker exit (process.exit, a fatal error) as "close"; Deno has no such
    // event, so the worker announces a self-close itself (see workers/block_worker.ts).
    this.worker.addEventListener("close", () => this.die("the worker exited"));
    this.post({
      kind: "init",
      pipelineUrl: pathToFileURL(options.pipelinePath).href,
      taskId: options.taskId,
      layout: options.layout,
      workerId: options.id,
      status: shared,
      measure: options.measure,
    });
  }

  get state(): ExecutorState {
    return this.stateValue;
  }

  send(blocks: readonly number[]): void {
    this.post({ kind: "blocks", blocks: Float64Array.from(blocks) });
  }

  runningPosition(): number {
    return this.status[StatusSlot.Running] === 1 ? this.status[StatusSlot.Position]! : -1;
  }

  runningSince(): number {
    return this.status[StatusSlot.Running] === 1 ? this.status[StatusSlot.StartedAt]! : Number.NaN;
  }

  private recalling = false;

  /** At most one recall at a time; the worker answers with `returned` (maybe empty). */
  recall(final = false): void {
    if (final) this.status[StatusSlot.Stop] = 1;
    if (this.recalling) return;
    this.recalling = true;
    this.status[StatusSlot.Recall] = 1;
  }

  /** Retire an idle worker: it holds no blocks, so terminating it loses nothing. */
  stop(): void {
    this.kill();
  }

  kill(): void {
    this.stateValue = "dead";
    this.worker.terminate();
  }

  private post(message: ToWorker): void {
    this.worker.postMessage(message);
  }

  private die(reason: string): void {
    if (this.stateValue === "dead") return;
    this.stateValue = "dead";
    this.worker.terminate();
    this.events.crashed(this, reason);
  }

  private receive(message: FromWorker): void {
    if (this.stateValue === "dead") return; // late message from a terminated worker
    switch (message.kind) {
      case "ready":
        this.stateValue = "ready";
        this.events.ready(this);
        break;
      case "setup-failed":
        this.stateValue = "dead";
        this.worker.terminate();
        this.events.setupFailed(this, message.message, message.stack);
        break;
      case "results":
        this.events.results(
          this,
          message.done,
          message.durations,
          message.usage,
          message.failed,
          message.cpuSeconds,
        );
        break;
      case "output":
        this.events.output(this, message.stream, message.text);
        break;
      case "returned":
        this.recalling = false;
        this.events.returned(this, message.positions);
        break;
      case "closing":
        this.die(message.reason);
        break;
    }
  }
}
