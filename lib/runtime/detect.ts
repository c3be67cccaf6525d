/** Which JavaScript runtime this is; the only place besides the adapters that looks. */

export type RuntimeName = "bun" | "deno" | "node";

export function runtimeName(): RuntimeName {
  const g = globalThis as { Bun?: unknown; Deno?: unknown };
  if (g.Bun !== undefined) return "bun";
  if (g.Deno !== undefined) return "deno";
  return "node";
}
