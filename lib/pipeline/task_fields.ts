/**
 * Readers for the fields of one task in a pipeline module (DESIGN.md section 4): each reads a
 * field, checks it and returns its value or default, or throws a PipelineError that names the
 * task and the field, quotes the value and says how to fix it. Used by validate.ts.
 */

import { placeholderList, unknownPlaceholder } from "./command_template.ts";
import { closest, describeValue } from "./describe_value.ts";
import { type Fit, FITS } from "../blocks/mod.ts";
import { makeRoi, type Roi, roiToString } from "../geometry/mod.ts";
import { PipelineError } from "../errors.ts";
import type { SkipMaskSource } from "./spec.ts";

/** A task (or pipeline) object as written, before any field is checked. */
export type Fields = Record<string, unknown>;

const ID_PATTERN = /^[A-Za-z0-9._-]+$/;
const MAX_ID_LENGTH = 200;
const ROI_EXAMPLE = "{ offset: [0, 0, 0], shape: [512, 512, 512] }";

/** Why `id` is not a valid task id, or null if it is. */
export function idProblem(id: string): string | null {
  if (id === "") return "must not be empty";
  if (!ID_PATTERN.test(id)) return `must contain only letters, digits, ".", "_" and "-"`;
  if (id.startsWith("__")) return `must not start with "__" (reserved for blockwise)`;
  if (id === "." || id === "..") return `must not be "." or ".."`;
  if (id.length > MAX_ID_LENGTH) return `must be at most ${MAX_ID_LENGTH} characters long`;
  return null;
}

/**
 * Reads one task's fields; `undefined` counts as absent. Every `fail*` throws the PipelineError
 * of that one field; validate.ts records it and reads the next field.
 */
export class TaskFields {
  readonly #fields: Fields;
  readonly #label: string;
  readonly #id: string | null;

  constructor(fields: Fields, label: string, id: string | null) {
    this.#fields = fields;
    this.#label = label;
    this.#id = id;
  }

  /** A field as written (undefined when absent). */
  value(field: string): unknown {
    return this.#fields[field];
  }

  failRaw(field: string, message: string): never {
    throw new PipelineError(`${this.#label}: ${message}`, this.#id, field);
  }

  fail(field: string, message: string): never {
    this.failRaw(field, `field "${field}" ${message}`);
  }

  roi(field: "totalRoi" | "readRoi" | "writeRoi"): Roi {
    const value = this.#fields[field];
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
    const offset = this.#integers(field, "offset", value["offset"]);
    const shape = this.#integers(field, "shape", value["shape"]);
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

  #integers(field: string, key: "offset" | "shape", value: unknown): number[] {
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
    const value = this.#fields["fit"];
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
    const value = this.#fields[field];
    if (value === undefined) return null;
    if (typeof value !== "boolean") {
      this.fail(field, `must be true or false; got ${describeValue(value)}. ${omit}`);
    }
    return value;
  }

  integer(field: string, min: number, fallback: number, purpose: string): number {
    const value = this.#fields[field];
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
    const value = this.#fields["timeout"];
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
    const value = this.#fields["requires"];
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
      if (name === "gpu" && typeof amount === "number" && amount > 0 && amount < 1) {
        this.fail(
          "requires",
          `gives gpu: ${amount}, a share of one device; blockwise gives each worker whole GPUs of its own (CUDA cannot fence a share off), so write gpu: 1 (or more), or run the models that would share a device in one worker`,
        );
      }
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
    const value = this.#fields["upstream"];
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
    return [...(value as string[])];
  }

  func(field: string, example: string): unknown {
    const value = this.#fields[field];
    if (value === undefined) return null;
    if (typeof value !== "function") {
      this.fail(field, `must be a function; got ${describeValue(value)}. Write e.g. ${example}.`);
    }
    return value;
  }

  /** `outputs`: the task's output names, which `{output:NAME}` may use. */
  command(outputs: readonly string[] = []): readonly string[] | null {
    const value = this.#fields["command"];
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
    for (const arg of value as string[]) {
      const unknown = unknownPlaceholder(arg, outputs);
      if (unknown !== null) {
        this.fail(
          "command",
          `uses the unknown placeholder "${unknown}" in argument "${arg}". Known placeholders: ${
            placeholderList(outputs)
          }; write {{ and }} for literal braces.`,
        );
      }
    }
    return [...(value as string[])];
  }

  cwd(): string | null {
    const value = this.#fields["cwd"];
    if (value === undefined) return null;
    if (typeof value === "string" && value !== "") return value;
    this.fail(
      "cwd",
      `must be a folder path; got ${
        describeValue(value)
      }. Give the folder the command runs in (relative to the pipeline file), or omit it to run in the folder blockwise was started in.`,
    );
  }

  tracking(): string | false | null {
    const value = this.#fields["tracking"];
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
    const value = this.#fields["skipMask"];
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

/** A non-null object (arrays included), whose fields can be read by name. */
export function isObject(value: unknown): value is Fields {
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

/** "1 axis" or "n axes", for messages about ROI dimensions. */
export function axes(n: number): string {
  return n === 1 ? "1 axis" : `${n} axes`;
}
