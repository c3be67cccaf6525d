/**
 * `run --tasks` and `plan --tasks` on the temporaries chain a -> b -> c -> d -> {e, f} (b, c, d
 * temporary): a run of some tasks takes them and what they read, and deletes only what every
 * downstream task of the whole pipeline no longer needs.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describeRun, runCli } from "./fixtures/tracking/harness.ts";
import { ran, runIn as run } from "./fixtures/outputs.ts";
import { all, chain, onDisk } from "./fixtures/temporaries.ts";
import { selectTasks } from "../lib/pipeline/task_selection.ts";
import type { PipelineConfig, TaskConfig } from "../lib/pipeline/spec.ts";

const newDir = scratchDirs("task-selection");

function pipelineOf(edges: Record<string, string[]>): PipelineConfig {
  return {
    path: "/p/pipeline.ts",
    tasks: Object.entries(edges).map(([id, upstream]) =>
      ({ id, upstream }) as unknown as TaskConfig
    ),
  };
}

describe("--tasks: which tasks a run takes", () => {
  const p = pipelineOf({ a: [], b: ["a"], c: ["b"], x: [], d: ["c", "x"], e: ["b"] });

  it("the named tasks and everything upstream of them, in the file's order", () => {
    const s = selectTasks(p, ["d"]);
    assert.deepEqual(s.pipeline.tasks.map((t) => t.id), ["a", "b", "c", "x", "d"]);
    assert.deepEqual(s.leftOut, ["e"]);
    assert.equal(s.whole, p);
    const two = selectTasks(p, ["e, x", "b"]);
    assert.deepEqual(two.pipeline.tasks.map((t) => t.id), ["a", "b", "x", "e"]);
    assert.deepEqual(two.leftOut, ["c", "d"]);
  });

  it("none given: every task", () => {
    assert.deepEqual(selectTasks(p, undefined).leftOut, []);
    assert.equal(selectTasks(p, []).pipeline, p);
  });

  it("refuses an unknown task and an empty list, naming the value", () => {
    assert.throws(
      () => selectTasks(p, ["c,segment"]),
      /--tasks names "segment", which is not a task of \/p\/pipeline\.ts; its tasks are a, b, c, x, d, e\./,
    );
    assert.throws(() => selectTasks(p, [" , "]), /--tasks " , " names no task/);
  });
});

describe("run --tasks with temporaries", () => {
  it("keeps what a left-out reader still needs, and frees it once that reader ran", async () => {
    const dir = newDir("held");
    const file = chain(dir);
    const first = await run(dir, file, ["--tasks", "e"]);
    assert.equal(first.code, 0, describeRun(first));
    assert.match(
      first.stderr,
      /Running only tasks a, b, c, d, e \(--tasks and the tasks they read\); left out: f\./,
    );
    assert.deepEqual(ran(dir), ["a", "b", "c", "d", "e"].flatMap((t) => all(t)).sort());
    // f reads every d block and has not run: d stays whole; b and c are read by nothing left.
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 8, e: 8, f: 0 });
    assert.doesNotMatch(first.stderr, /Task "f"/, "f is not part of the run");
    assert.equal(fs.existsSync(path.join(dir, "tracking", "f")), false, "its store is not made");

    const second = await run(dir, file, ["--tasks", "f"]);
    assert.equal(second.code, 0, describeRun(second));
    assert.deepEqual(ran(dir), all("f"), "only f runs: its inputs were kept");
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });

    const again = await run(dir, file);
    assert.equal(again.code, 0, describeRun(again));
    assert.deepEqual(ran(dir), []);
  });

  it("a left-out reader holds only the blocks its blocks not done read", async () => {
    const dir = newDir("partial");
    const first = await run(dir, chain(dir, { failing: "f3" }), ["--keep-temp"]);
    assert.equal(first.code, 1, describeRun(first));
    assert.deepEqual(onDisk(dir), { a: 8, b: 8, c: 8, d: 8, e: 8, f: 7 });
    // e runs again; f3 (write [6, 8)) has not run and reads d2, d3, d4: those stay.
    const file = chain(dir);
    const some = await run(dir, file, ["--tasks", "e", "--force", "e"]);
    assert.equal(some.code, 0, describeRun(some));
    assert.deepEqual(ran(dir), all("e"));
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 3, e: 8, f: 7 });
    const rest = await run(dir, file);
    assert.equal(rest.code, 0, describeRun(rest));
    assert.deepEqual(ran(dir), ["f3"]);
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
  });

  it("a reader left out that is already done holds nothing", async () => {
    const dir = newDir("done-reader");
    const file = chain(dir);
    const whole = await run(dir, file, ["--keep-temp"]);
    assert.equal(whole.code, 0, describeRun(whole));
    assert.deepEqual(onDisk(dir), { a: 8, b: 8, c: 8, d: 8, e: 8, f: 8 });
    // e and f are done: a run of e alone frees every temporary block at its start.
    const some = await run(dir, file, ["--tasks", "e"]);
    assert.equal(some.code, 0, describeRun(some));
    assert.deepEqual(ran(dir), []);
    assert.deepEqual(onDisk(dir), { a: 8, b: 0, c: 0, d: 0, e: 8, f: 8 });
  });

  it("refuses a --force or --skip-mask naming a task it leaves out, and an unknown task (exit 2)", async () => {
    const dir = newDir("refusals");
    const file = chain(dir);
    const unknown = await run(dir, file, ["--tasks", "e,g"]);
    assert.equal(unknown.code, 2, describeRun(unknown));
    assert.match(
      unknown.stderr,
      /--tasks names "g", which is not a task of .*; its tasks are a, b, c, d, e, f\./,
    );
    const forced = await run(dir, file, ["--tasks", "e", "--force", "f:0:2"]);
    assert.equal(forced.code, 2, describeRun(forced));
    assert.match(
      forced.stderr,
      /--force "f:0:2" names task "f", which --tasks leaves out of this run \(it runs a, b, c, d, e\); add "f" to --tasks or drop the flag\./,
    );
    const masked = await run(dir, file, ["--tasks", "e", "--skip-mask", "f=mask.npy"]);
    assert.equal(masked.code, 2, describeRun(masked));
    assert.match(masked.stderr, /--skip-mask "f=mask\.npy" names task "f"/);
    assert.deepEqual(ran(dir), [], "nothing ran");
  });

  it("plan --tasks shows the tasks the run would take", async () => {
    const dir = newDir("plan");
    const file = chain(dir);
    const text = await runCli(["plan", file, "--tasks", "c"]);
    assert.equal(text.code, 0, describeRun(text));
    assert.match(
      text.stdout,
      /^Planning only tasks a, b, c \(--tasks and the tasks they read\); left out: d, e, f\./,
    );
    assert.match(text.stdout, /3 tasks, 24 blocks/);
    const json = await runCli(["plan", file, "--tasks", "c", "--json"]);
    assert.equal(json.code, 0, describeRun(json));
    const parsed = JSON.parse(json.stdout) as {
      tasks_left_out: string[];
      tasks: { task: string }[];
    };
    assert.deepEqual(parsed.tasks_left_out, ["d", "e", "f"]);
    assert.deepEqual(parsed.tasks.map((t) => t.task), ["a", "b", "c"]);
    const all = JSON.parse((await runCli(["plan", file, "--json"])).stdout) as Record<
      string,
      unknown
    >;
    assert.equal("tasks_left_out" in all, false, "absent without --tasks");
  });
});
