/**
 * The Web Worker that runs blocks: it imports the pipeline module once, runs the task's
 * `setup` once, then runs `process(block, context)` for every block it is sent, in the order it
 * was sent, and reports the results in batches. An exception fails that block only; the worker
 * lives on.
 *
 * Nothing here allocates per block beyond the block object user code sees: blocks wait in a ring
 * of numbers and results are written into one Float64Array, reused. Messages are copied, never
 * transferred: a buffer transferred out of this worker once per block made the user's own
 * typed-array work 5-8 % slower (the filter passes of bench/real_work.ts: 8.0-8.3 ms a block
 * against 7.7-7.9 ms with copies; docs/design/WORKERS.md), while copying a results batch costs
 * microseconds.
 */

import process from "node:process";
import { format } from "node:util";
import { TaskLayout } from "../lib/blocks/mod.ts";
import { makeBlock } from "../lib/execute/block.ts";
import { TARGET_BATCH_MS } from "../lib/execute/dispatch.ts";
import {
  type BlockError,
  type FromWorker,
  type InitMessage,
  parseToWorker,
  PROTOCOL_VERSION,
  RECORD_STRIDE_MEASURED,
  RECORD_STRIDE_PLAIN,
  RESULT_BUFFER_FLOATS,
  RESULT_RECORDS,
  STATUS_DONE,
  STATUS_FAILED,
} from "../lib/execute/protocol/messages.ts";
import { STATUS_SLOTS, StatusSlot } from "../lib/execute/protocol/status_slots.ts";
import { threadCpuSeconds, ThreadMeter } from "../lib/runtime/usage.ts";
import { BlockMeter } from "../lib/execute/block_meter.ts";
import { BlockOutputs } from "../lib/outputs/block_outputs.ts";
import type { BlockCommit } from "../lib/run/block_report.ts";
import type { BlockContext } from "../lib/pipeline/spec.ts";
import { provideModulesFor } from "../lib/pipeline/provided_modules.ts";
import { errorParts } from "../lib/run/run_types.ts";

interface WorkerScope {
  onmessage: ((event: MessageEvent<unknown>) => void) | null;
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
  close(): void;
}

interface TaskModule {
  id?: unknown;
  process?: (block: unknown, state: unknown, context: BlockContext) => unknown;
  setup?: () => unknown;
}

const scope = globalThis as unknown as WorkerScope;
const post = (message: FromWorker, transfer: Transferable[] = []) =>
  scope.postMessage(message, transfer);

/** Half a window: the scheduler sends a batch once half of it is free, so one per report. */
const FLUSH_AFTER_MS = TARGET_BATCH_MS / 2;
const FLUSH_AFTER_BLOCKS = RESULT_RECORDS;

let init: InitMessage | null = null;
let layout: TaskLayout | null = null;
let processBlock: ((block: unknown, state: unknown, context: BlockContext) => unknown) | null =
  null;
let state: unknown;
let outputs: BlockOutputs = new BlockOutputs([], "run");
let params: BlockContext["params"] = {};
const NO_OUTPUTS: BlockContext["outputs"] = Object.freeze({});
let status: Float64Array | null = null;
let meter: BlockMeter | null = null;
let stride = RECORD_STRIDE_PLAIN;
let stopping = false;
let draining = false;

/** Blocks to run: a ring of (position, attempt) pairs. */
let queue = new Float64Array(2 * 1024);
let queueHead = 0;
let queueSize = 0;

/** The batch of results being filled; what is sent is a copy of its filled part. */
const records = new Float64Array(RESULT_BUFFER_FLOATS);
let recordCount = 0;
let errors: BlockError[] = [];
let commits: BlockCommit[] = [];
let firstUnflushedAt = 0;
let lastFlushAt = 0;
let cpuAtLastFlush = threadCpuSeconds();

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
  captureOutput();
  try {
    if (message.protocol !== PROTOCOL_VERSION) {
      throw new Error(
        `The run speaks worker protocol ${message.protocol} but this worker speaks ${PROTOCOL_VERSION}; use the same blockwise binary for both`,
      );
    }
    layout = new TaskLayout(message.layout);
    if (message.measure) {
      meter = new BlockMeter(new ThreadMeter());
      stride = RECORD_STRIDE_MEASURED;
    }
    await provideModulesFor(message.pipeline);
    const url = new URL(`file://${message.pipeline}`).href;
    const module = await import(url) as { default?: { tasks?: unknown } };
    const tasks = module.default?.tasks;
    const task = Array.isArray(tasks)
      ? (tasks as TaskModule[]).find((t) => t?.id === message.taskId)
      : undefined;
    if (task === undefined || typeof task.process !== "function") {
      throw new Error(
        `Task "${message.taskId}" with a process function was not found in ${message.pipeline} when the worker imported it; the pipeline file must export the same tasks every time it is imported`,
      );
    }
    processBlock = task.process.bind(task);
    outputs = new BlockOutputs(message.outputs, message.runId);
    params = Object.freeze({ ...(message.params ?? {}) });
    state = typeof task.setup === "function" ? await task.setup() : undefined;
    post({ kind: "ready" });
  } catch (error) {
    post({ kind: "setup-failed", ...errorParts(error) });
  }
}

function enqueue(blocks: Float64Array, count: number): void {
  if (2 * (queueSize + count) > queue.length) {
    const next = new Float64Array(Math.max(queue.length * 2, 2 * (queueSize + count)));
    for (let i = 0; i < 2 * queueSize; i++) next[i] = queue[(queueHead + i) % queue.length]!;
    queue = next;
    queueHead = 0;
  }
  for (let i = 0; i < 2 * count; i++) {
    queue[(queueHead + 2 * queueSize + i) % queue.length] = blocks[i]!;
  }
  queueSize += count;
}

function flush(): void {
  meter?.settle(records);
  if (recordCount === 0) return;
  lastFlushAt = performance.now();
  const cpu = threadCpuSeconds();
  const cpuSeconds = cpu - cpuAtLastFlush;
  cpuAtLastFlush = cpu;
  post({
    kind: "results",
    count: recordCount,
    stride,
    records: records.slice(0, recordCount * stride),
    errors,
    cpuSeconds,
    ...(outputs.empty ? {} : { commits }),
  });
  recordCount = 0;
  errors = [];
  commits = [];
}

function recallRequested(s: Float64Array): boolean {
  return s[StatusSlot.Recall] === 1 || s[StatusSlot.Stop] === 1;
}

async function drain(): Promise<void> {
  if (draining) return;
  draining = true;
  const s = status!;
  const taskId = init!.taskId;
  // Counters are read between consecutive blocks: the end of one is the start of the next.
  meter?.start();
  // "Blocks are slow" means 5 ms of work since the last report, not 5 ms of waiting for this
  // batch: counted from the idle wait, a worker among thousands (a batch every 100 ms or more)
  // sent every batch's first result alone, two frames a batch instead of one.
  lastFlushAt = performance.now();
  while (queueSize > 0) {
    if (recallRequested(s)) break;
    const position = queue[queueHead]!;
    const attempt = queue[(queueHead + 1) % queue.length]!;
    queueHead = (queueHead + 2) % queue.length;
    queueSize--;
    // Report what finished before a block starts, unless blocks are fast (then every
    // FLUSH_AFTER_MS): a worker on a byte stream names its running block only once all before it
    // are reported, so a slow block never runs unnamed (no timeout, no blame) behind a finished
    // one.
    if (recordCount > 0 && performance.now() - lastFlushAt >= FLUSH_AFTER_MS) flush();
    const block = makeBlock(taskId, layout!, position, attempt);
    const t0 = performance.now();
    s[StatusSlot.Position] = position;
    s[StatusSlot.Started]! += 1;
    s[StatusSlot.Running] = 1;
    let error: unknown = null;
    try {
      const context: BlockContext = {
        outputs: outputs.empty ? NO_OUTPUTS : outputs.prepare(block),
        params,
      };
      const result = processBlock!(block, state, context);
      if (result instanceof Promise) await result;
      // Hash what the block staged, here where the data is; a file outside its chunks fails it.
      if (!outputs.empty) commits.push(outputs.collect(block, position));
    } catch (e) {
      error = e ?? new Error("process threw a nullish value");
      if (!outputs.empty) {
        try {
          outputs.discard(block);
        } catch {
          // The next attempt's prepare, or the sweep at the next start, removes it.
        }
      }
    }
    const t1 = performance.now();
    const seconds = (t1 - t0) / 1000;
    s[StatusSlot.Running] = 0;
    s[StatusSlot.Finished]! += 1;
    const at = recordCount * stride;
    records[at] = position;
    records[at + 1] = error === null ? STATUS_DONE : STATUS_FAILED;
    records[at + 2] = seconds;
    // Finished at the instant the wall time ends, to the microsecond: the block ran from
    // `finished_at - wall_seconds` (issue 48: the report's timeline and running chart).
    meter?.ended(records, at, (performance.timeOrigin + t1) / 1000);
    if (error !== null) errors.push({ position, ...errorParts(error) });
    recordCount++;
    const now = performance.now();
    if (recordCount === 1) firstUnflushedAt = now;
    if (
      queueSize === 0 || recordCount >= FLUSH_AFTER_BLOCKS ||
      now - firstUnflushedAt >= FLUSH_AFTER_MS
    ) {
      flush();
    }
  }
  if (recallRequested(s)) handBack();
  flush();
  draining = false;
  if (stopping) closeWorker();
}

/** Return the blocks not started, in the order they were sent, so they go back to the queue. */
function handBack(): void {
  const positions = new Float64Array(queueSize);
  for (let i = 0; i < queueSize; i++) positions[i] = queue[(queueHead + 2 * i) % queue.length]!;
  const count = queueSize;
  queueHead = 0;
  queueSize = 0;
  flush();
  post({ kind: "returned", positions, count });
  // Answered: the next recall sets the flag again.
  status![StatusSlot.Recall] = 0;
}

interface StatusInit {
  readonly status?: unknown;
}

scope.onmessage = (event: MessageEvent<unknown>) => {
  let message;
  try {
    message = parseToWorker(event.data);
  } catch (error) {
    post({
      kind: "closing",
      reason: `the worker received a bad message: ${errorParts(error).message}`,
    });
    closeWorker();
    return;
  }
  switch (message.kind) {
    case "init": {
      // The shared status record rides along with init on this transport only.
      const shared = (event.data as StatusInit).status;
      status = shared instanceof SharedArrayBuffer
        ? new Float64Array(shared)
        : new Float64Array(STATUS_SLOTS);
      void initialise(message);
      break;
    }
    case "blocks":
      enqueue(message.blocks, message.count);
      if (recallRequested(status!) && !draining) handBack();
      else void drain();
      break;
    case "recall":
      status![StatusSlot.Recall] = 1;
      if (message.final) status![StatusSlot.Stop] = 1;
      if (!draining) handBack();
      break;
    case "stop":
      stopping = true;
      if (!draining) closeWorker();
      break;
  }
};
