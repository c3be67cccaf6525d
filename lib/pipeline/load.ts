/**
 * Loading a pipeline file: resolve the path, import the module (the runtime strips TypeScript
 * types) and validate its default export. Every failure is a `PipelineError` naming the path.
 */

import { stat } from "node:fs/promises";
import { dirname, extname, resolve } from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { PipelineError } from "../errors.ts";
import type { PipelineConfig } from "./spec.ts";
import { provideModulesFor } from "./provided_modules.ts";
import { type SyntaxErrorPosition, syntaxErrorPosition } from "../runtime/syntax_error.ts";
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

  // Outside the try: what fails here (BLOCKWISE_LIBBLOSC naming no usable libblosc) is not the
  // module's fault, and says itself what to fix.
  await provideModulesFor(path);
  let module: unknown;
  try {
    module = await import(pathToFileURL(path).href);
  } catch (error) {
    const missing = missingPackage(error);
    const syntax = syntaxErrorPosition(error);
    const failure = new PipelineError(
      syntax !== null
        ? `${where}: ${describeSyntaxError(syntax, path)}`
        : missing === null
        ? `${where}: importing it threw ${
          errorText(error)
        }. Fix the module so that it imports cleanly.`
        : `${where}: it imports the npm package "${missing}", which is not installed where the pipeline can find it. ` +
          `Install it next to the pipeline: cd "${
            dirname(path)
          }" && npm install ${missing}. Packages are looked up in node_modules in the pipeline's folder or a folder above it, under Bun, Deno and the compiled blockwise binary alike.`,
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

/**
 * `syntax error at FILE:LINE:COLUMN: what the parser said`, the line, a caret under the column
 * (tabs kept so it lines up), and what to do.
 */
function describeSyntaxError(syntax: SyntaxErrorPosition, pipelinePath: string): string {
  const where = `${syntax.file}:${syntax.line}:${syntax.column}`;
  const lead = syntax.lineText.slice(0, Math.max(0, syntax.column - 1)).replace(/[^\t]/g, " ");
  const frame = syntax.lineText === "" ? "" : `\n    ${syntax.lineText}\n    ${lead}^`;
  const whose = syntax.file === pipelinePath ? "" : " in a module it imports";
  return `syntax error${whose} at ${where}: ${syntax.message}${frame}\nFix the code at that position, then run again.`;
}

/**
 * The npm package an import failed to find, from the runtime's message (Bun and Node: "Cannot
 * find package 'x'", Deno: 'Import "x" not a dependency' or "Could not find a matching package
 * for 'npm:x'"), or null for any other failure. A deep import names its package.
 */
export function missingPackage(error: unknown): string | null {
  const message = error instanceof Error ? error.message : String(error);
  const patterns = [
    /Cannot find package '([^']+)'/,
    /Cannot find module '([^']+)'/,
    /Import "([^"]+)" not a dependency/,
    /Could not find a matching package for 'npm:([^']+)'/,
  ];
  for (const pattern of patterns) {
    const specifier = pattern.exec(message)?.[1];
    if (specifier === undefined || /^(\.|\/|[a-z][a-z0-9+.-]*:)/i.test(specifier)) continue;
    const parts = specifier.split("/");
    const name = specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
    // npm:name@version in Deno's message: keep the name.
    return name.replace(/(?<=.)@.*$/, "");
  }
  return null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function errorText(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
