/**
 * A worker's per-block resource figures (resource tracking), written into its result records.
 *
 * Reading the thread's CPU and I/O counters costs a few microseconds (two `/proc` reads), more
 * than a short block takes: read after every block, they cost a million-block run of no-op
 * blocks most of its time. So a block that ran at least `SHORT_BLOCK_SECONDS` is measured on its
 * own, while shorter blocks in a row are measured together (up to `GROUP_BLOCKS` of them, or
 * `GROUP_SECONDS` of their wall time) and share the group's CPU time and I/O bytes in proportion
 * to their wall time (page faults too). A long block that ends such a group shares it too. Totals stay exact; peak
 * RSS and the finishing time are each block's own.
 */

import { RECORD_SECONDS } from "./protocol/messages.ts";
import { Usage } from "../run/block_report.ts";

/** What the meter reads: cumulative counters of the calling thread. */
export interface ThreadCounters {
  /** CPU seconds of this thread (NaN when unknown). */
  cpuSeconds(): number;
  /** Bytes read and written through syscalls by this thread so far. */
  io(): { readonly read: number; readonly write: number };
  /** Peak resident set size of the process, bytes (cheap: may be a recent reading). */
  peakRssBytes(): number;
  /** Minor page faults of this thread so far (NaN when unknown). */
  minorFaults(): number;
}

export const SHORT_BLOCK_SECONDS = 50e-6;
export const GROUP_BLOCKS = 64;
export const GROUP_SECONDS = 1e-3;

const CPU = RECORD_SECONDS + Usage.CpuSeconds;
const RSS = RECORD_SECONDS + Usage.PeakRssBytes;
const READ = RECORD_SECONDS + Usage.IoReadBytes;
const WRITE = RECORD_SECONDS + Usage.IoWriteBytes;
const FINISHED = RECORD_SECONDS + Usage.FinishedAt;
const WALL = RECORD_SECONDS + Usage.WallSeconds;
const FAULTS = RECORD_SECONDS + Usage.MinorFaults;

export class BlockMeter {
  readonly #counters: ThreadCounters;
  readonly #now: () => number;
  /** Record offsets of the blocks measured together so far. */
  readonly #pending = new Int32Array(GROUP_BLOCKS);
  #count = 0;
  #wall = 0;
  #cpu0 = 0;
  #read0 = 0;
  #write0 = 0;
  #faults0 = 0;

  /** `now`: seconds since the epoch, for a record's finishing time when `ended` is not told. */
  constructor(counters: ThreadCounters, now: () => number = () => Date.now() / 1000) {
    this.#counters = counters;
    this.#now = now;
  }

  /** Take the counters' current values as the start of the next block. */
  start(): void {
    this.#count = 0;
    this.#wall = 0;
    this.#cpu0 = this.#counters.cpuSeconds();
    const io = this.#counters.io();
    this.#read0 = io.read;
    this.#write0 = io.write;
    this.#faults0 = this.#counters.minorFaults();
  }

  /**
   * The block whose record starts at `at` (its wall seconds already written) just ended: write
   * its peak RSS and finishing time, and its CPU and I/O now or with the group it joins.
   * `finishedAt` (seconds since the epoch): the instant its wall time was measured to, so that
   * `finishedAt - wall` is when it started, never before the block ahead of it ended.
   */
  ended(records: Float64Array, at: number, finishedAt = this.#now()): void {
    const seconds = records[at + WALL]!;
    records[at + RSS] = this.#counters.peakRssBytes();
    records[at + FINISHED] = finishedAt;
    this.#pending[this.#count++] = at;
    this.#wall += seconds;
    if (
      seconds >= SHORT_BLOCK_SECONDS || this.#count === GROUP_BLOCKS ||
      this.#wall >= GROUP_SECONDS
    ) {
      this.settle(records);
    }
  }

  /** Read the counters and share them out to the blocks waiting for their figures. */
  settle(records: Float64Array): void {
    const n = this.#count;
    if (n === 0) return;
    const cpu1 = this.#counters.cpuSeconds();
    const io = this.#counters.io();
    const cpu = cpu1 - this.#cpu0;
    const read = io.read - this.#read0;
    const write = io.write - this.#write0;
    const faults1 = this.#counters.minorFaults();
    const faults = faults1 - this.#faults0;
    const wall = this.#wall;
    let readLeft = read;
    let writeLeft = write;
    let faultsLeft = faults;
    for (let i = 0; i < n; i++) {
      const at = this.#pending[i]!;
      const share = wall > 0 ? records[at + WALL]! / wall : 1 / n;
      records[at + CPU] = cpu * share;
      // Whole bytes; the last block takes what rounding left, so the group's sum is exact.
      const r = i === n - 1 ? readLeft : Math.floor(read * share);
      const w = i === n - 1 ? writeLeft : Math.floor(write * share);
      records[at + READ] = r;
      records[at + WRITE] = w;
      readLeft -= r;
      writeLeft -= w;
      const f = i === n - 1 ? faultsLeft : Math.floor(faults * share);
      records[at + FAULTS] = f;
      faultsLeft -= f;
    }
    this.#cpu0 = cpu1;
    this.#read0 = io.read;
    this.#write0 = io.write;
    this.#faults0 = faults1;
    this.#count = 0;
    this.#wall = 0;
  }
}
