/**
 * `blockwise init [DIR] [--python]`: a starter pipeline in DIR (default: here) that runs as it
 * is, with every task field shown, plus a .gitignore. Files that exist are never overwritten:
 * the command refuses (exit 2) and names them.
 */

import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { createFailureAdvice, errorCode, InputError } from "../errors.ts";
import { GITIGNORE, JS_PIPELINE, PYTHON_MODULE, PYTHON_PIPELINE } from "./init_templates.ts";
import { EXIT_OK } from "./exit_codes.ts";

export interface InitOptions {
  readonly python?: boolean;
}

export function initCommand(dir: string | undefined, options: InitOptions): number {
  const folder = path.resolve(dir ?? ".");
  const files: [string, string][] = [
    ["pipeline.mjs", options.python === true ? PYTHON_PIPELINE : JS_PIPELINE],
    ...(options.python === true ? [["task.py", PYTHON_MODULE] as [string, string]] : []),
    [".gitignore", GITIGNORE],
  ];
  const existing = files.map(([name]) => name).filter((name) =>
    fs.existsSync(path.join(folder, name))
  );
  if (existing.length > 0) {
    throw new InputError(
      `Not writing a starter pipeline into ${folder}: ${existing.join(", ")} already exist${
        existing.length === 1 ? "s" : ""
      } there, and init never overwrites a file. Choose an empty folder (blockwise init DIR) or move them away`,
    );
  }
  try {
    fs.mkdirSync(folder, { recursive: true });
    for (const [name, text] of files) {
      fs.writeFileSync(path.join(folder, name), text, { flag: "wx" });
    }
  } catch (error) {
    if (errorCode(error) === undefined) throw error;
    throw new InputError(
      `Cannot write the starter pipeline into ${folder}: ${createFailureAdvice(error, folder)}`,
    );
  }
  const relative = path.relative(process.cwd(), folder);
  const shown = relative === "" ? "." : relative.startsWith("..") ? folder : relative;
  const lines = [
    `Wrote ${files.map(([name]) => path.join(shown, name)).join(", ")}`,
    "Next:",
    `  cd ${shown}`,
    "  blockwise plan pipeline.mjs",
    "  blockwise run pipeline.mjs --tracking-dir tracking",
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
  return EXIT_OK;
}
