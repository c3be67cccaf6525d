/**
 * Validation of a pipeline module's default export (DESIGN.md section 4). Every field of every
 * task is checked and its default filled in, the task DAG is built and each task's tiling is
 * constructed once, so nothing runs before the whole pipeline is known to be well-formed.
 * Messages name the task and the field, quote the value at fault and say how to fix it.
 *
 * Every problem of every task is collected and reported at once (one `PipelineProblems` error
 * listing them all), so a user fixes a pipeline in one round instead of one error per run. A
 * check that depends on a field that already failed (e.g. "writeRoi inside readRoi" after a
 * broken readRoi) is skipped, so each listed problem is a real one. The DAG (duplicate ids,
 * unknown upstream ids, cycles) is checked in the same round, from every task's id and upstream
 * list as written (lib/pipeline/dag_checks.ts), so a task with a field error still counts as a
 * task for its readers.
 * The per-field readers are in task_fields.ts, the message helpers in describe_value.ts.
 */

import { dirname, resolve } from "node:path";
import { closest, describeValue } from "./describe_value.ts";
import { axes, idProblem, isObject, TaskFields } from "./task_fields.ts";
import { type LayoutSpec, TaskLayout } from "../blocks/mod.ts";
import { containsRoi, roiToString } from "../geometry/mod.ts";
import { dagOf, rawDagProblems } from "./dag_checks.ts";
import { PipelineError } from "../errors.ts";
import {
  readInputs,
  readOutputs,
  readParams,
  readQuarantineAfter,
  readTemporary,
  readVersion,
} from "./output_fields.ts";
import { LOCAL_LAUNCH, maxWorkersOf, readLaunch } from "./launch_fields.ts";
import { checkPythonAlone, readPython } from "./python_fields.ts";
import { readEnv, readWorkerProfile } from "./env_fields.ts";
import type { Block, PipelineConfig, TaskConfig, TaskDefinition } from "./spec.ts";

/**
 * A pipeline with several problems: `message` lists them all, `problems` holds each one, and
 * `taskId`/`field` are the first problem's.
 */
export class PipelineProblems extends PipelineError {
  readonly problems: readonly PipelineError[];

  constructor(path: string, problems: readonly PipelineError[]) {
    const first = problems[0]!;
    super(
      `Pipeline "${path}" has ${problems.length} problems; fix them all, then run again:\n${
        problems.map((p) => `  - ${p.message}`).join("\n")
      }`,
      first.taskId,
      first.field,
    );
    this.problems = problems;
  }
}

/** The error to throw for a non-empty list: the one problem as it is, or all of them. */
function problemsError(path: string, problems: readonly PipelineError[]): PipelineError {
  return problems.length === 1 ? problems[0]! : new PipelineProblems(path, problems);
}

function throwProblems(path: string, problems: readonly PipelineError[]): void {
  if (problems.length > 0) throw problemsError(path, problems);
}

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
  python: true,
  cwd: true,
  check: true,
  tracking: true,
  resourceTracking: true,
  skipMask: true,
  outputs: true,
  version: true,
  params: true,
  inputs: true,
  quarantineAfter: true,
  temporary: true,
  launch: true,
  env: true,
  workerProfile: true,
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
  const problems: PipelineError[] = [];
  for (const key of Object.keys(moduleValue)) {
    if (key !== "tasks") {
      const close = closest(key, ["tasks"]);
      problems.push(
        new PipelineError(
          `${where}: unknown top-level field "${key}"; ${
            close === null ? "" : `did you mean "${close}"? `
          }A pipeline exports only { tasks: [...] }; put task settings inside each task.`,
          null,
          key,
        ),
      );
    }
  }
  const tasks = moduleValue["tasks"];
  if (!Array.isArray(tasks)) {
    problems.push(
      new PipelineError(
        `${where}: field "tasks" must be an array of tasks; got ${
          describeValue(tasks)
        }. ${expected}`,
        null,
        "tasks",
      ),
    );
    throw problemsError(path, problems);
  }
  if (tasks.length === 0) {
    problems.push(
      new PipelineError(
        `${where}: field "tasks" is empty; add at least one task. ${expected}`,
        null,
        "tasks",
      ),
    );
  }
  const configs: TaskConfig[] = [];
  tasks.forEach((task: unknown, index) => {
    const config = validateTask(task, index, path, problems);
    if (config !== null) configs.push(config);
  });
  // The DAG's problems too, all in the same round: from every task with an id, valid or not.
  problems.push(...rawDagProblems(tasks));
  throwProblems(path, problems);

  const dag = dagOf(configs);
  configs.forEach((task, i) => {
    for (const u of dag.upstream[i]!) {
      const up = configs[u]!;
      const dims = task.layout.totalRoi.offset.length;
      const upDims = up.layout.totalRoi.offset.length;
      if (dims !== upDims) {
        problems.push(
          new PipelineError(
            `Task "${task.id}": upstream "${up.id}" has ${axes(upDims)} but "${task.id}" has ${
              axes(dims)
            }; tasks linked by upstream must have the same number of axes. Give both tasks ROIs with the same axes, or remove "${up.id}" from upstream.`,
            task.id,
            "upstream",
          ),
        );
      }
    }
  });
  throwProblems(path, problems);
  return { path, tasks: configs };
}

/** The validated task, or null when it has problems (each one added to `problems`). */
function validateTask(
  value: unknown,
  index: number,
  pipelinePath: string,
  problems: PipelineError[],
): TaskConfig | null {
  if (!isObject(value) || Array.isArray(value)) {
    problems.push(
      new PipelineError(
        `Task at index ${index} must be an object with id, totalRoi, readRoi, writeRoi and process or command; got ${
          describeValue(value)
        }. Write { id: "extract", totalRoi: ..., readRoi: ..., writeRoi: ..., process(block) {} }.`,
        null,
        null,
      ),
    );
    return null;
  }
  const rawId = value["id"];
  const id = typeof rawId === "string" && idProblem(rawId) === null ? rawId : null;
  const t = new TaskFields(value, id === null ? `Task at index ${index}` : `Task "${id}"`, id);
  const before = problems.length;
  // Each reader throws a PipelineError for its field; `read` records it and goes on.
  const read = <T, F>(reader: () => T, fallback: F): T | F => {
    try {
      return reader();
    } catch (error) {
      if (!(error instanceof PipelineError)) throw error;
      problems.push(error);
      return fallback;
    }
  };

  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(FIELD_SET, key)) read(() => failUnknown(t, key), null);
  }
  if (id === null) {
    const problem = typeof rawId === "string"
      ? idProblem(rawId)
      : rawId === undefined
      ? "is missing"
      : "must be a string";
    read(
      () =>
        t.fail(
          "id",
          `${problem}; got ${
            describeValue(rawId)
          }. Use a unique name such as id: "extract" (it names the task's tracking directory).`,
        ),
      null,
    );
  }

  const totalRoi = read(() => t.roi("totalRoi"), null);
  const readRoi = read(() => t.roi("readRoi"), null);
  const writeRoi = read(() => t.roi("writeRoi"), null);
  const fit = read(() => t.fit(), "valid");
  const readWriteConflict =
    read(() => t.boolean("readWriteConflict", "Omit it for the default true."), null) ?? true;
  const layout = totalRoi === null || readRoi === null || writeRoi === null
    ? null
    : read(() => checkLayout(t, { totalRoi, readRoi, writeRoi, fit, readWriteConflict }), null);

  const outputs = read(() => readOutputs(t, dirname(pipelinePath)), []);
  const launch = read(() => readLaunch(t), LOCAL_LAUNCH);
  const base = {
    index,
    id: id ?? "",
    maxWorkers: read(() => maxWorkersOf(t, launch), 1),
    maxRetries: read(
      () => t.integer("maxRetries", 0, 2, "Set how often a failed block is retried"),
      2,
    ),
    maxWorkerRestarts: read(
      () =>
        t.integer(
          "maxWorkerRestarts",
          0,
          10,
          "Set how many crashed or timed-out workers may be replaced",
        ),
      10,
    ),
    timeout: read(() => t.timeout(), null),
    requires: read(() => t.requires(), {}),
    upstream: read(() => t.upstream(), []),
    check: read(() => t.func("check", "check(block) { return alreadyDone(block); }"), null) as
      | ((block: Block) => boolean | Promise<boolean>)
      | null,
    tracking: read(() => t.tracking(), null),
    resourceTracking: read(
      () => t.boolean("resourceTracking", "Omit it to follow --resource-tracking."),
      null,
    ),
    skipMask: read(() => t.skipMask(), null),
    outputs,
    version: read(() => readVersion(t), null),
    params: read(() => readParams(t), null),
    inputs: read(() => readInputs(t, dirname(pipelinePath)), []),
    quarantineAfter: read(() => readQuarantineAfter(t), null),
    temporary: read(() => readTemporary(t, outputs), false),
    launch,
    env: read(() => readEnv(t), null),
    workerProfile: read(() => readWorkerProfile(t), true),
  };
  const processFn = read(() => t.func("process", "process(block, context) { ... }"), null) as
    | ((block: Block, context: unknown) => unknown)
    | null;
  const setup = read(() => t.func("setup", "setup() { return context; }"), null) as
    | (() => unknown)
    | null;
  const command = read(() => t.command(outputs.map((o) => o.name)), null);
  const cwd = read(() => t.cwd(), null);
  const python = read(() => readPython(t, dirname(pipelinePath)), null);
  const runFields = [processFn, command, python];
  if (runFields.every((f) => f === null) && !problems.slice(before).some(isRunField)) {
    read(() =>
      t.failRaw(
        "process",
        `needs a "process" function, a "command" or "python"; got none. Add process(block) { ... }, command: ["program", "{write_offset}", "{write_shape}"], or python: { module: "segment.py" }.`,
      ), null);
  }
  if (python !== null) {
    const given = { process: processFn !== null, setup: setup !== null, command: command !== null };
    read(() => checkPythonAlone(t, { ...given, cwd: cwd !== null }), null);
  }
  if (processFn !== null && command !== null) {
    read(() =>
      t.failRaw(
        "command",
        `fields "process" and "command" cannot both be given; got both. Keep process to run blocks in Web Workers, or command to run a program per block.`,
      ), null);
  }
  if (setup !== null && command !== null && processFn === null) {
    read(() =>
      t.fail(
        "setup",
        `is only used with "process"; got setup with command. Remove setup, or replace command with a process function.`,
      ), null);
  }

  if (cwd !== null && command === null && processFn !== null) {
    read(() =>
      t.fail(
        "cwd",
        `is only used with "command"; got cwd ${
          JSON.stringify(cwd)
        } with process. Web Workers share the folder blockwise runs in: remove cwd and build paths from import.meta.url or absolute paths instead.`,
      ), null);
  }

  if (command !== null && base.launch.kind !== "local") {
    read(() =>
      t.fail(
        "launch",
        `is "${base.launch.kind}", but command tasks run their blocks on this machine; remove launch, or turn the task into a process function whose workers can run elsewhere.`,
      ), null);
  }
  if (base.env !== null && processFn !== null && base.launch.kind === "local") {
    read(() =>
      t.fail(
        "env",
        `sets variables for worker processes, but this task's blocks run in Web Workers, threads of blockwise that share its environment; set them where you start blockwise (MY_SETTING=on blockwise run ...), or remove env.`,
      ), null);
  }
  if (problems.length > before || layout === null) return null;
  if (python !== null) return { ...base, layout, kind: "python", python };
  if (command !== null) {
    const folder = cwd === null ? null : resolve(dirname(pipelinePath), cwd);
    return { ...base, layout, kind: "command", command, cwd: folder };
  }
  if (processFn === null) return null; // "needs a process or a command" was recorded above
  return { ...base, layout, kind: "process", process: processFn, setup };
}

/** A problem with a field that says how blocks run: "needs either" would only repeat it. */
function isRunField(problem: PipelineError): boolean {
  return ["process", "command", "python"].includes(problem.field ?? "");
}

/** The layout if its ROIs agree and it can be tiled; throws the PipelineError otherwise. */
function checkLayout(t: TaskFields, layout: LayoutSpec): LayoutSpec {
  const { totalRoi, readRoi, writeRoi } = layout;
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
  return layout;
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
