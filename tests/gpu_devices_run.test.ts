/**
 * GPUs per worker through the CLI, without a GPU: two workers of a `gpu: 1` task (command blocks,
 * Python workers) see different CUDA_VISIBLE_DEVICES, recorded by the blocks themselves; a
 * Python worker killed mid-run gives its device back and its replacement takes it; `plan` and
 * the run's first lines say which worker gets which device; a pool too small is refused before
 * any block runs.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { pythonMissing } from "./fixtures/python_peer.ts";
import { describeRun, runArgs, runCli } from "./fixtures/tracking/harness.ts";

const newDir = scratchDirs("gpus");
const missing = pythonMissing();
const PYTHON = { timeout: 120_000, ...(missing === null ? {} : { skip: missing }) };

/** A task of `n` one-voxel blocks in 1-D, without conflicts. */
function line(id: string, n: number, extra: string): string {
  return `{
    id: ${JSON.stringify(id)},
    totalRoi: { offset: [0], shape: [${n}] }, readRoi: { offset: [0], shape: [1] },
    writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false,
    ${extra}
  }`;
}

function write(dir: string, tasks: string, python = ""): string {
  if (python !== "") fs.writeFileSync(path.join(dir, "task.py"), python);
  const file = path.join(dir, "pipeline.mjs");
  fs.writeFileSync(file, `export default { tasks: [${tasks}] };\n`);
  return file;
}

interface BlockRecord {
  readonly block: string;
  readonly pid: string;
  readonly cuda: string;
  readonly gpu: string;
}

/** The lines the blocks appended to `env.log`: block, worker pid, CUDA_VISIBLE_DEVICES, BLOCKWISE_GPU. */
function records(dir: string): BlockRecord[] {
  return fs.readFileSync(path.join(dir, "env.log"), "utf8").trim().split("\n").map((l) => {
    const [block, pid, cuda, gpu] = l.split(" ");
    return { block: block!, pid: pid!, cuda: cuda!, gpu: gpu! };
  });
}

/** Per worker process (pid): the devices its blocks saw. */
function devicesByPid(rs: readonly BlockRecord[]): Map<string, Set<string>> {
  const by = new Map<string, Set<string>>();
  for (const r of rs) {
    const set = by.get(r.pid) ?? new Set<string>();
    set.add(r.cuda);
    by.set(r.pid, set);
  }
  return by;
}

// Env without the machine's own GPUs: --resources decides in every test.
const ENV = { CUDA_VISIBLE_DEVICES: "NoDevFiles" };

describe("GPUs per local worker", () => {
  it("gives two command-block workers different CUDA_VISIBLE_DEVICES", async () => {
    const dir = newDir("command");
    // Each command is a process of its own: the slot (the worker) is the parent's device holder.
    const file = write(
      dir,
      line(
        "predict",
        8,
        `maxWorkers: 2, requires: { gpu: 1 },
        command: ["sh", "-c", 'echo "$BLOCKWISE_BLOCK_ID $BLOCKWISE_GPU $CUDA_VISIBLE_DEVICES $BLOCKWISE_GPU" >> env.log; sleep 0.2']`,
      ),
    );
    const r = await runCli(runArgs(file, null, ["--resources", "gpu=3,5"]), { cwd: dir, env: ENV });
    assert.equal(r.code, 0, describeRun(r));
    assert.match(
      r.stderr,
      /Task "predict" GPUs: worker 0 -> device 3, worker 1 -> device 5 \(pool from --resources gpu=3,5\)/,
    );
    const rs = records(dir);
    assert.equal(rs.length, 8);
    for (const x of rs) assert.equal(x.cuda, x.gpu, "BLOCKWISE_GPU names the same devices");
    assert.deepEqual(new Set(rs.map((x) => x.cuda)), new Set(["3", "5"]), "both devices used");
  });

  it(
    "gives two Python workers different devices; a killed worker's device goes to its replacement",
    PYTHON,
    async () => {
      const dir = newDir("python");
      const file = write(
        dir,
        line("predict", 8, `maxWorkers: 2, requires: { gpu: 1 }, python: { module: "task.py" }`),
        `import os, time

def process(block):
    with open("env.log", "a") as f:
        f.write("%d %d %s %s\\n" % (block.id, os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES"),
                                    os.environ.get("BLOCKWISE_GPU")))
    time.sleep(0.15)
    if block.id == 2 and not os.path.exists("killed"):
        open("killed", "w").close()
        os.kill(os.getpid(), 9)
`,
      );
      const r = await runCli(runArgs(file, null, ["--resources", "gpu=2"]), {
        cwd: dir,
        env: ENV,
      });
      assert.equal(r.code, 0, describeRun(r));
      assert.match(r.stderr, /Task "predict" GPUs: worker 0 -> device 0, worker 1 -> device 1/);
      assert.match(
        r.stderr,
        /Task "predict": worker \d+ starts on device [01], given back by worker [01]\b/,
      );
      const rs = records(dir);
      const by = devicesByPid(rs);
      assert.ok(by.size >= 3, `a replacement worker ran: ${JSON.stringify(rs)}`);
      for (const [pid, devices] of by) {
        assert.equal(devices.size, 1, `worker ${pid} kept one device: ${[...devices]}`);
      }
      const killed = rs.find((x) => x.block === "2")!;
      const first = [...by.keys()];
      const replacement = first.slice(2);
      const firstTwo = first.slice(0, 2).map((pid) => [...by.get(pid)!][0]);
      assert.deepEqual(new Set(firstTwo), new Set(["0", "1"]), "the first two had one each");
      for (const pid of replacement) {
        assert.equal([...by.get(pid)!][0], killed.cuda, "the replacement took the freed device");
      }
      assert.ok(rs.filter((x) => x.block === "2").length === 2, "block 2 ran again");
    },
  );

  it("plan says which worker gets which device; too small a pool is refused before running", async () => {
    const dir = newDir("plan");
    const file = write(
      dir,
      line(
        "predict",
        4,
        `maxWorkers: 3, requires: { gpu: 2 }, command: ["sh", "-c", "echo ran >> env.log"]`,
      ),
    );
    const plan = await runCli(["plan", file, "--resources", "gpu=0,1,2,3"], { cwd: dir, env: ENV });
    assert.equal(plan.code, 0, describeRun(plan));
    assert.match(
      plan.stdout,
      /Task "predict" GPUs: worker 0 -> device 0,1, worker 1 -> device 2,3 \(pool from --resources gpu=0,1,2,3\)/,
    );
    // Where a run would be refused, plan warns: it may run where the workers will not.
    const elsewhere = await runCli(["plan", file], {
      cwd: dir,
      env: { CUDA_VISIBLE_DEVICES: "1" },
    });
    assert.equal(elsewhere.code, 0, describeRun(elsewhere));
    assert.match(
      elsewhere.stdout,
      /warning: Task "predict" requires gpu=2 per worker but the run's GPU pool has 1 \(CUDA_VISIBLE_DEVICES=1\).*\(a run here would be refused\)/,
    );
    const json = await runCli(["plan", file, "--json", "--resources", "gpu=0,1,2,3"], {
      cwd: dir,
      env: ENV,
    });
    assert.equal(json.code, 0, describeRun(json));
    assert.deepEqual((JSON.parse(json.stdout) as { tasks: { gpus: unknown }[] }).tasks[0]!.gpus, {
      per_worker: 2,
      by: "pool",
      workers: [["0", "1"], ["2", "3"]],
      pool: "--resources gpu=0,1,2,3",
      shared: false,
    });
    const r = await runCli(runArgs(file, null, ["--resources", "gpu=7"]), {
      cwd: dir,
      env: { CUDA_VISIBLE_DEVICES: "7" },
    });
    assert.equal(r.code, 2, describeRun(r));
    assert.match(
      r.stderr,
      /--resources gpu=7 asks for 7 GPUs but CUDA_VISIBLE_DEVICES=7 makes 1 visible; lower the count to 1/,
    );
    const small = await runCli(runArgs(file, null, ["--resources", "gpu=4,5,6"]), {
      cwd: dir,
      env: ENV,
    });
    assert.equal(small.code, 0, describeRun(small));
    const one = await runCli(runArgs(file, null), { cwd: dir, env: { CUDA_VISIBLE_DEVICES: "9" } });
    assert.equal(one.code, 2, describeRun(one));
    assert.match(
      one.stderr,
      /Task "predict" requires gpu=2 per worker but the run's GPU pool has 1 \(CUDA_VISIBLE_DEVICES=9\); give more devices with --resources gpu=ID,ID,\.\.\./,
    );
    assert.equal(fs.readFileSync(path.join(dir, "env.log"), "utf8").split("\n").length - 1, 4);
  });
});
