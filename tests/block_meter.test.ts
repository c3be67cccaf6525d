/**
 * Per-block resource figures in a worker (lib/execute/block_meter.ts): a block long enough is
 * measured on its own; runs of short blocks are measured together and share the figures in
 * proportion to their wall time, with exact totals.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  BlockMeter,
  GROUP_BLOCKS,
  SHORT_BLOCK_SECONDS,
  type ThreadCounters,
} from "../lib/execute/block_meter.ts";
import { RECORD_SECONDS, RECORD_STRIDE_MEASURED } from "../lib/execute/protocol/messages.ts";
import { Usage } from "../lib/run/block_report.ts";

/** Counters the test moves by hand, counting how often they are read. */
class FakeCounters implements ThreadCounters {
  cpu = 10;
  read = 1_000;
  write = 2_000;
  rss = 5_000_000;
  faults = 300;
  reads = 0;

  cpuSeconds(): number {
    this.reads++;
    return this.cpu;
  }

  io(): { read: number; write: number } {
    return { read: this.read, write: this.write };
  }

  peakRssBytes(): number {
    return this.rss;
  }

  minorFaults(): number {
    return this.faults;
  }
}

const field = (records: Float64Array, block: number, usage: Usage): number =>
  records[block * RECORD_STRIDE_MEASURED + RECORD_SECONDS + usage]!;

function setup(): { counters: FakeCounters; meter: BlockMeter; records: Float64Array } {
  const counters = new FakeCounters();
  let clock = 1_700_000_000;
  const meter = new BlockMeter(counters, () => clock++);
  meter.start();
  return { counters, meter, records: new Float64Array(RECORD_STRIDE_MEASURED * 256) };
}

/** Block `i` ran for `seconds`, using `cpu` seconds and reading/writing the given bytes. */
function run(
  s: ReturnType<typeof setup>,
  i: number,
  seconds: number,
  use: { cpu?: number; read?: number; write?: number; rss?: number; faults?: number } = {},
): void {
  s.counters.cpu += use.cpu ?? 0;
  s.counters.faults += use.faults ?? 0;
  s.counters.read += use.read ?? 0;
  s.counters.write += use.write ?? 0;
  if (use.rss !== undefined) s.counters.rss = use.rss;
  const at = i * RECORD_STRIDE_MEASURED;
  s.records[at + RECORD_SECONDS + Usage.WallSeconds] = seconds;
  s.meter.ended(s.records, at);
}

describe("BlockMeter", () => {
  it("measures a block that is not short on its own", () => {
    const s = setup();
    run(s, 0, 0.5, { cpu: 0.4, read: 4096, write: 100, rss: 6_000_000, faults: 250 });
    run(s, 1, 0.001, { cpu: 0.001, read: 0, write: 7, rss: 7_000_000 });
    assert.equal(field(s.records, 0, Usage.MinorFaults), 250);
    assert.equal(field(s.records, 1, Usage.MinorFaults), 0);
    assert.ok(Math.abs(field(s.records, 0, Usage.CpuSeconds) - 0.4) < 1e-9);
    assert.equal(field(s.records, 0, Usage.IoReadBytes), 4096);
    assert.equal(field(s.records, 0, Usage.IoWriteBytes), 100);
    assert.equal(field(s.records, 0, Usage.PeakRssBytes), 6_000_000);
    assert.equal(field(s.records, 1, Usage.IoWriteBytes), 7);
    assert.equal(field(s.records, 1, Usage.PeakRssBytes), 7_000_000);
    assert.equal(field(s.records, 0, Usage.FinishedAt), 1_700_000_000);
    assert.equal(field(s.records, 1, Usage.FinishedAt), 1_700_000_001);
    assert.equal(s.counters.reads, 3, "read at the start and after each block");
  });

  it("short blocks share their run's figures by wall time; totals are exact", () => {
    const s = setup();
    const short = SHORT_BLOCK_SECONDS / 10;
    run(s, 0, short, { cpu: 1e-6, read: 10, faults: 5 });
    run(s, 1, 2 * short, { cpu: 1e-6, write: 3, faults: 2 });
    run(s, 2, short, { cpu: 2e-6, read: 1 });
    assert.equal(s.counters.reads, 1, "no reading after a short block");
    // Not written yet: settled when the records leave the worker.
    assert.equal(field(s.records, 0, Usage.IoReadBytes), 0);
    s.meter.settle(s.records);
    assert.equal(s.counters.reads, 2);
    const cpu = [0, 1, 2].map((i) => field(s.records, i, Usage.CpuSeconds));
    const read = [0, 1, 2].map((i) => field(s.records, i, Usage.IoReadBytes));
    const write = [0, 1, 2].map((i) => field(s.records, i, Usage.IoWriteBytes));
    assert.ok(Math.abs(cpu[0]! - 1e-6) < 1e-12 && Math.abs(cpu[1]! - 2e-6) < 1e-12);
    assert.ok(Math.abs(cpu.reduce((a, b) => a + b) - 4e-6) < 1e-12);
    assert.deepEqual(read, [2, 5, 4]);
    assert.deepEqual(write, [0, 1, 2]);
    const faults = [0, 1, 2].map((i) => field(s.records, i, Usage.MinorFaults));
    assert.deepEqual(faults, [1, 3, 3], "whole faults by wall time; the last takes the rest");
    for (const bytes of [...read, ...write]) assert.ok(Number.isInteger(bytes));
    s.meter.settle(s.records); // nothing pending: no reading
    assert.equal(s.counters.reads, 2);
  });

  it("a long block ends the run of short ones before it and shares it", () => {
    const s = setup();
    run(s, 0, SHORT_BLOCK_SECONDS / 2, { cpu: 0 });
    run(s, 1, SHORT_BLOCK_SECONDS * 1.5, { cpu: 0.002 });
    assert.equal(s.counters.reads, 2);
    assert.ok(Math.abs(field(s.records, 0, Usage.CpuSeconds) - 0.0005) < 1e-12);
    assert.ok(Math.abs(field(s.records, 1, Usage.CpuSeconds) - 0.0015) < 1e-12);
  });

  it(`reads the counters at least every ${GROUP_BLOCKS} blocks, also of zero wall time`, () => {
    const s = setup();
    for (let i = 0; i < GROUP_BLOCKS; i++) run(s, i, 0, { read: 1 });
    assert.equal(s.counters.reads, 2);
    for (let i = 0; i < GROUP_BLOCKS; i++) {
      assert.equal(field(s.records, i, Usage.IoReadBytes), 1, `block ${i}`);
    }
  });
});
