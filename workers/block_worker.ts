/**
 * The Web Worker that runs blocks: it imports the pipeline module once, runs the task's
 * `setup` once, then runs `process(block, context)` for every block it is sent and reports the
 * results in batches. An exception fails that block only; the worker lives on.
 */

import process from "node:process";
import { format } from "node:util";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { makeBlock } from "../lib/execute/block.ts";
import {
  type BlockError,
  type FromWorker,
  type InitMessage,
  StatusSlot,
  type ToWorker,
} from "../lib/execute/worker_protocol.ts";
import { peakRssBytes, threadCpuSeconds, ThreadMeter } from "../lib/runtime/usage.ts";

interface WorkerScope {
  onmessage: ((event: MessageEvent<ToWorker>) => void) | null;
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
  close(): void;
}

interface TaskModule {
  id?: unknown;
  process?: (block: unknown, context: unknown) => unknown;
  setup?: () => unknown;
}

const scope = globalThis as unknown as WorkerScope;
const post = (message: FromWorker, transfer: Transferable[] = []) =>
  scope.postMessage(message, transfer);

const FLUSH_AFTER_MS = 5;
const FLUSH_AFTER_BLOCKS = 512;

let init: InitMessage | null = null;
let layout: TaskLayout | null = null;
let processBlock: ((block: unknown, context: unknown) => unknown) | null = null;
let context: unknown;
let status: Float64Array | null = null;
let meter: ThreadMeter | null = null;
let stopping = false;

const queue: number[] = [];
let queueHead = 0;
let draining = false;

let done: number[] = [];
let durations: number[] = [];
let usage: number[] = [];
let failed: BlockError[] = [];
let firstUnflushedAt = 0;
let cpuAtLastFlush = threadCpuSeconds();

function errorFields(error: unknown): { message: string; stack?: string } {
  if (error instanceof Error) {
    return error.stack === undefined ? { message: error.message } : {
      message: error.message,
      stack: error.stack,
    };
  }
  return { message: `non-Error value thrown: ${String(error)}` };
}

// Bun's workers have no `self.close`; give user code the same one in both runtimes.
const closeWorker: () => void = typeof scope.close === "function"
  ? scope.close.bind(scope)
  : () => process.exit(0);

/**
 * Route user output to the main thread, which prefixes it by task and worker or writes it to
 * per-worker log files, and announce a worker that closes itself so its blocks are retried.
 */
function captureOutput(): void {
  const send = (stream: "stdout" | "stderr") => (...args: unknown[]) => {
    post({ kind: "output", stream, text: format(...args) + "\n" });
  };
  console.log = send("stdout");
  console.info = send("stdout");
  console.debug = send("stdout");
  console.warn = send("stderr");
  console.error = send("stderr");
  scope.close = () => {
    post({ kind: "closing", reason: "the worker called self.close()" });
    closeWorker();
  };
  const exit = process.exit.bind(process);
  process.exit = ((code?: number) => {
    post({ kind: "closing", reason: `the worker called process.exit(${code ?? ""})` });
    return exit(code);
  }) as typeof process.exit;
}

async function initialise(message: InitMessage): Promise<void> {
  init = message;
  status = new Float64Array(message.status);
  layout = new TaskLayout(message.layout);
  if (message.measure) meter = new ThreadMeter();
  captureOutput();
  try {
    const module = await import(message.pipelineUrl) as { default?: { tasks?: unknown } };
    const tasks = module.default?.tasks;
    const task = Array.isArray(tasks)
      ? (tasks as TaskModule[]).find((t) => t?.id === message.taskId)
      : undefined;
    if (task === undefined || typeof task.process !== "function") {
      throw new Error(
        `Task "${message.taskId}" with a process function was not found in ${message.pipelineUrl} when the worker imported it; the pipeline file must export the same tasks every time it is imported`,
      );
    }
    processBlock = task.process.bind(task);
    context = typeof task.setup === "function" ? await task.setup() : undefined;
    post({ kind: "ready" });
  } catch (error) {
    post({ kind: "setup-failed", ...errorFields(error) });
  }
}

function flush(): void {
  if (done.length === 0 && failed.length === 0) return;
  const doneArray = Float64Array.from(done);
  const durationArray = Float64Array.from(durations);
  const usageArray = Float64Array.from(usage);
  const cpu = threadCpuSeconds();
  const cpuSeconds = cpu - cpuAtLastFlush;
  cpuAtLastFlush = cpu;
  post({
    kind: "results",
    done: doneArray,
    durations: durationArray,
    usage: usageArray,
    failed,
    cpuSeconds,
  }, [
    doneArray.buffer,
    durationArray.buffer,
    usageArray.buffer,
  ]);
  done = [];
  durations = [];
  usage = [];
  failed = [];
}

async function drain(): Promise<void> {
  if (draining) return;
  draining = true;
  const measure = init!.measure;
  const s = status!;
  const taskId = init!.taskId;
  // Counters are read once between consecutive blocks: the end of one is the start of the next.
  let cpu0 = measure ? meter!.cpuSeconds() : 0;
  let io0 = measure ? meter!.io() : null;
  while (queueHead < queue.length) {
    if (s[StatusSlot.Recall] === 1 || s[StatusSlot.Stop] === 1) {
      handBack();
      break;
    }
    const position = queue[queueHead++]!;
    const attempt = queue[queueHead++]!;
    const block = makeBlock(taskId, layout!, position, attempt);
    const t0 = performance.now();
    s[StatusSlot.Position] = position;
    s[StatusSlot.StartedAt] = Date.now();
    s[StatusSlot.Running] = 1;
    let error: unknown = null;
    try {
      const result = processBlock!(block, context);
      if (result instanceof Promise) await result;
    } catch (e) {
      error = e ?? new Error("process threw a nullish value");
    }
    const seconds = (performance.now() - t0) / 1000;
    s[StatusSlot.Running] = 0;
    s[StatusSlot.BlocksDone]! += 1;
    let figures: number[] = [];
    if (measure) {
      const cpu1 = meter!.cpuSeconds();
      const io1 = meter!.io();
      const rss = peakRssBytes();
      const readBytes = io1.read - io0!.read;
      const writeBytes = io1.write - io0!.write;
      // In `Usage` order; pushed straight into the batch on success (no array per block).
      if (error === null) {
        usage.push(seconds, cpu1 - cpu0, rss, readBytes, writeBytes, Date.now() / 1000);
      } else {
        figures = [seconds, cpu1 - cpu0, rss, readBytes, writeBytes, Date.now() / 1000];
      }
      cpu0 = cpu1;
      io0 = io1;
    }
    if (error === null) {
      done.push(position);
      durations.push(seconds);
    } else {
      failed.push({ position, seconds, ...errorFields(error), usage: figures });
    }
    const now = performance.now();
    if (done.length + failed.length === 1) firstUnflushedAt = now;
    if (
      queueHead >= queue.length || done.length >= FLUSH_AFTER_BLOCKS ||
      now - firstUnflushedAt >= FLUSH_AFTER_MS
    ) {
      flush();
    }
  }
  if (s[StatusSlot.Recall] === 1 || s[StatusSlot.Stop] === 1) handBack();
  queue.length = 0;
  queueHead = 0;
  flush();
  draining = false;
  if (stopping) closeWorker();
}

/** The run is stopping: return the blocks not started, so they go back to the queue at once. */
function handBack(): void {
  const positions: number[] = [];
  for (let i = queueHead; i < queue.length; i += 2) positions.push(queue[i]!);
  queue.length = 0;
  queueHead = 0;
  flush();
  const array = Float64Array.from(positions);
  post({ kind: "returned", positions: array }, [array.buffer]);
  // Answered: the next recall sets the flag again.
  status![StatusSlot.Recall] = 0;
}

scope.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  switch (message.kind) {
    case "init":
      void initialise(message);
      break;
    case "blocks": {
      const b = message.blocks;
      for (let i = 0; i < b.length; i++) queue.push(b[i]!);
      if ((status![StatusSlot.Recall] === 1 || status![StatusSlot.Stop] === 1) && !draining) {
        handBack();
      } else void drain();
      break;
    }
    case "stop":
      stopping = true;
      if (!draining) closeWorker();
      break;
  }
};
