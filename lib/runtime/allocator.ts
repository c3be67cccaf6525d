/**
 * The allocator of blockwise's own process, where Web Workers allocate their blocks' arrays.
 *
 * - Deno: V8 takes `ArrayBuffer` memory from glibc's malloc, which maps each large buffer afresh
 *   and trims the heap top after it is freed, so a block's typed arrays are zero-filled page by
 *   page every block. `mallopt(M_TOP_PAD, 256 MiB)` through Deno FFI keeps the heap top for
 *   the next block, as the worker profile's `MALLOC_TOP_PAD_` does for Python workers (measured:
 *   a quarter of the faults; docs/design/WORKERS.md).
 * - Bun: its buffers come from mimalloc, which glibc's settings do not reach. mimalloc returns
 *   freed memory to the system 10 ms after it is freed (`MIMALLOC_PURGE_DELAY`), shorter than a
 *   block, so each block's arrays were faulted in afresh; it reads the setting only from the
 *   environment it starts with, and exports no way to change it later. So `run` and `worker`
 *   start again in place (`execve`: the same process, pid and descriptors, about 10 ms) with
 *   `MIMALLOC_PURGE_DELAY=1000` (measured: half the faults, 3 % off the JavaScript pair's time;
 *   docs/design/WORKERS.md). The restarted process removes the variable from its environment,
 *   so the programs it starts (commands, Python workers) do not inherit it. It prints nothing:
 *   the setting concerns this process's own memory, not what a task's workers get.
 *
 * A user who set `MALLOC_TOP_PAD_` or a `glibc.malloc` tunable, or `MIMALLOC_PURGE_DELAY`, keeps
 * their setting.
 */

import process from "node:process";
import { runtimeName } from "./detect.ts";
import { selfCommand } from "./self_command.ts";

export const PURGE_DELAY_ENV = "MIMALLOC_PURGE_DELAY";
export const PURGE_DELAY_MS = 1000;
/** Set for the restarted process only: it says the variable above is blockwise's, not the user's. */
const RESTARTED_ENV = "BLOCKWISE_ALLOCATOR_RESTARTED";

type Execve = (file: string, args: string[], env: Record<string, string | undefined>) => never;

/**
 * Under Bun on Linux, start this process again in place with mimalloc told to keep freed memory
 * for `PURGE_DELAY_MS` (unless the user set `MIMALLOC_PURGE_DELAY`); returns when it did not
 * (Deno, another system, no `execve`, or already restarted). In the restarted process it takes
 * the variables out of the environment again. Call it first thing, before any output or thread.
 */
export function restartForBlockWork(
  argv: readonly string[] = process.argv,
  env: Record<string, string | undefined> = process.env,
): void {
  if (env[RESTARTED_ENV] === "1") {
    delete env[RESTARTED_ENV];
    delete env[PURGE_DELAY_ENV];
    return;
  }
  if (process.platform !== "linux" || runtimeName() !== "bun") return;
  if (env[PURGE_DELAY_ENV] !== undefined) return;
  const execve = (process as unknown as { execve?: Execve }).execve;
  if (typeof execve !== "function") return;
  const self = selfCommand();
  try {
    execve(self[0]!, [...self, ...argv.slice(2)], {
      ...env,
      [PURGE_DELAY_ENV]: String(PURGE_DELAY_MS),
      [RESTARTED_ENV]: "1",
    });
  } catch {
    // The binary cannot be executed again (removed, or no permission): run as it is.
  }
}

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
