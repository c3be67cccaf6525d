/**
 * The profile reader behind bench/fleet_profile.ts: jitdump files become perf maps, perf script
 * output becomes samples, and samples are counted by side and kind over the run only.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  jitdumpSymbols,
  KindTally,
  perfMap,
  PerfScriptReader,
  type Sample,
  sampleKind,
} from "../bench/cpu_profile.ts";

/** A jitdump file: its header, then records built by the caller. */
function jitdump(pid: number, records: Uint8Array[]): Uint8Array {
  const header = new Uint8Array(40);
  const view = new DataView(header.buffer);
  view.setUint32(0, 0x4a695444, true);
  view.setUint32(4, 1, true);
  view.setUint32(8, 40, true);
  view.setUint32(20, pid, true);
  const size = records.reduce((n, r) => n + r.length, header.length);
  const out = new Uint8Array(size);
  out.set(header, 0);
  let at = header.length;
  for (const r of records) {
    out.set(r, at);
    at += r.length;
  }
  return out;
}

function codeLoad(start: bigint, size: bigint, name: string, codeBytes = 8): Uint8Array {
  const nameBytes = new TextEncoder().encode(name);
  const total = 16 + 40 + nameBytes.length + 1 + codeBytes;
  const record = new Uint8Array(total);
  const view = new DataView(record.buffer);
  view.setUint32(0, 0, true); // JIT_CODE_LOAD
  view.setUint32(4, total, true);
  view.setBigUint64(16 + 16, start, true);
  view.setBigUint64(16 + 24, size, true);
  record.set(nameBytes, 16 + 40);
  return record;
}

function otherRecord(id: number, total: number): Uint8Array {
  const record = new Uint8Array(total);
  const view = new DataView(record.buffer);
  view.setUint32(0, id, true);
  view.setUint32(4, total, true);
  return record;
}

describe("jitdump files", () => {
  it("reads the process and every code load, skips other records and stops at a cut one", () => {
    const cut = codeLoad(0x3000n, 0x10n, "JSC-FTL: cut#Zz").subarray(0, 30);
    const file = jitdump(4242, [
      codeLoad(0x7f0000001000n, 0x80n, "JSC-DFG: fill#AbCdEf"),
      otherRecord(2, 40), // a code move: not a load
      codeLoad(0x7f0000002000n, 0x1a0n, "JSC-Baseline: #pump#Q1w2E3"),
      cut,
    ]);
    const { pid, symbols } = jitdumpSymbols(file);
    assert.equal(pid, 4242);
    assert.deepEqual(symbols.map((s) => s.name), [
      "JSC-DFG: fill#AbCdEf",
      "JSC-Baseline: #pump#Q1w2E3",
    ]);
    assert.equal(
      perfMap(symbols),
      "7f0000001000 80 JSC-DFG: fill#AbCdEf\n7f0000002000 1a0 JSC-Baseline: #pump#Q1w2E3\n",
    );
  });

  it("refuses a file that is not a jitdump, saying which files it reads", () => {
    const text = new TextEncoder().encode("not a jitdump file at all, just some words");
    assert.equal(text.length, 42);
    assert.throws(
      () => jitdumpSymbols(text),
      /Not a jitdump file: it does not start with "JiTD" \(42 bytes\); pass the jit-PID files/,
    );
  });
});

const SCRIPT = [
  "bun  100/100  10.500000: ",
  "\t    7fae0581d5df JSC-DFG: fill#AbCdEf (/tmp/perf-100.map)",
  "\t         18562c4 [unknown] (/bin/bun.exe)",
  "",
  "bun  100/100  10.600000: ",
  "\tffffffff82237486 tcp_sendmsg ([kernel.kallsyms])",
  "\tffffffff82237400 __x64_sys_sendto ([kernel.kallsyms])",
  "\t    7fae0581d5df JSC-DFG: send#AbCdEf (/tmp/perf-100.map)",
  "",
  "JITWorker  100/103  10.700000: ",
  "\t         18562c4 [unknown] (/bin/bun.exe)",
  "",
  "JSC PerfLog  200/207  10.700000: ",
  "\tffffffff82237486 ext4_write ([kernel.kallsyms])",
  "",
  "bun.exe  200/200  10.800000: ",
  "\t    7ffd12345678 __vdso_clock_gettime ([vdso])",
  "\t    7fae0581d5df JSC-FTL: #run#Cy (/tmp/perf-200.map)",
  "",
  "bun.exe  200/200  10.900000: ",
  "\tffffffff81000000 clear_page ([kernel.kallsyms])",
  "\tffffffff81000100 exc_page_fault ([kernel.kallsyms])",
  "",
  "bun  100/100  12.000000: ",
  "\t    7fae0581d5df JSC-DFG: fill#AbCdEf (/tmp/perf-100.map)",
].join("\n");

function samplesOf(text: string): Sample[] {
  const out: Sample[] = [];
  const reader = new PerfScriptReader((s) => out.push(s));
  for (const line of text.split("\n")) reader.line(line);
  reader.end();
  return out;
}

describe("perf script samples", () => {
  it("reads each sample's thread, time and stack, innermost frame first", () => {
    const samples = samplesOf(SCRIPT);
    assert.equal(samples.length, 7);
    assert.deepEqual(samples[3]!.stack, [{ symbol: "ext4_write", object: "[kernel.kallsyms]" }]);
    assert.deepEqual(
      [samples[3]!.command, samples[3]!.pid, samples[3]!.tid, samples[3]!.time],
      ["JSC PerfLog", 200, 207, 10.7],
    );
    assert.equal(samples[1]!.stack[1]!.symbol, "__x64_sys_sendto");
  });

  it("counts each sample once by kind: the thread first, then what the main thread was doing", () => {
    assert.deepEqual(samplesOf(SCRIPT).map(sampleKind), [
      "compiled JavaScript",
      "kernel: send and receive",
      "JIT compiler threads",
      "jitdump writer (the profile's own cost)",
      "clock reads",
      "kernel: page faults",
      "compiled JavaScript",
    ]);
  });

  it("tallies by side inside the run only", () => {
    const tally = new KindTally(10, 11, (pid) => pid === 100 ? "scheduler" : "simulators");
    for (const s of samplesOf(SCRIPT)) tally.add(s);
    assert.equal(tally.total, 6, "the sample after the run's end is left out");
    assert.equal(tally.of("scheduler", "compiled JavaScript"), 1);
    assert.equal(tally.of("scheduler", "JIT compiler threads"), 1);
    assert.equal(tally.of("simulators", "clock reads"), 1);
    assert.equal(tally.of("simulators", "compiled JavaScript"), 0);
  });
});
