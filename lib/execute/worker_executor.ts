/**
 * An executor backed by a Web Worker running `workers/block_worker.ts`. Messages are the
 * protocol's (`protocol/messages.ts`), checked on arrival; the shared status record
 * (`protocol/status_slots.ts`) is the fast path for "which block runs now" and for recall.
 * Batch buffers go back and forth instead of being left to the garbage collector: result
 * buffers return to the worker with the next blocks, block buffers come back with results.
 */

import type { LayoutSpec } from "../blocks/mod.ts";
import type { OutputPlan } from "../outputs/output_plan.ts";
import type { JsonValue } from "../pipeline/spec.ts";
import { spawnWorker } from "../runtime/mod.ts";
import { NO_PROCESS, type ProcessMatch } from "../runtime/nvml.ts";
import {
  type Executor,
  type ExecutorEvents,
  type ExecutorSpec,
  type ExecutorState,
} from "./executor.ts";
import { MAX_WINDOW } from "./dispatch.ts";
import { InFlightQueue } from "./in_flight.ts";
import { parseFromWorker, PROTOCOL_VERSION, type ToWorker } from "./protocol/messages.ts";
import { STATUS_SLOTS, StatusSlot } from "./protocol/status_slots.ts";
import { RunningBlockWatch } from "./running_block_watch.ts";

/** What a Web Worker executor needs: less than a whole task, so a worker relay can use it too. */
export interface WebWorkerOptions {
  readonly id: number;
  readonly task: number;
  readonly taskId: string;
  readonly layout: LayoutSpec;
  /** Absolute path of the pipeline module. */
  readonly pipelinePath: string;
  readonly measure: boolean;
  /** Seconds per block, or null. */
  readonly timeout: number | null;
  readonly outputs: readonly OutputPlan[];
  readonly runId: string;
  readonly params: Readonly<Record<string, JsonValue>> | null;
  readonly events: ExecutorEvents;
}

export function webWorkerOptions(spec: ExecutorSpec): WebWorkerOptions {
  return {
    id: spec.id,
    task: spec.task,
    taskId: spec.config.id,
    layout: spec.config.layout,
    pipelinePath: spec.pipelinePath,
    measure: spec.measure,
    timeout: spec.config.timeout,
    outputs: spec.outputs,
    runId: spec.runId,
    params: spec.config.params,
    events: spec.events,
  };
}

export class WorkerExecutor implements Executor {
  readonly id: number;
  readonly task: number;
  readonly parkable = true;
  readonly inFlight = new InFlightQueue();
  // One block until the first result tells how long blocks take (then `window` adapts).
  window = 1;
  #state: ExecutorState = "starting";
  readonly #spec: WebWorkerOptions;
  readonly #worker: Worker;
  readonly #status: Float64Array;
  /**
   * Where the dispatcher writes a batch (at most MAX_WINDOW blocks); the worker gets a copy of
   * its filled part, so this one is reused (no buffer is transferred: see workers/block_worker.ts).
   */
  readonly #batch = new Float64Array(2 * MAX_WINDOW);
  readonly #watch: RunningBlockWatch;
  #recalling = false;

  constructor(spec: WebWorkerOptions) {
    this.#spec = spec;
    this.id = spec.id;
    this.task = spec.task;
    this.#watch = new RunningBlockWatch(spec.timeout);
    const shared = new SharedArrayBuffer(STATUS_SLOTS * Float64Array.BYTES_PER_ELEMENT);
    this.#status = new Float64Array(shared);
    this.#worker = spawnWorker(`${spec.taskId}:${spec.id}`);
    this.#worker.onmessage = (event: MessageEvent<unknown>) => this.#receive(event.data);
    this.#worker.onerror = (event: ErrorEvent) => {
      // Without preventDefault an uncaught error in a worker takes the main thread down (Deno).
      event.preventDefault();
      const where = event.filename ? ` (${event.filename}:${event.lineno})` : "";
      this.#die(`uncaught error in the worker: ${event.message || "unknown error"}${where}`);
    };
    this.#worker.onmessageerror = () => this.#die("a message from the worker could not be read");
    // Bun reports every worker exit (process.exit, a fatal error) as "close"; Deno has no such
    // event, so the worker announces a self-close itself (see workers/block_worker.ts).
    this.#worker.addEventListener("close", () => this.#die("the worker exited"));
    const init: ToWorker & { status: SharedArrayBuffer } = {
      kind: "init",
      protocol: PROTOCOL_VERSION,
      taskId: spec.taskId,
      workerId: spec.id,
      pipeline: spec.pipelinePath,
      pipelineSha256: null,
      layout: spec.layout,
      measure: spec.measure,
      outputs: spec.outputs,
      runId: spec.runId,
      params: spec.params,
      status: shared,
    };
    this.#worker.postMessage(init);
  }

  get state(): ExecutorState {
    return this.#state;
  }

  batchBuffer(pairs: number): Float64Array {
    if (2 * pairs > this.#batch.length) {
      throw new RangeError(`A batch of ${pairs} blocks exceeds the window cap of ${MAX_WINDOW}`);
    }
    return this.#batch;
  }

  send(batch: Float64Array, count: number): void {
    const message: ToWorker = { kind: "blocks", blocks: batch.slice(0, 2 * count), count };
    this.#worker.postMessage(message);
  }

  /** A thread of the scheduler's process: its devices' utilisation, no memory of its own. */
  gpuProcess(): ProcessMatch {
    return NO_PROCESS;
  }

  runningPosition(): number {
    return this.#status[StatusSlot.Running] === 1 ? this.#status[StatusSlot.Position]! : -1;
  }

  /** Changes whenever a new block starts; -1 while none runs. */
  runningToken(): number {
    const s = this.#status;
    return s[StatusSlot.Running] === 1 ? s[StatusSlot.Started]! : -1;
  }

  /** Blocks the worker finished so far (reported or not). */
  finishedCount(): number {
    return this.#status[StatusSlot.Finished]!;
  }

  checkHealth(now: number): void {
    if (this.#state === "dead") return;
    const overdue = this.#watch.observe(now, this.runningToken());
    if (overdue !== null) this.#die(overdue);
  }

  /** At most one recall at a time; the worker answers with `returned` (maybe empty). */
  recall(final = false): void {
    if (final) this.#status[StatusSlot.Stop] = 1;
    if (this.#recalling) return;
    this.#recalling = true;
    this.#status[StatusSlot.Recall] = 1;
  }

  /** Retire an idle worker: it holds no blocks, so terminating it loses nothing. */
  stop(): void {
    this.kill();
  }

  kill(): void {
    this.#state = "dead";
    this.#worker.terminate();
  }

  #die(reason: string): void {
    if (this.#state === "dead") return;
    this.#state = "dead";
    this.#worker.terminate();
    this.#spec.events.crashed(this, reason);
  }

  #receive(data: unknown): void {
    if (this.#state === "dead") return; // late message from a terminated worker
    let message;
    try {
      message = parseFromWorker(data);
    } catch (error) {
      this.#die(`the worker broke the protocol: ${(error as Error).message}`);
      return;
    }
    const events = this.#spec.events;
    switch (message.kind) {
      case "ready":
        this.#state = "ready";
        events.ready(this);
        break;
      case "setup-failed":
        this.#state = "dead";
        this.#worker.terminate();
        events.setupFailed(this, message.message, message.stack);
        break;
      case "results":
        events.results(this, message);
        break;
      case "output":
        events.output(this, message.stream, message.text);
        break;
      case "returned":
        this.#recalling = false;
        events.returned(this, message.positions, message.count);
        break;
      case "closing":
        this.#die(message.reason);
        break;
      case "hello":
      case "heartbeat":
        this.#die(`the worker sent "${message.kind}", which only byte-stream workers send`);
        break;
    }
  }
}
