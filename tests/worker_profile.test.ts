/**
 * The worker profile (issue 29): what Python workers (local and remote) and command blocks get
 * in their environment, that a user's own setting and the task's `env` win, that
 * `workerProfile: false` removes it, that `plan` and the run say what was applied, and the
 * refusals of bad `env` and `workerProfile` fields.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { PYTHON, pythonMissing } from "./fixtures/python_peer.ts";
import { describeRun, readFloat32, runArgs, runCli } from "./fixtures/tracking/harness.ts";
import { validatePipeline } from "../lib/pipeline/validate.ts";
import type { TaskConfig } from "../lib/pipeline/spec.ts";
import {
  AFFINITY_THREADS_ENV,
  ALLOCATOR_PROFILE,
  describeWorkerEnvironment,
  THREAD_VARIABLES,
  usableCores,
  withLaunch,
  workerEnvironment,
} from "../lib/execute/worker_profile.ts";

const newDir = scratchDirs("profile");
const missing = pythonMissing();
const SLOW = { timeout: 120_000, ...(missing === null ? {} : { skip: missing }) };
const PROFILE_NAMES = [...Object.keys(ALLOCATOR_PROFILE), ...THREAD_VARIABLES];
const ROIS = `totalRoi: { offset: [0], shape: [4] }, readRoi: { offset: [0], shape: [1] },
  writeRoi: { offset: [0], shape: [1] }, readWriteConflict: false`;

let fieldsDir: string | null = null;

/** The validated task with `fields` (a module m.py exists beside its pipeline). */
function task(fields: string): TaskConfig {
  if (fieldsDir === null) {
    fieldsDir = newDir("fields");
    fs.writeFileSync(path.join(fieldsDir, "m.py"), "def process(block):\n    pass\n");
  }
  const module: unknown = new Function(`return { tasks: [{ id: "t", ${ROIS}, ${fields} }] };`)();
  return validatePipeline(module, path.join(fieldsDir, "p.mjs")).tasks[0]!;
}

/** What blockwise's environment holds of the profile's variables (a user setting wins). */
function expected(name: string, profileValue: string): string {
  return process.env[name] ?? profileValue;
}

describe("workerEnvironment", () => {
  it("give local Python workers the allocator setting and one thread each on 2 cores", () => {
    const t = task(`maxWorkers: 2, python: { module: "m.py" }`);
    const env = workerEnvironment(t, {}, 2);
    assert.deepEqual(env.variables, {
      MALLOC_TOP_PAD_: "268435456",
      OMP_NUM_THREADS: "1",
      OPENBLAS_NUM_THREADS: "1",
      MKL_NUM_THREADS: "1",
      NUMEXPR_NUM_THREADS: "1",
    });
    assert.equal(workerEnvironment(t, {}, 8).variables["OMP_NUM_THREADS"], "4");
  });

  it("size the threads from requires.cpu, and from cpusPerWorker for SLURM workers", () => {
    const cpu = task(`maxWorkers: 4, requires: { cpu: 3 }, command: ["true"]`);
    assert.equal(workerEnvironment(cpu, {}, 2).variables["OPENBLAS_NUM_THREADS"], "3");
    const slurm = task(
      `python: { module: "m.py" }, launch: { kind: "slurm", cpusPerWorker: 6 }`,
    );
    assert.equal(workerEnvironment(slurm, {}, 2).variables["MKL_NUM_THREADS"], "6");
  });

  it("follow the launch the run gives the task (--launcher), not the one it was written with", () => {
    const t = task(`maxWorkers: 2, python: { module: "m.py" }`);
    const slurm = task(`python: { module: "m.py" }, launch: "slurm"`).launch;
    assert.equal(workerEnvironment(t, {}, 2).threads, 1);
    assert.equal(workerEnvironment(withLaunch(t, slurm), {}, 2).threads, "affinity");
    assert.equal(withLaunch(t, undefined), t);
  });

  it("leave a remote worker with no figure to size its pools from its CPU affinity", () => {
    const t = task(`python: { module: "m.py" }, launch: { kind: "command", argv: ["{worker}"] }`);
    const env = workerEnvironment(t, {}, 2);
    assert.equal(env.variables[AFFINITY_THREADS_ENV], "1");
    assert.equal(env.variables["OMP_NUM_THREADS"], undefined);
    assert.equal(env.threads, "affinity");
  });

  it("keep what the user set, and let the task's env override everything", () => {
    const t = task(`python: { module: "m.py" }, env: { MKL_NUM_THREADS: "5", MY_FLAG: "on" }`);
    const env = workerEnvironment(t, { OMP_NUM_THREADS: "7", MALLOC_TOP_PAD_: "0" }, 2);
    assert.equal(env.variables["OMP_NUM_THREADS"], undefined, "inherited, not overwritten");
    assert.equal(env.variables["MALLOC_TOP_PAD_"], undefined);
    assert.equal(env.variables["MKL_NUM_THREADS"], "5");
    assert.equal(env.variables["MY_FLAG"], "on");
    assert.deepEqual(env.kept, {
      MALLOC_TOP_PAD_: "0",
      OMP_NUM_THREADS: "7",
      MKL_NUM_THREADS: "5",
    });
    const line = describeWorkerEnvironment(t, env)!;
    assert.match(line, /yours kept: MALLOC_TOP_PAD_=0 OMP_NUM_THREADS=7 MKL_NUM_THREADS=5/);
    assert.match(line, /env: MKL_NUM_THREADS=5 MY_FLAG=on/);
  });

  it("leave the allocator alone when GLIBC_TUNABLES sets a malloc tunable", () => {
    const t = task(`python: { module: "m.py" }`);
    const tunables = "glibc.malloc.top_pad=1048576";
    const env = workerEnvironment(t, { GLIBC_TUNABLES: tunables }, 2);
    assert.equal(env.variables["MALLOC_TOP_PAD_"], undefined);
    assert.equal(env.kept["GLIBC_TUNABLES"], tunables);
    assert.equal(env.variables["OMP_NUM_THREADS"], "2");
  });

  it("apply nothing with workerProfile: false, but still the task's env", () => {
    const t = task(`command: ["true"], workerProfile: false, env: { A: "1" }`);
    const env = workerEnvironment(t, {}, 2);
    assert.deepEqual(env.variables, { A: "1" });
    assert.match(describeWorkerEnvironment(t, env)!, /worker profile off \(workerProfile: false\)/);
  });

  it("say nothing for Web Worker tasks, and give remote JavaScript workers only env", () => {
    assert.equal(
      describeWorkerEnvironment(task(`process() {}`), workerEnvironment(task(`process() {}`), {})),
      null,
    );
    const remote = task(`process() {}, launch: "slurm", env: { B: "2" }`);
    assert.deepEqual(workerEnvironment(remote, {}, 2).variables, { B: "2" });
  });
});

describe("env and workerProfile fields", () => {
  const refused = (fields: string, pattern: RegExp) =>
    assert.throws(() => task(fields), (e: Error) => pattern.test(e.message));

  it("refuse env on a task whose blocks run in Web Workers", () => {
    refused(`process() {}, env: { A: "1" }`, /field "env" sets variables for worker processes/);
  });

  it("refuse a bad variable name, a non-string value and a non-object", () => {
    refused(`command: ["true"], env: { "1A": "x" }`, /"1A", which is not a valid/);
    refused(`command: ["true"], env: { A: true }`, /variable "A" must be a string; got true/);
    refused(`command: ["true"], env: ["A=1"]`, /field "env" must be an object/);
  });

  it("refuse a workerProfile that is not true or false", () => {
    refused(
      `command: ["true"], workerProfile: "off"`,
      /field "workerProfile" must be true or false/,
    );
  });
});

/** A pipeline file in `dir` with one task `fields`; Python module `task.py` when given. */
function pipeline(dir: string, fields: string, module?: string): string {
  if (module !== undefined) fs.writeFileSync(path.join(dir, "task.py"), module);
  const file = path.join(dir, "p.mjs");
  fs.writeFileSync(file, `export default { tasks: [{ id: "t", ${ROIS}, ${fields} }] };\n`);
  return file;
}

/** A Python module whose blocks write the named variables to env/<id>.json. */
const ENV_DUMP = `import json, os
NAMES = ${JSON.stringify([...PROFILE_NAMES, "MY_FLAG", "BLOCKWISE_PARENT_PID"])}

def process(block):
    os.makedirs("env", exist_ok=True)
    with open(os.path.join("env", "%d.json" % block.id), "w") as f:
        json.dump({n: os.environ.get(n) for n in NAMES}, f)
`;

function dumped(dir: string, block = 0): Record<string, string | null> {
  return JSON.parse(fs.readFileSync(path.join(dir, "env", `${block}.json`), "utf8"));
}

describe("the worker profile reaches worker processes", () => {
  it(
    "reach local Python workers, and say so in plan and in the run's first lines",
    SLOW,
    async () => {
      const dir = newDir("local");
      const file = pipeline(
        dir,
        `maxWorkers: 2, env: { MY_FLAG: "on" }, python: { module: "task.py", interpreter: ${
          JSON.stringify(PYTHON)
        } }`,
        ENV_DUMP,
      );
      const plan = await runCli(["plan", file], { cwd: dir });
      assert.equal(plan.code, 0, describeRun(plan));
      assert.match(plan.stdout, /Task "t" Python workers: worker profile .*MALLOC_TOP_PAD_=/);
      const r = await runCli(runArgs(file, null), { cwd: dir });
      assert.equal(r.code, 0, describeRun(r));
      assert.match(r.stderr + r.stdout, /Task "t" Python workers: worker profile/);
      const threads = String(Math.max(1, Math.floor(usableCores() / 2)));
      for (let id = 0; id < 4; id++) {
        const env = dumped(dir, id);
        assert.equal(env["MALLOC_TOP_PAD_"], expected("MALLOC_TOP_PAD_", "268435456"));
        for (const name of THREAD_VARIABLES) assert.equal(env[name], expected(name, threads));
        assert.equal(env["MY_FLAG"], "on");
        // The run names itself, so a worker whose run died before it connected exits.
        assert.match(env["BLOCKWISE_PARENT_PID"] ?? "", /^\d+$/);
      }
    },
  );

  it(
    "let the user's own setting win, and remove the profile with workerProfile: false",
    SLOW,
    async () => {
      const dir = newDir("user");
      const py = `python: { module: "task.py", interpreter: ${JSON.stringify(PYTHON)} }`;
      const file = pipeline(dir, py, ENV_DUMP);
      const r = await runCli(runArgs(file, null), {
        cwd: dir,
        env: { OMP_NUM_THREADS: "7", MALLOC_TOP_PAD_: "4096" },
      });
      assert.equal(r.code, 0, describeRun(r));
      assert.equal(dumped(dir)["OMP_NUM_THREADS"], "7");
      assert.equal(dumped(dir)["MALLOC_TOP_PAD_"], "4096");
      assert.match(r.stderr + r.stdout, /yours kept: MALLOC_TOP_PAD_=4096 OMP_NUM_THREADS=7/);

      fs.rmSync(path.join(dir, "env"), { recursive: true });
      pipeline(dir, `workerProfile: false, ${py}`);
      const off = await runCli(runArgs(file, null), { cwd: dir });
      assert.equal(off.code, 0, describeRun(off));
      for (const name of PROFILE_NAMES) assert.equal(dumped(dir)[name], process.env[name] ?? null);
      assert.match(off.stderr + off.stdout, /worker profile off/);
    },
  );

  it("reach remote Python workers, whose pools follow their CPU affinity", SLOW, async () => {
    const dir = newDir("remote");
    const file = pipeline(
      dir,
      `launch: { kind: "command", argv: ["{worker}"] }, python: { module: "task.py", interpreter: ${
        JSON.stringify(PYTHON)
      } }`,
      ENV_DUMP,
    );
    const r = await runCli(runArgs(file, null), { cwd: dir });
    assert.equal(r.code, 0, describeRun(r));
    const env = dumped(dir);
    assert.equal(env["MALLOC_TOP_PAD_"], expected("MALLOC_TOP_PAD_", "268435456"));
    const affinity = fs.readFileSync("/proc/self/status", "utf8").match(
      /Cpus_allowed_list:\s*(\S+)/,
    )?.[1] ?? "";
    const cores = affinity.split(",").reduce((n, part) => {
      const [a, b] = part.split("-").map(Number);
      return n + (b === undefined ? 1 : b - a! + 1);
    }, 0);
    for (const name of THREAD_VARIABLES) assert.equal(env[name], expected(name, String(cores)));
  });

  it("reach command blocks", SLOW, async () => {
    const dir = newDir("command");
    const names = [...PROFILE_NAMES, "MY_FLAG"];
    fs.writeFileSync(
      path.join(dir, "dump.sh"),
      `mkdir -p env\necho "${names.map((n) => `${n}=\${${n}-unset}`).join(" ")}" > env/$1.txt\n`,
    );
    const file = pipeline(
      dir,
      `maxWorkers: 1, env: { MY_FLAG: "yes" }, cwd: ".", command: ["sh", "dump.sh", "{block_id}"]`,
    );
    const r = await runCli(runArgs(file, null), { cwd: dir });
    assert.equal(r.code, 0, describeRun(r));
    assert.match(r.stderr + r.stdout, /Task "t" command blocks: worker profile/);
    const line = fs.readFileSync(path.join(dir, "env", "3.txt"), "utf8");
    assert.match(line, new RegExp(`MALLOC_TOP_PAD_=${expected("MALLOC_TOP_PAD_", "268435456")}`));
    assert.match(line, /MY_FLAG=yes/);
    for (const name of THREAD_VARIABLES) assert.doesNotMatch(line, new RegExp(`${name}=unset`));
  });
});

/**
 * A Python module whose blocks burn about 40 ms of CPU each and write their process's CPU time
 * (user + system) after setup and after every block to cpu/<pid>-<setup|last>.
 */
const CPU_BURN = `import os

def cpu_now():
    t = os.times()
    return t.user + t.system

def write(kind):
    os.makedirs("cpu", exist_ok=True)
    with open(os.path.join("cpu", "%d-%s" % (os.getpid(), kind)), "w") as f:
        f.write(repr(cpu_now()))

def setup():
    write("setup")

def process(block, _state):
    until = cpu_now() + 0.04
    total = 0
    while cpu_now() < until:
        total += sum(range(2000))
    write("last")
`;

describe("resource tracking stays true", () => {
  it(
    "sum the blocks' cpu_seconds to within 5 % of the Python workers' own CPU",
    SLOW,
    async () => {
      const dir = newDir("cpu");
      const file = pipeline(
        dir,
        `totalRoi: { offset: [0], shape: [48] }, maxWorkers: 2,
         python: { module: "task.py", setup: "setup", interpreter: ${JSON.stringify(PYTHON)} }`,
        CPU_BURN,
      );
      const tracking = path.join(dir, "tracking");
      const r = await runCli(runArgs(file, tracking, ["--resource-tracking"]), { cwd: dir });
      assert.equal(r.code, 0, describeRun(r));
      const ledger = readFloat32(path.join(tracking, "t"), "cpu_seconds");
      const blocks = [...ledger.slice(0, 48)].reduce((a, b) => a + b, 0);
      // Each worker's CPU from the end of its setup to the end of its last block.
      const files = fs.readdirSync(path.join(dir, "cpu"));
      const pids = new Set(files.map((f) => f.split("-")[0]!));
      let workers = 0;
      for (const pid of pids) {
        const read = (kind: string) =>
          Number(fs.readFileSync(path.join(dir, "cpu", `${pid}-${kind}`), "utf8"));
        workers += read("last") - read("setup");
      }
      assert.ok(workers > 1.5, `the workers used ${workers} s of CPU`);
      const off = Math.abs(blocks - workers) / workers;
      assert.ok(
        off <= 0.05,
        `blocks ${blocks.toFixed(3)} s against workers ${workers.toFixed(3)} s`,
      );
      assert.match(r.stdout + r.stderr, /faults\/block/);
    },
  );
});

describe("the summary's worker log line", () => {
  it(
    "names local Python workers' logs as such, and no folder when no worker started",
    SLOW,
    async () => {
      const dir = newDir("logs");
      const file = pipeline(
        dir,
        `python: { module: "task.py", interpreter: ${JSON.stringify(PYTHON)} }`,
        ENV_DUMP,
      );
      const tracking = path.join(dir, "tracking");
      const first = await runCli(runArgs(file, tracking), { cwd: dir });
      assert.equal(first.code, 0, describeRun(first));
      const line = (first.stdout + first.stderr).split("\n").find((l) => l.includes("worker logs"));
      const folder = /^Python worker logs +(\S+)\/<task>/.exec(line ?? "")?.[1];
      assert.ok(folder !== undefined && folder.includes("/.workers/"), line);
      assert.ok(fs.existsSync(folder), `${folder} exists`);
      // Every block done: no worker starts, so no log folder is named.
      const again = await runCli(runArgs(file, tracking), { cwd: dir });
      assert.equal(again.code, 0, describeRun(again));
      assert.doesNotMatch(again.stdout + again.stderr, /worker logs/);
    },
  );
});
