/**
 * The task fields of outputs and provenance: `outputs` (a file per block, or a Zarr array written
 * chunk by chunk), `version` and `params` (what makes a block stale), `inputs` (external data a
 * block reads), `quarantineAfter` and `temporary`. Each reader checks one field and returns its
 * normalised value, or throws the field's PipelineError through `TaskFields.fail`.
 */

import { isAbsolute, resolve } from "node:path";
import { describeValue } from "./describe_value.ts";
import type { TaskFields } from "./task_fields.ts";
import { OUTPUT_PLACEHOLDERS, PLACEHOLDER_PATTERN } from "./command_template.ts";
import type { InputConfig, JsonValue, OutputConfig } from "./spec.ts";

const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]*$/;
/** Placeholders that differ between any two blocks of a task: one of them names a block's file. */
const UNIQUE_PLACEHOLDERS = ["block_id", "index", "write_offset"];
const OUTPUT_EXAMPLE =
  `outputs: { stats: { path: "stats/{block_id}.json" }, labels: { zarr: "out.zarr/labels" } }`;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    Object.getPrototypeOf(value) === Object.prototype;
}

function offsetOf(t: TaskFields, field: string, where: string, value: unknown): number[] | null {
  if (value === undefined) return null;
  if (Array.isArray(value) && value.every((v) => Number.isSafeInteger(v))) return [...value];
  t.fail(
    field,
    `${where}: "offset" must be an array of integers (the array index of coordinate 0 on each axis); got ${
      describeValue(value)
    }.`,
  );
}

/** `outputs`: named outputs, each a per-block path template or a Zarr array. */
export function readOutputs(t: TaskFields, pipelineDir: string): readonly OutputConfig[] {
  const value = t.value("outputs");
  if (value === undefined) return [];
  if (!isPlainObject(value) || Object.keys(value).length === 0) {
    t.fail(
      "outputs",
      `must be an object of named outputs; got ${
        describeValue(value)
      }. Write e.g. ${OUTPUT_EXAMPLE}.`,
    );
  }
  const out: OutputConfig[] = [];
  for (const [name, spec] of Object.entries(value)) {
    const where = `output "${name}"`;
    if (!NAME_PATTERN.test(name)) {
      t.fail(
        "outputs",
        `has the output name ${
          JSON.stringify(name)
        }; a name starts with a letter and holds only letters, digits and "_" (it becomes {output:${name}} and BLOCKWISE_OUTPUT_${name.toUpperCase()}).`,
      );
    }
    if (!isPlainObject(spec)) {
      t.fail(
        "outputs",
        `${where} must be { path: ... } or { zarr: ... }; got ${describeValue(spec)}.`,
      );
    }
    const keys = Object.keys(spec);
    const hasPath = "path" in spec;
    const hasZarr = "zarr" in spec;
    if (hasPath === hasZarr) {
      t.fail(
        "outputs",
        `${where} must have exactly one of "path" (a file or folder per block) and "zarr" (an array written by many blocks); got ${
          describeValue(spec)
        }.`,
      );
    }
    const allowed = hasPath ? ["path"] : ["zarr", "offset"];
    const extra = keys.find((k) => !allowed.includes(k));
    if (extra !== undefined) {
      t.fail(
        "outputs",
        `${where} has the unknown field "${extra}"; allowed: ${allowed.join(", ")}.`,
      );
    }
    const target = hasPath ? spec["path"] : spec["zarr"];
    if (typeof target !== "string" || target === "") {
      t.fail(
        "outputs",
        `${where}: the ${hasPath ? "path" : "zarr"} must be a non-empty string; got ${
          describeValue(target)
        }.`,
      );
    }
    if (hasPath) {
      checkTemplate(t, where, target);
      out.push({
        name,
        kind: "path",
        target: absolute(pipelineDir, target),
        written: target,
        offset: null,
      });
    } else {
      if (/[{}]/.test(target)) {
        t.fail(
          "outputs",
          `${where}: a Zarr output names one array for every block, without placeholders; got ${
            JSON.stringify(target)
          }.`,
        );
      }
      const offset = offsetOf(t, "outputs", where, spec["offset"]);
      out.push({
        name,
        kind: "zarr",
        target: absolute(pipelineDir, target),
        written: target,
        offset,
      });
    }
  }
  return out;
}

function checkTemplate(t: TaskFields, where: string, template: string): void {
  const names: string[] = [];
  for (const match of template.matchAll(PLACEHOLDER_PATTERN)) {
    const name = match[1];
    if (name === undefined) continue;
    if (!(OUTPUT_PLACEHOLDERS as readonly string[]).includes(name)) {
      t.fail(
        "outputs",
        `${where} uses the placeholder "{${name}}" in ${
          JSON.stringify(template)
        }; an output path may use ${
          OUTPUT_PLACEHOLDERS.map((p) => `{${p}}`).join(" ")
        } (not {attempt}: a block's output must not depend on the attempt).`,
      );
    }
    names.push(name);
  }
  if (!names.some((n) => UNIQUE_PLACEHOLDERS.includes(n))) {
    t.fail(
      "outputs",
      `${where}: the path ${
        JSON.stringify(template)
      } is the same for every block, so blocks would overwrite each other; put {block_id} (or {index} or {write_offset}) in it, e.g. "stats/{block_id}.json".`,
    );
  }
}

function absolute(dir: string, target: string): string {
  return isAbsolute(target) ? target : resolve(dir, target);
}

/** `inputs`: external files or Zarr arrays a block reads, fingerprinted into its provenance. */
export function readInputs(t: TaskFields, pipelineDir: string): readonly InputConfig[] {
  const value = t.value("inputs");
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    t.fail(
      "inputs",
      `must be an array; got ${
        describeValue(value)
      }. Write e.g. inputs: [{ zarr: "raw.zarr/volume" }, { path: "model.pt", compare: "content" }].`,
    );
  }
  return value.map((spec, i): InputConfig => {
    const where = `input ${i}`;
    if (!isPlainObject(spec) || ("path" in spec) === ("zarr" in spec)) {
      t.fail(
        "inputs",
        `${where} must be { path: ... } or { zarr: ... } (with an optional compare: "mtime" | "content"); got ${
          describeValue(spec)
        }.`,
      );
    }
    const kind = "path" in spec ? "path" : "zarr";
    const allowed = kind === "path" ? ["path", "compare"] : ["zarr", "compare", "offset"];
    const extra = Object.keys(spec).find((k) => !allowed.includes(k));
    if (extra !== undefined) {
      t.fail(
        "inputs",
        `${where} has the unknown field "${extra}"; allowed: ${allowed.join(", ")}.`,
      );
    }
    const target = spec[kind];
    if (typeof target !== "string" || target === "") {
      t.fail(
        "inputs",
        `${where}: the ${kind} must be a non-empty string; got ${describeValue(target)}.`,
      );
    }
    const compare = spec["compare"] ?? "mtime";
    if (compare !== "mtime" && compare !== "content") {
      t.fail(
        "inputs",
        `${where}: "compare" must be "mtime" (size and modification time, the default) or "content" (a hash of the bytes); got ${
          describeValue(compare)
        }.`,
      );
    }
    const offset = kind === "zarr" ? offsetOf(t, "inputs", where, spec["offset"]) : null;
    return { kind, target: absolute(pipelineDir, target), written: target, compare, offset };
  });
}

/** `version`: bumped by the user when the code's results change. */
export function readVersion(t: TaskFields): string | null {
  const value = t.value("version");
  if (value === undefined) return null;
  if (typeof value === "string" && value !== "") return value;
  t.fail(
    "version",
    `must be a non-empty string; got ${
      describeValue(value)
    }. Bump it (e.g. version: "2") when a change of the code changes its results.`,
  );
}

/** `params`: semantic parameters, plain JSON data; their canonical form enters the provenance. */
export function readParams(t: TaskFields): Readonly<Record<string, JsonValue>> | null {
  const value = t.value("params");
  if (value === undefined) return null;
  if (!isPlainObject(value)) {
    t.fail(
      "params",
      `must be an object of parameters; got ${
        describeValue(value)
      }. Write e.g. params: { threshold: 0.5 }.`,
    );
  }
  const problem = jsonProblem(value, "params");
  if (problem !== null) {
    t.fail(
      "params",
      `must hold only plain data (objects, arrays, strings, finite numbers, booleans, null); ${problem}. Keep functions and handles out of params.`,
    );
  }
  return value as Record<string, JsonValue>;
}

function jsonProblem(value: unknown, path: string): string | null {
  if (value === null || typeof value === "string" || typeof value === "boolean") return null;
  if (typeof value === "number") return Number.isFinite(value) ? null : `${path} is ${value}`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = jsonProblem(value[i], `${path}[${i}]`);
      if (p !== null) return p;
    }
    return null;
  }
  if (isPlainObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      const p = jsonProblem(v, `${path}.${k}`);
      if (p !== null) return p;
    }
    return null;
  }
  return `${path} is ${describeValue(value)}`;
}

/** `quarantineAfter`: failed attempts across runs after which a block is left alone. */
export function readQuarantineAfter(t: TaskFields): number | null {
  const value = t.value("quarantineAfter");
  if (value === undefined) return null;
  if (Number.isSafeInteger(value) && (value as number) >= 1) return value as number;
  t.fail(
    "quarantineAfter",
    `must be an integer of at least 1; got ${
      describeValue(value)
    }. A block that failed that many attempts over all runs is left alone until reset --failed or --force; omit it to retry failed blocks every run.`,
  );
}

/** `temporary`: the task's outputs are deleted once every block reading them has committed. */
export function readTemporary(t: TaskFields, outputs: readonly OutputConfig[]): boolean {
  const value = t.value("temporary");
  if (value === undefined || value === false) return false;
  if (value !== true) {
    t.fail("temporary", `must be true or false; got ${describeValue(value)}.`);
  }
  if (outputs.length === 0) {
    t.fail(
      "temporary",
      `needs "outputs": only declared outputs can be deleted once their readers are done; declare the task's outputs or remove temporary.`,
    );
  }
  return true;
}
