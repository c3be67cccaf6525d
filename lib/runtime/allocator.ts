/**
 * The allocator of blockwise's own process, where Web Workers allocate their blocks' arrays.
 *
 * - Deno: V8 takes `ArrayBuffer` memory from glibc's malloc, which maps each large buffer afresh
 *   and trims the heap top after it is freed, so a block's typed arrays are zero-filled page by
 *   page every block. `mallopt(M_TOP_PAD, 256 MiB)` through Deno FFI keeps the heap top for
 *   the next block, as the worker profile's `MALLOC_TOP_PAD_` does for Python workers (measured:
 *   a quarter of the faults; docs/design/WORKERS.md).
 * - Bun: its buffers come from its own allocator (mimalloc), which glibc's settings do not reach
 *   and which exports no way to tune it at run time; nothing to do here.
 *
 * A user who set `MALLOC_TOP_PAD_` or a `glibc.malloc` tunable keeps their setting.
 */

import process from "node:process";
import { runtimeName } from "./detect.ts";

/** glibc's `M_TOP_PAD` parameter number for mallopt. */
const M_TOP_PAD = -2;
export const TOP_PAD_BYTES = 256 * 1024 * 1024;

type Mallopt = (parameter: number, value: number) => number;

/**
 * Keep freed memory at the heap's top for the next block, where the runtime allocates buffers
 * through glibc; returns what was done (for the run's first lines), or null when nothing was.
 */
export function keepAllocatorWarm(
  env: Readonly<Record<string, string | undefined>> = process.env,
): string | null {
  if (process.platform !== "linux" || runtimeName() !== "deno") return null;
  if (env["MALLOC_TOP_PAD_"] !== undefined || /glibc\.malloc\./.test(env["GLIBC_TUNABLES"] ?? "")) {
    return null;
  }
  const mallopt = denoMallopt();
  if (mallopt === null || mallopt(M_TOP_PAD, TOP_PAD_BYTES) !== 1) return null;
  return `Web Workers: glibc keeps ${
    TOP_PAD_BYTES / 1024 / 1024
  } MiB at its heap top between blocks (mallopt M_TOP_PAD)`;
}

function denoMallopt(): Mallopt | null {
  try {
    const d = (globalThis as unknown as {
      Deno: {
        dlopen(
          lib: string,
          symbols: Record<string, { parameters: string[]; result: string }>,
        ): { symbols: { mallopt: Mallopt } };
      };
    }).Deno;
    return d.dlopen("libc.so.6", { mallopt: { parameters: ["i32", "i32"], result: "i32" } })
      .symbols.mallopt;
  } catch {
    // No FFI permission, or no glibc (musl): leave the allocator as it is.
    return null;
  }
}
