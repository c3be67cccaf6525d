/**
 * What a run's CPU time is made of, from `perf record -g` over a scheduler and the processes it
 * starts (`bench/fleet_profile.ts`): every sample is counted once, by process side (the scheduler
 * or the simulators), by thread (event loop, JIT compiler, the rest) and, for an event loop, by
 * kind of work: compiled JavaScript, the runtime's own code (its interpreter, sockets, garbage
 * collector, JSON), clock reads, and the kernel's work by what the process asked of it.
 *
 * perf cannot name JIT-compiled code by itself. JavaScriptCore writes what it compiles to a
 * jitdump file when started with `BUN_JSC_useJITDump=1` (in TMPDIR, `jit-PID-...`);
 * `jitdumpSymbols` reads one and `perfMap` turns it into the `/tmp/perf-PID.map` that
 * `perf script` reads for that process.
 */

/** One piece of code the JIT wrote: its address range and name ("JSC-DFG: fill#AbCdEf"). */
export interface JitSymbol {
  readonly start: bigint;
  readonly size: bigint;
  readonly name: string;
}

const JITDUMP_MAGIC = 0x4a695444; // "JiTD"
const JIT_CODE_LOAD = 0;
/** File header: magic, version, header size, ELF machine, padding, pid, timestamp, flags. */
const HEADER_PID_AT = 20;
/** A record's header: id, total size, timestamp. */
const RECORD_HEADER_BYTES = 16;
/** JIT_CODE_LOAD after its header: pid, tid, vma, code address, code size, code index. */
const CODE_LOAD_FIELDS_BYTES = 40;

/** The process and the code loads of a jitdump file (perf's format, tools/perf/util/jitdump.h). */
export function jitdumpSymbols(bytes: Uint8Array): { pid: number; symbols: JitSymbol[] } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 40 || view.getUint32(0, true) !== JITDUMP_MAGIC) {
    throw new Error(
      `Not a jitdump file: it does not start with "JiTD" (${bytes.length} bytes); pass the jit-PID files JavaScriptCore writes with BUN_JSC_useJITDump=1`,
    );
  }
  const pid = view.getUint32(HEADER_PID_AT, true);
  const symbols: JitSymbol[] = [];
  const decoder = new TextDecoder();
  let at = view.getUint32(8, true);
  // A record still being written when the process ended is cut: stop at it.
  while (at + RECORD_HEADER_BYTES <= bytes.length) {
    const id = view.getUint32(at, true);
    const size = view.getUint32(at + 4, true);
    if (size < RECORD_HEADER_BYTES || at + size > bytes.length) break;
    if (id === JIT_CODE_LOAD) {
      const fields = at + RECORD_HEADER_BYTES;
      const nameAt = fields + CODE_LOAD_FIELDS_BYTES;
      const nameEnd = bytes.indexOf(0, nameAt);
      if (nameEnd < 0 || nameEnd >= at + size) break;
      symbols.push({
        start: view.getBigUint64(fields + 16, true),
        size: view.getBigUint64(fields + 24, true),
        name: decoder.decode(bytes.subarray(nameAt, nameEnd)).replaceAll("\n", " "),
      });
    }
    at += size;
  }
  return { pid, symbols };
}

/** The lines of a `/tmp/perf-PID.map`: "START SIZE NAME" in hex. */
export function perfMap(symbols: readonly JitSymbol[]): string {
  return symbols.map((s) => `${s.start.toString(16)} ${s.size.toString(16)} ${s.name}\n`).join(
    "",
  );
}

/** One frame of a sample's stack, innermost first: its symbol and the object it is in. */
export interface Frame {
  readonly symbol: string;
  readonly object: string;
}

export interface Sample {
  readonly command: string;
  readonly pid: number;
  readonly tid: number;
  /** Seconds, in the clock perf recorded with (`-k CLOCK_REALTIME`: since the epoch). */
  readonly time: number;
  readonly stack: readonly Frame[];
}

const SAMPLE_HEADER = /^(.+?)\s+(\d+)\/(\d+)\s+(\d+\.\d+):\s*$/;
const STACK_FRAME = /^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$/;

/**
 * Read `perf script -F comm,pid,tid,time,ip,sym,dso` output (with call stacks) line by line:
 * `line` takes each line and calls `sample` for each sample once its stack is complete;
 * `end` flushes the last one.
 */
export class PerfScriptReader {
  readonly #sample: (sample: Sample) => void;
  #header: Omit<Sample, "stack"> | null = null;
  #stack: Frame[] = [];

  constructor(sample: (sample: Sample) => void) {
    this.#sample = sample;
  }

  line(text: string): void {
    if (text.trim() === "") return;
    if (!text.startsWith("\t") && !text.startsWith(" ")) {
      this.end();
      const m = SAMPLE_HEADER.exec(text.trimStart());
      if (m === null) return;
      this.#header = { command: m[1]!, pid: Number(m[2]), tid: Number(m[3]), time: Number(m[4]) };
      return;
    }
    const m = STACK_FRAME.exec(text);
    if (m !== null && this.#header !== null) this.#stack.push({ symbol: m[1]!, object: m[2]! });
  }

  end(): void {
    if (this.#header !== null) this.#sample({ ...this.#header, stack: this.#stack });
    this.#header = null;
    this.#stack = [];
  }
}

/** The kinds of work a sample is counted as; `sampleKind` decides. */
export const KINDS = [
  "compiled JavaScript",
  "the runtime's own code (interpreter, sockets, GC, JSON)",
  "clock reads",
  "kernel: send and receive",
  "kernel: connect, accept, close",
  "kernel: page faults",
  "kernel: epoll",
  "kernel: other",
  "JIT compiler threads",
  "jitdump writer (the profile's own cost)",
  "other threads (GC helpers, allocator)",
] as const;
export type Kind = typeof KINDS[number];

const CONNECTIONS = new Set([
  "__x64_sys_connect",
  "__x64_sys_accept4",
  "__x64_sys_close",
  "__x64_sys_socket",
  "__x64_sys_bind",
  "__x64_sys_shutdown",
]);
const TRANSFERS = new Set([
  "__x64_sys_sendto",
  "__x64_sys_recvfrom",
  "__x64_sys_write",
  "__x64_sys_read",
  "__x64_sys_writev",
  "__x64_sys_readv",
]);

const isKernel = (f: Frame) => f.object.includes("kernel");

/**
 * What a sample was doing. A thread other than the process's main one is a JIT compiler
 * (JavaScriptCore names them JITWorker), the jitdump writer, or something else; on the main
 * thread the innermost frame decides, and for the kernel the system call or fault it serves.
 */
export function sampleKind(sample: Sample): Kind {
  if (sample.tid !== sample.pid) {
    if (sample.command.startsWith("JITWorker")) return "JIT compiler threads";
    if (sample.command.startsWith("JSC PerfLog")) return "jitdump writer (the profile's own cost)";
    return "other threads (GC helpers, allocator)";
  }
  const kernel = sample.stack.filter(isKernel).map((f) => f.symbol);
  if (kernel.length > 0) {
    if (kernel.some((s) => s.includes("page_fault"))) return "kernel: page faults";
    if (kernel.some((s) => CONNECTIONS.has(s))) return "kernel: connect, accept, close";
    if (kernel.some((s) => TRANSFERS.has(s))) return "kernel: send and receive";
    if (kernel.some((s) => s.startsWith("__x64_sys_epoll"))) return "kernel: epoll";
    return "kernel: other";
  }
  const leaf = sample.stack[0];
  if (leaf === undefined) return "the runtime's own code (interpreter, sockets, GC, JSON)";
  if (leaf.object.includes("vdso")) return "clock reads";
  if (leaf.symbol.startsWith("JSC-")) return "compiled JavaScript";
  return "the runtime's own code (interpreter, sockets, GC, JSON)";
}

/** Samples per (side, kind) inside a time window; `side` says whose process a pid is. */
export class KindTally {
  readonly #counts = new Map<string, number>();
  #total = 0;

  constructor(
    readonly from: number,
    readonly to: number,
    readonly side: (pid: number) => string,
  ) {}

  get total(): number {
    return this.#total;
  }

  add(sample: Sample): void {
    if (sample.time < this.from || sample.time > this.to) return;
    const key = `${this.side(sample.pid)}\t${sampleKind(sample)}`;
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
    this.#total++;
  }

  of(side: string, kind: Kind): number {
    return this.#counts.get(`${side}\t${kind}`) ?? 0;
  }
}
