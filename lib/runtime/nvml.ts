/**
 * The NVIDIA management library (NVML, libnvidia-ml.so.1) read through FFI: device count, UUIDs,
 * utilisation, device memory and one process's device memory. Design: docs/design/GPU.md.
 *
 * `openNvml()` never throws: without the library, without FFI, or when nvmlInit_v2 fails it
 * returns `{ ok: false, reason }`. Once open, every call returns its figures or an `NvmlError`
 * value (a call failing, a device fallen off the bus, the library closed): a run keeps going.
 *
 * The structs are read at nvml.h's offsets (little-endian hosts):
 *   nvmlUtilization_t  { gpu u32 @0, memory u32 @4 }                          8 bytes
 *   nvmlMemory_t       { total u64 @0, free u64 @8, used u64 @16 }           24 bytes
 *   nvmlProcessInfo_t  { pid u32 @0, (4 bytes padding), usedGpuMemory u64 @8,
 *                        gpuInstanceId u32 @16, computeInstanceId u32 @20 }  24 bytes
 * (the _v3 process call takes nvmlProcessInfo_t, which nvml.h defines as nvmlProcessInfo_v2_t).
 */

import * as fs from "node:fs";
import process from "node:process";
import { type NvmlSymbols, openNvmlLibrary } from "./nvml_ffi.ts";

/** The library loaded unless BLOCKWISE_NVML names another (a path) or says "off". */
export const NVML_LIBRARY = "libnvidia-ml.so.1";
export const NVML_ENV = "BLOCKWISE_NVML";

export const UTILIZATION_BYTES = 8;
export const MEMORY_BYTES = 24;
export const PROCESS_INFO_BYTES = 24;
export const PROCESS_PID_OFFSET = 0;
export const PROCESS_USED_MEMORY_OFFSET = 8;

/** nvmlReturn_t values this module acts on. */
export const NVML_SUCCESS = 0;
export const NVML_ERROR_INSUFFICIENT_SIZE = 7;
export const NVML_ERROR_GPU_IS_LOST = 15;
/** usedGpuMemory when the driver cannot tell (Windows WDDM, some vGPU set-ups). */
const VALUE_NOT_AVAILABLE = 0xffff_ffff_ffff_ffffn;
const UUID_BUFFER_BYTES = 96;
/** Room for this many processes at first; grown when NVML says more are running. */
const FIRST_PROCESS_CAPACITY = 16;
const PROCESS_RETRIES = 4;

/** A call that did not give its figures, and why (NVML's own message where it gave one). */
export interface NvmlError {
  readonly error: string;
}

/** One device's utilisation (percent of the last sample period with a kernel running), memory. */
export interface NvmlSample {
  readonly utilPct: number;
  /** Percent of the period the device memory was read or written. */
  readonly memUtilPct: number;
  readonly memUsedBytes: number;
  readonly memTotalBytes: number;
}

/**
 * Whose device memory to count: one pid, or every listed process a predicate accepts (a command
 * block's process group, say: see `inProcessGroup`).
 */
export type ProcessMatch = number | ((pid: number) => boolean);

export interface Nvml {
  /** What was loaded: a soname or a path. */
  readonly library: string;
  /** Devices NVML sees (all of the machine's, whatever CUDA_VISIBLE_DEVICES says). */
  deviceCount(): number | NvmlError;
  /** The device's UUID ("GPU-..."), as CUDA_VISIBLE_DEVICES may name it. */
  uuid(deviceIndex: number): string | NvmlError;
  sample(deviceIndex: number): NvmlSample | NvmlError;
  /**
   * Bytes of device memory the matching processes hold on the device (0 when none has a
   * context there); a number (exact below 2^53 bytes, 8 PiB).
   */
  processMemory(deviceIndex: number, pid: ProcessMatch): number | NvmlError;
  /** nvmlShutdown and unload; later calls return an NvmlError. Idempotent. */
  close(): void;
}

export type NvmlOpen =
  | { readonly ok: true; readonly nvml: Nvml }
  | { readonly ok: false; readonly reason: string };

export interface OpenNvmlOptions {
  /** Environment to read BLOCKWISE_NVML from (default: process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export function isNvmlError(value: unknown): value is NvmlError {
  return typeof value === "object" && value !== null && "error" in value;
}

/** The library BLOCKWISE_NVML asks for, or null for "off". */
export function nvmlLibraryChoice(
  env: Readonly<Record<string, string | undefined>> = process.env,
): string | null {
  const wanted = env[NVML_ENV]?.trim() ?? "";
  if (wanted === "") return NVML_LIBRARY;
  if (wanted.toLowerCase() === "off") return null;
  return wanted;
}

/** Load NVML and initialise it; never throws. */
export async function openNvml(options: OpenNvmlOptions = {}): Promise<NvmlOpen> {
  const library = nvmlLibraryChoice(options.env ?? process.env);
  if (library === null) return { ok: false, reason: `${NVML_ENV}=off: GPU figures not read` };
  let opened;
  try {
    opened = await openNvmlLibrary(library);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { ok: false, reason: `cannot load ${library}: ${why}` };
  }
  let code: number;
  try {
    code = opened.symbols.nvmlInit_v2();
  } catch (error) {
    opened.close();
    return { ok: false, reason: `nvmlInit_v2 in ${library} threw: ${String(error)}` };
  }
  if (code !== NVML_SUCCESS) {
    const message = errorText(opened.symbols, code);
    opened.close();
    return { ok: false, reason: `nvmlInit_v2 in ${library} failed: ${message}` };
  }
  return { ok: true, nvml: new NvmlSession(library, opened.symbols, () => opened.close()) };
}

/**
 * The `{ deviceCount(): number | null }` a device pool asks (null: no count, for the reason the
 * open or the call gave). `opened` is openNvml's result; the session stays open.
 */
export function nvmlDeviceCounter(opened: NvmlOpen): { deviceCount(): number | null } {
  return {
    deviceCount() {
      if (!opened.ok) return null;
      const n = opened.nvml.deviceCount();
      return isNvmlError(n) ? null : n;
    },
  };
}

/**
 * The process group `pid` belongs to (Linux, /proc/PID/stat), or null when it is gone or this
 * is not Linux.
 */
export function processGroupOf(pid: number): number | null {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return null;
  }
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const group = Number(fields[2]);
  return Number.isInteger(group) ? group : null;
}

/**
 * A `ProcessMatch` of no process: a worker without a process of its own (a Web Worker, a thread
 * of a daisy script) reads its devices' utilisation and records no device memory, since its
 * process's memory is every thread's (docs/design/GPU.md).
 */
export const NO_PROCESS: ProcessMatch = () => false;

/** A `ProcessMatch` for every process in the group led by `leader` (a command's group). */
export function inProcessGroup(leader: number): (pid: number) => boolean {
  return (pid) => pid === leader || processGroupOf(pid) === leader;
}

function errorText(symbols: NvmlSymbols, code: number): string {
  let text = "";
  try {
    text = symbols.nvmlErrorString(code);
  } catch {
    // Leave only the code.
  }
  return text === "" ? `NVML error ${code}` : `${text} (NVML error ${code})`;
}

class NvmlSession implements Nvml {
  readonly library: string;
  #symbols: NvmlSymbols | null;
  readonly #unload: () => void;
  readonly #handles = new Map<number, bigint>();
  readonly #count = new Uint32Array(1);
  readonly #handle = new BigUint64Array(1);
  readonly #utilization = new Uint8Array(UTILIZATION_BYTES);
  readonly #memory = new Uint8Array(MEMORY_BYTES);
  #processes = new Uint8Array(FIRST_PROCESS_CAPACITY * PROCESS_INFO_BYTES);

  constructor(library: string, symbols: NvmlSymbols, unload: () => void) {
    this.library = library;
    this.#symbols = symbols;
    this.#unload = unload;
  }

  deviceCount(): number | NvmlError {
    return this.#call("nvmlDeviceGetCount_v2", null, (s) => s.nvmlDeviceGetCount_v2(this.#count)) ??
      this.#count[0]!;
  }

  uuid(deviceIndex: number): string | NvmlError {
    const buffer = new Uint8Array(UUID_BUFFER_BYTES);
    const failed = this.#onDevice(
      "nvmlDeviceGetUUID",
      deviceIndex,
      (s, h) => s.nvmlDeviceGetUUID(h, buffer, buffer.length),
    );
    if (failed !== null) return failed;
    const end = buffer.indexOf(0);
    return new TextDecoder().decode(buffer.subarray(0, end < 0 ? buffer.length : end));
  }

  sample(deviceIndex: number): NvmlSample | NvmlError {
    const u = this.#utilization;
    const failedU = this.#onDevice(
      "nvmlDeviceGetUtilizationRates",
      deviceIndex,
      (s, h) => s.nvmlDeviceGetUtilizationRates(h, u),
    );
    if (failedU !== null) return failedU;
    const m = this.#memory;
    const failedM = this.#onDevice(
      "nvmlDeviceGetMemoryInfo",
      deviceIndex,
      (s, h) => s.nvmlDeviceGetMemoryInfo(h, m),
    );
    if (failedM !== null) return failedM;
    const uv = new DataView(u.buffer, u.byteOffset, u.byteLength);
    const mv = new DataView(m.buffer, m.byteOffset, m.byteLength);
    return {
      utilPct: uv.getUint32(0, true),
      memUtilPct: uv.getUint32(4, true),
      memTotalBytes: Number(mv.getBigUint64(0, true)),
      memUsedBytes: Number(mv.getBigUint64(16, true)),
    };
  }

  processMemory(deviceIndex: number, pid: ProcessMatch): number | NvmlError {
    const name = "nvmlDeviceGetComputeRunningProcesses_v3";
    if (this.#symbols !== null && this.#symbols.nvmlDeviceGetComputeRunningProcesses_v3 === null) {
      return { error: `${this.library} has no ${name} (driver older than NVML API 11)` };
    }
    for (let attempt = 0; attempt < PROCESS_RETRIES; attempt++) {
      const capacity = this.#processes.length / PROCESS_INFO_BYTES;
      this.#count[0] = capacity;
      let code = NVML_SUCCESS;
      const failed = this.#onDevice(name, deviceIndex, (s, h) => {
        code = s.nvmlDeviceGetComputeRunningProcesses_v3!(h, this.#count, this.#processes);
        return code === NVML_ERROR_INSUFFICIENT_SIZE ? NVML_SUCCESS : code;
      });
      if (failed !== null) return failed;
      if (code === NVML_ERROR_INSUFFICIENT_SIZE) {
        // More processes than room: NVML wrote how many it needs; leave room for newcomers.
        const needed = Math.max(this.#count[0]!, capacity) * 2;
        this.#processes = new Uint8Array(needed * PROCESS_INFO_BYTES);
        continue;
      }
      return this.#findProcess(Math.min(this.#count[0]!, capacity), pid);
    }
    return { error: `${name}(device ${deviceIndex}): the process list kept growing` };
  }

  close(): void {
    const symbols = this.#symbols;
    if (symbols === null) return;
    this.#symbols = null;
    this.#handles.clear();
    try {
      symbols.nvmlShutdown();
    } finally {
      this.#unload();
    }
  }

  #findProcess(listed: number, match: ProcessMatch): number | NvmlError {
    const view = new DataView(this.#processes.buffer);
    let bytes = 0n;
    for (let i = 0; i < listed; i++) {
      const at = i * PROCESS_INFO_BYTES;
      const pid = view.getUint32(at + PROCESS_PID_OFFSET, true);
      if (typeof match === "number" ? pid !== match : !match(pid)) continue;
      const used = view.getBigUint64(at + PROCESS_USED_MEMORY_OFFSET, true);
      if (used === VALUE_NOT_AVAILABLE) {
        return { error: `NVML cannot tell the device memory of process ${pid} (not available)` };
      }
      // A process is listed once per device, but add up in case the driver splits it.
      bytes += used;
    }
    return Number(bytes);
  }

  /** The device's handle (asked once, then kept), or why there is none. */
  #handleOf(deviceIndex: number): bigint | NvmlError {
    const known = this.#handles.get(deviceIndex);
    if (known !== undefined) return known;
    if (!Number.isInteger(deviceIndex) || deviceIndex < 0 || deviceIndex > 0xffff_ffff) {
      return { error: `no device index ${deviceIndex}` };
    }
    const failed = this.#call(
      "nvmlDeviceGetHandleByIndex_v2",
      deviceIndex,
      (s) => s.nvmlDeviceGetHandleByIndex_v2(deviceIndex, this.#handle),
    );
    if (failed !== null) return failed;
    const handle = this.#handle[0]!;
    this.#handles.set(deviceIndex, handle);
    return handle;
  }

  #onDevice(
    name: string,
    deviceIndex: number,
    run: (symbols: NvmlSymbols, handle: bigint) => number,
  ): NvmlError | null {
    const handle = this.#handleOf(deviceIndex);
    if (isNvmlError(handle)) return handle;
    return this.#call(name, deviceIndex, (s) => run(s, handle));
  }

  /** Runs one NVML call; null on success, else the error value (never throws). */
  #call(
    name: string,
    deviceIndex: number | null,
    run: (symbols: NvmlSymbols) => number,
  ): NvmlError | null {
    const symbols = this.#symbols;
    const where = deviceIndex === null ? name : `${name}(device ${deviceIndex})`;
    if (symbols === null) return { error: `${where}: NVML was closed` };
    let code: number;
    try {
      code = run(symbols);
    } catch (error) {
      return { error: `${where} threw: ${String(error)}` };
    }
    if (code === NVML_SUCCESS) return null;
    return { error: `${where}: ${errorText(symbols, code)}` };
  }
}
