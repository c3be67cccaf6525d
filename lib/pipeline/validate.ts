/**
 * Validation of a pipeline module's default export (DESIGN.md section 4). Every field of every
 * task is checked and its default filled in, the task DAG is built and each task's tiling is
 * constructed once, so nothing runs before the whole pipeline is known to be well-formed.
 * Messages name the task and the field, quote the value at fault and say how to fix it.
 */

import { placeholderList, unknownPlaceholder } from "./command_template.ts";
import { type Fit, FITS, TaskLayout } from "../blocks/mod.ts";
import { containsRoi, makeRoi, type Roi, roiToString } from "../geometry/mod.ts";
import { buildDag, DagError, type TaskDag } from "../graph/pipeline_dag.ts";
import { PipelineError } from "../errors.ts";
import type { Block, PipelineConfig, SkipMaskSource, TaskConfig, TaskDefinition } from "./spec.ts";

type Fields = Record<string, unknown>;

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

const ID_PATTERN = /^[A-Za-z0-9._-]+$/;
const MAX_ID_LENGTH = 200;
const ROI_EXAMPLE = "{ offset: [0, 0, 0], shape: [512, 512, 512] }";

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
    if (!Object.hasOwn(FIELD_SET, key)) t.failUnknown(key);
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

  const processFn = t.func("process", "process(block, context) { ... }") as
    | ((block: Block, context: unknown) => unknown)
    | null;
  const setup = t.func("setup", "setup() { return context; }") as (() => unknown) | null;
  const command = t.command();
  if (processFn === null && command === null) {
    t.failRaw(
      "process",
      `needs a "process" function or a "command"; got neither. Add process(block) { ... }, or command: ["program", "{write_offset}", "{write_shape}"].`,
    );
  }
  if (processFn !== null && command !== null) {
    t.failRaw(
      "command",
      `fields "process" and "command" cannot both be given; got both. Keep process to run blocks in Web Workers, or command to run a program per block.`,
    );
  }
  if (setup !== null && processFn === null) {
    t.fail(
      "setup",
      `is only used with "process"; got setup with command. Remove setup, or replace command with a process function.`,
    );
  }

  return {
    index,
    id: rawId,
    layout,
    maxWorkers,
    maxRetries,
    maxWorkerRestarts,
    timeout: t.timeout(),
    requires: t.requires(),
    upstream: t.upstream(),
    process: processFn,
    setup,
    command,
    check: t.func("check", "check(block) { return alreadyDone(block); }") as
      | ((block: Block) => boolean | Promise<boolean>)
      | null,
    tracking: t.tracking(),
    resourceTracking: t.boolean("resourceTracking", "Omit it to follow --resource-tracking."),
    skipMask: t.skipMask(),
  };
}

function idProblem(id: string): string | null {
  if (id === "") return "must not be empty";
  if (!ID_PATTERN.test(id)) return `must contain only letters, digits, ".", "_" and "-"`;
  if (id.startsWith("__")) return `must not start with "__" (reserved for blockwise)`;
  if (id === "." || id === "..") return `must not be "." or ".."`;
  if (id.length > MAX_ID_LENGTH) return `must be at most ${MAX_ID_LENGTH} characters long`;
  return null;
}

/** Reads one task's fields; `undefined` counts as absent. Every `fail*` throws. */
class TaskFields {
  constructor(
    private readonly fields: Fields,
    private readonly label: string,
    private readonly id: string | null,
  ) {}

  failRaw(field: string, message: string): never {
    throw new PipelineError(`${this.label}: ${message}`, this.id, field);
  }

  fail(field: string, message: string): never {
    this.failRaw(field, `field "${field}" ${message}`);
  }

  failUnknown(key: string): never {
    const allowed = `Allowed fields: ${TASK_FIELDS.join(", ")}.`;
    const daisy = Object.hasOwn(DAISY_NAMES, key)
      ? DAISY_NAMES[key]!
      : key.includes("_")
      ? known(snakeToCamel(key))
      : null;
    if (daisy !== null) {
      this.failRaw(
        key,
        `unknown field "${key}" (daisy's snake_case name); rename it to "${daisy}". ${allowed}`,
      );
    }
    const close = closest(key, TASK_FIELDS);
    this.failRaw(
      key,
      close === null
        ? `unknown field "${key}"; remove it or use an allowed field. ${allowed}`
        : `unknown field "${key}"; did you mean "${close}"? ${allowed}`,
    );
  }

  roi(field: "totalRoi" | "readRoi" | "writeRoi"): Roi {
    const value = this.fields[field];
    if (value === undefined) {
      this.fail(
        field,
        `is missing; every task needs totalRoi, readRoi and writeRoi, e.g. ${field}: ${ROI_EXAMPLE}.`,
      );
    }
    if (!isObject(value) || Array.isArray(value)) {
      this.fail(
        field,
        `must be an object { offset: [...], shape: [...] }; got ${
          describeValue(value)
        }. Write e.g. ${field}: ${ROI_EXAMPLE}.`,
      );
    }
    for (const key of Object.keys(value)) {
      if (key !== "offset" && key !== "shape") {
        const hint = ["size", "extent", "dims"].includes(key)
          ? `Rename "${key}" to "shape".`
          : ["begin", "start", "origin"].includes(key)
          ? `Rename "${key}" to "offset".`
          : `Remove "${key}".`;
        this.fail(field, `must have exactly the keys "offset" and "shape"; got "${key}". ${hint}`);
      }
    }
    const offset = this.integers(field, "offset", value["offset"]);
    const shape = this.integers(field, "shape", value["shape"]);
    if (offset.length !== shape.length) {
      this.fail(
        field,
        `must have as many offset as shape entries; got offset ${describeValue(offset)} (${
          axes(offset.length)
        }) and shape ${describeValue(shape)} (${axes(shape.length)}). Give one entry per axis.`,
      );
    }
    if (offset.length === 0) {
      this.fail(
        field,
        `must have at least one axis; got offset [] and shape []. Give one entry per axis, e.g. ${field}: { offset: [0], shape: [100] }.`,
      );
    }
    const roi = makeRoi(offset, shape);
    if (shape.some((s) => s <= 0)) {
      this.fail(
        field,
        `must have a positive shape on every axis; got ${
          roiToString(roi)
        }. Make every shape entry at least 1.`,
      );
    }
    return roi;
  }

  private integers(field: string, key: "offset" | "shape", value: unknown): number[] {
    if (value === undefined) {
      this.fail(field, `is missing "${key}"; write e.g. ${field}: ${ROI_EXAMPLE}.`);
    }
    if (!Array.isArray(value) || !value.every((v) => Number.isSafeInteger(v))) {
      this.failRaw(
        field,
        `field "${field}.${key}" must be an array of integers; got ${
          describeValue(value)
        }. Use whole voxel numbers, e.g. ${field}: ${ROI_EXAMPLE}.`,
      );
    }
    return value as number[];
  }

  fit(): Fit {
    const value = this.fields["fit"];
    if (value === undefined) return "valid";
    if (typeof value === "string" && (FITS as readonly string[]).includes(value)) {
      return value as Fit;
    }
    const close = typeof value === "string" ? closest(value, FITS) : null;
    this.fail(
      "fit",
      `must be one of ${FITS.map((f) => `"${f}"`).join(", ")}; got ${describeValue(value)}. ${
        close === null ? "" : `Did you mean "${close}"? `
      }Omit it for "valid".`,
    );
  }

  boolean(field: string, omit: string): boolean | null {
    const value = this.fields[field];
    if (value === undefined) return null;
    if (typeof value !== "boolean") {
      this.fail(field, `must be true or false; got ${describeValue(value)}. ${omit}`);
    }
    return value;
  }

  integer(field: string, min: number, fallback: number, purpose: string): number {
    const value = this.fields[field];
    if (value === undefined) return fallback;
    if (!Number.isSafeInteger(value) || (value as number) < min) {
      this.fail(
        field,
        `must be an integer >= ${min}; got ${
          describeValue(value)
        }. ${purpose}, or omit it for the default ${fallback}.`,
      );
    }
    return value as number;
  }

  timeout(): number | null {
    const value = this.fields["timeout"];
    if (value === undefined) return null;
    if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
      this.fail(
        "timeout",
        `must be a positive number of seconds; got ${
          describeValue(value)
        }. Give the time limit per block, e.g. timeout: 600, or omit it for no limit.`,
      );
    }
    return value;
  }

  requires(): Readonly<Record<string, number>> {
    const value = this.fields["requires"];
    if (value === undefined) return {};
    const example = "e.g. requires: { cpu: 1, gpu: 1 }";
    if (!isObject(value) || Array.isArray(value)) {
      this.fail(
        "requires",
        `must be an object of resource counts; got ${describeValue(value)}. Write ${example}.`,
      );
    }
    const result: Record<string, number> = {};
    for (const [name, amount] of Object.entries(value)) {
      if (!Number.isSafeInteger(amount) || (amount as number) < 0) {
        this.fail(
          "requires",
          `must map each resource to an integer >= 0; got ${name}: ${
            describeValue(amount)
          }. Write ${example}.`,
        );
      }
      result[name] = amount as number;
    }
    return result;
  }

  upstream(): readonly string[] {
    const value = this.fields["upstream"];
    if (value === undefined) return [];
    if (!Array.isArray(value)) {
      this.fail(
        "upstream",
        `must be an array of task ids; got ${describeValue(value)}. Write e.g. upstream: [${
          typeof value === "string" ? JSON.stringify(value) : `"extract"`
        }].`,
      );
    }
    const bad = value.findIndex((v) => typeof v !== "string");
    if (bad >= 0) {
      this.fail(
        "upstream",
        `must contain only task ids (strings); got ${
          describeValue(value[bad])
        } at position ${bad}. Write the upstream tasks' ids, e.g. upstream: ["extract"].`,
      );
    }
    for (const arg of value as string[]) {
      const unknown = unknownPlaceholder(arg);
      if (unknown !== null) {
        this.fail(
          "command",
          `uses the unknown placeholder "${unknown}" in argument "${arg}". Known placeholders: ${placeholderList()}; write {{ and }} for literal braces.`,
        );
      }
    }
    return [...(value as string[])];
  }

  func(field: string, example: string): unknown {
    const value = this.fields[field];
    if (value === undefined) return null;
    if (typeof value !== "function") {
      this.fail(field, `must be a function; got ${describeValue(value)}. Write e.g. ${example}.`);
    }
    return value;
  }

  command(): readonly string[] | null {
    const value = this.fields["command"];
    if (value === undefined) return null;
    if (!Array.isArray(value)) {
      this.fail(
        "command",
        `must be an array of strings (the program and its arguments); got ${
          describeValue(value)
        }. Split it into words, e.g. command: ["python3", "export.py", "{write_offset}"].`,
      );
    }
    if (value.length === 0) {
      this.fail(
        "command",
        `must name a program; got []. Write e.g. command: ["python3", "export.py", "{write_offset}"].`,
      );
    }
    const bad = value.findIndex((v) => typeof v !== "string");
    if (bad >= 0) {
      this.fail(
        "command",
        `must contain only strings; got ${
          describeValue(value[bad])
        } at position ${bad}. Quote it, or use a placeholder such as "{write_shape}".`,
      );
    }
    if (value[0] === "") {
      this.fail(
        "command",
        `must start with a program name; got "" at position 0. Name the program.`,
      );
    }
    return [...(value as string[])];
  }

  tracking(): string | false | null {
    const value = this.fields["tracking"];
    if (value === undefined) return null;
    if (value === false || (typeof value === "string" && value !== "")) return value;
    this.fail(
      "tracking",
      `must be a store path or false; got ${
        describeValue(value)
      }. Give a path, false to disable tracking for this task, or omit it to follow --tracking-dir.`,
    );
  }

  skipMask(): SkipMaskSource | null {
    const value = this.fields["skipMask"];
    if (value === undefined) return null;
    const fix =
      `Give a mask file path, an array of numbers (one per block, nonzero skips), or { data, shape }.`;
    if (typeof value === "string") {
      if (value === "") this.fail("skipMask", `must not be an empty path; got "". ${fix}`);
      return value;
    }
    if (isObject(value) && !Array.isArray(value) && !ArrayBuffer.isView(value)) {
      if ("shape" in value || "data" in value) {
        const shape = value["shape"];
        if (!isNumbers(value["data"])) {
          this.failRaw(
            "skipMask",
            `field "skipMask.data" must be an array of numbers; got ${
              describeValue(value["data"])
            }. ${fix}`,
          );
        }
        if (!Array.isArray(shape) || !shape.every((s) => Number.isSafeInteger(s) && s >= 0)) {
          this.failRaw(
            "skipMask",
            `field "skipMask.shape" must be an array of integers >= 0; got ${
              describeValue(shape)
            }. ${fix}`,
          );
        }
        return value as SkipMaskSource;
      }
    }
    // Arrays (flat, typed or nested, of numbers or booleans) are checked in full when the mask
    // is loaded against the task's block grid (lib/masks), which names the bad element.
    if (!isMaskArray(value)) {
      this.fail("skipMask", `has the wrong type; got ${describeValue(value)}. ${fix}`);
    }
    return value as SkipMaskSource;
  }
}

/** Numbers or booleans, flat, typed or nested (shape and raggedness are checked on load). */
function isMaskArray(value: unknown): boolean {
  if (ArrayBuffer.isView(value)) return true;
  if (!Array.isArray(value)) return false;
  return value.every((v) =>
    typeof v === "number" || typeof v === "boolean" || (typeof v === "object" && isMaskArray(v))
  );
}

function isObject(value: unknown): value is Fields {
  return typeof value === "object" && value !== null;
}

/** An array, a numeric typed array, or another array-like whose entries are all numbers. */
function isNumbers(value: unknown): value is ArrayLike<number> {
  if (ArrayBuffer.isView(value)) {
    return !(value instanceof DataView) && !(value instanceof BigInt64Array) &&
      !(value instanceof BigUint64Array);
  }
  if (!isObject(value)) return false;
  const length = value["length"];
  if (!Number.isSafeInteger(length) || (length as number) < 0) return false;
  for (let i = 0; i < (length as number); i++) if (typeof value[i] !== "number") return false;
  return true;
}

function axes(n: number): string {
  return n === 1 ? "1 axis" : `${n} axes`;
}

function snakeToCamel(name: string): string {
  return name.toLowerCase().replace(/_+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function known(name: string): keyof TaskDefinition | null {
  return Object.hasOwn(FIELD_SET, name) ? name as keyof TaskDefinition : null;
}

/** The candidate closest to `name` (case-insensitive edit distance), if close enough. */
export function closest(name: string, candidates: readonly string[]): string | null {
  const lower = name.toLowerCase();
  let best: string | null = null;
  let bestDistance = Math.max(1, Math.floor(name.length / 3));
  for (const candidate of candidates) {
    const d = editDistance(lower, candidate.toLowerCase());
    if (d <= bestDistance && (best === null || d < bestDistance)) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** A short, runtime-independent rendering of a value for error messages. */
export function describeValue(value: unknown, depth = 0): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
    case "number":
      return Object.is(value, -0) ? "-0" : String(value);
    case "bigint":
      return `${value}n`;
    case "function":
      return value.name === "" ? "a function" : `function ${value.name}`;
    case "object":
      break;
    default:
      return String(value);
  }
  if (value === null) return "null";
  if (ArrayBuffer.isView(value)) return `${value.constructor.name} of ${value.byteLength} bytes`;
  const nested = depth >= 2;
  if (Array.isArray(value)) {
    if (nested) return "[...]";
    const items = value.slice(0, 8).map((v: unknown) => describeValue(v, depth + 1));
    if (value.length > 8) items.push(`... ${value.length - 8} more`);
    return `[${items.join(", ")}]`;
  }
  if (nested) return "{...}";
  const entries = Object.entries(value);
  const items = entries.slice(0, 6).map(([k, v]) =>
    `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k)}: ${describeValue(v, depth + 1)}`
  );
  if (entries.length > 6) items.push("...");
  return items.length === 0 ? "{}" : `{ ${items.join(", ")} }`;
}
