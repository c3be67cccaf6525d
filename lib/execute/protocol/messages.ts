/**
 * The worker protocol: every message between the run loop and a block worker, whatever carries
 * it (postMessage to a Web Worker, or frames on a byte stream: `frames.ts`). Blocks travel as
 * positions (the worker rebuilds IDs and ROIs from the task layout), many per message, so
 * dispatch is not one round trip per block. `docs/design/WORKERS.md` is the specification;
 * keep the two in step.
 *
 * Every incoming message is checked by `parseFromWorker` / `parseToWorker` before it is used:
 * a worker is user code, and a remote one is a stranger on the network.
 */

import type { LayoutSpec } from "../../blocks/mod.ts";
import type { BlockCommit } from "../../run/block_report.ts";
import type { OutputPlan } from "../../outputs/output_plan.ts";
import type { JsonValue } from "../../pipeline/spec.ts";
import {
  bad,
  commitsOf,
  count,
  fields,
  floats,
  num,
  optionalStack,
  optionalString,
  preview,
  ProtocolError,
  str,
} from "./message_fields.ts";

export { ProtocolError };

export const PROTOCOL_VERSION = 1;

/** Result record fields: position, status, then the figures (resource tracking only). */
export const RECORD_POSITION = 0;
export const RECORD_STATUS = 1;
export const RECORD_SECONDS = 2;
/** Fields per record without resource tracking. */
export const RECORD_STRIDE_PLAIN = 3;
/**
 * Fields per record with resource tracking: the seven `Usage` figures (lib/run/block_report.ts)
 * start at RECORD_SECONDS.
 */
export const RECORD_STRIDE_MEASURED = 9;
/** A worker reports at most this many records per results message (Web Workers). */
export const RESULT_RECORDS = 512;
/** Size of a Web Worker's result buffer, in numbers: every one is this size, so all are reusable. */
export const RESULT_BUFFER_FLOATS = RESULT_RECORDS * RECORD_STRIDE_MEASURED;
export const STATUS_DONE = 0;
export const STATUS_FAILED = 1;

// ---- scheduler -> worker --------------------------------------------------------------------

export interface InitMessage {
  readonly kind: "init";
  readonly protocol: number;
  readonly taskId: string;
  /** Run-wide worker number. */
  readonly workerId: number;
  /** Absolute path of the pipeline module to import. */
  readonly pipeline: string;
  /** SHA-256 (hex) of the pipeline file; a worker on another machine refuses a different file. */
  readonly pipelineSha256: string | null;
  readonly layout: LayoutSpec;
  /** Measure CPU, RSS and I/O per block (resource tracking). */
  readonly measure: boolean;
  /** The task's declared outputs, resolved (empty without outputs). */
  readonly outputs: readonly OutputPlan[];
  /** Names this run's staging folders. */
  readonly runId: string;
  /** The task's params (or null), handed to `process` in its context. */
  readonly params: Readonly<Record<string, JsonValue>> | null;
  /** Python tasks: the module the Python client imports and the functions it calls. */
  readonly python?: PythonInit;
}

export interface PythonInit {
  /** Absolute path of the module. */
  readonly module: string;
  /** SHA-256 (hex) of the module file; a worker that reads another file refuses to start. */
  readonly moduleSha256: string | null;
  readonly process: string;
  readonly setup: string | null;
}

export interface BlocksMessage {
  readonly kind: "blocks";
  /** `count` pairs of (position, attempt) from the start of `blocks`. */
  readonly blocks: Float64Array;
  readonly count: number;
}

/** Hand back every block not started yet; `final` also means: start nothing sent later. */
export interface RecallMessage {
  readonly kind: "recall";
  readonly final: boolean;
}

/** Finish the blocks held, then exit. */
export interface StopMessage {
  readonly kind: "stop";
}

export type ToWorker = InitMessage | BlocksMessage | RecallMessage | StopMessage;

// ---- worker -> scheduler --------------------------------------------------------------------

/** First message of a worker on a byte stream. */
export interface HelloMessage {
  readonly kind: "hello";
  readonly protocol: number;
  /** What the worker is, e.g. "blockwise 0.2.0 (bun 1.4.5)" or "blockwise-python 3.11". */
  readonly client: string;
  readonly pid: number;
  readonly host: string;
  /** Remote workers: the worker slot the launcher gave it (`BLOCKWISE_WORKER_SLOT`). */
  readonly slot?: string;
  /** Remote workers: a fresh 256-bit nonce (hex) the scheduler's proof must answer. */
  readonly nonce?: string;
  /**
   * A worker joining by hand (`blockwise worker --secret-file`), instead of `slot`: the id of the
   * task it asks for, or "" to take the run's only joinable task. An optional field: protocol 1
   * still (a scheduler before it refuses such a hello for having no slot).
   */
  readonly join?: string;
}

export interface ReadyMessage {
  readonly kind: "ready";
}

export interface SetupFailedMessage {
  readonly kind: "setup-failed";
  readonly message: string;
  readonly stack?: string;
  /** "import": the task's module did not import (absent: its setup failed). */
  readonly stage?: "import";
}

export interface BlockError {
  readonly position: number;
  readonly message: string;
  readonly stack?: string;
}

export interface ResultsMessage {
  readonly kind: "results";
  /** Records, in the order the blocks ran (which is the order they were sent). */
  readonly count: number;
  /** RECORD_STRIDE_PLAIN or RECORD_STRIDE_MEASURED. */
  readonly stride: number;
  readonly records: Float64Array;
  /** One per record whose status is STATUS_FAILED, in record order. */
  readonly errors: readonly BlockError[];
  /** CPU seconds the worker used since its previous results message (NaN if unknown). */
  readonly cpuSeconds: number;
  /**
   * With declared outputs: one per done record, in record order, what the block staged (its
   * files, sizes, SHA-256 and content hash).
   */
  readonly commits?: readonly BlockCommit[];
}

/** Blocks handed back unstarted after a recall (possibly none). */
export interface ReturnedMessage {
  readonly kind: "returned";
  readonly positions: Float64Array;
  readonly count: number;
}

export interface OutputMessage {
  readonly kind: "output";
  readonly stream: "stdout" | "stderr";
  readonly text: string;
}

/** The worker is about to end itself (user code called `self.close()`, `process.exit`). */
export interface ClosingMessage {
  readonly kind: "closing";
  readonly reason: string;
}

/**
 * The worker takes no more blocks (its batch job nears its walltime, say): it hands back what it
 * has not started (`returned`), finishes the block it runs, and the scheduler starts a
 * replacement. Not a crash: no block fails.
 */
export interface LeavingMessage {
  readonly kind: "leaving";
  readonly reason: string;
}

/** Liveness on a byte stream: sent at least every heartbeat interval. */
export interface HeartbeatMessage {
  readonly kind: "heartbeat";
  /** Position of the block running now, or -1. */
  readonly running: number;
  /** Seconds the running block has run so far (0 when none runs). */
  readonly runningFor: number;
}

export type FromWorker =
  | HelloMessage
  | ReadyMessage
  | SetupFailedMessage
  | ResultsMessage
  | ReturnedMessage
  | OutputMessage
  | ClosingMessage
  | LeavingMessage
  | HeartbeatMessage;

// ---- validation -----------------------------------------------------------------------------

/**
 * A results message: the hot path of a busy run, in a function of its own so that the JIT
 * compiles it once, whatever mix of other messages (a thousand hellos) `parseFromWorker` sees.
 */
function parseResults(m: Record<string, unknown>): ResultsMessage {
  const kind = "results";
  const n = count(m, "count", kind);
  const stride = count(m, "stride", kind);
  if (stride !== RECORD_STRIDE_PLAIN && stride !== RECORD_STRIDE_MEASURED) {
    throw bad(kind, "stride", `${RECORD_STRIDE_PLAIN} or ${RECORD_STRIDE_MEASURED}`, stride);
  }
  const records = floats(m, "records", kind, n * stride);
  const rawErrors = m["errors"];
  if (!Array.isArray(rawErrors)) throw bad(kind, "errors", "an array", rawErrors);
  const errors = rawErrors.length === 0 ? [] : rawErrors.map((e: unknown): BlockError => {
    const f = fields({ kind: "error", ...(typeof e === "object" ? e : { bad: e }) }, "Worker");
    return {
      position: num(f, "position", "results error"),
      message: str(f, "message", "results error"),
      ...optionalStack(f, "results error"),
    };
  });
  let failed = 0;
  for (let i = 0; i < n; i++) {
    const status = records[i * stride + RECORD_STATUS];
    if (status === STATUS_FAILED) failed++;
    else if (status !== STATUS_DONE) {
      throw new ProtocolError(`"results" message: record ${i} has status ${status}`);
    }
  }
  if (failed !== errors.length) {
    throw new ProtocolError(
      `"results" message: ${failed} failed records but ${errors.length} errors`,
    );
  }
  const message = {
    kind,
    count: n,
    stride,
    records,
    errors,
    cpuSeconds: num(m, "cpuSeconds", kind),
  } as const;
  // The hot path (no outputs) copies nothing more.
  if (m["commits"] === undefined) return message;
  return { ...message, ...commitsOf(m, n - failed) };
}

/** Check a message from a worker; throws ProtocolError naming what is wrong. */
export function parseFromWorker(value: unknown): FromWorker {
  const m = fields(value, "Worker");
  const kind = m.kind;
  switch (kind) {
    case "hello":
      return {
        kind,
        protocol: count(m, "protocol", kind),
        client: str(m, "client", kind),
        pid: count(m, "pid", kind),
        host: str(m, "host", kind),
        ...optionalString(m, "slot", kind),
        ...optionalString(m, "nonce", kind),
        ...optionalString(m, "join", kind),
      };
    case "ready":
      return { kind };
    case "setup-failed":
      return {
        kind,
        message: str(m, "message", kind),
        ...optionalStack(m, kind),
        ...(m["stage"] === "import" ? { stage: "import" as const } : {}),
      };
    case "results":
      return parseResults(m);
    case "returned": {
      const n = count(m, "count", kind);
      return { kind, count: n, positions: floats(m, "positions", kind, n) };
    }
    case "output": {
      const stream = m["stream"];
      if (stream !== "stdout" && stream !== "stderr") {
        throw bad(kind, "stream", `"stdout" or "stderr"`, stream);
      }
      return { kind, stream, text: str(m, "text", kind) };
    }
    case "closing":
      return { kind, reason: str(m, "reason", kind) };
    case "leaving":
      return { kind, reason: str(m, "reason", kind) };
    case "heartbeat":
      return { kind, running: num(m, "running", kind), runningFor: num(m, "runningFor", kind) };
    default:
      throw new ProtocolError(`Worker message has an unknown kind: ${preview(kind)}`);
  }
}

/** Check a message from the scheduler; throws ProtocolError naming what is wrong. */
export function parseToWorker(value: unknown): ToWorker {
  const m = fields(value, "Scheduler");
  const kind = m.kind;
  switch (kind) {
    case "init": {
      const layout = m["layout"];
      if (typeof layout !== "object" || layout === null) {
        throw bad(kind, "layout", "a layout object", layout);
      }
      const sha = m["pipelineSha256"];
      if (sha !== null && typeof sha !== "string") {
        throw bad(kind, "pipelineSha256", "a string or null", sha);
      }
      const measure = m["measure"];
      if (typeof measure !== "boolean") throw bad(kind, "measure", "a boolean", measure);
      const outputs = m["outputs"] ?? [];
      if (!Array.isArray(outputs)) throw bad(kind, "outputs", "an array of output plans", outputs);
      const params = m["params"] ?? null;
      if (params !== null && (typeof params !== "object" || Array.isArray(params))) {
        throw bad(kind, "params", "an object or null", params);
      }
      return {
        kind,
        protocol: count(m, "protocol", kind),
        taskId: str(m, "taskId", kind),
        workerId: count(m, "workerId", kind),
        pipeline: str(m, "pipeline", kind),
        pipelineSha256: sha,
        layout: layout as LayoutSpec,
        measure,
        outputs: outputs as OutputPlan[],
        runId: typeof m["runId"] === "string" ? m["runId"] : "run",
        params: params as Record<string, JsonValue> | null,
        ...pythonOf(m),
      };
    }
    case "blocks": {
      const n = count(m, "count", kind);
      return { kind, count: n, blocks: floats(m, "blocks", kind, 2 * n) };
    }
    case "recall": {
      const final = m["final"];
      if (typeof final !== "boolean") throw bad(kind, "final", "a boolean", final);
      return { kind, final };
    }
    case "stop":
      return { kind };
    default:
      throw new ProtocolError(`Scheduler message has an unknown kind: ${preview(kind)}`);
  }
}

function pythonOf(m: Record<string, unknown>): { python?: PythonInit } {
  const v = m["python"];
  if (v === undefined) return {};
  const p = fields({ kind: "python", ...(typeof v === "object" ? v : { bad: v }) }, "Scheduler");
  const sha = p["moduleSha256"] ?? null;
  const setup = p["setup"] ?? null;
  if (sha !== null && typeof sha !== "string") {
    throw bad("init", "python.moduleSha256", "a string or null", sha);
  }
  if (setup !== null && typeof setup !== "string") {
    throw bad("init", "python.setup", "a string or null", setup);
  }
  return {
    python: {
      module: str(p, "module", "init python"),
      moduleSha256: sha,
      process: str(p, "process", "init python"),
      setup,
    },
  };
}
