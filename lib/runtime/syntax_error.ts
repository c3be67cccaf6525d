/**
 * Where a module that failed to import has its syntax error, from each runtime's own error:
 * Bun throws a `BuildMessage` (or an `AggregateError` of them, the first being the cause and the
 * rest its echoes) with `position: { file, line, column, lineText }`; Deno throws an error whose
 * message holds `SyntaxError: ...`, a code frame and `at file:///...:LINE:COLUMN`.
 */

import * as fs from "node:fs";
import { fileURLToPath } from "node:url";

/** A syntax error's place: the file, 1-based line and column, the line's text. */
export interface SyntaxErrorPosition {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  readonly lineText: string;
  /** What the parser said, e.g. `Expected "}" but found "shape"`. */
  readonly message: string;
}

interface BunPosition {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  readonly lineText?: string;
}

/** The syntax error `error` reports, or null when it is not one (or has no position). */
export function syntaxErrorPosition(error: unknown): SyntaxErrorPosition | null {
  const first = isRecord(error) && Array.isArray(error["errors"]) && error["errors"].length > 0
    ? error["errors"][0]
    : error;
  const fromBun = bunPosition(first);
  if (fromBun !== null) return fromBun;
  return denoPosition(error);
}

function bunPosition(error: unknown): SyntaxErrorPosition | null {
  if (!isRecord(error) || !isRecord(error["position"])) return null;
  const position = error["position"] as unknown as BunPosition;
  if (typeof position.file !== "string" || !Number.isInteger(position.line)) return null;
  const message = typeof error["message"] === "string" ? error["message"] : "syntax error";
  return {
    file: position.file,
    line: position.line,
    column: position.column,
    lineText: position.lineText ?? lineOf(position.file, position.line),
    message,
  };
}

function denoPosition(error: unknown): SyntaxErrorPosition | null {
  const text = error instanceof Error ? error.message : "";
  const said = /SyntaxError: ([^\n]*)/.exec(text);
  const at = /\n\s*at (file:\/\/\S+?):(\d+):(\d+)\s*$/.exec(text);
  if (said === null || at === null) return null;
  let file: string;
  try {
    file = fileURLToPath(at[1]!);
  } catch {
    return null;
  }
  const line = Number(at[2]);
  return { file, line, column: Number(at[3]), lineText: lineOf(file, line), message: said[1]! };
}

function lineOf(file: string, line: number): string {
  try {
    return fs.readFileSync(file, "utf8").split(/\r?\n/)[line - 1] ?? "";
  } catch {
    return "";
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}
