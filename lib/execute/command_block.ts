/**
 * Command tasks: each block runs an external program. The argv template's placeholders are
 * replaced per block and the block is also passed in environment variables. No shell is
 * involved unless the template itself starts one (e.g. `["sh", "-c", "..."]`).
 */

import { statSync } from "node:fs";
import process from "node:process";
import type { Block } from "../pipeline/spec.ts";
import {
  type CommandGroup,
  findProgram,
  killCommandGroup,
  startCommandGroup,
} from "../runtime/command_group.ts";
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

/**
 * Replace `{name}` placeholders, and `{output:NAME}` by where the block writes output NAME;
 * `{{` and `}}` stand for literal braces.
 */
export function expandCommand(
  template: readonly string[],
  block: Block,
  outputs: Readonly<Record<string, string>> = {},
): string[] {
  const values = placeholderValues(block);
  return template.map((arg) =>
    arg.replace(PLACEHOLDER_PATTERN, (match, name: string | undefined, output?: string) => {
      if (match === "{{") return "{";
      if (match === "}}") return "}";
      const value = output !== undefined
        ? (name === "output" ? outputs[output] : undefined)
        : name === undefined
        ? undefined
        : values[name];
      if (value === undefined) {
        throw new Error(
          `Unknown placeholder "${match}" in command argument "${arg}"; known placeholders: ${placeholderList()}`,
        );
      }
      return value;
    })
  );
}

export function commandEnvironment(
  block: Block,
  outputs: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const v = placeholderValues(block);
  const staged: Record<string, string> = {};
  for (const [name, where] of Object.entries(outputs)) {
    staged[`BLOCKWISE_OUTPUT_${name.toUpperCase()}`] = where;
  }
  return {
    ...staged,
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
  /**
   * Where the command's output goes, in whole lines (a last line without a newline gets one
   * when the command ends). Default: this process's stdout and stderr. stderr is also kept for
   * the error message.
   */
  readonly onStdout?: (lines: string) => void;
  readonly onStderr?: (lines: string) => void;
  /** Aborting it kills the command's whole process group. */
  readonly signal?: AbortSignal;
  /** The folder the command runs in; absent or null for the process's. */
  readonly cwd?: string | null;
  /** Where the block writes each declared output (its staging locations). */
  readonly outputs?: Readonly<Record<string, string>>;
  /**
   * The environment the block's variables are added to: the task's worker environment
   * (lib/execute/worker_profile.ts) over this process's; default this process's.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Told the command's pid (its process group's id) once it has started. */
  readonly onStart?: (pid: number) => void;
}

/**
 * Splits a stream's text into whole lines: output of concurrent commands is interleaved line
 * by line, never inside a line.
 */
export class LineBuffer {
  #partial = "";

  /** The complete lines in `chunk` (with what was held back before), each ending in "\n". */
  push(chunk: string): string {
    const text = this.#partial + chunk;
    const end = text.lastIndexOf("\n") + 1;
    this.#partial = text.slice(end);
    return text.slice(0, end);
  }

  /** What is held back, as a line of its own, or "" when nothing is. */
  end(): string {
    const rest = this.#partial;
    this.#partial = "";
    return rest === "" ? "" : `${rest}\n`;
  }
}

/**
 * Run one block's command in a process group of its own that dies with blockwise
 * (lib/runtime/command_group.ts); resolves on exit status 0, rejects with `CommandFailure`
 * otherwise. Aborting `options.signal` kills the group, grandchildren included.
 */
export function runCommandBlock(
  template: readonly string[],
  block: Block,
  options: CommandOptions = {},
): Promise<void> {
  const argv = expandCommand(template, block, options.outputs);
  const [file, ...args] = argv;
  const cwd = options.cwd ?? null;
  // Layers, merged once where the command is spawned: the base is a whole environment.
  const env = [options.env ?? process.env, commandEnvironment(block, options.outputs)] as const;
  const onStdout = options.onStdout ?? ((lines: string) => process.stdout.write(lines));
  const onStderr = options.onStderr ?? ((lines: string) => process.stderr.write(lines));
  return new Promise((resolve, reject) => {
    const notStarted = (reason: string): void => {
      reject(
        new CommandFailure(
          `Command ${JSON.stringify(argv)} could not be started: ${reason}`,
          null,
          null,
          "",
        ),
      );
    };
    if (cwd !== null && !isDirectory(cwd)) {
      notStarted(
        `its folder "${cwd}" (the task's cwd) does not exist; create it or fix the task's cwd`,
      );
      return;
    }
    const path = env[1].PATH ?? env[0].PATH;
    if (findProgram(file!, path, cwd ?? process.cwd()) === null) {
      notStarted(
        `"${file}" was not found or is not executable; check that "${file}" is installed and on PATH, or give its absolute path`,
      );
      return;
    }
    if (options.signal?.aborted === true) {
      notStarted("it was stopped before it started");
      return;
    }
    const stdout = new LineBuffer();
    const stderrLines = new LineBuffer();
    let stderr = "";
    let group: CommandGroup;
    try {
      group = startCommandGroup([file!, ...args], {
        env,
        cwd,
        onStdout: (chunk) => {
          const lines = stdout.push(chunk);
          if (lines !== "") onStdout(lines);
        },
        onStderr: (chunk) => {
          stderr = (stderr + chunk).slice(-STDERR_TAIL_BYTES);
          const lines = stderrLines.push(chunk);
          if (lines !== "") onStderr(lines);
        },
      });
    } catch (error) {
      notStarted(error instanceof Error ? error.message : String(error));
      return;
    }
    options.onStart?.(group.pid);
    const kill = (): void => killCommandGroup(group.pid, "SIGKILL");
    options.signal?.addEventListener("abort", kill, { once: true });
    group.ended.then(({ code, signal }) => {
      options.signal?.removeEventListener("abort", kill);
      const restOut = stdout.end();
      if (restOut !== "") onStdout(restOut);
      const restErr = stderrLines.end();
      if (restErr !== "") onStderr(restErr);
      if (code === 0) {
        resolve();
        return;
      }
      const tail = stderr.trimEnd().split("\n").slice(-STDERR_TAIL_LINES).join("\n");
      const status = signal !== null ? `was killed by ${signal}` : `exited with status ${code}`;
      reject(
        new CommandFailure(
          `Command ${JSON.stringify(argv)} ${status}${
            tail === "" ? "" : `\nlast lines of its stderr:\n${tail}`
          }`,
          code,
          signal,
          tail,
        ),
      );
    });
  });
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
