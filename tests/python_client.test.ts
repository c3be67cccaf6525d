/**
 * The Python client (workers/python/blockwise_worker.py) against blockwise's own protocol code:
 * it is what the binary carries, it parses as Python 3.8, its handshake and every message it
 * sends pass blockwise's validators, it runs blocks in order and reports them as the JS worker
 * does (errors with tracebacks, resource figures), honours recall, final recall and stop, sends
 * heartbeats naming the running block, exits when the scheduler goes away mid-block, and its
 * geometry and output hashing match TaskLayout and BlockOutputs byte for byte.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as net from "node:net";
import process from "node:process";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { withTimeout } from "./fixtures/parallel/harness.ts";
import {
  CLIENT_FILE,
  GEOMETRY_FILE,
  type Peer,
  PYTHON,
  pythonInit,
  pythonMissing,
  startPeer,
} from "./fixtures/python_peer.ts";
import {
  PYTHON_CLIENT_SOURCE,
  PYTHON_GEOMETRY_SOURCE,
} from "../lib/remote/python_client_source.ts";
import { MAX_HANDSHAKES_PER_ADDRESS, WorkerServer } from "../lib/remote/worker_server.ts";
import { encodeFrame } from "../lib/execute/protocol/frames.ts";
import { embeddedModule } from "../workers/python/embed.ts";
import { type LayoutSpec, TaskLayout } from "../lib/blocks/mod.ts";
import { makeBlock } from "../lib/execute/block.ts";
import { BlockOutputs } from "../lib/outputs/block_outputs.ts";
import type { OutputPlan, ZarrOutputPlan } from "../lib/outputs/output_plan.ts";
import { ownedChunkKeys, stagingLane } from "../lib/outputs/staging.ts";
import { Rng } from "./fixtures/rng.ts";
import type { FromWorker, ResultsMessage } from "../lib/execute/protocol/messages.ts";

const newDir = scratchDirs("pyclient");
const missing = pythonMissing();
const SKIP = missing === null ? {} : { skip: missing };
const SLOW = { timeout: 60_000, ...SKIP };

/** Run `script` with the client importable as `blockwise_worker`; `input` goes to its stdin. */
function python(script: string, input: unknown): unknown {
  const r = spawnSync(
    PYTHON,
    [
      "-c",
      `import sys; sys.path.insert(0, ${JSON.stringify(path.dirname(CLIENT_FILE))})\n${script}`,
    ],
    { input: JSON.stringify(input), encoding: "utf8", maxBuffer: 1 << 28 },
  );
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

function module(dir: string, text: string, name = "task.py"): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

/** Results until `n` records arrived; returns them flattened with the errors and commits. */
async function results(peer: Peer, n: number): Promise<ResultsMessage[]> {
  const out: ResultsMessage[] = [];
  let got = 0;
  while (got < n) {
    const m = await peer.next((x) => x.kind === "results");
    if (m.kind !== "results") throw new Error("unreachable");
    out.push(m);
    got += m.count;
  }
  assert.equal(got, n, "no more records than blocks sent");
  return out;
}

function positionsOf(batches: readonly ResultsMessage[]): number[] {
  return batches.flatMap((b) =>
    Array.from({ length: b.count }, (_, i) => b.records[i * b.stride]!)
  );
}

async function authenticated(peer: Peer): Promise<void> {
  const auth = await peer.next((m) => m.kind === "auth");
  assert.equal(auth.kind === "auth" && auth.mac, peer.expectedMac);
}

describe("the Python client's source", () => {
  it("is what the binary carries, and lib/remote/python_client_source.ts is up to date", () => {
    const text = fs.readFileSync(CLIENT_FILE, "utf8");
    const geometry = fs.readFileSync(GEOMETRY_FILE, "utf8");
    assert.ok(
      PYTHON_CLIENT_SOURCE === text,
      "the embedded client differs from workers/python/blockwise_worker.py: run bun workers/python/embed.ts",
    );
    assert.ok(
      PYTHON_GEOMETRY_SOURCE === geometry,
      "the embedded geometry module differs from python/blockwise/geometry.py: run bun workers/python/embed.ts",
    );
    assert.equal(
      fs.readFileSync(path.join(path.dirname(CLIENT_FILE), "blockwise_geometry.py"), "utf8"),
      geometry,
      "workers/python/blockwise_geometry.py is the package's geometry.py (a symlink)",
    );
    const generated = fs.readFileSync(
      path.join(path.dirname(CLIENT_FILE), "..", "..", "lib", "remote", "python_client_source.ts"),
      "utf8",
    );
    assert.equal(generated, embeddedModule(text, geometry));
  });

  it(
    "parses as Python 3.8 and imports nothing outside the standard library but its geometry",
    SKIP,
    () => {
      const found = python(
        `import ast, json
out = {}
for name, path in json.load(sys.stdin).items():
    tree = ast.parse(open(path).read(), feature_version=(3, 8))
    names = {"load": set(), "lazy": set()}
    def visit(node, where):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            where = "lazy"
        if isinstance(node, ast.Import):
            names[where].update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names[where].add("." * node.level + (node.module or "").split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child, where)
    visit(tree, "load")
    std = getattr(sys, "stdlib_module_names", None)
    out[name] = {k: sorted(n for n in v if std is not None and n not in std) for k, v in names.items()}
print(json.dumps(out))`,
        { client: CLIENT_FILE, geometry: GEOMETRY_FILE },
      );
      // The client's geometry: blockwise_geometry.py beside it (as blockwise writes it), the
      // package's sibling module inside the package, the installed package's otherwise. The
      // geometry's read_block imports numpy when called, never at load.
      assert.deepEqual(found, {
        client: { load: [], lazy: [".", "blockwise"] },
        geometry: { load: [], lazy: ["numpy"] },
      });
    },
  );
});

describe("the Python client's session", () => {
  it(
    "greets, proves the secret for its slot, and refuses a scheduler without it",
    SLOW,
    async () => {
      const peer = await startPeer();
      try {
        assert.equal(peer.hello.kind, "hello");
        assert.match(peer.hello.client, /^blockwise-python /);
        assert.equal(peer.hello.pid, peer.child.pid);
        assert.equal(peer.hello.slot, "5a".repeat(16));
        assert.match(peer.hello.nonce ?? "", /^[0-9a-f]{64}$/);
        await authenticated(peer);
        peer.send({ kind: "stop" });
        assert.deepEqual(await withTimeout(peer.exited, 30_000, "exit"), { code: 0, signal: null });
      } finally {
        peer.child.kill("SIGKILL");
      }
      const impostor = await startPeer({ wrongProof: true });
      const refusal = await impostor.next((m) => m.kind === "error");
      assert.match(refusal.kind === "error" ? refusal.message : "", /could not prove/);
      const exit = await withTimeout(impostor.exited, 30_000, "exit");
      assert.notEqual(exit.code, 0);
    },
  );

  it(
    "runs blocks in order: results, errors with tracebacks, params, attempt, output",
    SLOW,
    async () => {
      const dir = newDir("blocks");
      const file = module(
        dir,
        `import json, os, sys
LOG = os.environ["TEST_LOG"]

def explode(block):
    raise ValueError("bad block %d" % block.index[0])

def process(block):
    with open(LOG, "a") as f:
        f.write(json.dumps([block.task_id, block.id, list(block.index), block.attempt,
                            block.params, block.outputs]) + "\\n")
    if block.index[0] == 3:
        explode(block)
    if block.index[0] == 4:
        print("four", end="")
        print(" is", "fine")
        print("to stderr", file=sys.stderr)
`,
      );
      const log = path.join(dir, "log.jsonl");
      const peer = await startPeer({ env: { TEST_LOG: log } });
      try {
        await authenticated(peer);
        peer.send(pythonInit(file, { params: { sigma: 2 } }));
        assert.equal((await peer.next()).kind, "ready");
        peer.send({
          kind: "blocks",
          count: 6,
          blocks: Float64Array.of(0, 1, 1, 1, 2, 1, 3, 2, 4, 1, 5, 7),
        });
        const batches = await results(peer, 6);
        assert.deepEqual(positionsOf(batches), [0, 1, 2, 3, 4, 5]);
        const errors = batches.flatMap((b) => b.errors);
        assert.equal(errors.length, 1);
        assert.equal(errors[0]!.position, 3);
        assert.equal(errors[0]!.message, "ValueError: bad block 3");
        assert.match(errors[0]!.stack ?? "", /^Traceback \(most recent call last\):/);
        assert.match(errors[0]!.stack ?? "", /line 5, in explode\n/);
        assert.doesNotMatch(
          errors[0]!.stack ?? "",
          /blockwise_worker/,
          "the client's own frame is left out",
        );
        for (const b of batches) {
          assert.equal(b.stride, 3);
          for (let i = 0; i < b.count; i++) {
            assert.equal(b.records[i * 3 + 1], b.records[i * 3] === 3 ? 1 : 0);
            assert.ok(b.records[i * 3 + 2]! >= 0);
          }
        }
        const lines = fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
        assert.deepEqual(lines.map((l) => l[3]), [1, 1, 1, 2, 1, 7]);
        assert.deepEqual(lines[2], ["t", 2, [2], 1, { sigma: 2 }, {}]);
        const out = await peer.next((m) => m.kind === "output" && m.stream === "stdout");
        assert.deepEqual(out, { kind: "output", stream: "stdout", text: "four is fine\n" });
        const err = await peer.next((m) => m.kind === "output" && m.stream === "stderr");
        assert.equal(err.kind === "output" && err.text, "to stderr\n");
        peer.send({ kind: "stop" });
        assert.equal((await withTimeout(peer.exited, 30_000, "exit")).code, 0);
      } finally {
        peer.child.kill("SIGKILL");
      }
    },
  );

  it(
    "measures each block: CPU, peak RSS, I/O, when it finished and its page faults (stride 9)",
    SLOW,
    async () => {
      const dir = newDir("measure");
      const file = module(
        dir,
        `import os
def process(block, state):
    with open(os.path.join(${JSON.stringify(dir)}, "f%d" % block.index[0]), "wb") as f:
        f.write(b"x" * 100000)
    sum(range(200000))
`,
      );
      const peer = await startPeer();
      try {
        await authenticated(peer);
        peer.send(pythonInit(file, { measure: true }));
        assert.equal((await peer.next()).kind, "ready");
        const before = Date.now() / 1000;
        peer.send({ kind: "blocks", count: 3, blocks: Float64Array.of(0, 1, 1, 1, 2, 1) });
        const batches = await results(peer, 3);
        const after = Date.now() / 1000;
        for (const b of batches) {
          assert.equal(b.stride, 9);
          assert.ok(b.cpuSeconds >= 0);
          for (let i = 0; i < b.count; i++) {
            const [, status, seconds, cpu, rss, read, written, at, faults] = b.records.slice(
              i * 9,
              i * 9 + 9,
            );
            assert.ok(Number.isInteger(faults) && faults! >= 0, `${faults} minor faults`);
            assert.equal(status, 0);
            assert.ok(seconds! > 0 && cpu! > 0, `${seconds} s, ${cpu} CPU s`);
            assert.ok(rss! > 1_000_000, `peak RSS ${rss}`);
            assert.ok(read! >= 0);
            if (fs.existsSync("/proc/self/io")) assert.ok(written! >= 100_000, `wrote ${written}`);
            assert.ok(at! >= before - 1 && at! <= after + 1, `finished at ${at}`);
          }
        }
      } finally {
        peer.child.kill("SIGKILL");
      }
    },
  );

  it(
    "hands back unstarted blocks on recall, starts nothing after a final one, stops",
    SLOW,
    async () => {
      const dir = newDir("recall");
      const release = path.join(dir, "release");
      const file = module(
        dir,
        `import os, time
def process(block):
    while block.index[0] == 0 and not os.path.exists(${JSON.stringify(release)}):
        time.sleep(0.01)
`,
      );
      const peer = await startPeer();
      try {
        await authenticated(peer);
        peer.send(pythonInit(file));
        assert.equal((await peer.next()).kind, "ready");
        const blocks = new Float64Array(20);
        for (let i = 0; i < 10; i++) blocks.set([i, 1], 2 * i);
        peer.send({ kind: "blocks", count: 10, blocks });
        // Heartbeats name the running block and how long it has run.
        const first = await peer.next((m) => m.kind === "heartbeat" && m.running === 0);
        const second = await peer.next((m) => m.kind === "heartbeat" && m.running === 0);
        assert.ok(
          first.kind === "heartbeat" && second.kind === "heartbeat" &&
            second.runningFor > first.runningFor,
        );
        peer.send({ kind: "recall", final: false });
        fs.writeFileSync(release, "");
        assert.deepEqual(positionsOf(await results(peer, 1)), [0]);
        const back = await peer.next();
        assert.equal(back.kind, "returned");
        assert.deepEqual(Array.from(back.kind === "returned" ? back.positions : []), [
          1,
          2,
          3,
          4,
          5,
          6,
          7,
          8,
          9,
        ]);
        peer.send({ kind: "blocks", count: 2, blocks: Float64Array.of(20, 1, 21, 1) });
        assert.deepEqual(positionsOf(await results(peer, 2)), [20, 21]);
        peer.send({ kind: "recall", final: true });
        const none = await peer.next();
        assert.deepEqual(none.kind === "returned" && Array.from(none.positions), []);
        peer.send({ kind: "blocks", count: 1, blocks: Float64Array.of(30, 1) });
        const refused = await peer.next();
        assert.deepEqual(refused.kind === "returned" && Array.from(refused.positions), [30]);
        peer.send({ kind: "stop" });
        assert.equal((await withTimeout(peer.exited, 30_000, "exit")).code, 0);
      } finally {
        fs.writeFileSync(release, "");
        peer.child.kill("SIGKILL");
      }
    },
  );

  it(
    "leaves before its job's walltime: says so and hands back what it has not started",
    SLOW,
    async () => {
      const dir = newDir("leaving");
      const release = path.join(dir, "release");
      const file = module(
        dir,
        `import os, time
def process(block):
    while block.index[0] == 0 and not os.path.exists(${JSON.stringify(release)}):
        time.sleep(0.01)
`,
      );
      // The job ends in an hour, inside a margin of two: the first heartbeat finds it too close.
      const peer = await startPeer({
        env: {
          BLOCKWISE_JOB_END_TIME: String(Math.round(Date.now() / 1000) + 3600),
          BLOCKWISE_WALLTIME_MARGIN: "7200",
        },
      });
      try {
        await authenticated(peer);
        peer.send(pythonInit(file));
        assert.equal((await peer.next()).kind, "ready");
        peer.send({ kind: "blocks", count: 3, blocks: Float64Array.of(0, 1, 1, 1, 2, 1) });
        const leaving = await peer.next((m) => m.kind === "leaving");
        assert.match(
          leaving.kind === "leaving" ? leaving.reason : "",
          /its job ends in \d+ s, less than the margin of 7200 s/,
        );
        fs.writeFileSync(release, "");
        assert.deepEqual(positionsOf(await results(peer, 1)), [0]);
        const back = await peer.next((m) => m.kind === "returned");
        assert.deepEqual(back.kind === "returned" && Array.from(back.positions), [1, 2]);
      } finally {
        fs.writeFileSync(release, "");
        peer.child.kill("SIGKILL");
      }
    },
  );

  it("exits by itself when the scheduler goes away while a block runs", SLOW, async () => {
    const dir = newDir("gone");
    const file = module(dir, `import time\ndef process(block):\n    time.sleep(3600)\n`);
    const peer = await startPeer();
    try {
      await authenticated(peer);
      peer.send(pythonInit(file));
      assert.equal((await peer.next()).kind, "ready");
      peer.send({ kind: "blocks", count: 1, blocks: Float64Array.of(0, 1) });
      await peer.next((m) => m.kind === "heartbeat" && m.running === 0);
      peer.close();
      const exit = await withTimeout(peer.exited, 30_000, "the orphaned client's exit");
      assert.equal(exit.code, 1);
      assert.match(peer.stderr(), /closed the connection while a block ran/);
    } finally {
      peer.child.kill("SIGKILL");
    }
  });

  it(
    "reports setup failures: an exception, a missing function, another module file",
    SLOW,
    async () => {
      const dir = newDir("setup");
      const cases: [string, Partial<Parameters<typeof pythonInit>[1]>, RegExp, RegExp | null][] = [
        [
          `def setup():\n    raise RuntimeError("no model")\ndef process(block, state):\n    pass\n`,
          { setup: "setup" },
          /^RuntimeError: no model$/,
          /line 2, in setup/,
        ],
        [
          `def process(block):\n    pass\n`,
          { setup: "load" },
          /has no function load .*python\.setup/,
          null,
        ],
        [`x = 1\n`, {}, /has no function process .*python\.process/, null],
        [`import nonexistent_module_xyz\n`, {}, /^ModuleNotFoundError: No module named/, /line 1/],
      ];
      for (const [text, fields, message, stack] of cases) {
        const file = module(dir, text);
        const peer = await startPeer();
        try {
          await authenticated(peer);
          peer.send(pythonInit(file, fields));
          const m = await peer.next();
          assert.equal(m.kind, "setup-failed", text);
          if (m.kind !== "setup-failed") continue;
          assert.match(m.message, message);
          if (stack === null) assert.equal(m.stack, undefined);
          else assert.match(m.stack ?? "", stack);
        } finally {
          peer.child.kill("SIGKILL");
        }
      }
      const file = module(dir, `def process(block):\n    pass\n`);
      const peer = await startPeer();
      try {
        await authenticated(peer);
        const init = pythonInit(file);
        peer.send({ ...init, python: { ...init.python!, moduleSha256: "0".repeat(64) } });
        const m = await peer.next();
        assert.match(m.kind === "setup-failed" ? m.message : "", /differs from the scheduler's/);
      } finally {
        peer.child.kill("SIGKILL");
      }
    },
  );

  it("announces sys.exit in a block after reporting the blocks before it", SLOW, async () => {
    const dir = newDir("exit");
    const file = module(
      dir,
      `import sys\ndef process(block):\n    if block.index[0] == 2:\n        sys.exit(4)\n`,
    );
    const peer = await startPeer();
    try {
      await authenticated(peer);
      peer.send(pythonInit(file));
      assert.equal((await peer.next()).kind, "ready");
      peer.send({ kind: "blocks", count: 3, blocks: Float64Array.of(0, 1, 1, 1, 2, 1) });
      assert.deepEqual(positionsOf(await results(peer, 2)), [0, 1]);
      const closing: FromWorker | { kind: string } = await peer.next();
      assert.deepEqual(closing, { kind: "closing", reason: "the worker called sys.exit(4)" });
      assert.equal((await withTimeout(peer.exited, 30_000, "exit")).code, 1);
    } finally {
      peer.child.kill("SIGKILL");
    }
  });
});

/** Layouts for the geometry cross-check: every fit, context, negative offsets, 1-D to 4-D. */
function layouts(): LayoutSpec[] {
  const out: LayoutSpec[] = [];
  const roi = (offset: number[], shape: number[]) => ({ offset, shape });
  for (const fit of ["valid", "overhang", "shrink"] as const) {
    out.push(
      {
        totalRoi: roi([0, 0, 0], [100, 90, 80]),
        readRoi: roi([-5, -5, -5], [30, 30, 30]),
        writeRoi: roi([0, 0, 0], [20, 20, 20]),
        fit,
        readWriteConflict: true,
      },
      {
        totalRoi: roi([-17, 3], [53, 41]),
        readRoi: roi([-3, -2], [10, 9]),
        writeRoi: roi([0, 0], [4, 5]),
        fit,
        readWriteConflict: true,
      },
      {
        totalRoi: roi([5], [1001]),
        readRoi: roi([0], [7]),
        writeRoi: roi([2], [3]),
        fit,
        readWriteConflict: false,
      },
      {
        totalRoi: roi([0, 0, 0, 0], [9, 10, 11, 12]),
        readRoi: roi([0, 0, 0, 0], [4, 4, 4, 4]),
        writeRoi: roi([1, 1, 1, 1], [2, 2, 3, 2]),
        fit,
        readWriteConflict: true,
      },
    );
  }
  // A grid index near 10^12 on the first axis: IDs beyond 2^53, exact only as big integers.
  out.push({
    totalRoi: roi([0, 0, 0], [1e12 + 10, 5, 5]),
    readRoi: roi([0, 0, 0], [1e12 + 1, 1, 1]),
    writeRoi: roi([1e12, 0, 0], [1, 1, 1]),
    fit: "valid",
    readWriteConflict: false,
  });
  return out;
}

describe("the Python client's geometry and outputs", () => {
  it(
    "builds the same block (id, index, read and write ROI) as TaskLayout at every position",
    SKIP,
    () => {
      const cases = layouts().map((spec) => {
        const layout = new TaskLayout(spec);
        const n = layout.blockCount;
        const positions = n <= 3000
          ? Array.from({ length: n }, (_, p) => p)
          : Array.from({ length: 500 }, (_, i) => Math.floor((i * n) / 500)).concat([n - 1]);
        return { spec, positions, layout };
      });
      const got = python(
        `import json, blockwise_worker as w
out = []
for case in json.load(sys.stdin):
    layout = w.Layout(case["spec"])
    rows = []
    for p in case["positions"]:
        b = w.Block()
        layout.fill(b, p)
        rows.append([str(b.id), list(b.index), list(b.read_roi.offset), list(b.read_roi.shape),
                     list(b.write_roi.offset), list(b.write_roi.shape)])
    out.append({"count": layout.count, "rows": rows})
print(json.dumps(out))`,
        cases.map(({ spec, positions }) => ({ spec, positions })),
      ) as { count: number; rows: unknown[][] }[];
      let big = 0;
      cases.forEach(({ layout, positions }, c) => {
        assert.equal(got[c]!.count, layout.blockCount, `layout ${c}: block count`);
        positions.forEach((p, i) => {
          const block = makeBlock("t", layout, p, 1);
          if (typeof block.id === "bigint") big++;
          assert.deepEqual(got[c]!.rows[i], [
            String(block.id),
            block.index,
            block.readRoi.offset,
            block.readRoi.shape,
            block.writeRoi.offset,
            block.writeRoi.shape,
          ], `layout ${c} position ${p}`);
        });
      });
      assert.ok(big > 0, "some IDs needed big integers");
    },
  );

  it("puts each block in the same staging lane as stagingLane, big indices too", SKIP, () => {
    const rng = new Rng(11);
    const indices: number[][] = [[0], [1], [15], [2 ** 31 - 1], [2 ** 40 + 3], [7, 0, 2 ** 33]];
    for (let i = 0; i < 400; i++) {
      const dims = 1 + rng.int(4);
      indices.push(Array.from({ length: dims }, () => rng.int(i % 2 === 0 ? 64 : 2 ** 40)));
    }
    const got = python(
      `import json, blockwise_worker as w
print(json.dumps([w.staging_lane(index) for index in json.load(sys.stdin)]))`,
      indices,
    ) as string[];
    const expected = indices.map(stagingLane);
    assert.deepEqual(got, expected);
    assert.equal(new Set(expected).size, 16, "every lane is used");
  });

  it(
    "stages and hashes outputs exactly as BlockOutputs: same locations, files, content hash",
    SKIP,
    () => {
      const dir = newDir("outputs");
      const spec: LayoutSpec = {
        totalRoi: { offset: [0, 0], shape: [40, 40] },
        readRoi: { offset: [0, 0], shape: [8, 8] },
        writeRoi: { offset: [0, 0], shape: [8, 8] },
        fit: "valid",
        readWriteConflict: false,
      };
      const layout = new TaskLayout(spec);
      const plans: OutputPlan[] = [
        {
          kind: "path",
          name: "txt",
          base: path.join(dir, "out"),
          relative: "{task_id}/{block_id}-{{x}}.txt",
          written: "out/{task_id}/{block_id}-{{x}}.txt",
        },
        {
          kind: "path",
          name: "tree",
          base: path.join(dir, "trees"),
          relative: "{index}",
          written: "trees/{index}",
        },
        {
          kind: "zarr",
          name: "z",
          base: path.join(dir, "arr"),
          written: "arr",
          zarrFormat: 3,
          metadataFiles: [{ name: "zarr.json", text: '{"zarr_format": 3, "é": 1}' }],
          offset: [4, 0],
          storedChunk: [4, 8],
          chunkGrid: [11, 5],
          keyEncoding: { name: "default", separator: "/" },
        },
      ];
      const outputs = new BlockOutputs(plans, "run-1");
      const position = 7;
      const block = makeBlock("seg", layout, position, 1);
      const where = outputs.prepare(block);
      fs.writeFileSync(where["txt"]!, "block 7");
      fs.mkdirSync(path.join(where["tree"]!, "b", "ü"), { recursive: true });
      fs.writeFileSync(
        path.join(where["tree"]!, "b", "ü", "x.bin"),
        new Uint8Array(3 << 20).fill(7),
      );
      fs.writeFileSync(path.join(where["tree"]!, "é.txt"), "accent");
      fs.writeFileSync(path.join(where["tree"]!, "Z.txt"), "capital");
      fs.writeFileSync(path.join(where["tree"]!, "😀.txt"), "astral");
      fs.writeFileSync(path.join(where["tree"]!, "\uff5e.txt"), "fullwidth tilde");
      const owned = ownedChunkKeys(plans[2] as ZarrOutputPlan, block.writeRoi);
      assert.deepEqual(owned, ["c/3/2", "c/4/2"]);
      for (const key of owned) {
        fs.mkdirSync(path.join(where["z"]!, "c", key.split("/")[1]!), { recursive: true });
        fs.writeFileSync(path.join(where["z"]!, key), `chunk ${key}`);
      }
      const js = outputs.collect(block, position);
      const script = `import json, blockwise_worker as w
data = json.load(sys.stdin)
layout = w.Layout(data["layout"])
b = w.Block()
b.task_id = "seg"
layout.fill(b, data["position"])
outputs = w.Outputs(data["plans"], "run-1")
where = {p["name"]: outputs.location(p, b) for p in data["plans"]}
try:
    print(json.dumps({"where": where, "commit": outputs.collect(b, data["position"])}))
except w.OutputProblem as e:
    print(json.dumps({"where": where, "error": str(e)}))`;
      const input = { layout: spec, plans, position };
      const py = python(script, input) as {
        where: Record<string, string>;
        commit?: unknown;
        error?: string;
      };
      assert.deepEqual(py.where, where);
      assert.deepEqual(py.commit, js);
      // A chunk outside the block's write ROI fails the attempt, with the same words.
      fs.mkdirSync(path.join(where["z"]!, "c", "0"));
      fs.writeFileSync(path.join(where["z"]!, "c", "0", "0"), "stray");
      const jsError = (() => {
        try {
          outputs.collect(block, position);
          return "";
        } catch (error) {
          return (error as Error).message;
        }
      })();
      assert.match(jsError, /outside its write ROI/);
      assert.equal((python(script, input) as { error: string }).error, jsError);
    },
  );
});

describe("the Python client under a scheduler that stops early", () => {
  it(
    "exits cleanly when told after its proof that the run needs no more workers",
    SLOW,
    async () => {
      const peer = await startPeer();
      try {
        await authenticated(peer);
        // The run ended during the handshake (a scheduler closing says so to everyone still in it).
        peer.send({ kind: "error", message: "refused: the run has ended", later: true });
        assert.deepEqual(await withTimeout(peer.exited, 30_000, "exit"), { code: 0, signal: null });
        assert.match(
          peer.stderr(),
          /The run needs no more workers now: refused: the run has ended/,
        );
      } finally {
        peer.child.kill("SIGKILL");
      }
    },
  );

  it("hands a recall while idle an empty answer", SLOW, async () => {
    const dir = newDir("idle");
    const file = module(dir, `def process(block):\n    pass\n`);
    const peer = await startPeer();
    try {
      await authenticated(peer);
      peer.send(pythonInit(file));
      assert.equal((await peer.next()).kind, "ready");
      peer.send({ kind: "recall", final: false });
      const m = await peer.next();
      assert.deepEqual(m.kind === "returned" && Array.from(m.positions), []);
    } finally {
      peer.child.kill("SIGKILL");
    }
  });
});

/** Whether `pid` runs (a zombie left to a container's init that does not reap counts as gone). */
function running(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

describe("the Python client of a local run that died", () => {
  it("exits within 2 s when its run is SIGKILLed before it connected", SLOW, async () => {
    // A port nobody listens on: the worker keeps retrying its connection.
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const run = spawn(
      "sh",
      ["-c", `BLOCKWISE_PARENT_PID=$$ "$0" "$1" & echo $!; wait`, PYTHON, CLIENT_FILE],
      {
        env: {
          ...process.env,
          BLOCKWISE_SECRET: "a".repeat(64),
          BLOCKWISE_WORKER_SLOT: "0123456789abcdef",
          BLOCKWISE_CONNECT: `127.0.0.1:${port}`,
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    run.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    const pid = await new Promise<number>((resolve) =>
      run.stdout.setEncoding("utf8").once("data", (s: string) => resolve(Number(s.trim())))
    );
    await new Promise((resolve) => setTimeout(resolve, 800));
    assert.ok(running(pid), `the worker retries its connection meanwhile: ${stderr}`);
    run.kill("SIGKILL");
    const killedAt = Date.now();
    while (running(pid) && Date.now() - killedAt < 10_000) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const took = Date.now() - killedAt;
    if (running(pid)) process.kill(pid, "SIGKILL");
    assert.ok(took < 2000, `the worker outlived its run by ${took} ms`);
  });
});

describe("the Python client of a busy scheduler", () => {
  it("comes back when told the scheduler is busy, and is admitted", SLOW, async () => {
    const secret = "b".repeat(64);
    const slot = "0123456789abcdef";
    const log: string[] = [];
    const server = await WorkerServer.start({
      listen: { host: "127.0.0.1", port: 0 },
      secret,
      log: (m) => log.push(m),
    });
    let admitted = 0;
    server.expect(slot, (channel) => {
      admitted++;
      channel.write(encodeFrame({ kind: "stop" }));
      return true;
    });
    // Idle connections from this address hold every handshake slot it may have (for 2 s).
    const idle = Array.from(
      { length: MAX_HANDSHAKES_PER_ADDRESS },
      () => net.connect({ host: "127.0.0.1", port: server.address.port }).on("error", () => {}),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Not spawnSync: the server answers on this thread's event loop.
    const child = spawn(PYTHON, [CLIENT_FILE], {
      env: {
        ...process.env,
        BLOCKWISE_SECRET: secret,
        BLOCKWISE_WORKER_SLOT: slot,
        BLOCKWISE_CONNECT: `127.0.0.1:${server.address.port}`,
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (t: string) => (stderr += t));
    const status = await withTimeout(
      new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code))),
      30_000,
      "the Python worker to end",
    );
    for (const c of idle) c.destroy();
    await server.close();
    assert.equal(status, 0, stderr);
    assert.match(stderr, /The scheduler is busy \(refused: busy: .*\); connecting again in \d+ ms/);
    assert.equal(admitted, 1, log.join("\n"));
  });
});
