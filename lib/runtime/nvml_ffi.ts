/**
 * libnvidia-ml (NVML) through `bun:ffi` or Deno FFI: the functions lib/runtime/nvml.ts calls,
 * with one JavaScript shape in both runtimes. The policy (which library, the structs' layout,
 * errors as values) is nvml.ts's; this file only opens the library and binds the symbols.
 *
 * `nvmlDevice_t` is an opaque pointer. It is read as a 64-bit integer from the 8 bytes
 * nvmlDeviceGetHandleByIndex_v2 writes and passed back as a `u64` argument: on the 64-bit
 * platforms blockwise runs on, a pointer and a u64 travel in the same register, and this keeps
 * Deno's pointer objects (and their permission rules) out of the per-sample calls. Out
 * parameters are typed arrays (`ptr` in bun:ffi, `buffer` in Deno).
 *
 * `bun:ffi` is imported dynamically, as in mmap_bun.ts: a static import makes Deno refuse the
 * module graph. Deno needs an unscoped --allow-ffi (or -A) to read nvmlErrorString's C string.
 */

import process from "node:process";
import { runtimeName } from "./detect.ts";
import { denoFfiState } from "./mmap_deno.ts";

/** The NVML functions blockwise calls. Every one returns an nvmlReturn_t (0 = success). */
export interface NvmlSymbols {
  nvmlInit_v2(): number;
  nvmlShutdown(): number;
  /** Returns the message; the binding reads the C string. */
  nvmlErrorString(code: number): string;
  nvmlDeviceGetCount_v2(count: Uint32Array): number;
  nvmlDeviceGetHandleByIndex_v2(index: number, handle: BigUint64Array): number;
  nvmlDeviceGetUUID(device: bigint, uuid: Uint8Array, length: number): number;
  nvmlDeviceGetUtilizationRates(device: bigint, utilization: Uint8Array): number;
  nvmlDeviceGetMemoryInfo(device: bigint, memory: Uint8Array): number;
  /** Absent (null) in a driver older than the _v3 entry point (NVML API 11, 2021). */
  nvmlDeviceGetComputeRunningProcesses_v3:
    | ((device: bigint, count: Uint32Array, infos: Uint8Array) => number)
    | null;
}

/** An opened library: its symbols, and `close` to unload it (after nvmlShutdown). */
export interface OpenedNvmlLibrary {
  readonly library: string;
  readonly symbols: NvmlSymbols;
  close(): void;
}

type Signature = readonly [args: readonly string[], result: string];
type Raw = (...args: readonly unknown[]) => unknown;

/** Argument and result types in bun:ffi's names (Deno's are mapped from these). */
const CORE: Readonly<Record<string, Signature>> = {
  nvmlInit_v2: [[], "i32"],
  nvmlShutdown: [[], "i32"],
  nvmlDeviceGetCount_v2: [["ptr"], "i32"],
  nvmlDeviceGetHandleByIndex_v2: [["u32", "ptr"], "i32"],
  nvmlDeviceGetUUID: [["u64", "ptr", "u32"], "i32"],
  nvmlDeviceGetUtilizationRates: [["u64", "ptr"], "i32"],
  nvmlDeviceGetMemoryInfo: [["u64", "ptr"], "i32"],
};
const PROCESSES = "nvmlDeviceGetComputeRunningProcesses_v3";
const PROCESSES_SIGNATURE: Signature = [["u64", "ptr", "ptr"], "i32"];

interface BunFfiModule {
  dlopen(
    library: string,
    symbols: Readonly<Record<string, { args: readonly string[]; returns: string }>>,
  ): Library;
}

interface DenoFfiNamespace {
  dlopen(
    library: string,
    symbols: Readonly<Record<string, { parameters: readonly string[]; result: string }>>,
  ): Library;
  UnsafePointerView: { getCString(pointer: object): string };
}

/** Why FFI cannot be used here (runtime, permission, platform), or null when it can. */
export function nvmlFfiUnavailable(): string | null {
  if (process.platform !== "linux" || (process.arch !== "x64" && process.arch !== "arm64")) {
    return `NVML is read on 64-bit Linux only (this is ${process.platform}/${process.arch})`;
  }
  const runtime = runtimeName();
  if (runtime === "bun") return null;
  if (runtime === "deno") {
    const state = denoFfiState();
    return state === "granted"
      ? null
      : `Deno was not given --allow-ffi (ffi permission: ${state}); run with -A or an ` +
        `unscoped --allow-ffi to read GPU figures`;
  }
  return `${runtime} has no FFI blockwise uses`;
}

/**
 * Open `library` (a path, or a soname the dynamic loader looks up) and bind NVML's functions.
 * Throws with the loader's reason when it cannot be opened or lacks one of the core functions;
 * a missing nvmlDeviceGetComputeRunningProcesses_v3 is bound as null.
 */
export async function openNvmlLibrary(library: string): Promise<OpenedNvmlLibrary> {
  const why = nvmlFfiUnavailable();
  if (why !== null) throw new Error(why);
  return runtimeName() === "bun" ? await openWithBun(library) : openWithDeno(library);
}

/** A library opened by either runtime: its functions by name, and a close. */
interface Library {
  readonly symbols: Readonly<Record<string, Raw>>;
  close(): void;
}

/** nvmlErrorString's signature: it returns a C string (a pointer, under Deno). */
const ERROR_STRING: Signature = [["i32"], "cstring"];

/**
 * The library through one runtime's `open` (its dlopen, given signatures in bun:ffi's names)
 * and `text` (what nvmlErrorString returned, as a string).
 */
function openWith(
  library: string,
  open: (signatures: Readonly<Record<string, Signature>>) => Library,
  text: (returned: unknown) => string,
): OpenedNvmlLibrary {
  const core = open({ ...CORE, nvmlErrorString: ERROR_STRING });
  let processes: Library | null = null;
  try {
    processes = open({ [PROCESSES]: PROCESSES_SIGNATURE });
  } catch {
    // An older driver: per-process memory is not available, utilisation still is.
  }
  const errorString = core.symbols["nvmlErrorString"]!;
  return {
    library,
    symbols: bindSymbols(
      core.symbols,
      (code) => text(errorString(code)),
      processes?.symbols[PROCESSES] ?? null,
    ),
    close() {
      processes?.close();
      core.close();
    },
  };
}

async function openWithBun(library: string): Promise<OpenedNvmlLibrary> {
  const ffi = (await import("bun:ffi" as string)) as BunFfiModule;
  return openWith(
    library,
    (signatures) =>
      ffi.dlopen(
        library,
        Object.fromEntries(
          Object.entries(signatures).map(([name, [args, returns]]) => [name, { args, returns }]),
        ),
      ),
    String,
  );
}

function openWithDeno(library: string): OpenedNvmlLibrary {
  const deno = (globalThis as unknown as { Deno: DenoFfiNamespace }).Deno;
  const denoType = (type: string) =>
    type === "ptr" ? "buffer" : type === "cstring" ? "pointer" : type;
  return openWith(
    library,
    (signatures) =>
      deno.dlopen(
        library,
        Object.fromEntries(
          Object.entries(signatures).map((
            [name, [args, result]],
          ) => [name, { parameters: args.map(denoType), result: denoType(result) }]),
        ),
      ),
    (pointer) =>
      pointer === null || typeof pointer !== "object"
        ? ""
        : deno.UnsafePointerView.getCString(pointer),
  );
}

function bindSymbols(
  raw: Readonly<Record<string, Raw>>,
  errorString: (code: number) => string,
  processes: Raw | null,
): NvmlSymbols {
  const call = (name: string) => {
    const f = raw[name];
    if (f === undefined) throw new Error(`${name} is not bound`);
    return (...args: readonly unknown[]) => Number(f(...args));
  };
  const init = call("nvmlInit_v2");
  const shutdown = call("nvmlShutdown");
  const count = call("nvmlDeviceGetCount_v2");
  const handle = call("nvmlDeviceGetHandleByIndex_v2");
  const uuid = call("nvmlDeviceGetUUID");
  const utilization = call("nvmlDeviceGetUtilizationRates");
  const memory = call("nvmlDeviceGetMemoryInfo");
  return {
    nvmlInit_v2: () => init(),
    nvmlShutdown: () => shutdown(),
    nvmlErrorString: errorString,
    nvmlDeviceGetCount_v2: (out) => count(out),
    nvmlDeviceGetHandleByIndex_v2: (index, out) => handle(index, out),
    nvmlDeviceGetUUID: (device, out, length) => uuid(device, out, length),
    nvmlDeviceGetUtilizationRates: (device, out) => utilization(device, out),
    nvmlDeviceGetMemoryInfo: (device, out) => memory(device, out),
    nvmlDeviceGetComputeRunningProcesses_v3: processes === null
      ? null
      : (device, count, infos) => Number(processes(device, count, infos)),
  };
}
