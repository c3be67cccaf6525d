import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PipelineError } from "../lib/errors.ts";
import { loadPipeline, missingPackage } from "../lib/pipeline/load.ts";
import { PipelineProblems, validatePipeline } from "../lib/pipeline/validate.ts";

const PATH = "/pipelines/test.ts";

type Fields = Record<string, unknown>;

function roi(offset: number[], shape: number[]): Fields {
  return { offset, shape };
}

/** A valid 2-D task; `overrides` replace fields, and an `undefined` override removes one. */
function task(overrides: Fields = {}): Fields {
  const base: Fields = {
    id: "extract",
    totalRoi: roi([0, 0], [128, 128]),
    readRoi: roi([-8, -8], [80, 80]),
    writeRoi: roi([0, 0], [64, 64]),
    process() {},
  };
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) delete base[k];
    else base[k] = v;
  }
  return base;
}

function pipeline(...tasks: unknown[]): Fields {
  return { tasks };
}

interface Expected {
  taskId?: string | null;
  field?: string | null;
}

/** Asserts that validation fails with a PipelineError whose message contains every part. */
function rejects(value: unknown, parts: readonly string[], expected: Expected = {}): PipelineError {
  let caught: unknown = null;
  try {
    validatePipeline(value, PATH);
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof PipelineError, `expected a PipelineError, got ${String(caught)}`);
  for (const part of parts) {
    assert.ok(
      caught.message.includes(part),
      `message lacks ${JSON.stringify(part)}:\n${caught.message}`,
    );
  }
  assert.match(caught.message, /^[A-Z]/, "messages are sentence case");
  if (expected.taskId !== undefined) assert.equal(caught.taskId, expected.taskId);
  if (expected.field !== undefined) assert.equal(caught.field, expected.field);
  return caught;
}

function rejectsField(
  overrides: Fields,
  field: string,
  parts: readonly string[],
  taskId: string | null = "extract",
): PipelineError {
  return rejects(pipeline(task(overrides)), [`field "${field}"`, ...parts], { taskId, field });
}

describe("validatePipeline() pipeline shape", () => {
  it("rejects a default export that is not an object", () => {
    rejects(42, [PATH, "default export", "got 42", "export default { tasks"]);
    rejects(null, ["got null"]);
  });

  it("rejects a missing or non-array tasks field", () => {
    rejects({}, ['field "tasks"', "got undefined"], { field: "tasks" });
    rejects({ tasks: { id: "a" } }, ['field "tasks"', "must be an array", '{ id: "a" }']);
  });

  it("rejects an empty tasks array", () => {
    rejects({ tasks: [] }, ['field "tasks" is empty', "add at least one task"]);
  });

  it("rejects unknown top-level fields and suggests tasks", () => {
    rejects({ task: [task()] }, ['unknown top-level field "task"', 'did you mean "tasks"?'], {
      field: "task",
    });
  });

  it("rejects a task that is not an object, naming it by index", () => {
    rejects(pipeline(task(), "extract2"), ["Task at index 1", "must be an object", '"extract2"'], {
      taskId: null,
    });
    rejects(pipeline([task()]), ["Task at index 0", "must be an object"]);
  });
});

describe("validatePipeline() unknown task fields", () => {
  it("suggests the closest known name for a typo", () => {
    const e = rejectsField({ maxWorker: 2 }, "maxWorker", []);
    assert.match(
      e.message,
      /Task "extract": unknown field "maxWorker"; did you mean "maxWorkers"\?/,
    );
    assert.ok(e.message.includes("Allowed fields: id, totalRoi, readRoi, writeRoi, fit"));
  });

  it("maps daisy's snake_case names to the camelCase name", () => {
    const cases: [string, string][] = [
      ["total_roi", "totalRoi"],
      ["num_workers", "maxWorkers"],
      ["max_retries", "maxRetries"],
      ["read_write_conflict", "readWriteConflict"],
      ["task_id", "id"],
      ["process_function", "process"],
      ["upstream_tasks", "upstream"],
    ];
    for (const [daisy, camel] of cases) {
      rejects(pipeline(task({ [daisy]: 1 })), [
        `unknown field "${daisy}"`,
        `rename it to "${camel}"`,
      ], {
        field: daisy,
      });
    }
  });

  it("lists the allowed fields when nothing is close", () => {
    const e = rejects(pipeline(task({ colour: "red" })), ['unknown field "colour"', "remove it"]);
    assert.ok(e.message.includes("skipMask"));
    assert.ok(!e.message.includes("did you mean"));
  });

  it("is not fooled by names of Object.prototype", () => {
    rejects(pipeline(task({ toString: 1 })), ['unknown field "toString"']);
  });

  it("names the task by index when its id is also bad", () => {
    rejects(pipeline(task({ id: 7, maxWorker: 2 })), ["Task at index 0", '"maxWorker"'], {
      taskId: null,
    });
  });
});

describe("validatePipeline() id", () => {
  it("rejects a missing id", () => {
    rejectsField({ id: undefined }, "id", ["Task at index 0", "is missing"], null);
  });

  it("rejects an empty id", () => {
    rejectsField({ id: "" }, "id", ["Task at index 0", "must not be empty", 'got ""'], null);
  });

  it("rejects an id that is not a string", () => {
    rejectsField({ id: 12 }, "id", ["Task at index 0", "must be a string", "got 12"], null);
  });

  it("rejects characters that do not belong in a directory name", () => {
    rejectsField({ id: "seg/ment" }, "id", ['got "seg/ment"', "letters, digits"], null);
    rejectsField({ id: "a b" }, "id", ['got "a b"'], null);
  });

  it('rejects ids starting with "__" and the names "." and ".."', () => {
    rejectsField({ id: "__meta" }, "id", ['must not start with "__"', 'got "__meta"'], null);
    rejectsField({ id: ".." }, "id", ['got ".."'], null);
  });

  it("names later tasks by their index", () => {
    const second = task({ id: "bad id", upstream: ["extract"] });
    rejects(pipeline(task(), second), ["Task at index 1", 'field "id"', 'got "bad id"']);
  });
});

describe("validatePipeline() ROIs", () => {
  it("rejects a missing ROI", () => {
    rejectsField({ totalRoi: undefined }, "totalRoi", ["is missing", "offset: [0, 0, 0]"]);
  });

  it("rejects a ROI that is not an object", () => {
    rejectsField({ readRoi: [0, 64] }, "readRoi", ["must be an object", "got [0, 64]"]);
  });

  it("rejects extra keys and suggests shape for size", () => {
    rejectsField({ writeRoi: { offset: [0, 0], size: [64, 64] } }, "writeRoi", [
      'got "size"',
      'Rename "size" to "shape"',
    ]);
  });

  it("rejects a ROI without shape", () => {
    rejectsField({ totalRoi: { offset: [0, 0] } }, "totalRoi", ['is missing "shape"']);
  });

  it("rejects non-integer coordinates", () => {
    rejects(pipeline(task({ totalRoi: roi([0, 0.5], [128, 128]) })), [
      'field "totalRoi.offset" must be an array of integers',
      "got [0, 0.5]",
    ], { field: "totalRoi" });
    rejects(pipeline(task({ totalRoi: roi([0, 0], [2 ** 53, 1]) })), [
      'field "totalRoi.shape"',
      String(2 ** 53),
    ]);
    rejects(pipeline(task({ readRoi: { offset: "0,0", shape: [80, 80] } })), ['got "0,0"']);
  });

  it("rejects offset and shape of different lengths", () => {
    rejectsField({ totalRoi: roi([0, 0], [128]) }, "totalRoi", [
      "as many offset as shape entries",
      "offset [0, 0] (2 axes)",
      "shape [128] (1 axis)",
    ]);
  });

  it("rejects a ROI without axes", () => {
    rejectsField({ totalRoi: roi([], []) }, "totalRoi", ["at least one axis"]);
  });

  it("rejects ROIs with different numbers of axes", () => {
    rejects(pipeline(task({ readRoi: roi([-8, -8, -8], [80, 80, 80]) })), [
      'Task "extract": fields "totalRoi", "readRoi" and "writeRoi" must have the same number of axes',
      "totalRoi Roi((0, 0), (128, 128)) (2 axes)",
      "readRoi Roi((-8, -8, -8), (80, 80, 80)) (3 axes)",
    ], { taskId: "extract", field: "readRoi" });
  });

  it("rejects zero and negative shapes", () => {
    rejectsField({ writeRoi: roi([0, 0], [64, 0]) }, "writeRoi", [
      "positive shape",
      "Roi((0, 0), (64, 0))",
    ]);
    rejectsField({ totalRoi: roi([0, 0], [-5, 128]) }, "totalRoi", ["Roi((0, 0), (-5, 128))"]);
  });

  it("rejects a writeRoi outside readRoi", () => {
    const e = rejects(
      pipeline(task({ readRoi: roi([8, 8], [80, 80]), writeRoi: roi([0, 0], [64, 64]) })),
      [],
      { taskId: "extract", field: "writeRoi" },
    );
    assert.equal(
      e.message,
      'Task "extract": field "writeRoi" must lie inside "readRoi"; got writeRoi Roi((0, 0), (64, 64)) and readRoi Roi((8, 8), (80, 80)). Grow readRoi or move writeRoi.',
    );
  });

  it("turns a tiling the layout refuses into a PipelineError naming the task", () => {
    const huge = { totalRoi: roi([0, 0], [2 ** 21, 2 ** 21]), readRoi: roi([0, 0], [1, 1]) };
    rejects(pipeline(task({ ...huge, writeRoi: roi([0, 0], [1, 1]) })), [
      'Task "extract": cannot tile totalRoi',
      "blocks",
    ], { taskId: "extract", field: "writeRoi" });
  });
});

describe("validatePipeline() scalar fields", () => {
  it("rejects an unknown fit and suggests the closest mode", () => {
    rejectsField({ fit: "bogus" }, "fit", ['"valid", "overhang", "shrink"', 'got "bogus"']);
    rejectsField({ fit: "shrnk" }, "fit", ['Did you mean "shrink"?']);
  });

  it("rejects a non-boolean readWriteConflict", () => {
    rejectsField({ readWriteConflict: "yes" }, "readWriteConflict", ["true or false", 'got "yes"']);
  });

  it("rejects maxWorkers below 1 or not an integer", () => {
    rejectsField({ maxWorkers: 0 }, "maxWorkers", ["integer >= 1", "got 0", "default 1"]);
    rejectsField({ maxWorkers: 1.5 }, "maxWorkers", ["got 1.5"]);
  });

  it("reads launch.arrayThrottle, rejecting one that is not a whole number >= 1", () => {
    const launch = (arrayThrottle: unknown) => ({ launch: { kind: "slurm", arrayThrottle } });
    for (const bad of [0, 2.5, "10", -3]) {
      rejectsField(launch(bad), "launch", [
        'option "arrayThrottle" must be a whole number of at least 1',
        `got ${typeof bad === "string" ? `"${bad}"` : bad}`,
        "arrayThrottle: 50",
      ]);
    }
    const config = validatePipeline(pipeline(task(launch(25))), PATH).tasks[0]!;
    assert.equal(config.launch.kind === "slurm" ? config.launch.arrayThrottle : "none", 25);
    const plain = validatePipeline(pipeline(task({ launch: "slurm" })), PATH).tasks[0]!;
    assert.equal(plain.launch.kind === "slurm" ? plain.launch.arrayThrottle : "none", null);
  });

  it("reads launch.workers { min, max } (elastic) as maxWorkers max, refusing bad ranges and a different maxWorkers", () => {
    const slurm = (workers: unknown, more: Fields = {}) => ({
      launch: { kind: "slurm", workers },
      ...more,
    });
    const config = validatePipeline(pipeline(task(slurm({ min: 0, max: 8 }))), PATH).tasks[0]!;
    assert.equal(config.maxWorkers, 8);
    assert.deepEqual("workers" in config.launch ? config.launch.workers : null, { min: 0, max: 8 });
    const command = validatePipeline(
      pipeline(task({
        launch: { kind: "command", argv: ["{worker}"], workers: { min: 2, max: 3 } },
        maxWorkers: 3,
      })),
      PATH,
    ).tasks[0]!;
    assert.equal(command.maxWorkers, 3);
    assert.deepEqual("workers" in command.launch ? command.launch.workers : null, {
      min: 2,
      max: 3,
    });
    const fixed = validatePipeline(pipeline(task({ launch: "slurm", maxWorkers: 4 })), PATH)
      .tasks[0]!;
    assert.ok(!("workers" in fixed.launch));
    rejectsField(slurm({ min: 1, max: 3 }, { maxWorkers: 5 }), "maxWorkers", [
      "is 5 but launch.workers.max is 3",
      "give one of them",
    ]);
    rejectsField(slurm({ min: 1, max: 0 }), "launch", ['needs "max"', "got 0", "max: 20"]);
    rejectsField(slurm({ min: -1, max: 2 }), "launch", ['needs "min"', "got -1"]);
    rejectsField(slurm({ min: 1.5, max: 2 }), "launch", ['needs "min"', "got 1.5"]);
    rejectsField(slurm({ max: 2 }), "launch", ['needs "min"']);
    rejectsField(slurm({ min: 4, max: 2 }), "launch", ["min 4 above max 2", "lower min"]);
    rejectsField(slurm({ min: 1, max: 2, step: 1 }), "launch", ['no field "step"']);
    rejectsField(slurm(3), "launch", ['"workers" must be an object', "got 3"]);
    rejectsField({ launch: { kind: "manual", workers: { min: 1, max: 2 } } }, "launch", [
      'of kind "manual" takes no "workers"',
      "join by hand",
      "set maxWorkers",
    ]);
  });

  it("rejects a negative maxRetries", () => {
    rejectsField({ maxRetries: -1 }, "maxRetries", ["integer >= 0", "got -1", "default 2"]);
  });

  it("rejects a maxWorkerRestarts that is not a number", () => {
    rejectsField({ maxWorkerRestarts: "10" }, "maxWorkerRestarts", ['got "10"', "default 10"]);
  });

  it("rejects a timeout that is not a positive finite number", () => {
    for (const [value, shown] of [[0, "0"], [-1, "-1"], [Infinity, "Infinity"], [NaN, "NaN"]]) {
      rejectsField({ timeout: value }, "timeout", ["positive number of seconds", `got ${shown}`]);
    }
    rejectsField({ timeout: "60" }, "timeout", ['got "60"']);
    rejectsField({ timeout: null }, "timeout", ["got null"]);
  });

  it("rejects requires that is not an object of non-negative integers", () => {
    rejectsField({ requires: [1] }, "requires", ["object of resource counts", "got [1]"]);
    rejectsField({ requires: { gpu: -1 } }, "requires", ["got gpu: -1"]);
    rejectsField({ requires: { cpu: 0.5 } }, "requires", ["got cpu: 0.5"]);
  });

  it("rejects upstream that is not an array of strings", () => {
    rejectsField({ upstream: "extract" }, "upstream", ['got "extract"', 'upstream: ["extract"]']);
    rejectsField({ upstream: ["a", 3] }, "upstream", ["got 3 at position 1"]);
  });

  it("rejects a non-boolean resourceTracking", () => {
    rejectsField({ resourceTracking: 1 }, "resourceTracking", ["true or false", "got 1"]);
  });

  it("rejects tracking that is neither a path nor false", () => {
    rejectsField({ tracking: true }, "tracking", ["store path or false", "got true"]);
    rejectsField({ tracking: "" }, "tracking", ['got ""']);
    rejectsField({ tracking: 3 }, "tracking", ["got 3"]);
  });

  it("rejects a skipMask of the wrong type", () => {
    rejectsField({ skipMask: 42 }, "skipMask", ["got 42", "mask file path"]);
    rejectsField({ skipMask: ["a"] }, "skipMask", ['got ["a"]']);
    rejects(pipeline(task({ skipMask: { data: "x", shape: [2] } })), [
      'field "skipMask.data"',
      'got "x"',
    ], { field: "skipMask" });
    rejects(pipeline(task({ skipMask: { data: [0, 1], shape: [-2] } })), [
      'field "skipMask.shape"',
      "got [-2]",
    ]);
  });

  it("accepts each form of skipMask", () => {
    for (const mask of ["mask.npy", [0, 1], new Uint8Array(2), { data: [0, 1], shape: [2, 1] }]) {
      const config = validatePipeline(pipeline(task({ skipMask: mask })), PATH);
      assert.equal(config.tasks[0]!.skipMask, mask);
    }
  });
});

describe("validatePipeline() process, setup, command, check", () => {
  it("rejects a process that is not a function", () => {
    rejectsField({ process: "run" }, "process", ["must be a function", 'got "run"']);
  });

  it("rejects a setup that is not a function", () => {
    rejectsField({ setup: {} }, "setup", ["must be a function", "got {}"]);
  });

  it("rejects a check that is not a function", () => {
    rejectsField({ check: true }, "check", ["must be a function", "got true"]);
  });

  it("rejects a command that is not a non-empty array of strings", () => {
    const base = { process: undefined };
    rejectsField({ ...base, command: "python3 x.py" }, "command", ['got "python3 x.py"']);
    rejectsField({ ...base, command: [] }, "command", ["must name a program", "got []"]);
    rejectsField({ ...base, command: ["python3", 64] }, "command", ["got 64 at position 1"]);
    rejectsField({ ...base, command: ["", "x"] }, "command", ["program name"]);
  });

  it("rejects a task with neither process nor command", () => {
    rejects(pipeline(task({ process: undefined })), [
      'Task "extract": needs a "process" function, a "command" or "python"; got none',
    ], { taskId: "extract", field: "process" });
  });

  it("rejects a task with both process and command", () => {
    rejects(pipeline(task({ command: ["true"] })), ['"process" and "command"', "got both"], {
      field: "command",
    });
  });

  it("rejects setup without process", () => {
    rejects(pipeline(task({ process: undefined, command: ["true"], setup() {} })), [
      'field "setup" is only used with "process"',
    ], { field: "setup" });
  });
});

describe("validatePipeline() cwd", () => {
  const command = { process: undefined, command: ["make", "{block_id}"] };

  it("resolves a command task's cwd against the pipeline file's folder", () => {
    const relative = validatePipeline(pipeline(task({ ...command, cwd: "out/work" })), PATH);
    const t = relative.tasks[0]!;
    assert.ok(t.kind === "command");
    assert.equal(t.cwd, "/pipelines/out/work");
    const absolute = validatePipeline(pipeline(task({ ...command, cwd: "/scratch" })), PATH);
    assert.ok(absolute.tasks[0]!.kind === "command");
    assert.equal(absolute.tasks[0]!.cwd, "/scratch");
    const none = validatePipeline(pipeline(task(command)), PATH).tasks[0]!;
    assert.ok(none.kind === "command");
    assert.equal(none.cwd, null);
  });

  it("refuses cwd on a process task, saying why", () => {
    rejectsField({ cwd: "work" }, "cwd", [
      'is only used with "command"',
      '"work"',
      "Web Workers share the folder",
    ]);
  });

  it("refuses a cwd that is not a path", () => {
    rejectsField({ ...command, cwd: "" }, "cwd", ["must be a folder path", 'got ""']);
    rejectsField({ ...command, cwd: 3 }, "cwd", ["must be a folder path", "got 3"]);
  });
});

describe("validatePipeline() pipeline graph", () => {
  it("rejects duplicate ids", () => {
    rejects(pipeline(task(), task()), ['Duplicate task id "extract"'], {
      taskId: "extract",
      field: "id",
    });
  });

  it("rejects an unknown upstream id", () => {
    rejects(pipeline(task({ upstream: ["extrac"] })), ['upstream "extrac"', '"extract"'], {
      taskId: "extract",
      field: "upstream",
    });
  });

  it("rejects cycles", () => {
    const a = task({ id: "a", upstream: ["c"] });
    const b = task({ id: "b", upstream: ["a"] });
    const c = task({ id: "c", upstream: ["b"] });
    const e = rejects(pipeline(a, b, c), ["cycle", '"a"', '"b"', '"c"'], { field: "upstream" });
    assert.ok(e.taskId !== null);
  });

  it("rejects a task listing itself upstream", () => {
    rejects(pipeline(task({ upstream: ["extract"] })), ["itself"], { taskId: "extract" });
  });

  it("rejects upstream links between tasks with different numbers of axes", () => {
    const volume = task({
      id: "volume",
      totalRoi: roi([0, 0, 0], [64, 64, 64]),
      readRoi: roi([0, 0, 0], [32, 32, 32]),
      writeRoi: roi([0, 0, 0], [32, 32, 32]),
      upstream: ["extract"],
    });
    rejects(pipeline(task(), volume), [
      'Task "volume": upstream "extract" has 2 axes but "volume" has 3 axes',
    ], { taskId: "volume", field: "upstream" });
  });
});

describe("validatePipeline() reports every problem at once", () => {
  it("lists the problems of every task in one error, keeping the first one's task and field", () => {
    const e = rejects(
      pipeline(
        task({ id: "a", maxWorkers: 0, num_workers: 2 }),
        task({ id: "b", fit: "shrnk", timeout: -1 }),
        { id: "c" },
      ),
      [
        `Pipeline "${PATH}" has 8 problems`,
        'Task "a": unknown field "num_workers"',
        'Task "a": field "maxWorkers" must be an integer >= 1; got 0',
        'Task "b": field "fit" must be one of',
        'Did you mean "shrink"?',
        'Task "b": field "timeout" must be a positive number of seconds; got -1',
        'Task "c": field "totalRoi" is missing',
        'Task "c": field "writeRoi" is missing',
        'Task "c": needs a "process" function, a "command" or "python"',
      ],
      { taskId: "a", field: "num_workers" },
    );
    assert.ok(e instanceof PipelineProblems);
    assert.deepEqual(e.problems.map((p) => [p.taskId, p.field]), [
      ["a", "num_workers"],
      ["a", "maxWorkers"],
      ["b", "fit"],
      ["b", "timeout"],
      ["c", "totalRoi"],
      ["c", "readRoi"],
      ["c", "writeRoi"],
      ["c", "process"],
    ]);
    // One problem per line, each still a complete message.
    assert.equal(e.message.split("\n").length, 9, e.message);
  });

  it("skips checks that depend on a field that already failed", () => {
    const e = rejects(
      pipeline(task({ readRoi: roi([0, 0], [-1, 80]), command: 7, process: undefined })),
      ['field "readRoi" must have a positive shape', 'field "command" must be an array'],
      { taskId: "extract", field: "readRoi" },
    );
    assert.ok(e instanceof PipelineProblems);
    // Not "writeRoi must lie inside readRoi", not "needs a process or a command".
    assert.equal(e.problems.length, 2, e.message);
  });

  it("reports the DAG's problems in the same round as the fields' problems", () => {
    const e = rejects(
      pipeline(task({ id: "a", maxRetries: -1 }), task({ id: "b", upstream: ["nope"] })),
      ['field "maxRetries"', 'upstream "nope" is not a task'],
    );
    assert.ok(e instanceof PipelineProblems && e.problems.length === 2, e.message);
    rejects(pipeline(task({ id: "a" }), task({ id: "b", upstream: ["nope"] })), [
      'upstream "nope" is not a task',
    ]);
  });

  it("reports a cycle and an unknown upstream together, and a duplicate id with a field error", () => {
    const cycle = rejects(
      pipeline(
        task({ id: "a", upstream: ["b"] }),
        task({ id: "b", upstream: ["a"] }),
        task({ id: "c", upstream: ["ghost"] }),
      ),
      ['upstream "ghost" is not a task', 'Pipeline contains a cycle: "b" -> "a" -> "b"'],
    );
    assert.ok(cycle instanceof PipelineProblems && cycle.problems.length === 2, cycle.message);
    const twice = rejects(
      pipeline(task({ id: "a" }), task({ id: "a", maxWorkers: 0 })),
      ['field "maxWorkers"', 'Duplicate task id "a"'],
    );
    assert.ok(twice instanceof PipelineProblems && twice.problems.length === 2, twice.message);
  });

  it("does not call a task with a field error an unknown upstream", () => {
    const e = rejects(
      pipeline(task({ id: "a", maxRetries: -1 }), task({ id: "b", upstream: ["a"] })),
      ['field "maxRetries"'],
    );
    assert.ok(!e.message.includes("is not a task"), e.message);
  });

  it("keeps a single problem's message as it is", () => {
    const e = rejectsField({ maxWorkers: 0 }, "maxWorkers", []);
    assert.ok(!(e instanceof PipelineProblems));
    assert.match(e.message, /^Task "extract": field "maxWorkers"/);
  });
});

describe("validatePipeline() accepted pipelines", () => {
  it("fills in every default", () => {
    const config = validatePipeline(pipeline(task()), PATH);
    assert.equal(config.path, PATH);
    assert.equal(config.tasks.length, 1);
    const t = config.tasks[0]!;
    assert.equal(t.index, 0);
    assert.equal(t.id, "extract");
    assert.deepEqual(t.layout, {
      totalRoi: { offset: [0, 0], shape: [128, 128] },
      readRoi: { offset: [-8, -8], shape: [80, 80] },
      writeRoi: { offset: [0, 0], shape: [64, 64] },
      fit: "valid",
      readWriteConflict: true,
    });
    assert.equal(t.maxWorkers, 1);
    assert.equal(t.maxRetries, 2);
    assert.equal(t.maxWorkerRestarts, 10);
    assert.equal(t.timeout, null);
    assert.deepEqual(t.requires, {});
    assert.deepEqual(t.upstream, []);
    assert.ok(t.kind === "process");
    assert.equal(typeof t.process, "function");
    assert.equal(t.setup, null);
    assert.equal("command" in t, false);
    assert.equal(t.check, null);
    assert.equal(t.tracking, null);
    assert.equal(t.resourceTracking, null);
    assert.equal(t.skipMask, null);
  });

  it("treats a field set to undefined as absent", () => {
    const config = validatePipeline(pipeline(task({ timeout: undefined, fit: undefined })), PATH);
    assert.equal(config.tasks[0]!.timeout, null);
    assert.equal(config.tasks[0]!.layout.fit, "valid");
  });

  it("keeps explicit values", () => {
    const check = () => true;
    const config = validatePipeline(
      pipeline(task({
        fit: "shrink",
        readWriteConflict: false,
        maxWorkers: 4,
        maxRetries: 0,
        maxWorkerRestarts: 0,
        timeout: 0.5,
        requires: { cpu: 1, gpu: 0 },
        check,
        tracking: false,
        resourceTracking: true,
      })),
      PATH,
    );
    const t = config.tasks[0]!;
    assert.equal(t.layout.fit, "shrink");
    assert.equal(t.layout.readWriteConflict, false);
    assert.equal(t.maxWorkers, 4);
    assert.equal(t.maxRetries, 0);
    assert.equal(t.maxWorkerRestarts, 0);
    assert.equal(t.timeout, 0.5);
    assert.deepEqual(t.requires, { cpu: 1, gpu: 0 });
    assert.equal(t.check, check);
    assert.equal(t.tracking, false);
    assert.equal(t.resourceTracking, true);
  });

  it("accepts a 3-task pipeline with fan-in, in declaration order", () => {
    const setup = () => ({ model: 1 });
    const config = validatePipeline(
      pipeline(
        task({ id: "raw" }),
        task({ id: "mask", setup, tracking: "/data/tracking/mask" }),
        task({
          id: "merge",
          upstream: ["raw", "mask"],
          process: undefined,
          command: ["python3", "merge.py", "{write_offset}", "{write_shape}"],
        }),
      ),
      PATH,
    );
    assert.deepEqual(config.tasks.map((t) => [t.index, t.id]), [[0, "raw"], [1, "mask"], [
      2,
      "merge",
    ]]);
    const merge = config.tasks[2]!;
    assert.deepEqual(merge.upstream, ["raw", "mask"]);
    assert.ok(merge.kind === "command");
    assert.deepEqual(merge.command, ["python3", "merge.py", "{write_offset}", "{write_shape}"]);
    assert.equal("process" in merge, false);
    const mask = config.tasks[1]!;
    assert.ok(mask.kind === "process");
    assert.equal(mask.setup, setup);
    assert.equal(config.tasks[1]!.tracking, "/data/tracking/mask");
  });
});

describe("loadPipeline()", () => {
  const dir = mkdtempSync(join(tmpdir(), "blockwise-pipeline-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string): string => {
    const file = join(dir, name);
    writeFileSync(file, text);
    return file;
  };
  const taskSource = `{
      id: "extract",
      totalRoi: { offset: [0, 0], shape: [128, 128] },
      readRoi: { offset: [0, 0], shape: [64, 64] },
      writeRoi: { offset: [0, 0], shape: [64, 64] },
      process(block: { id: number | bigint }): void { void block; },
    }`;

  it("loads a TypeScript pipeline with type annotations", async () => {
    const file = write(
      "typed.ts",
      `interface Settings { workers: number }\nconst settings: Settings = { workers: 3 };\n` +
        `export default { tasks: [{ ...${taskSource}, maxWorkers: settings.workers }] };\n`,
    );
    const config = await loadPipeline(file);
    assert.equal(config.path, file);
    assert.equal(config.tasks[0]!.id, "extract");
    assert.equal(config.tasks[0]!.maxWorkers, 3);
  });

  it("loads a JavaScript module by a path relative to cwd", async () => {
    write(
      "plain.mjs",
      `export default { tasks: [{ id: "a", totalRoi: { offset: [0], shape: [10] },` +
        ` readRoi: { offset: [0], shape: [5] }, writeRoi: { offset: [0], shape: [5] },` +
        ` command: ["true"] }] };\n`,
    );
    const config = await loadPipeline("plain.mjs", dir);
    assert.equal(config.path, join(dir, "plain.mjs"));
    const only = config.tasks[0]!;
    assert.ok(only.kind === "command");
    assert.deepEqual(only.command, ["true"]);
  });

  it("passes validation errors through", async () => {
    const file = write(
      "invalid.ts",
      `export default { tasks: [{ ...${taskSource}, fit: "x" }] };\n`,
    );
    await assert.rejects(loadPipeline(file), (e: unknown) => {
      assert.ok(e instanceof PipelineError);
      assert.equal(e.field, "fit");
      return true;
    });
  });

  it("refuses a missing file, naming the path", async () => {
    const missing = join(dir, "nope.ts");
    await assert.rejects(loadPipeline(missing), (e: unknown) => {
      assert.ok(e instanceof PipelineError);
      assert.ok(e.message.includes(`"${missing}"`), e.message);
      assert.ok(e.message.includes("does not exist"), e.message);
      return true;
    });
  });

  it("refuses a directory", async () => {
    const sub = join(dir, "pipelines.ts");
    mkdirSync(sub);
    await assert.rejects(loadPipeline(sub), (e: unknown) => {
      assert.ok(e instanceof PipelineError);
      assert.ok(e.message.includes("is a directory"), e.message);
      assert.ok(e.message.includes(sub), e.message);
      return true;
    });
  });

  it("refuses an unsupported extension", async () => {
    const file = write("pipeline.json", "{}");
    await assert.rejects(loadPipeline(file), (e: unknown) => {
      assert.ok(e instanceof PipelineError);
      assert.ok(e.message.includes('".json" is not supported'), e.message);
      assert.ok(e.message.includes(".ts, .mts, .js, .mjs"), e.message);
      return true;
    });
  });

  it("names a missing npm package and how to install it next to the pipeline", async () => {
    const file = write(
      "needs_package.ts",
      `import { open } from "blockwise-missing-package-x7/storage";\nexport default { open };\n`,
    );
    await assert.rejects(loadPipeline(file), (e: unknown) => {
      assert.ok(e instanceof PipelineError);
      assert.ok(
        e.message.includes('imports the npm package "blockwise-missing-package-x7"'),
        e.message,
      );
      assert.ok(
        e.message.includes(`cd "${dir}" && npm install blockwise-missing-package-x7.`),
        e.message,
      );
      assert.match(e.message, /compiled blockwise binary/);
      assert.ok(e.cause instanceof Error);
      return true;
    });
  });

  it("recognises each runtime's message for a package that is not installed", () => {
    const cases: [string, string | null][] = [
      ["Cannot find package 'zarrita' imported from /p/pipeline.ts", "zarrita"],
      ["Cannot find module '@zarrita/storage/fs' from '/p/pipeline.ts'", "@zarrita/storage"],
      ['Import "numcodecs" not a dependency\n  hint: ...', "numcodecs"],
      [
        "Could not find a matching package for 'npm:zarrita@0.7' in the node_modules directory.",
        "zarrita",
      ],
      ["Cannot find module './helper.ts' from '/p/pipeline.ts'", null],
      ["Cannot find package 'node:fsx' imported from /p/pipeline.ts", null],
      ["volume.zarr is missing", null],
    ];
    for (const [message, name] of cases) {
      assert.equal(missingPackage(new Error(message)), name, message);
    }
  });

  it("reports a module that throws on import with the original message", async () => {
    const file = write(
      "throws.ts",
      `throw new Error("cannot find volume.zarr");\nexport default {};\n`,
    );
    await assert.rejects(loadPipeline(file), (e: unknown) => {
      assert.ok(e instanceof PipelineError);
      assert.ok(e.message.includes(`"${file}"`), e.message);
      assert.ok(e.message.includes("cannot find volume.zarr"), e.message);
      assert.ok(e.cause instanceof Error);
      return true;
    });
  });

  for (const extension of [".ts", ".mts", ".js", ".mjs"]) {
    it(`gives a syntax error's file, line, column and line (${extension})`, async () => {
      const file = write(
        `syntax_${extension.slice(1)}${extension}`,
        `export default {\n  tasks: [{ id: "a",\n    readRoi: { offset: [0,0] shape: [5,5] },\n  }],\n};\n`,
      );
      await assert.rejects(loadPipeline(file), (e: unknown) => {
        assert.ok(e instanceof PipelineError);
        const expected = new RegExp(
          `^Cannot load pipeline "${file}": syntax error at ${file}:3:30: .*shape.*\n` +
            ` {8}readRoi: \\{ offset: \\[0,0\\] shape: \\[5,5\\] \\},\n` +
            ` {33}\\^\nFix the code at that position, then run again\\.$`,
        );
        assert.match(e.message, expected);
        return true;
      });
    });
  }

  it("names the imported module that has the syntax error", async () => {
    const broken = write("broken_helper.ts", `const x: number = ;\nexport default x;\n`);
    const file = write(
      "imports_broken.mjs",
      `import x from "./broken_helper.ts";\nexport default x;\n`,
    );
    await assert.rejects(loadPipeline(file), (e: unknown) => {
      assert.ok(e instanceof PipelineError);
      assert.match(
        e.message,
        new RegExp(`syntax error in a module it imports at ${broken}:1:19: `),
      );
      return true;
    });
  });

  it("reports a module without a default export, showing the expected shape", async () => {
    const file = write("named.ts", `export const tasks = [];\n`);
    await assert.rejects(loadPipeline(file), (e: unknown) => {
      assert.ok(e instanceof PipelineError);
      assert.ok(e.message.includes("no default export"), e.message);
      assert.ok(e.message.includes('"tasks"'), e.message);
      assert.ok(e.message.includes("export default { tasks: ["), e.message);
      return true;
    });
  });
});

describe("command placeholders", () => {
  it("refuses an unknown placeholder, naming it and the known ones", () => {
    const base = {
      id: "export",
      totalRoi: { offset: [0], shape: [10] },
      readRoi: { offset: [0], shape: [5] },
      writeRoi: { offset: [0], shape: [5] },
    };
    assert.throws(
      () => validatePipeline({ tasks: [{ ...base, command: ["echo", "{write_ofset}"] }] }, "p.ts"),
      (error: unknown) =>
        error instanceof PipelineError && error.field === "command" &&
        error.message.includes('"{write_ofset}"') && error.message.includes("{write_offset}"),
    );
    const ok = validatePipeline(
      { tasks: [{ ...base, command: ["echo", "{write_offset}", "{{literal}}"] }] },
      "p.ts",
    );
    const echo = ok.tasks[0]!;
    assert.ok(echo.kind === "command");
    assert.deepEqual(echo.command, ["echo", "{write_offset}", "{{literal}}"]);
  });
});

describe("validatePipeline() python", () => {
  const dir = mkdtempSync(join(tmpdir(), "blockwise-validate-python-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "pipeline.ts");
  writeFileSync(join(dir, "segment.py"), "def process(block):\n    pass\n");
  const python = (value: unknown, more: Fields = {}) =>
    task({ process: undefined, python: value, ...more });
  const rejectsPython = (value: unknown, parts: string[], more: Fields = {}, field = "python") => {
    let caught: unknown = null;
    try {
      validatePipeline(pipeline(python(value, more)), file);
    } catch (error) {
      caught = error;
    }
    assert.ok(caught instanceof PipelineError, String(caught));
    for (const part of parts) assert.ok(caught.message.includes(part), caught.message);
    assert.equal(caught.field, field);
  };

  it("makes a python task with defaults and the module's absolute path", () => {
    const config = validatePipeline(pipeline(python({ module: "segment.py" })), file);
    const t = config.tasks[0]!;
    assert.equal(t.kind, "python");
    assert.deepEqual(t.kind === "python" ? t.python : null, {
      module: join(dir, "segment.py"),
      written: "segment.py",
      process: "process",
      setup: null,
      interpreter: "python3",
    });
    const named = validatePipeline(
      pipeline(
        python({ module: "./segment.py", process: "run", setup: "load", interpreter: "/opt/py" }),
      ),
      file,
    ).tasks[0]!;
    assert.deepEqual(
      named.kind === "python"
        ? [named.python.process, named.python.setup, named.python.interpreter]
        : [],
      ["run", "load", "/opt/py"],
    );
  });

  it("rejects a bad python field, naming the option", () => {
    rejectsPython("segment.py", ['field "python" must be an object', 'got "segment.py"']);
    rejectsPython({ module: "segment.py", moduel: 1 }, [
      'has no option "moduel"',
      "module, process",
    ]);
    rejectsPython({}, ['needs "module"', "got undefined"]);
    rejectsPython({ module: "missing.py" }, [
      '"missing.py"',
      `no file at ${join(dir, "missing.py")}`,
    ]);
    rejectsPython({ module: "segment.py", process: "run-it" }, [
      'option "process"',
      "Python identifier",
      '"run-it"',
    ]);
    rejectsPython({ module: "segment.py", setup: 3 }, ['option "setup"', "got 3"]);
    rejectsPython({ module: "segment.py", interpreter: "" }, ['option "interpreter"']);
  });

  it("refuses python with process, command, a JavaScript setup or cwd", () => {
    const m = { module: "segment.py" };
    rejectsPython(m, ['"python" and "process" cannot both be given'], { process() {} }, "process");
    rejectsPython(
      m,
      ['"python" and "command" cannot both be given'],
      { command: ["true"] },
      "command",
    );
    rejectsPython(
      m,
      ['field "setup" is a JavaScript function', "python.setup"],
      { setup() {} },
      "setup",
    );
    rejectsPython(m, ['field "cwd" is only used with "command"'], { cwd: "." }, "cwd");
  });
});
