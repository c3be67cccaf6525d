/** Which JavaScript runtime this is; the only place besides the adapters that looks. */

import process from "node:process";

export type RuntimeName = "bun" | "deno" | "node";

interface RuntimeGlobals {
  Bun?: { version?: string };
  Deno?: { version?: { deno?: string } };
}

export function runtimeName(): RuntimeName {
  const g = globalThis as RuntimeGlobals;
  if (g.Bun !== undefined) return "bun";
  if (g.Deno !== undefined) return "deno";
  return "node";
}

/** The running runtime's own version, e.g. "1.4.5" for Bun 1.4.5, or "unknown". */
export function runtimeVersion(): string {
  const g = globalThis as RuntimeGlobals;
  const version = g.Bun !== undefined
    ? g.Bun.version
    : g.Deno !== undefined
    ? g.Deno.version?.deno
    : process.versions.node;
  return version ?? "unknown";
}

/** The host as a build-target-style name, e.g. "linux-x64" or "linux-arm64". */
export function hostPlatform(): string {
  return `${process.platform}-${process.arch}`;
}
