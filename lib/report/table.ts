/** Plain aligned text tables for terminal output. */

export type Align = "left" | "right";

export interface Column {
  readonly header: string;
  readonly align?: Align;
}

export function formatTable(
  columns: readonly Column[],
  rows: readonly (readonly string[])[],
  indent = 2,
): string {
  const widths = columns.map((c, i) =>
    Math.max(c.header.length, ...rows.map((r) => (r[i] ?? "").length))
  );
  const pad = (text: string, i: number): string =>
    columns[i]!.align === "right" ? text.padStart(widths[i]!) : text.padEnd(widths[i]!);
  const line = (cells: readonly string[]): string =>
    " ".repeat(indent) + cells.map((c, i) => pad(c, i)).join("  ").trimEnd();
  return [
    line(columns.map((c) => c.header)),
    line(widths.map((w) => "─".repeat(w))),
    ...rows.map(line),
  ].join("\n");
}

/** `1234567` → `1,234,567`. */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}

/** `[4, 4, 8]` → `4×4×8`. */
export function formatShape(shape: readonly number[]): string {
  return shape.length === 0 ? "()" : shape.join("×");
}
