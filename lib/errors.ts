/**
 * Expected failures that end a command, each tied to the exit code DESIGN.md section 8 gives it.
 * Everything else that is thrown is a bug and exits with a stack trace. The mapping to process
 * exit codes lives in one place: `lib/cli/exit_codes.ts`.
 */

/** Invalid arguments or input: command line, pipeline file, mask (exit 2). */
export class InputError extends Error {
  override readonly name = "InputError";
}

/** A pipeline file failed validation (exit 2). Names the task and the field at fault. */
export class PipelineError extends InputError {
  constructor(
    message: string,
    readonly taskId: string | null = null,
    readonly field: string | null = null,
  ) {
    super(message);
  }
}

/** A tracking store refused to open or be changed (exit 3). */
export class StoreError extends Error {
  override readonly name = "StoreError";
  constructor(message: string, readonly path: string) {
    super(message);
  }
}

/** The message of a thrown value, whatever was thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The `code` of a Node-style system error (`ENOENT`, `EEXIST`, ...), if any. */
export function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
