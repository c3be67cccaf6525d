/**
 * Readers for the fields of protocol messages: each checks one field of an incoming message and
 * throws a ProtocolError naming the message kind, the field and the value at fault.
 */

import type { BlockCommit } from "../../run/block_report.ts";

/** A message broke the protocol: the peer is killed (a worker) or refused (a connection). */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
}

export type Fields = Record<string, unknown>;

export function fields(value: unknown, direction: string): Fields & { kind: string } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ProtocolError(`${direction} message is not an object: ${preview(value)}`);
  }
  const kind = (value as Fields)["kind"];
  if (typeof kind !== "string") {
    throw new ProtocolError(`${direction} message has no "kind": ${preview(value)}`);
  }
  return value as Fields & { kind: string };
}

export function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

export function str(m: Fields, key: string, kind: string): string {
  const v = m[key];
  if (typeof v !== "string") throw bad(kind, key, "a string", v);
  return v;
}

export function num(m: Fields, key: string, kind: string): number {
  const v = m[key];
  if (typeof v !== "number") throw bad(kind, key, "a number", v);
  return v;
}

export function count(m: Fields, key: string, kind: string): number {
  const v = m[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw bad(kind, key, "a non-negative integer", v);
  }
  return v;
}

export function floats(m: Fields, key: string, kind: string, length: number): Float64Array {
  const v = m[key];
  if (!(v instanceof Float64Array)) throw bad(kind, key, "a Float64Array", v);
  if (v.length < length) {
    throw new ProtocolError(
      `"${kind}" message: "${key}" holds ${v.length} numbers, fewer than the ${length} announced`,
    );
  }
  return v;
}

export function bad(kind: string, key: string, expected: string, got: unknown): ProtocolError {
  return new ProtocolError(`"${kind}" message: "${key}" must be ${expected}, got ${preview(got)}`);
}

export function optionalStack(m: Fields, kind: string): { stack?: string } {
  const v = m["stack"];
  if (v === undefined) return {};
  if (typeof v !== "string") throw bad(kind, "stack", "a string", v);
  return { stack: v };
}

export function optionalString<K extends string>(
  m: Fields,
  key: K,
  kind: string,
): { [P in K]?: string } {
  const v = m[key];
  if (v === undefined) return {};
  if (typeof v !== "string" || v.length > 256) throw bad(kind, key, "a short string", v);
  return { [key]: v } as { [P in K]?: string };
}

export function commitsOf(m: Fields, done: number): { commits?: readonly BlockCommit[] } {
  const v = m["commits"];
  if (v === undefined) return {};
  if (!Array.isArray(v) || v.length !== done) {
    throw new ProtocolError(
      `"results" message: "commits" must hold one entry per done record (${done}); got ${
        preview(v)
      }`,
    );
  }
  return {
    commits: v.map((c: unknown, i): BlockCommit => {
      const f = fields({ kind: "commit", ...(typeof c === "object" ? c : { bad: c }) }, "Worker");
      const files = f["files"];
      const content = str(f, "content", "results commit");
      if (!/^[0-9a-f]{64}$/.test(content)) {
        throw bad("results commit", "content", "a SHA-256 in hex", content);
      }
      if (!Array.isArray(files)) throw bad("results commit", "files", "an array", files);
      return {
        position: num(f, "position", "results commit"),
        content,
        files: files.map((file: unknown) => {
          const ff = fields(
            { kind: "file", ...(typeof file === "object" ? file : { bad: file }) },
            "Worker",
          );
          const path = str(ff, "path", `results commit ${i} file`);
          if (path === "" || path.split("/").some((p) => p === ".." || p === "." || p === "")) {
            throw bad(
              `results commit ${i} file`,
              "path",
              "a relative path inside the output",
              path,
            );
          }
          return {
            output: str(ff, "output", `results commit ${i} file`),
            path,
            size: count(ff, "size", `results commit ${i} file`),
            sha256: str(ff, "sha256", `results commit ${i} file`),
          };
        }),
      };
    }),
  };
}
