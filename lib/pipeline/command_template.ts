/** The placeholders a command task's argv template may use, replaced per block. */

export const COMMAND_PLACEHOLDERS = [
  "task_id",
  "block_id",
  "index",
  "read_offset",
  "read_shape",
  "write_offset",
  "write_shape",
  "attempt",
] as const;

export type CommandPlaceholder = typeof COMMAND_PLACEHOLDERS[number];

/** What an output path template may use: the block's geometry, never its attempt. */
export const OUTPUT_PLACEHOLDERS = COMMAND_PLACEHOLDERS.filter((p) => p !== "attempt");

/**
 * `{{` and `}}` are literal braces; `{name}` is a placeholder, and in commands `{output:NAME}`
 * is where the block writes its output NAME (group 2).
 */
export const PLACEHOLDER_PATTERN = /\{\{|\}\}|\{([a-z_]+)(?::([A-Za-z][A-Za-z0-9_]*))?\}/g;

/**
 * The first placeholder in `arg` that is not a known one, or null. `outputs` are the task's
 * output names, which `{output:NAME}` may use.
 */
export function unknownPlaceholder(arg: string, outputs: readonly string[] = []): string | null {
  for (const match of arg.matchAll(PLACEHOLDER_PATTERN)) {
    const name = match[1];
    if (name === undefined) continue;
    const output = match[2];
    if (output !== undefined) {
      if (name !== "output" || !outputs.includes(output)) return match[0];
    } else if (!(COMMAND_PLACEHOLDERS as readonly string[]).includes(name)) {
      return match[0];
    }
  }
  return null;
}

export function placeholderList(outputs: readonly string[] = []): string {
  return [
    ...COMMAND_PLACEHOLDERS.map((p) => `{${p}}`),
    ...outputs.map((o) => `{output:${o}}`),
  ].join(" ");
}
