/**
 * Validation of a pipeline module's default export (DESIGN.md section 4). Every field of every
 * task is checked and its default filled in, the task DAG is built and each task's tiling is
 * constructed once, so nothing runs before the whole pipeline is known to be well-formed.
 * Messages name the task and the field, quote the value at fault and say how to fix it.
 * The per-field readers are in task_fields.ts, the message helpers in describe_value.ts.
 */

import { closest, describeValue } from "./describe_value.ts";
import { axes, idProblem, isObject, TaskFields } from "./task_fields.ts";
import { TaskLayout } from "../blocks/mod.ts";
import { containsRoi, roiToString } from "../geometry/mod.ts";
import { buildDag, DagError, type TaskDag } from "../graph/pipeline_dag.ts";
import { PipelineError } from "../errors.ts";
import type { Block, PipelineConfig, TaskConfig, TaskDefinition } from "./spec.ts";

export { closest, describeValue };

const FIELD_SET: Record<keyof TaskDefinition, true> = {
  id: true,
  totalRoi: true,
  readRoi: true,
  writeRoi: true,
  fit: true,
  readWriteConflict: true,
  maxWorkers: true,
  maxRetries: true,
  maxWorkerRestarts: true,
  timeout: true,
  requires: true,
  upstream: true,
  process: true,
  setup: true,
  command: true,
  check: true,
  tracking: true,
  resourceTracking: true,
  skipMask: true,
};

/** Every field a task may have, in documentation order. */
export const TASK_FIELDS = Object.keys(FIELD_SET) as readonly (keyof TaskDefinition)[];

/** daisy's parameter names whose blockwise name is not simply their camelCase form. */
const DAISY_NAMES: Readonly<Record<string, keyof TaskDefinition>> = {
  task_id: "id",
  num_workers: "maxWorkers",
  process_function: "process",
  check_function: "check",
  init_callback_fn: "setup",
  upstream_tasks: "upstream",
  timeout_secs: "timeout",
  done_marker_path: "tracking",
};

/** Turns the default export of a pipeline module at `path` into a validated pipeline. */
export function validatePipeline(moduleValue: unknown, path: string): PipelineConfig {
  const where = `Pipeline "${path}"`;
  const expected =
    "Write export default { tasks: [{ id, totalRoi, readRoi, writeRoi, process }] }.";
  if (!isObject(moduleValue)) {
    throw new PipelineError(
      `${where}: default export must be an object with a "tasks" array; got ${
        describeValue(moduleValue)
      }. ${expected}`,
    );
  }
  for (const key of Object.keys(moduleValue)) {
    if (key !== "tasks") {
      const close = closest(key, ["tasks"]);
      throw new PipelineError(
        `${where}: unknown top-level field "${key}"; ${
          close === null ? "" : `did you mean "${close}"? `
        }A pipeline exports only { tasks: [...] }; put task settings inside each task.`,
        null,
        key,
      );
    }
  }
  const tasks = moduleValue["tasks"];
  if (!Array.isArray(tasks)) {
    throw new PipelineError(
      `${where}: field "tasks" must be an array of tasks; got ${describeValue(tasks)}. ${expected}`,
      null,
      "tasks",
    );
  }
  if (tasks.length === 0) {
    throw new PipelineError(
      `${where}: field "tasks" is empty; add at least one task. ${expected}`,
      null,
      "tasks",
    );
  }
  const configs = tasks.map((task: unknown, index) => validateTask(task, index));

  const dag = dagOf(configs);
  configs.forEach((task, i) => {
    for (const u of dag.upstream[i]!) {
      const up = configs[u]!;
      const dims = task.layout.totalRoi.offset.length;
      const upDims = up.layout.totalRoi.offset.length;
      if (dims !== upDims) {
        throw new PipelineError(
          `Task "${task.id}": upstream "${up.id}" has ${axes(upDims)} but "${task.id}" has ${
            axes(dims)
          }; tasks linked by upstream must have the same number of axes. Give both tasks ROIs with the same axes, or remove "${up.id}" from upstream.`,
          task.id,
          "upstream",
        );
      }
    }
  });
  return { path, tasks: configs };
}

function dagOf(configs: readonly TaskConfig[]): TaskDag {
  try {
    return buildDag(configs);
  } catch (error) {
    if (error instanceof DagError) {
      throw new PipelineError(error.message, error.taskId ?? null, error.field);
    }
    throw error;
  }
}

function validateTask(value: unknown, index: number): TaskConfig {
  if (!isObject(value) || Array.isArray(value)) {
    throw new PipelineError(
      `Task at index ${index} must be an object with id, totalRoi, readRoi, writeRoi and process or command; got ${
        describeValue(value)
      }. Write { id: "extract", totalRoi: ..., readRoi: ..., writeRoi: ..., process(block) {} }.`,
      null,
      null,
    );
  }
  const rawId = value["id"];
  const idOk = typeof rawId === "string" && idProblem(rawId) === null;
  const t: TaskFields = new TaskFields(
    value,
    idOk ? `Task "${rawId}"` : `Task at index ${index}`,
    idOk ? rawId : null,
  );

  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(FIELD_SET, key)) failUnknown(t, key);
  }
  if (typeof rawId !== "string" || !idOk) {
    const problem = typeof rawId === "string"
      ? idProblem(rawId)
      : rawId === undefined
      ? "is missing"
      : "must be a string";
    t.fail(
      "id",
      `${problem}; got ${
        describeValue(rawId)
      }. Use a unique name such as id: "extract" (it names the task's tracking directory).`,
    );
  }

  const totalRoi = t.roi("totalRoi");
  const readRoi = t.roi("readRoi");
  const writeRoi = t.roi("writeRoi");
  const dims = [totalRoi, readRoi, writeRoi].map((r) => r.offset.length);
  if (dims[0] !== dims[1] || dims[0] !== dims[2]) {
    t.failRaw(
      dims[0] !== dims[1] ? "readRoi" : "writeRoi",
      `fields "totalRoi", "readRoi" and "writeRoi" must have the same number of axes; got totalRoi ${
        roiToString(totalRoi)
      } (${axes(dims[0]!)}), readRoi ${roiToString(readRoi)} (${axes(dims[1]!)}) and writeRoi ${
        roiToString(writeRoi)
      } (${axes(dims[2]!)}). Give all three ROIs one entry per axis of the volume.`,
    );
  }
  if (!containsRoi(readRoi, writeRoi)) {
    t.fail(
      "writeRoi",
      `must lie inside "readRoi"; got writeRoi ${roiToString(writeRoi)} and readRoi ${
        roiToString(readRoi)
      }. Grow readRoi or move writeRoi.`,
    );
  }

  const fit = t.fit();
  const readWriteConflict = t.boolean("readWriteConflict", "Omit it for the default true.") ?? true;
  const maxWorkers = t.integer("maxWorkers", 1, 1, "Set how many workers run at once");
  const maxRetries = t.integer("maxRetries", 0, 2, "Set how often a failed block is retried");
  const maxWorkerRestarts = t.integer(
    "maxWorkerRestarts",
    0,
    10,
    "Set how many crashed or timed-out workers may be replaced",
  );
  const layout = { totalRoi, readRoi, writeRoi, fit, readWriteConflict };
  try {
    new TaskLayout(layout);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    t.failRaw(
      "writeRoi",
      `cannot tile totalRoi ${roiToString(totalRoi)} into blocks of writeRoi ${
        roiToString(writeRoi)
      }: ${error.message}.`,
    );
  }

  const base = {
    index,
    id: rawId,
    layout,
    maxWorkers,
    maxRetries,
    maxWorkerRestarts,
    timeout: t.timeout(),
    requires: t.requires(),
    upstream: t.upstream(),
    check: t.func("check", "check(block) { return alreadyDone(block); }") as
      | ((block: Block) => boolean | Promise<boolean>)
      | null,
    tracking: t.tracking(),
    resourceTracking: t.boolean("resourceTracking", "Omit it to follow --resource-tracking."),
    skipMask: t.skipMask(),
  };
  const processFn = t.func("process", "process(block, context) { ... }") as
    | ((block: Block, context: unknown) => unknown)
    | null;
  const setup = t.func("setup", "setup() { return context; }") as (() => unknown) | null;
  const command = t.command();
  if (command !== null) {
    if (processFn !== null) {
      t.failRaw(
        "command",
        `fields "process" and "command" cannot both be given; got both. Keep process to run blocks in Web Workers, or command to run a program per block.`,
      );
    }
    if (setup !== null) {
      t.fail(
        "setup",
        `is only used with "process"; got setup with command. Remove setup, or replace command with a process function.`,
      );
    }
    return { ...base, kind: "command", command };
  }
  if (processFn === null) {
    t.failRaw(
      "process",
      `needs a "process" function or a "command"; got neither. Add process(block) { ... }, or command: ["program", "{write_offset}", "{write_shape}"].`,
    );
  }
  return { ...base, kind: "process", process: processFn, setup };
}

/** Rejects the unknown field `key`, naming daisy's equivalent or the closest allowed field. */
function failUnknown(t: TaskFields, key: string): never {
  const allowed = `Allowed fields: ${TASK_FIELDS.join(", ")}.`;
  const daisy = Object.hasOwn(DAISY_NAMES, key)
    ? DAISY_NAMES[key]!
    : key.includes("_")
    ? known(snakeToCamel(key))
    : null;
  if (daisy !== null) {
    t.failRaw(
      key,
      `unknown field "${key}" (daisy's snake_case name); rename it to "${daisy}". ${allowed}`,
    );
  }
  const close = closest(key, TASK_FIELDS);
  t.failRaw(
    key,
    close === null
      ? `unknown field "${key}"; remove it or use an allowed field. ${allowed}`
      : `unknown field "${key}"; did you mean "${close}"? ${allowed}`,
  );
}

function snakeToCamel(name: string): string {
  return name.toLowerCase().replace(/_+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function known(name: string): keyof TaskDefinition | null {
  return Object.hasOwn(FIELD_SET, name) ? name as keyof TaskDefinition : null;
}
