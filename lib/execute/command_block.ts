/**
 * Command tasks: each block runs an external program. The argv template's placeholders are
 * replaced per block and the block is also passed in environment variables. No shell is
 * involved unless the template itself starts one (e.g. `["sh", "-c", "..."]`).
 */

import { spawn } from "node:child_process";
import type { Block } from "../pipeline/spec.ts";
import { PLACEHOLDER_PATTERN, placeholderList } from "../pipeline/command_template.ts";

const STDERR_TAIL_LINES = 20;
const STDERR_TAIL_BYTES = 64 * 1024;

function placeholderValues(block: Block): Record<string, string> {
  return {
    task_id: block.taskId,
    block_id: String(block.id),
    index: block.index.join(","),
    read_offset: block.readRoi.offset.join(","),
    read_shape: block.readRoi.shape.join(","),
    write_offset: block.writeRoi.offset.join(","),
    write_shape: block.writeRoi.shape.join(","),
    attempt: String(block.attempt),
  };
}

/** Replace `{name}` placeholders; `{{` and `}}` stand for literal braces. */
export function expandCommand(template: readonly string[], block: Block): string[] {
  const values = placeholderValues(block);
  return template.map((arg) =>
    arg.replace(PLACEHOLDER_PATTERN, (match, name: string | undefined) => {
      if (match === "{{") return "{";
      if (match === "}}") return "}";
      const value = name === undefined ? undefined : values[name];
      if (value === undefined) {
        throw new Error(
          `Unknown placeholder "${match}" in command argument "${arg}"; known placeholders: ${placeholderList()}`,
        );
      }
      return value;
    })
  );
}

export function commandEnvironment(block: Block): Record<string, string> {
  const v = placeholderValues(block);
  return {
    BLOCKWISE_TASK_ID: v.task_id!,
    BLOCKWISE_BLOCK_ID: v.block_id!,
    BLOCKWISE_INDEX: v.index!,
    BLOCKWISE_READ_OFFSET: v.read_offset!,
    BLOCKWISE_READ_SHAPE: v.read_shape!,
    BLOCKWISE_WRITE_OFFSET: v.write_offset!,
    BLOCKWISE_WRITE_SHAPE: v.write_shape!,
    BLOCKWISE_ATTEMPT: v.attempt!,
  };
}

export class CommandFailure extends Error {
  override readonly name = "CommandFailure";
  constructor(
    message: string,
    readonly exitCode: number | null,
    readonly signal: string | null,
    readonly stderrTail: string,
  ) {
    super(message);
  }
}

export interface CommandOptions {
  /** Where the command's stdout goes; stderr is also kept for the error message. */
  readonly onStdout?: (chunk: string) => void;
  readonly onStderr?: (chunk: string) => void;
  readonly signal?: AbortSignal;
}

/** Run one block's command; resolves on exit status 0, rejects with `CommandFailure` otherwise. */
export function runCommandBlock(
  template: readonly string[],
  block: Block,
  options: CommandOptions = {},
): Promise<void> {
  const argv = expandCommand(template, block);
  const [file, ...args] = argv;
  return new Promise((resolve, reject) => {
    let stderr = "";
    const child = spawn(file!, args, {
      env: { ...process.env, ...commandEnvironment(block) },
      stdio: ["ignore", "pipe", "pipe"],
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => options.onStdout?.(chunk));
    child.stderr.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_TAIL_BYTES);
      options.onStderr?.(chunk);
    });
    child.on("error", (error: NodeJS.ErrnoException) => {
      const hint = error.code === "ENOENT"
        ? `; check that "${file}" is installed and on PATH, or give its absolute path`
        : "";
      reject(
        new CommandFailure(
          `Command ${JSON.stringify(argv)} could not be started: ${error.message}${hint}`,
          null,
          null,
          "",
        ),
      );
    });
    child.on("close", (code, signal) => {
      if (code === 0) {
        resolve();
        return;
      }
      const tail = stderr.trimEnd().split("\n").slice(-STDERR_TAIL_LINES).join("\n");
      const status = signal !== null ? `was killed by ${signal}` : `exited with status ${code}`;
      reject(
        new CommandFailure(
          `Command ${JSON.stringify(argv)} ${status}${
            tail ? `; last lines of stderr:\n${tail}` : ""
          }`,
          code,
          signal,
          tail,
        ),
      );
    });
  });
}
