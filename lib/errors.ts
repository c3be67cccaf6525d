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
