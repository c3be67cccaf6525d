/**
 * Loading a pipeline file: resolve the path, import the module (the runtime strips TypeScript
 * types) and validate its default export. Every failure is a `PipelineError` naming the path.
 */

import { stat } from "node:fs/promises";
import { extname, resolve } from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { PipelineError } from "../errors.ts";
import type { PipelineConfig } from "./spec.ts";
import { validatePipeline } from "./validate.ts";

/** File extensions a pipeline module may have. */
export const PIPELINE_EXTENSIONS: readonly string[] = [".ts", ".mts", ".js", ".mjs"];

const EXPECTED_SHAPE =
  "export default { tasks: [{ id, totalRoi, readRoi, writeRoi, process(block) { ... } }] }";

/** Imports and validates the pipeline module `file` (relative paths resolve against `cwd`). */
export async function loadPipeline(
  file: string,
  cwd: string = process.cwd(),
): Promise<PipelineConfig> {
  const path = resolve(cwd, file);
  const where = `Cannot load pipeline "${path}"`;
  let isDirectory: boolean;
  let isFile: boolean;
  try {
    const info = await stat(path);
    isDirectory = info.isDirectory();
    isFile = info.isFile();
  } catch (error) {
    const code = isObject(error) ? error["code"] : undefined;
    throw new PipelineError(
      code === "ENOENT" || code === "ENOTDIR"
        ? `${where}: the file does not exist. Check the path (relative paths are resolved against "${cwd}").`
        : `${where}: cannot read it (${errorText(error)}). Check the path and its permissions.`,
    );
  }
  if (isDirectory) {
    throw new PipelineError(
      `${where}: it is a directory. Pass the pipeline module itself, e.g. "${
        resolve(path, "pipeline.ts")
      }".`,
    );
  }
  if (!isFile) {
    throw new PipelineError(`${where}: it is not a regular file. Pass a .ts or .js module.`);
  }
  const extension = extname(path);
  if (!PIPELINE_EXTENSIONS.includes(extension)) {
    throw new PipelineError(
      `${where}: extension ${
        extension === "" ? "is missing" : `"${extension}" is not supported`
      }. A pipeline is a module ending in ${PIPELINE_EXTENSIONS.join(", ")}.`,
    );
  }

  let module: unknown;
  try {
    module = await import(pathToFileURL(path).href);
  } catch (error) {
    const failure = new PipelineError(
      `${where}: importing it threw ${
        errorText(error)
      }. Fix the module so that it imports cleanly.`,
    );
    failure.cause = error;
    throw failure;
  }
  const value = isObject(module) ? module["default"] : undefined;
  if (value === undefined) {
    const names = isObject(module) ? Object.keys(module) : [];
    const found = names.length === 0
      ? "it exports nothing"
      : `it exports only ${names.map((n) => `"${n}"`).join(", ")}`;
    throw new PipelineError(
      `${where}: the module has no default export (${found}). End it with ${EXPECTED_SHAPE}.`,
    );
  }
  return validatePipeline(value, path);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function errorText(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
