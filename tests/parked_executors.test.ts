/**
 * Under a `--resources` budget smaller than the workers the tasks could use, tasks take turns;
 * an idle Web Worker whose task will want it back is parked (out of the budget, set up and warm)
 * instead of exiting, so a turn does not cost a worker start and the task's `setup` again.
 * Driven through the fake-executor rig, whose invariant check after every event also checks
 * that a parked executor holds no block and that parked and working executors of a task are at
 * most its `maxWorkers`. The end-to-end run with real workers counts the setups.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { TARGET_BATCH_MS } from "../lib/execute/dispatch.ts";
import type { Executor } from "../lib/execute/executor.ts";
import { ParkedExecutors } from "../lib/execute/parked_executors.ts";
import { WorkerLifetimes } from "../lib/execute/run_stats.ts";
import type { TaskConfig } from "../lib/pipeline/spec.ts";
import { describeRun, runArgs, runCli } from "./fixtures/tracking/harness.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import type { FakeExecutor } from "./fixtures/fake_executor.ts";
import { Rng } from "./fixtures/rng.ts";
import { linearTask, RunRig } from "./fixtures/run_rig.ts";

const BLOCKS = 120;
/** Blocks of a tenth of a window's time: ten to a window, whatever TARGET_BATCH_MS is. */
const TENTH_WINDOW = TARGET_BATCH_MS / 1000 / 10;
const newDir = scratchDirs("parked-");
/** The end-to-end chain's side: 20 x 20 blocks a task (without parking, task a's setup ran 4 times). */
const SIDE = 200;

interface Turns {
  readonly parkable: boolean;
  readonly requires?: Readonly<Record<string, number>>;
  readonly resources?: Readonly<Record<string, number>>;
  /** Called once per round with the rig, before the executors act. */
  readonly meddle?: (rig: RunRig) => void;
}

/** a -> b (temporary) -> c, one worker a task and two cpus for all three: they take turns. */
async function takeTurns(o: Turns): Promise<RunRig> {
  const fields = { maxWorkers: 1, requires: o.requires ?? { cpu: 1 } };
  const rig = RunRig.start([
    linearTask("a", BLOCKS, fields),
    linearTask("b", BLOCKS, { ...fields, upstream: ["a"] }),
    linearTask("c", BLOCKS, { ...fields, upstream: ["b"] }),
  ], {
    preferDownstream: true,
    resources: o.resources ?? { cpu: 2 },
    temporary: ["b"],
    parkable: o.parkable,
  });
  for (let round = 0; rig.result === null; round++) {
    assert.ok(round < 100_000, "the run does not end");
    o.meddle?.(rig);
    let acted = false;
    for (const e of rig.fakes.made) {
      if (e.state === "starting") e.becomeReady();
      else if (e.state === "ready" && e.recallPending) e.answerRecall();
      else if (e.state === "ready" && e.held.length > 0) e.succeed(e.held.length, TENTH_WINDOW);
      else continue;
      acted = true;
    }
    if (!acted) rig.advance(100);
    await rig.settle();
  }
  assert.equal((await rig.finished()).outcome, "complete");
  return rig;
}

const started = (rig: RunRig) => ["a", "b", "c"].map((id) => rig.made(id).length);

describe("parked executors", () => {
  it("tasks taking turns under a budget park their idle workers and take them back: one start per worker", async () => {
    const exiting = await takeTurns({ parkable: false });
    const parking = await takeTurns({ parkable: true });
    // Without parking every turn starts a worker; with it each task starts its one worker once.
    assert.ok(
      started(exiting).reduce((x, y) => x + y) > 6,
      `workers started without parking: ${started(exiting)}`,
    );
    assert.deepEqual(started(parking), [1, 1, 1]);
    // Parked executors are ended with their task (stopped, not killed), none left alive.
    for (const e of parking.fakes.made) {
      assert.equal(e.state, "dead");
      assert.ok(e.stopped, `executor ${e.id} was not stopped cleanly`);
    }
  });

  it("a task that requires anything besides cpu has its idle workers exit, to give back what its setup holds", async () => {
    const rig = await takeTurns({
      parkable: true,
      requires: { cpu: 1, mem: 4 },
      resources: { cpu: 2, mem: 100 },
    });
    assert.ok(started(rig).reduce((x, y) => x + y) > 6, `workers started: ${started(rig)}`);
  });

  it("a worker that dies while parked is dropped, not counted as a failure, and the task goes on", async () => {
    let victim: FakeExecutor | null = null;
    const rig = await takeTurns({
      parkable: true,
      meddle(rig) {
        if (victim !== null) return;
        for (const t of ["a", "b", "c"]) {
          const inPool = new Set<Executor>(rig.run.tasks[rig.task(t)]!.executors);
          const parked = rig.made(t).find((e) => e.state === "ready" && !inPool.has(e));
          if (parked === undefined) continue;
          victim = parked;
          parked.crash("killed while parked");
          return;
        }
      },
    });
    assert.ok(victim !== null, "no executor was ever parked");
    const dead: FakeExecutor = victim;
    const task = rig.run.tasks[dead.task]!;
    const workers = (await rig.finished()).utilization?.workers ?? [];
    const stats = workers.find((w) => w.workerId === dead.id)!;
    assert.equal(stats.exit, "crashed");
    assert.equal(stats.reason, "killed while parked");
    assert.ok(
      rig.notices.some((n) =>
        n ===
          `Task "${task.config.id}": worker ${dead.id} ended while parked (killed while parked); it held no block, and its task starts another when it needs one`
      ),
      rig.notices.join("\n"),
    );
    assert.equal(task.stats.restarts, 0, "a parked worker's death spent a restart");
    assert.equal(rig.made(task.config.id).length, 2, "its task started one replacement");
  });

  it("parks only executors that cost nothing idle, of tasks that require only cpu", () => {
    const config = (requires: Record<string, number>) => ({ requires }) as unknown as TaskConfig;
    const executor = (parkable?: boolean) => ({ parkable }) as unknown as Executor;
    assert.ok(ParkedExecutors.eligible(executor(true), config({})));
    assert.ok(ParkedExecutors.eligible(executor(true), config({ cpu: 2 })));
    assert.ok(!ParkedExecutors.eligible(executor(true), config({ cpu: 1, gpu: 1 })));
    assert.ok(!ParkedExecutors.eligible(executor(false), config({ cpu: 1 })));
    assert.ok(!ParkedExecutors.eligible(executor(), config({ cpu: 1 })));
  });

  it("records the time a worker sat parked apart from its working lifetime", () => {
    const lifetimes = new WorkerLifetimes();
    const parked = new ParkedExecutors(lifetimes);
    const executor = { task: 0, state: "ready", stop() {}, kill() {} } as unknown as Executor;
    lifetimes.started(executor, 7, "a", 1000);
    parked.park(executor, 2000);
    assert.equal(parked.take(1, 2500), null, "another task's executor was taken");
    assert.equal(parked.take(0, 4500), executor);
    parked.park(executor, 5000);
    parked.end(6000, "clean");
    const stats = lifetimes.of(executor);
    assert.equal(stats.parkedSeconds, 3.5);
    assert.equal(stats.endedAt, 6);
    assert.equal(stats.exit, "clean");
    assert.equal(parked.take(0, 7000), null, "an ended executor stayed parked");
  });
});

describe("parked executors, randomized", () => {
  // Random chains, budgets and event orders, with workers crashing while they work and while
  // parked: the rig checks after every event that no parked executor holds a block, that a
  // task's working and parked executors stay within its maxWorkers and the working ones within
  // the budget; every run must end complete, every executor ended.
  let crashedWhileParked = 0;
  for (let seed = 1; seed <= 24; seed++) {
    it(`seed ${seed}`, async () => {
      const rng = new Rng(seed);
      const workers = () => 1 + rng.int(3);
      const fields = () => ({
        maxWorkers: workers(),
        requires: { cpu: 1 },
        maxRetries: 1000,
        maxWorkerRestarts: 1000,
      });
      const blocks = 20 + rng.int(60);
      const tasks = [
        linearTask("a", blocks, fields()),
        linearTask("b", blocks, { ...fields(), upstream: ["a"] }),
        linearTask("c", blocks, { ...fields(), upstream: ["b"] }),
      ];
      const rig = RunRig.start(tasks, {
        preferDownstream: rng.chance(0.7),
        resources: { cpu: 1 + rng.int(3) },
        temporary: rng.chance(0.5) ? ["b"] : [],
        parkable: true,
      });
      let parkedCrashes = 0;
      for (let round = 0; rig.result === null; round++) {
        assert.ok(round < 100_000, "the run does not end");
        let acted = false;
        for (const e of [...rig.fakes.made]) {
          if (e.state === "dead") continue;
          const inPool = rig.run.tasks[e.task]!.executors.has(e);
          // Parked spells are short (a turn or two): those crash more often, to be seen at all.
          if (rng.chance(inPool ? 0.01 : 0.2)) {
            if (!inPool) parkedCrashes++;
            e.crash("random crash");
          } else if (e.state === "starting") e.becomeReady();
          else if (e.recallPending) e.answerRecall();
          else if (e.held.length > 0) e.succeed(1 + rng.int(e.held.length));
          else continue;
          acted = true;
        }
        if (!acted) rig.advance(100);
        await rig.settle();
      }
      const result = await rig.finished();
      assert.equal(result.outcome, "complete", `seed ${seed}`);
      for (const e of rig.fakes.made) {
        assert.equal(e.state, "dead", `executor ${e.id} outlived the run`);
      }
      const exits = result.utilization?.workers.map((w) => w.exit) ?? [];
      assert.ok(!exits.includes("running"), `a worker's end was not recorded: ${exits}`);
      crashedWhileParked += parkedCrashes;
    });
  }
  it("had workers crash while parked", () => {
    assert.ok(
      crashedWhileParked > 0,
      "no seed crashed a parked worker: the seeds test nothing of it",
    );
  });
});

describe("parked workers, end to end", () => {
  it("under --resources cpu=2 each worker of a temporary chain runs its task's setup once", async () => {
    const dir = newDir("chain");
    {
      const setups = path.join(dir, "setups");
      fs.mkdirSync(setups);
      const task = (id: string, up: string | null) =>
        `{
        id: "${id}", ${up === null ? "" : `upstream: ["${up}"],`}
        totalRoi: ${
          up === null
            ? "{ offset: [0, 0], shape: [SIDE, SIDE] }"
            : "{ offset: [-10, -10], shape: [SIDE + 20, SIDE + 20] }"
        },
        readRoi: ${
          up === null
            ? "{ offset: [0, 0], shape: [10, 10] }"
            : "{ offset: [-10, -10], shape: [30, 30] }"
        },
        writeRoi: { offset: [0, 0], shape: [10, 10] },
        readWriteConflict: false, fit: "shrink", maxWorkers: 2, requires: { cpu: 1 },
        ${id === "b" ? "temporary: true," : ""}
        outputs: { o: { path: "${id}/{write_offset}.bin" } },
        setup() { fs.writeFileSync(SETUPS + "/${id}-" + Math.random().toString(36).slice(2), ""); },
        process(block, state, context) { fs.writeFileSync(context.outputs.o, "x"); },
      }`;
      const file = path.join(dir, "chain.mjs");
      fs.writeFileSync(
        file,
        `import fs from "node:fs";\nconst SETUPS = ${
          JSON.stringify(setups)
        };\nconst SIDE = ${SIDE};\n` +
          `export default { tasks: [${task("a", null)}, ${task("b", "a")}, ${task("c", "b")}] };\n`,
      );
      const r = await runCli(runArgs(file, path.join(dir, "tracking"), ["--resources", "cpu=2"]));
      assert.equal(r.code, 0, describeRun(r));
      assert.equal(fs.readdirSync(path.join(dir, "c")).length, (SIDE / 10) ** 2);
      assert.equal(
        fs.existsSync(path.join(dir, "b")) ? fs.readdirSync(path.join(dir, "b")).length : 0,
        0,
      );
      const count = (id: string) =>
        fs.readdirSync(setups).filter((f) => f.startsWith(`${id}-`)).length;
      for (const id of ["a", "b", "c"]) {
        assert.ok(count(id) >= 1 && count(id) <= 2, `task ${id} ran its setup ${count(id)} times`);
      }
    }
  });
});
