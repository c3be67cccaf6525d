/**
 * The worker protocol as frames on a byte stream: every message round-trips, the decoder copes
 * with any chunking, and refuses oversized frames, unknown types, garbage and messages that do
 * not match their type, naming what is wrong.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  encodeFrame,
  FrameDecoder,
  schedulerSideDecoder,
  workerSideDecoder,
} from "../lib/execute/protocol/frames.ts";
import {
  type FromWorker,
  parseFromWorker,
  parseToWorker,
  PROTOCOL_VERSION,
  ProtocolError,
  type ToWorker,
} from "../lib/execute/protocol/messages.ts";

const LAYOUT = {
  totalRoi: { offset: [0, 0], shape: [8, 8] },
  readRoi: { offset: [0, 0], shape: [4, 4] },
  writeRoi: { offset: [1, 1], shape: [2, 2] },
  fit: "valid" as const,
  readWriteConflict: true,
};

const TO_WORKER: ToWorker[] = [
  {
    kind: "init",
    protocol: PROTOCOL_VERSION,
    taskId: "segment",
    workerId: 3,
    pipeline: "/shared/pipeline.ts",
    pipelineSha256: "ab".repeat(32),
    layout: LAYOUT,
    measure: true,
    outputs: [],
    runId: "r1",
    params: { threshold: 0.5 },
  },
  {
    kind: "init",
    protocol: PROTOCOL_VERSION,
    taskId: "segment",
    workerId: 4,
    pipeline: "/shared/pipeline.ts",
    pipelineSha256: null,
    layout: LAYOUT,
    measure: false,
    outputs: [],
    runId: "r1",
    params: null,
    python: {
      module: "/shared/segment.py",
      moduleSha256: "cd".repeat(32),
      process: "process",
      setup: null,
    },
  },
  { kind: "blocks", blocks: Float64Array.of(5, 1, 9, 2, 2 ** 40, 1), count: 3 },
  { kind: "recall", final: false },
  { kind: "recall", final: true },
  { kind: "stop" },
];

const FROM_WORKER: FromWorker[] = [
  { kind: "hello", protocol: PROTOCOL_VERSION, client: "blockwise test", pid: 42, host: "node7" },
  {
    kind: "hello",
    protocol: PROTOCOL_VERSION,
    client: "blockwise-python 3.11",
    pid: 43,
    host: "gpu3",
    slot: "9f".repeat(16),
    nonce: "ab".repeat(32),
  },
  { kind: "ready" },
  { kind: "setup-failed", message: "no GPU", stack: "Error: no GPU\n    at setup" },
  {
    kind: "results",
    count: 2,
    stride: 3,
    records: Float64Array.of(5, 0, 0.25, 9, 1, 1.5),
    errors: [{ position: 9, message: "bad block", stack: "Error: bad block" }],
    cpuSeconds: 0.75,
  },
  {
    kind: "results",
    count: 1,
    stride: 9,
    records: Float64Array.of(7, 0, 0.5, 0.4, 1e9, 4096, 8192, 1.7e9, 312),
    errors: [],
    cpuSeconds: Number.NaN,
  },
  {
    kind: "results",
    count: 1,
    stride: 3,
    records: Float64Array.of(4, 0, 0.1),
    errors: [],
    cpuSeconds: 0.1,
    commits: [{
      position: 4,
      files: [{ output: "stats", path: "4.json", size: 12, sha256: "ab".repeat(32) }],
      content: "cd".repeat(32),
    }],
  },
  { kind: "returned", positions: Float64Array.of(11, 12), count: 2 },
  { kind: "output", stream: "stderr", text: "héllo ✓\n" },
  { kind: "closing", reason: "the worker called process.exit(3)" },
  { kind: "leaving", reason: "its job ends in 50 s, less than the margin of 60 s" },
  { kind: "heartbeat", running: 17, runningFor: 12.5 },
];

/** Frames of all messages, concatenated, fed in chunks of `size` bytes. */
function feed<T>(decoder: FrameDecoder<T>, frames: Uint8Array[], size: number): T[] {
  const total = frames.reduce((n, f) => n + f.length, 0);
  const all = new Uint8Array(total);
  let at = 0;
  for (const f of frames) {
    all.set(f, at);
    at += f.length;
  }
  const out: T[] = [];
  for (let i = 0; i < all.length; i += size) out.push(...decoder.push(all.subarray(i, i + size)));
  return out;
}

function normalise(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_k, v) => {
    if (v instanceof Float64Array) return { f64: [...v].map((x) => Number.isNaN(x) ? "NaN" : x) };
    return typeof v === "number" && Number.isNaN(v) ? "NaN" : v;
  }));
}

describe("worker protocol frames", () => {
  for (const size of [1, 3, 7, 64, 100_000]) {
    it(`round-trips every message in chunks of ${size} bytes`, () => {
      const toWorker = feed(workerSideDecoder(), TO_WORKER.map(encodeFrame), size);
      assert.deepEqual(normalise(toWorker), normalise(TO_WORKER));
      const fromWorker = feed(schedulerSideDecoder(), FROM_WORKER.map(encodeFrame), size);
      assert.deepEqual(normalise(fromWorker), normalise(FROM_WORKER));
      // A decoder that starts small (a handshake's) grows for frames larger than its buffer.
      const small = feed(schedulerSideDecoder(undefined, 16), FROM_WORKER.map(encodeFrame), size);
      assert.deepEqual(normalise(small), normalise(FROM_WORKER));
    });
  }

  it("keeps at most one frame: whole frames are read in place, and a large cut frame's room is given back", () => {
    const frames = FROM_WORKER.map(encodeFrame);
    // Whole frames in one big chunk: nothing is kept.
    const decoder = schedulerSideDecoder(undefined, 1024);
    const many = Array.from({ length: 50 }, () => frames).flat();
    assert.equal(feed(decoder, many, 1_000_000).length, many.length);
    assert.equal(decoder.capacity, 0);
    // A frame cut by a chunk's end is kept until it is whole, then its room is given back.
    const big = encodeFrame({
      kind: "results",
      count: 2000,
      stride: 3,
      records: new Float64Array(6000), // block 0 done, 2,000 times
      errors: [],
      cpuSeconds: 0,
    });
    const withBig = [frames[0]!, big, frames[1]!];
    const cut = feed(decoder, withBig, 4096);
    assert.equal(cut.length, 3);
    assert.equal(cut[1]!.kind, "results");
    assert.equal(decoder.buffered, 0);
    assert.equal(decoder.capacity, 0);
    // A small frame cut by a chunk's end takes the starting room, and keeps it.
    assert.equal(feed(decoder, [frames[0]!], 3).length, 1);
    assert.equal(decoder.capacity, 1024);
  });

  it("round-trips the session frames of the handshake", () => {
    const frames = [
      encodeFrame({ kind: "challenge", nonce: "00ff", proof: "ab12" }),
      encodeFrame({ kind: "auth", mac: "beef" }),
      encodeFrame({ kind: "error", message: "wrong secret" }),
    ];
    assert.deepEqual(feed(schedulerSideDecoder(), frames, 5), [
      { kind: "challenge", nonce: "00ff", proof: "ab12" },
      { kind: "auth", mac: "beef" },
      { kind: "error", message: "wrong secret" },
    ]);
  });

  it("refuses a frame over the cap as soon as its length is read", () => {
    const decoder = schedulerSideDecoder(1024);
    const header = new Uint8Array(4);
    new DataView(header.buffer).setUint32(0, 1_000_000, true);
    assert.throws(() => decoder.push(header), /frame of 1000000 bytes exceeds the cap of 1024/);
  });

  it("refuses garbage: an unknown frame type, a zero length, bad JSON, a short body", () => {
    assert.throws(
      () => schedulerSideDecoder().push(Uint8Array.of(1, 0, 0, 0, 0x7e)),
      /Unknown frame type 0x7e/,
    );
    assert.throws(() => schedulerSideDecoder().push(Uint8Array.of(0, 0, 0, 0)), /length 0/);
    const bad = new TextEncoder().encode("{not json");
    const frame = new Uint8Array(5 + bad.length);
    new DataView(frame.buffer).setUint32(0, 1 + bad.length, true);
    frame[4] = 0x11; // ready
    frame.set(bad, 5);
    assert.throws(() => schedulerSideDecoder().push(frame), /not valid UTF-8 JSON/);
    const short = Uint8Array.of(5, 0, 0, 0, 0x20, 9, 0, 0, 0); // blocks: 9 pairs announced, none sent
    assert.throws(() => workerSideDecoder().push(short), /too short/);
    assert.throws(() =>
      schedulerSideDecoder().push(new TextEncoder().encode("GET / HTTP/1.1\r\n"))
    );
  });

  it("refuses every binary frame whose body is shorter than its content, naming both sizes", () => {
    const frame = (type: number, body: number[]) => {
      const bytes = new Uint8Array(5 + body.length);
      new DataView(bytes.buffer).setUint32(0, 1 + body.length, true);
      bytes[4] = type;
      bytes.set(body, 5);
      return bytes;
    };
    const cases: [string, Uint8Array, "worker" | "scheduler", RegExp][] = [
      [
        "results header",
        frame(0x21, [1, 0, 0, 0]),
        "scheduler",
        /A results frame is 4 bytes.*\(16 bytes\)/,
      ],
      [
        "results records",
        frame(0x21, [2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        "scheduler",
        /A results frame is 16 bytes.*\(64 bytes\)/,
      ],
      [
        "returned positions",
        frame(0x22, [2, 0, 0, 0]),
        "scheduler",
        /A returned frame is 4 bytes.*\(20 bytes\)/,
      ],
      [
        "heartbeat",
        frame(0x25, [0, 0, 0, 0]),
        "scheduler",
        /A heartbeat frame is 4 bytes.*\(16 bytes\)/,
      ],
      ["recall", frame(0x30, []), "worker", /A recall frame is 0 bytes.*\(1 bytes\)/],
      ["blocks header", frame(0x20, [1, 0]), "worker", /A blocks frame is 2 bytes.*\(4 bytes\)/],
    ];
    for (const [what, bytes, side, message] of cases) {
      const decoder = () => side === "worker" ? workerSideDecoder() : schedulerSideDecoder();
      assert.throws(() => decoder().push(bytes), message, what);
      assert.throws(() => decoder().push(bytes), ProtocolError, what);
    }
  });

  it("checks what every message holds, naming the field", () => {
    assert.throws(() => parseFromWorker(null), ProtocolError);
    const init = { ...TO_WORKER[1]! } as Record<string, unknown>;
    assert.throws(
      () => parseToWorker({ ...init, python: { module: "/a.py", process: 3 } }),
      /"init python" message: "process" must be a string/,
    );
    assert.throws(
      () => parseToWorker({ ...init, python: { module: "/a.py", process: "p", setup: 1 } }),
      /"python.setup" must be a string or null/,
    );
    assert.throws(() => parseFromWorker({ kind: "dance" }), /unknown kind: "dance"/);
    assert.throws(
      () =>
        parseFromWorker({
          kind: "results",
          count: 2,
          stride: 3,
          records: new Float64Array(3),
          errors: [],
          cpuSeconds: 0,
        }),
      /holds 3 numbers, fewer than the 6 announced/,
    );
    assert.throws(
      () =>
        parseFromWorker({
          kind: "results",
          count: 1,
          stride: 5,
          records: new Float64Array(5),
          errors: [],
          cpuSeconds: 0,
        }),
      /"stride" must be 3 or 9/,
    );
    assert.throws(
      () =>
        parseFromWorker({
          kind: "results",
          count: 1,
          stride: 3,
          records: Float64Array.of(1, 1, 0),
          errors: [],
          cpuSeconds: 0,
        }),
      /1 failed records but 0 errors/,
    );
    assert.throws(
      () =>
        parseFromWorker({
          kind: "results",
          count: 1,
          stride: 3,
          records: Float64Array.of(1, 4, 0),
          errors: [],
          cpuSeconds: 0,
        }),
      /record 0 has status 4/,
    );
    assert.throws(() => parseFromWorker({ kind: "output", stream: "stdin", text: "" }), /"stream"/);
    assert.throws(
      () => parseToWorker({ kind: "blocks", count: -1, blocks: new Float64Array() }),
      /non-negative/,
    );
    assert.throws(() => parseToWorker({ kind: "recall" }), /"final" must be a boolean/);
    assert.throws(() => parseToWorker({ kind: "init", protocol: 1 }), /"layout"/);
  });
});
