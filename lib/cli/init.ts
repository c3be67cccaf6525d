/**
 * `blockwise init [DIR] [--python]`: a starter pipeline in DIR (default: here) that runs as it
 * is, with every task field shown, plus a .gitignore. Files that exist are never overwritten:
 * the command refuses (exit 2) and names them; a .gitignore that exists (every git project has
 * one) gets the lines it lacks appended, or is left as it is when it has them all, and the
 * command says which.
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
  const ignoreFile = path.join(folder, ".gitignore");
  let ignore: { readonly kind: "new" | "appended" | "kept"; readonly lines: string[] };
  try {
    fs.mkdirSync(folder, { recursive: true });
    for (const [name, text] of files) {
      fs.writeFileSync(path.join(folder, name), text, { flag: "wx" });
    }
    ignore = updateGitignore(ignoreFile);
  } catch (error) {
    if (errorCode(error) === undefined) throw error;
    throw new InputError(
      `Cannot write the starter pipeline into ${folder}: ${createFailureAdvice(error, folder)}`,
    );
  }
  const relative = path.relative(process.cwd(), folder);
  const shown = relative === "" ? "." : relative.startsWith("..") ? folder : relative;
  const written = [
    ...files.map(([name]) => name),
    ...(ignore.kind === "new" ? [".gitignore"] : []),
  ];
  const lines = [
    `Wrote ${written.map((name) => path.join(shown, name)).join(", ")}`,
    ...(ignore.kind === "appended"
      ? [`Appended ${ignore.lines.join(", ")} to the existing ${path.join(shown, ".gitignore")}`]
      : ignore.kind === "kept"
      ? [
        `Left the existing ${path.join(shown, ".gitignore")} as it is (it already ignores ${
          ignore.lines.join(", ")
        })`,
      ]
      : []),
    "Next:",
    ...(shown === "." ? [] : [`  cd ${shown}`]),
    "  blockwise plan pipeline.mjs",
    "  blockwise run pipeline.mjs --tracking-dir tracking",
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
  return EXIT_OK;
}

/** The lines of GITIGNORE that are not comments. */
const IGNORED = GITIGNORE.split("\n").filter((l) => l !== "" && !l.startsWith("#"));

/**
 * Writes .gitignore, or appends to an existing one the entries it lacks (compared line by
 * line, ignoring surrounding blanks and a leading slash). Returns what was done and the entries
 * written (all of them for a new or unchanged file).
 */
function updateGitignore(file: string): {
  readonly kind: "new" | "appended" | "kept";
  readonly lines: string[];
} {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    if (errorCode(error) !== "ENOENT") throw error;
    fs.writeFileSync(file, GITIGNORE, { flag: "wx" });
    return { kind: "new", lines: IGNORED };
  }
  const has = new Set(text.split(/\r?\n/).map((l) => l.trim().replace(/^\//, "")));
  const missing = IGNORED.filter((l) => !has.has(l) && !has.has(l.replace(/\/$/, "")));
  if (missing.length === 0) return { kind: "kept", lines: IGNORED };
  const separator = text === "" || text.endsWith("\n") ? "" : "\n";
  fs.appendFileSync(
    file,
    `${separator}${text === "" ? "" : "\n"}# Written by blockwise runs (blockwise init)\n${
      missing.join("\n")
    }\n`,
  );
  return { kind: "appended", lines: missing };
}
