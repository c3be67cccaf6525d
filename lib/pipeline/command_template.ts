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

/** `{{` and `}}` are literal braces; `{name}` is a placeholder. */
export const PLACEHOLDER_PATTERN = /\{\{|\}\}|\{([a-z_]+)\}/g;

/** The first `{name}` in `arg` that is not a known placeholder, or null. */
export function unknownPlaceholder(arg: string): string | null {
  for (const match of arg.matchAll(PLACEHOLDER_PATTERN)) {
    const name = match[1];
    if (name !== undefined && !(COMMAND_PLACEHOLDERS as readonly string[]).includes(name)) {
      return match[0];
    }
  }
  return null;
}

export function placeholderList(): string {
  return COMMAND_PLACEHOLDERS.map((p) => `{${p}}`).join(" ");
}
