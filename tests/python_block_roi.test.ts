/**
 * The ROIs of a Python task's blocks are blockwise.geometry.Roi values (the daisy API's Roi, one
 * source: python/blockwise/geometry.py, written beside the client as blockwise_geometry.py):
 * grow, intersect, contains, shift and to_slices work in a process function, and the class is
 * the installed package's when that is the same file; a read ROI that begins before the array
 * fails its block with to_slices' error naming the ROI (numpy would wrap the negative start);
 * the client's folder is written whole, once, by concurrent writers, and
 * `blockwise worker --python-client-dir DIR` writes it for a hand-joining user.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { assertAllBalanced, countersOf, withTimeout } from "./fixtures/parallel/harness.ts";
import { PYTHON, pythonMissing } from "./fixtures/python_peer.ts";
import { describeRun, REPO, runCli } from "./fixtures/tracking/harness.ts";
import { loadPipeline } from "../lib/pipeline/mod.ts";
import { buildPipelineGraph, localExecutorFactory, runParallel } from "../lib/execute/mod.ts";
import type { BlockFailure, RunResult } from "../lib/run/run_types.ts";
import { RemoteWorkers } from "../lib/remote/remote_workers.ts";
import { TaskLayout } from "../lib/blocks/mod.ts";
import {
  PYTHON_CLIENT_FILE,
  PYTHON_GEOMETRY_FILE,
  pythonClientFolderName,
  writePythonClient,
} from "../lib/remote/python_client.ts";
import {
  PYTHON_CLIENT_SOURCE,
  PYTHON_GEOMETRY_SOURCE,
} from "../lib/remote/python_client_source.ts";

const newDir = scratchDirs("pyroi");
const missing = pythonMissing();
const SLOW = { timeout: 120_000, ...(missing === null ? {} : { skip: missing }) };
const PACKAGE = path.join(REPO, "python");

/** Run the pipeline `tasks` (the array's source) with `task.py` beside it. */
async function run(
  dir: string,
  tasks: string,
  python: string,
): Promise<{ result: RunResult; failures: BlockFailure[] }> {
  fs.writeFileSync(path.join(dir, "task.py"), python);
  const file = path.join(dir, "pipeline.mjs");
  fs.writeFileSync(file, `export default { tasks: [${tasks}] };\n`);
  const pipeline = await loadPipeline(file);
  const failures: BlockFailure[] = [];
  const remote = await RemoteWorkers.open({
    pipeline,
    logDir: path.join(dir, "worker-logs"),
    runId: "test-run",
    log: () => {},
    pythonClientDir: path.join(dir, "client"),
  });
  assert.ok(remote !== null);
  try {
    const result = await withTimeout(
      runParallel(pipeline, buildPipelineGraph(pipeline), {
        executorFactory: remote.factory(localExecutorFactory),
        observer: { blockFailed: (f) => failures.push(f) },
      }),
      100_000,
      "the run",
    );
    return { result, failures };
  } finally {
    await remote.close();
  }
}

interface Row {
  readonly index: number[];
  readonly module: string;
  readonly same_as_package: boolean | null;
  readonly coordinate: boolean;
  readonly read: [number[], number[]];
  readonly write: [number[], number[]];
  readonly grown_inside: boolean;
  readonly contains: boolean[];
  readonly shifted: number[];
  readonly sum: number[];
  readonly slices: number[][];
  readonly refused: string;
}

function rows(dir: string): Row[] {
  return fs.readFileSync(path.join(dir, "log.jsonl"), "utf8").split("\n").filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Row);
}

/** A 40x40 volume in 10x10 blocks with 2 voxels of context, cut at the border (shrink). */
const SHRINK = `totalRoi: { offset: [0, 0], shape: [40, 40] },
  readRoi: { offset: [-2, -2], shape: [14, 14] }, writeRoi: { offset: [0, 0], shape: [10, 10] },
  fit: "shrink", maxWorkers: 2, maxRetries: 0`;

const GEOMETRY_TASK = `import importlib, json, os, sys

from blockwise_geometry import Coordinate, Roi

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log.jsonl")
VOLUME = Roi((0, 0), (40, 40))


def process(block):
    read, write = block.read_roi, block.write_roi
    try:
        package = importlib.import_module("blockwise.geometry")
        same = type(read) is package.Roi and type(write) is package.Roi
    except ImportError:
        same = None
    try:
        read.shift(-100).to_slices()
        refused = ""
    except ValueError as error:
        refused = str(error)
    row = dict(
        index=list(block.index),
        module=type(read).__module__,
        same_as_package=same,
        coordinate=type(read.offset) is Coordinate and type(write.end) is Coordinate,
        read=[list(read.offset), list(read.shape)],
        write=[list(write.offset), list(write.shape)],
        # shrink: the read ROI is the write ROI grown by the context, cut to the volume
        grown_inside=write.grow(2, 2).intersect(VOLUME) == read,
        contains=[read.contains(write), VOLUME.contains(read), read.contains(write.offset),
                  write.contains(write.end)],
        shifted=list(write.shift((1, 2)).offset),
        sum=list(read.offset + write.shape),
        slices=[[s.start, s.stop] for s in write.to_slices(origin=read.offset)],
        refused=refused,
    )
    with open(LOG, "a") as f:
        f.write(json.dumps(row) + "\\n")
`;

describe("a Python task's block ROIs", () => {
  it(
    "are blockwise.geometry.Roi values: grow, intersect, contains, shift and to_slices work",
    SLOW,
    async () => {
      const dir = newDir("geometry");
      const { result, failures } = await run(
        dir,
        `{ id: "t", ${SHRINK}, python: { module: "task.py" } }`,
        GEOMETRY_TASK,
      );
      assertAllBalanced(result);
      assert.deepEqual(failures, []);
      assert.equal(countersOf(result, "t").completed, 16);
      const layout = new TaskLayout({
        totalRoi: { offset: [0, 0], shape: [40, 40] },
        readRoi: { offset: [-2, -2], shape: [14, 14] },
        writeRoi: { offset: [0, 0], shape: [10, 10] },
        fit: "shrink",
        readWriteConflict: true,
      });
      const got = rows(dir);
      assert.equal(got.length, 16);
      for (const row of got) {
        const p = layout.positionOf(row.index);
        const read = layout.readRoiOf(p);
        const write = layout.writeRoiOf(p);
        const where = `block ${row.index}`;
        // The client's own copy (no package on the path here), or the package's when installed.
        assert.ok(
          row.module === "blockwise_geometry" ||
            (row.module === "blockwise.geometry" && row.same_as_package === true),
          `${where}: ${row.module}`,
        );
        assert.ok(row.coordinate, `${where}: offsets, shapes and ends are Coordinates`);
        assert.deepEqual(row.read, [[...read.offset], [...read.shape]], where);
        assert.deepEqual(row.write, [[...write.offset], [...write.shape]], where);
        assert.ok(row.grown_inside, where);
        assert.deepEqual(row.contains, [true, true, true, false], where);
        assert.deepEqual(row.shifted, [write.offset[0]! + 1, write.offset[1]! + 2], where);
        assert.deepEqual(row.sum, read.offset.map((o, d) => o + write.shape[d]!), where);
        assert.deepEqual(
          row.slices,
          write.offset.map((o, d) => [o - read.offset[d]!, o - read.offset[d]! + write.shape[d]!]),
          where,
        );
        assert.match(row.refused, /^Roi\(\(-?\d+, -?\d+\), \(\d+, \d+\)\)\.to_slices\(\): /);
      }
    },
  );

  it(
    "are the installed package's Roi class (blockwise.geometry) when it is the same file",
    SLOW,
    async () => {
      const dir = newDir("package");
      const { result, failures } = await run(
        dir,
        `{ id: "t", ${SHRINK}, env: { PYTHONPATH: ${JSON.stringify(PACKAGE)} },
          python: { module: "task.py" } }`,
        GEOMETRY_TASK,
      );
      assertAllBalanced(result);
      assert.deepEqual(failures, []);
      const got = rows(dir);
      assert.equal(got.length, 16);
      for (const row of got) {
        assert.equal(row.module, "blockwise.geometry");
        assert.equal(row.same_as_package, true);
        assert.ok(row.grown_inside);
      }
    },
  );

  it(
    "fail a block whose read ROI begins before the array with to_slices' error, naming the ROI",
    SLOW,
    async () => {
      const dir = newDir("negative");
      // The total ROI is the 40x40 volume grown by the context: edge blocks read from -2.
      const grown = `totalRoi: { offset: [-2, -2], shape: [44, 44] },
        readRoi: { offset: [-2, -2], shape: [14, 14] },
        writeRoi: { offset: [0, 0], shape: [10, 10] }, readWriteConflict: false, maxWorkers: 2,
        maxRetries: 0`;
      const { result, failures } = await run(
        dir,
        `{ id: "naive", ${grown}, python: { module: "task.py", process: "naive" } },
         { id: "fixed", ${grown}, python: { module: "task.py", process: "fixed" } }`,
        `from blockwise_geometry import Roi

VOLUME = Roi((0, 0), (40, 40))
ARRAY = [[0] * 40 for _ in range(40)]


def read(roi):
    rows, columns = roi.to_slices()
    return [row[columns] for row in ARRAY[rows]]


def naive(block):
    read(block.read_roi)


def fixed(block):
    # Only the part of the read ROI inside the array; pad the rest if the algorithm needs it.
    inside = block.read_roi.intersect(VOLUME)
    data = read(inside)
    assert len(data) == inside.shape[0] and len(data[0]) == inside.shape[1]
`,
      );
      assertAllBalanced(result);
      assert.equal(countersOf(result, "fixed").completed, 16);
      assert.equal(countersOf(result, "fixed").failed, 0);
      const naive = countersOf(result, "naive");
      // Blocks in the first row or column read from -2: 4 + 4 - 1 of the 16.
      assert.deepEqual([naive.completed, naive.failed], [9, 7]);
      assert.equal(failures.length, 7);
      for (const f of failures) {
        assert.equal(f.taskId, "naive");
        const [i, j] = f.index as number[];
        assert.ok(i === 0 || j === 0, `block ${f.index} failed`);
        const axis = i === 0 ? 0 : 1;
        const roi = `Roi((${i! * 10 - 2}, ${j! * 10 - 2}), (14, 14))`;
        assert.ok(
          f.message.startsWith(
            `ValueError: ${roi}.to_slices(): the ROI begins at -2 on axis ${axis}, before the array; numpy would wrap a negative index around to the array's end. Intersect the ROI with the array's ROI first (roi.intersect(array_roi))`,
          ),
          f.message,
        );
        assert.match(f.stack ?? "", /task\.py", line 8, in read\n/);
      }
    },
  );
});

describe("read_block in a Python task", () => {
  const numpy = spawnSync(PYTHON, ["-c", "import numpy"], { encoding: "utf8" });
  const WITH_NUMPY = numpy.status === 0 || missing !== null
    ? SLOW
    : { ...SLOW, skip: "skipped: python3 cannot import numpy" };

  it(
    "reads every edge block's read ROI whole, padded with the fill where it leaves the volume",
    WITH_NUMPY,
    async () => {
      const dir = newDir("read-block");
      // The 40x40 volume grown by the 2-voxel context, as pipelines.md advises.
      const { result, failures } = await run(
        dir,
        `{ id: "t", totalRoi: { offset: [-2, -2], shape: [44, 44] },
          readRoi: { offset: [-2, -2], shape: [14, 14] },
          writeRoi: { offset: [0, 0], shape: [10, 10] }, maxWorkers: 2, maxRetries: 0,
          python: { module: "task.py" } }`,
        `import json, os

import numpy as np
from blockwise_geometry import Roi, read_block

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log.jsonl")
VOLUME = np.arange(1, 40 * 40 + 1, dtype=np.int32).reshape(40, 40)


def process(block):
    read = block.read_roi
    data = read_block(VOLUME, read, fill=-1)
    inside = read.intersect(Roi((0, 0), VOLUME.shape))
    expected = np.full(tuple(read.shape), -1, dtype=np.int32)
    expected[inside.to_slices(origin=read.offset)] = VOLUME[inside.to_slices()]
    row = dict(index=list(block.index), shape=list(data.shape),
               equal=bool((data == expected).all()), padded=int((data == -1).sum()))
    with open(LOG, "a") as f:
        f.write(json.dumps(row) + "\\n")
`,
      );
      assertAllBalanced(result);
      assert.deepEqual(failures, []);
      assert.equal(countersOf(result, "t").completed, 16);
      const got = fs.readFileSync(path.join(dir, "log.jsonl"), "utf8").split("\n")
        .filter((l) => l !== "").map((l) =>
          JSON.parse(l) as { index: number[]; shape: number[]; equal: boolean; padded: number }
        );
      assert.equal(got.length, 16);
      let edges = 0;
      for (const row of got) {
        const [i, j] = row.index as [number, number];
        assert.deepEqual(row.shape, [14, 14], `block ${row.index}`);
        assert.ok(row.equal, `block ${row.index}`);
        // 2 rows or columns stick out on each side at the volume's edge.
        const out = (k: number) => (k === 0 || k === 3 ? 2 : 0);
        const expected = 14 * 14 - (14 - out(i)) * (14 - out(j));
        assert.equal(row.padded, expected, `block ${row.index}`);
        if (expected > 0) edges++;
      }
      assert.equal(edges, 12);
    },
  );
});

describe("the Python client's folder", () => {
  it("holds the client and its geometry module, named by their content, written once", () => {
    const dir = newDir("folder");
    const file = writePythonClient(dir);
    const folder = path.join(dir, pythonClientFolderName());
    assert.equal(file, path.join(folder, PYTHON_CLIENT_FILE));
    assert.match(path.basename(folder), /^blockwise-client-[0-9a-f]{16}$/);
    assert.deepEqual(fs.readdirSync(dir), [path.basename(folder)], "no temporary left");
    assert.deepEqual(fs.readdirSync(folder).sort(), [PYTHON_GEOMETRY_FILE, PYTHON_CLIENT_FILE]);
    assert.equal(fs.readFileSync(file, "utf8"), PYTHON_CLIENT_SOURCE);
    assert.equal(
      fs.readFileSync(path.join(folder, PYTHON_GEOMETRY_FILE), "utf8"),
      PYTHON_GEOMETRY_SOURCE,
    );
    // Written once: a second run reuses it as it is.
    const inode = fs.statSync(folder).ino;
    assert.equal(writePythonClient(dir), file);
    assert.equal(fs.statSync(folder).ino, inode);
    // A damaged folder (an edited file) is replaced whole.
    fs.writeFileSync(path.join(folder, PYTHON_GEOMETRY_FILE), "# edited\n");
    assert.equal(writePythonClient(dir), file);
    assert.equal(
      fs.readFileSync(path.join(folder, PYTHON_GEOMETRY_FILE), "utf8"),
      PYTHON_GEOMETRY_SOURCE,
    );
    assert.deepEqual(fs.readdirSync(dir), [path.basename(folder)], "no temporary left");
  });

  it(
    "is written whole by concurrent `blockwise worker --python-client-dir DIR`, which print its client",
    SLOW,
    async () => {
      const dir = newDir("concurrent");
      const target = path.join(dir, "shared");
      const runs = await Promise.all(
        Array.from({ length: 6 }, () => runCli(["worker", "--python-client-dir", target])),
      );
      const printed = new Set<string>();
      for (const r of runs) {
        assert.equal(r.code, 0, describeRun(r));
        printed.add(r.stdout.trim());
      }
      assert.equal(printed.size, 1);
      const file = [...printed][0]!;
      assert.equal(file, path.join(target, pythonClientFolderName(), PYTHON_CLIENT_FILE));
      assert.deepEqual(fs.readdirSync(target), [pythonClientFolderName()], "no temporary left");
      assert.equal(fs.readFileSync(file, "utf8"), PYTHON_CLIENT_SOURCE);
      assert.equal(
        fs.readFileSync(path.join(path.dirname(file), PYTHON_GEOMETRY_FILE), "utf8"),
        PYTHON_GEOMETRY_SOURCE,
      );
      // The folder's client starts (and, with nothing to connect to, says so).
      const env = { ...process.env };
      delete env["BLOCKWISE_CONNECT"];
      delete env["PYTHONPATH"];
      const started = spawnSync(PYTHON, [file], { encoding: "utf8", env });
      assert.equal(started.status, 2, started.stderr);
      assert.match(started.stderr, /No scheduler to connect to/);
      // The printed file alone, without its geometry module or blockwise's package: the fix.
      const alone = path.join(dir, "alone");
      fs.mkdirSync(alone);
      const printedClient = await runCli(["worker", "--python-client"]);
      fs.writeFileSync(path.join(alone, "client.py"), printedClient.stdout);
      const lonely = spawnSync(PYTHON, ["-S", path.join(alone, "client.py")], {
        encoding: "utf8",
        env,
      });
      assert.notEqual(lonely.status, 0);
      assert.match(
        lonely.stderr,
        /needs blockwise_geometry\.py beside it .*blockwise worker --python-client-dir DIR/,
      );
      const both = await runCli(["worker", "--python-client", "--python-client-dir", target]);
      assert.equal(both.code, 2, describeRun(both));
      assert.match(both.stderr, /Give one of --python-client .* and --python-client-dir DIR/);
    },
  );
});
