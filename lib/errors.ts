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

/** `text` as one shell word: unchanged when it is plain, else single-quoted. */
export function shellQuote(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}

/**
 * The fix every refusal of a tracking store or output folder ends with when nothing short of
 * starting over helps: the command that deletes it (its blocks then run again).
 */
export function deleteToStartFresh(dir: string): string {
  return `Delete it to start fresh:\n    rm -rf ${shellQuote(dir)}`;
}

/**
 * Why creating or writing `target` (a file or folder) failed and what to do, as the end of a
 * message: permissions, a file where a folder is needed, a read-only or full disk. Falls back to
 * the system's own message.
 */
export function createFailureAdvice(error: unknown, target: string): string {
  const code = errorCode(error);
  switch (code) {
    case "ENOENT":
      return `a folder above ${target} does not exist and cannot be created there (ENOENT). Choose a path under a folder that exists`;
    case "EACCES":
    case "EPERM":
      return `permission denied (${code}): this user may not create or write ${target}. Choose a folder you can write to, or fix the permissions of the folder above it`;
    case "EROFS":
      return `the file system holding ${target} is read-only (EROFS). Choose a folder on a writable file system`;
    case "ENOTDIR":
    case "EEXIST":
      return `a part of the path ${target} is a file, not a folder (${code}). Choose a path whose parents are folders, or move the file away`;
    case "ENOSPC":
    case "EDQUOT":
      return `the disk or quota is full (${code}). Free some space and try again`;
    case "ENAMETOOLONG":
      return `the path ${target} is too long (ENAMETOOLONG). Choose a shorter path`;
    case "ELOOP":
      return `the path ${target} has a loop of symbolic links (ELOOP). Fix the links`;
    default:
      return messageOf(error);
  }
}
