/**
 * The pipeline a daisy script describes, as the session receives it (DAISY_API.md, "Values"),
 * turned into the validated `PipelineConfig` every runner takes. Validation is the pipeline
 * files' own (`validatePipeline`): the same refusals, defaults and DAG checks, so a daisy task
 * and a task of a pipeline file cannot mean different things. Each task becomes an embedded
 * Python task: its blocks run in threads of the calling Python process.
 */

import { resolve } from "node:path";
import process from "node:process";
import { isRecord, PipelineError } from "../errors.ts";
import {
  type Block,
  type PipelineConfig,
  type TaskConfig,
  type TaskDefinition,
  validatePipeline,
} from "../pipeline/mod.ts";

/** Whether a task's `process_function` takes a block or drives its own `daisy.Client`. */
export type DaisyMode = "block" | "worker";

export interface DaisyPipeline {
  readonly config: PipelineConfig;
  /** Per task (pipeline order), how its process function is called. */
  readonly modes: readonly DaisyMode[];
}

/** Asks the Python process whether a block is done already (the task's `check_function`). */
export type CheckAsker = (block: Block) => Promise<boolean>;

/** A request the session refuses: the Python exception to raise and its message. */
export class SessionRefusal extends Error {
  constructor(readonly pythonType: "ValueError" | "TypeError" | "KeyError", message: string) {
    super(message);
  }
}

const TASK_KEYS = [
  "id",
  "totalRoi",
  "readRoi",
  "writeRoi",
  "fit",
  "readWriteConflict",
  "maxWorkers",
  "maxRetries",
  "maxWorkerRestarts",
  "timeout",
  "requires",
  "check",
  "mode",
  "tracking",
  "resourceTracking",
  "skipMask",
  "outputs",
  "launch",
  "job",
] as const;

/** Never called: an embedded task's blocks run in Python; validation wants a way to run them. */
function runsInPython(): never {
  throw new Error("Internal error: an embedded Python task's block reached a Web Worker");
}

export function parseDaisyPipeline(value: unknown, ask: CheckAsker): DaisyPipeline {
  if (!isRecord(value) || !Array.isArray(value["tasks"])) {
    throw new SessionRefusal(
      "TypeError",
      `The session expected a pipeline {"tasks": [...], "edges": [...]}; got ${
        JSON.stringify(value)?.slice(0, 200)
      }`,
    );
  }
  const edges = value["edges"] ?? [];
  if (!Array.isArray(edges)) {
    throw new SessionRefusal("TypeError", `The pipeline's "edges" must be a list of pairs`);
  }
  const upstream = new Map<string, string[]>();
  for (const edge of edges) {
    if (
      !Array.isArray(edge) || edge.length !== 2 || typeof edge[0] !== "string" ||
      typeof edge[1] !== "string"
    ) {
      throw new SessionRefusal(
        "TypeError",
        `A pipeline edge must be a pair of task ids [upstream, downstream]; got ${
          JSON.stringify(edge)
        }`,
      );
    }
    const list = upstream.get(edge[1]) ?? [];
    if (!list.includes(edge[0])) list.push(edge[0]);
    upstream.set(edge[1], list);
  }
  const modes: DaisyMode[] = [];
  const jobs: (JobSpec | null)[] = [];
  const definitions = (value["tasks"] as unknown[]).map((raw) => {
    const task = definitionOf(raw, upstream, ask);
    modes.push(task.mode);
    jobs.push(task.job);
    return task.definition;
  });
  const source = typeof value["source"] === "string" && value["source"] !== ""
    ? resolve(value["source"])
    : resolve(process.cwd(), "<python>");
  let config: PipelineConfig;
  try {
    config = validatePipeline({ tasks: definitions }, source);
  } catch (error) {
    if (error instanceof PipelineError) throw new SessionRefusal("ValueError", error.message);
    throw error;
  }
  const tasks = config.tasks.map((t, i) => embedded(t, modes[i]!, jobs[i] ?? null));
  return { config: { ...config, tasks }, modes };
}

/**
 * Where a daisy task's function lives, for workers launched elsewhere (`launch=` other than
 * local): the module file, the function's name in it, and the interpreter to run.
 */
interface JobSpec {
  readonly module: string;
  readonly function: string;
  readonly interpreter: string;
}

function embedded(task: TaskConfig, mode: DaisyMode, job: JobSpec | null): TaskConfig {
  const { process: _process, setup: _setup, kind: _kind, ...base } = task as TaskConfig & {
    process?: unknown;
    setup?: unknown;
  };
  if (task.launch.kind !== "local" && job === null) {
    throw new SessionRefusal(
      "ValueError",
      `Task "${task.id}": its workers are launched by ${task.launch.kind}, but the session got no module and function to run there ("job")`,
    );
  }
  return {
    ...base,
    kind: "python",
    python: {
      module: job?.module ?? `<python process function of task ${task.id}>`,
      written: job?.module ?? `process_function of task "${task.id}"`,
      process: job?.function ?? "process_function",
      setup: null,
      interpreter: job?.interpreter ?? "python3",
      embedded: { mode },
    },
  };
}

function jobOf(id: string, value: unknown): JobSpec | null {
  if (value === undefined || value === null) return null;
  const v = value as Record<string, unknown>;
  const text = (key: string): string => {
    const x = isRecord(value) ? v[key] : undefined;
    if (typeof x !== "string" || x === "") {
      throw new SessionRefusal(
        "TypeError",
        `Task "${id}": "job" needs "module", "function" and "interpreter" strings; got ${
          JSON.stringify(value)
        }`,
      );
    }
    return x;
  };
  return { module: text("module"), function: text("function"), interpreter: text("interpreter") };
}

function definitionOf(
  raw: unknown,
  upstream: ReadonlyMap<string, readonly string[]>,
  ask: CheckAsker,
): { definition: TaskDefinition; mode: DaisyMode; job: JobSpec | null } {
  if (!isRecord(raw) || typeof raw["id"] !== "string") {
    throw new SessionRefusal(
      "TypeError",
      `Each task must be an object with a string "id"; got ${JSON.stringify(raw)?.slice(0, 200)}`,
    );
  }
  const id = raw["id"];
  const unknown = Object.keys(raw).find((k) => !(TASK_KEYS as readonly string[]).includes(k));
  if (unknown !== undefined) {
    throw new SessionRefusal(
      "TypeError",
      `Task "${id}": the session knows no field "${unknown}" (it knows ${TASK_KEYS.join(", ")})`,
    );
  }
  const mode = raw["mode"] ?? "block";
  if (mode !== "block" && mode !== "worker") {
    throw new SessionRefusal(
      "ValueError",
      `Task "${id}": "mode" must be "block" or "worker"; got ${JSON.stringify(mode)}`,
    );
  }
  const definition: Record<string, unknown> = { process: runsInPython };
  for (const key of TASK_KEYS) {
    const v = raw[key];
    if (v === undefined || v === null || key === "check" || key === "mode" || key === "job") {
      continue;
    }
    definition[key] = v;
  }
  if (raw["check"] === true) definition["check"] = ask;
  const ups = upstream.get(id);
  if (ups !== undefined) definition["upstream"] = [...ups];
  return {
    definition: definition as unknown as TaskDefinition,
    mode,
    job: jobOf(id, raw["job"]),
  };
}
