/**
 * The real CLI in a child process (`bun main.ts ...`): exit codes, the summary on stderr,
 * `--events` JSON lines, SIGINT during a run, `plan --json`, `plan --blocks --json`, `types`,
 * and `--help` / `--version` on every subcommand.
 */

import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { buildProgram } from "../lib/cli/program.ts";
import { codecsLine } from "../lib/cli/codecs_line.ts";
import { VERSION } from "../lib/version.ts";
import { countLines, readLines, REPO_ROOT, writePipeline } from "./fixtures/parallel/harness.ts";

const BUN = path.join(REPO_ROOT, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO_ROOT, "main.ts");

const newDir = scratchDirs("");

/**
 * What `bun main.ts --version` prints: the release, the Bun that runs it, "source", and the
 * modules a pipeline may import without installing them.
 */
const SOURCE_VERSION_LINE = `blockwise ${VERSION} (bun ${
  (JSON.parse(
    fs.readFileSync(path.join(REPO_ROOT, "node_modules", "bun", "package.json"), "utf8"),
  ) as { version: string }).version
}, source on ${process.platform}-${process.arch})
modules for pipelines: zarrita ${installed("zarrita")}, @zarrita/storage ${
  installed("@zarrita/storage")
}, blockwise ${VERSION}, numcodecs ${installed("numcodecs")} (a pipeline's own node_modules wins)`;

function installed(name: string): string {
  const file = path.join(REPO_ROOT, "node_modules", name, "package.json");
  return (JSON.parse(fs.readFileSync(file, "utf8")) as { version: string }).version;
}

interface Exit {
  readonly code: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface Cli {
  readonly pid: number;
  readonly done: Promise<Exit>;
  signal(name: "SIGINT" | "SIGTERM"): void;
}

/** Start `bun main.ts ...args` in `cwd`; it is killed (and the test fails) after `ms`. */
function start(args: readonly string[], cwd: string, ms = 30_000): Cli {
  const child = spawn(BUN, [MAIN, ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (c: string) => (stdout += c));
  child.stderr.on("data", (c: string) => (stderr += c));
  const done = new Promise<Exit>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`blockwise ${args.join(" ")} did not exit within ${ms} ms:\n${stderr}`));
    }, ms);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return {
    pid: child.pid!,
    done,
    // process.kill, not child.kill: Deno's child_process then reports a signal instead of the
    // exit code the child chose after handling it.
    signal: (name) => process.kill(child.pid!, name),
  };
}

function cli(args: readonly string[], cwd: string = REPO_ROOT, ms?: number): Promise<Exit> {
  return start(args, cwd, ms).done;
}

function task(id: string, blocks: number, fields: string, body: string): string {
  return `{
    id: ${JSON.stringify(id)},
    totalRoi: { offset: [0], shape: [${blocks * 10}] },
    readRoi: { offset: [0], shape: [10] },
    writeRoi: { offset: [0], shape: [10] },
    readWriteConflict: false,
    ${fields}
    process(block) { ${body} },
  }`;
}

function pipelineFile(dir: string, tasks: readonly string[]): string {
  return writePipeline(dir, `export default { tasks: [\n${tasks.join(",\n")}\n] };\n`);
}

interface EventLine {
  readonly event: string;
  readonly time: number;
  readonly [key: string]: unknown;
}

interface TaskCounters {
  readonly task: string;
  readonly phase: string;
  readonly total: number;
  readonly completed: number;
  readonly failed: number;
  readonly orphaned: number;
  readonly skipped: number;
  readonly ready: number;
  readonly processing: number;
  readonly pending: number;
}

function assertCountersBalanced(c: TaskCounters): void {
  assert.equal(
    c.ready + c.processing + c.pending + c.completed + c.failed + c.orphaned,
    c.total,
    JSON.stringify(c),
  );
}

describe("blockwise run", () => {
  it("exits 0 and prints the summary on stderr for a clean run", async () => {
    const dir = newDir("cli-ok");
    const file = pipelineFile(dir, [
      task("a", 4, "maxWorkers: 2,", `log("blocks", block, now());`),
      task("b", 4, `upstream: ["a"],`, `log("blocks", block, now());`),
    ]);
    const r = await cli(["run", file, "--no-progress"], dir);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /Execution summary/);
    assert.match(r.stderr, /Resource utilization/);
    assert.match(r.stderr, /All 8 blocks completed\./);
    assert.equal(countLines(dir, "blocks"), 8);
    assert.deepEqual(fs.readdirSync(dir).sort(), ["blocks", "pipeline.mjs"], "no stray files");
  });

  it("exits 1 when a block fails, and --events writes run_start, block_failed and run_end", async () => {
    const dir = newDir("cli-fail");
    const file = pipelineFile(dir, [
      task(
        "a",
        4,
        "maxRetries: 1,",
        `if (block.index[0] === 2) throw new Error("bad block " + block.attempt);`,
      ),
      task("b", 4, `upstream: ["a"],`, ""),
    ]);
    const events = path.join(dir, "out", "events.jsonl");
    const r = await cli(["run", file, "--no-progress", "--events", events], dir);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /Execution summary/);
    assert.match(r.stderr, /bad block 2/);
    assert.match(r.stderr, /1 block failed, 1 orphaned/);

    const lines = readLines<EventLine>(path.dirname(events), "events.jsonl");
    assert.ok(lines.length >= 4);
    assert.equal(lines[0]!.event, "run_start");
    assert.equal(lines.at(-1)!.event, "run_end");
    assert.equal(lines.filter((l) => l.event === "run_start").length, 1);
    assert.equal(lines.filter((l) => l.event === "run_end").length, 1);
    for (let i = 1; i < lines.length; i++) assert.ok(lines[i]!.time >= lines[i - 1]!.time);
    const started = lines[0]!["tasks"] as TaskCounters[];
    assert.deepEqual(started.map((t) => [t.task, t.total, t.completed]), [["a", 4, 0], [
      "b",
      4,
      0,
    ]]);

    const failed = lines.filter((l) => l.event === "block_failed");
    assert.deepEqual(
      failed.map((l) => [l["task"], l["block_id"], l["index"], l["attempt"], l["permanent"]]),
      [["a", 2, [2], 1, false], ["a", 2, [2], 2, true]],
    );
    const error = failed[1]!["error"] as { message: string; stack: string | null };
    assert.equal(error.message, "bad block 2");
    assert.ok(error.stack !== null && error.stack.includes("bad block 2"));

    const end = lines.at(-1)!;
    assert.equal(end["outcome"], "incomplete");
    assert.equal(end["exit_code"], 1);
    assert.equal(end["stopped_by"], null);
    const tasks = end["tasks"] as TaskCounters[];
    for (const t of tasks) assertCountersBalanced(t);
    assert.deepEqual(
      tasks.map((t) => [t.task, t.phase, t.completed, t.failed, t.orphaned, t.skipped]),
      [["a", "done", 3, 1, 0, 0], ["b", "done", 3, 0, 1, 0]],
    );
    for (const l of lines.filter((x) => x.event === "task_progress")) {
      assertCountersBalanced(l as unknown as TaskCounters);
    }
  });

  it("--events-blocks adds a block_done line per completed block, and needs --events", async () => {
    const dir = newDir("cli-events-blocks");
    const file = pipelineFile(dir, [
      task(
        "a",
        4,
        "maxWorkers: 2, maxRetries: 1,",
        `if (block.index[0] === 1 && block.attempt === 1) throw new Error("once");`,
      ),
      task("b", 4, `upstream: ["a"],`, ""),
    ]);
    for (const serial of [false, true]) {
      const events = path.join(dir, `events-${serial}.jsonl`);
      const extra = serial ? ["--serial"] : [];
      const r = await cli([
        "run",
        file,
        "--no-progress",
        "--events",
        events,
        "--events-blocks",
        ...extra,
      ], dir);
      assert.equal(r.code, 0, r.stderr);
      const done = readLines<EventLine>(dir, path.basename(events)).filter((l) =>
        l.event === "block_done"
      );
      assert.deepEqual(
        done.map((l) => `${l["task"]}/${l["block_id"]}`).sort(),
        ["a/0", "a/1", "a/2", "a/3", "b/0", "b/1", "b/2", "b/3"],
      );
      const retried = done.find((l) => l["task"] === "a" && l["block_id"] === 1)!;
      assert.deepEqual(retried["index"], [1]);
      assert.equal(retried["attempt"], 2);
      assert.ok(typeof retried["wall_seconds"] === "number" && retried["wall_seconds"] >= 0);
      if (serial) assert.ok(done.every((l) => l["worker"] === null));
      else assert.ok(done.every((l) => Number.isInteger(l["worker"])));
    }
    const plain = path.join(dir, "plain.jsonl");
    assert.equal((await cli(["run", file, "--no-progress", "--events", plain], dir)).code, 0);
    assert.ok(readLines<EventLine>(dir, "plain.jsonl").every((l) => l.event !== "block_done"));
    const alone = await cli(["run", file, "--no-progress", "--events-blocks"], dir);
    assert.equal(alone.code, 2, alone.stderr);
    assert.match(
      alone.stderr,
      /--events-blocks adds lines to the events file: give it with --events FILE/,
    );
  });

  it("exits 2 with a message naming the task and field for an invalid pipeline", async () => {
    const dir = newDir("cli-invalid");
    const file = pipelineFile(dir, [task("extract", 2, `maxWorkers: "two",`, "")]);
    const r = await cli(["run", file, "--no-progress"], dir);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /"extract"/);
    assert.match(r.stderr, /maxWorkers/);
    assert.match(r.stderr, /"two"/);
    assert.doesNotMatch(r.stderr, /internal error/);
  });

  it("exits 2 for a missing pipeline file and for a bad --resources value", async () => {
    const dir = newDir("cli-usage");
    const missing = await cli(["run", path.join(dir, "nope.ts")], dir);
    assert.equal(missing.code, 2, missing.stderr);
    assert.match(missing.stderr, /does not exist/);
    const file = pipelineFile(dir, [task("a", 1, "", "")]);
    const bad = await cli(["run", file, "--resources", "cpu=lots"], dir);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /cpu=lots/);
  });

  it("refuses an --events path it cannot write before running anything (exit 2)", async () => {
    const dir = newDir("cli-events-bad");
    const file = pipelineFile(dir, [task("a", 2, "", `log("blocks", block, now());`)]);
    // A regular file where the events file's folder should be: unwritable even for root.
    fs.writeFileSync(path.join(dir, "taken"), "");
    for (const events of [path.join(dir, "taken", "events.jsonl"), dir]) {
      const r = await cli(["run", file, "--no-progress", "--events", events], dir);
      assert.equal(r.code, 2, r.stderr);
      assert.ok(r.stderr.includes(`Cannot write the events file "${events}"`), r.stderr);
      assert.match(r.stderr, /Pass --events a file path/);
      assert.doesNotMatch(r.stderr, /internal error|Execution summary/);
    }
    assert.equal(countLines(dir, "blocks"), 0, "no block ran");
  });

  it("--resources gpu=1 limits gpu only: a task that requires cpu still runs", async () => {
    const dir = newDir("cli-resources");
    const file = pipelineFile(dir, [
      task("a", 2, "requires: { cpu: 1 }, maxWorkers: 2,", ""),
      task("b", 2, "requires: { cpu: 1, gpu: 1 },", ""),
    ]);
    const r = await cli(["run", file, "--no-progress", "--resources", "gpu=1"], dir);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /All 4 blocks completed\./);
  });

  it("refuses a task without blocks unless --allow-empty, and warns as plan does", async () => {
    const dir = newDir("cli-zero");
    const file = pipelineFile(dir, [
      `{ id: "tiny", totalRoi: { offset: [0], shape: [4] }, readRoi: { offset: [0], shape: [8] },
        writeRoi: { offset: [0], shape: [8] }, process() {} }`,
      task("a", 2, "", ""),
    ]);
    const refused = await cli(["run", file, "--no-progress"], dir);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(
      refused.stderr,
      /Task "tiny" has no blocks: .*pass --allow-empty to run the other tasks/,
    );
    assert.equal(countLines(dir, "blocks"), 0, "nothing ran");
    const r = await cli(["run", file, "--no-progress", "--allow-empty"], dir);
    assert.equal(r.code, 0, r.stderr);
    const warning =
      'warning: Task "tiny" has no blocks: its total write ROI Roi((0), (4)) is smaller than one write block (8) on axis 0';
    assert.ok(r.stderr.includes(warning), r.stderr);
    const plan = await cli(["plan", file], dir);
    assert.ok(plan.stdout.includes(warning), plan.stdout);
  });

  it("ends the summary with where the ledger, the events and the worker logs are", async () => {
    const dir = newDir("cli-where");
    const file = pipelineFile(dir, [
      task("a", 2, "", ""),
      task("b", 2, `upstream: ["a"], tracking: false,`, ""),
    ]);
    const r = await cli([
      "run",
      file,
      "--no-progress",
      "--tracking-dir",
      "trk",
      "--events",
      "ev.jsonl",
      "--log-dir",
      "logs",
    ], dir);
    assert.equal(r.code, 0, r.stderr);
    const real = fs.realpathSync(dir);
    const tail = r.stderr.trimEnd().split("\n").slice(-3).map((l) => l.replace(real, "DIR"));
    assert.deepEqual(tail, [
      "tracking     DIR/trk/<task>: a; no store: b",
      "events       DIR/ev.jsonl",
      "worker logs  DIR/logs/<task>/worker_<n>.out, .err",
    ]);
    const bare = await cli(["run", file, "--no-progress"], dir);
    assert.match(bare.stderr.trimEnd().split("\n").at(-1)!, /^tracking {2}none: a rerun runs/);
  });

  it("stops on SIGINT: exit 130, summary printed, no block runs afterwards", {
    timeout: 60_000,
  }, async () => {
    const dir = newDir("cli-sigint");
    const file = pipelineFile(dir, [
      task("slow", 300, "maxWorkers: 2,", `const s = now(); sleep(100); log("blocks", block, s);`),
    ]);
    const events = path.join(dir, "events.jsonl");
    const run = start(["run", file, "--events", events], dir, 60_000);
    // Wait until the events file shows completed blocks.
    const deadline = Date.now() + 20_000;
    let progressed = false;
    while (!progressed && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      progressed = fs.existsSync(events) &&
        readLines<EventLine>(dir, "events.jsonl").some((l) =>
          l.event === "task_progress" && (l["completed"] as number) > 0
        );
    }
    assert.ok(progressed, "the run made progress");
    run.signal("SIGINT");
    const r = await run.done;
    assert.equal(r.code, 130, r.stderr);
    assert.match(r.stderr, /Received SIGINT/);
    assert.match(
      r.stderr,
      /then stopping .*\nNothing is tracked \(no --tracking-dir\): a new run starts over\.\n/,
    );
    assert.match(r.stderr, /Execution summary/);
    // The process is gone, and with it every worker thread: no block can start any more.
    assert.throws(() => process.kill(run.pid, 0), /ESRCH/);
    const ran = countLines(dir, "blocks");
    assert.ok(ran > 0 && ran < 300, `${ran} blocks ran before the stop`);

    const lines = readLines<EventLine>(dir, "events.jsonl");
    const end = lines.at(-1)!;
    assert.equal(end.event, "run_end");
    assert.equal(end["outcome"], "interrupted");
    assert.equal(end["stopped_by"], "SIGINT");
    assert.equal(end["exit_code"], 130);
    const [slow] = end["tasks"] as TaskCounters[];
    assertCountersBalanced(slow!);
    assert.equal(slow!.processing, 0, "nothing left in flight");
    assert.equal(slow!.completed, ran, "every block that ran to its end was counted");
    assert.ok(slow!.completed < 300);
  });
  it("a second SIGINT stops at once, says so, and records exit 130 in runs.jsonl", {
    timeout: 60_000,
  }, async () => {
    const dir = newDir("cli-sigint-twice");
    const file = pipelineFile(dir, [
      task("slow", 20, "maxWorkers: 2,", `sleep(4000);`),
    ]);
    const events = path.join(dir, "events.jsonl");
    const tracking = path.join(dir, "tracking");
    const run = start(["run", file, "--events", events, "--tracking-dir", tracking], dir, 60_000);
    const deadline = Date.now() + 20_000;
    while (!fs.existsSync(events) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 1000)); // blocks are running now
    run.signal("SIGINT");
    await new Promise((r) => setTimeout(r, 300));
    run.signal("SIGINT");
    const r = await run.done;
    assert.equal(r.code, 130, r.stderr);
    assert.match(r.stderr, /Received SIGINT again: stopping now/);
    assert.match(r.stderr, /Stopped at once: blocks in flight were killed.*; exit 130/);
    const records = fs.readFileSync(path.join(tracking, "slow", "runs.jsonl"), "utf8")
      .trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const last = records.at(-1)!;
    assert.equal(last["exit_code"], 130);
    assert.equal(last["stopped_by"], "SIGINT");
    assert.equal(last["outcome"], "interrupted");
  });
});

describe("blockwise run: stop", () => {
  it(
    "on SIGINT, runs only the blocks already running, not every block already queued in a worker",
    {
      timeout: 60_000,
    },
    async () => {
      // 3000 no-op blocks grow each worker's window to hundreds of blocks; the 3000 blocks after
      // them take 20 ms each, so each worker holds many unstarted slow blocks when the signal
      // comes. The recall hands them back: each worker finishes the block it runs and starts no
      // other. (Were they run instead, the 5 s grace period would see about 250 per worker.)
      // Counting blocks, not seconds, keeps this independent of the machine's speed.
      const dir = newDir("cli-sigint-queue");
      const file = pipelineFile(dir, [
        `{
    id: "mixed",
    totalRoi: { offset: [0], shape: [6000] },
    readRoi: { offset: [0], shape: [1] },
    writeRoi: { offset: [0], shape: [1] },
    readWriteConflict: false,
    maxWorkers: 2,
    process(block) {
      if (block.index[0] < 3000) return;
      sleep(20);
      fs.appendFileSync(DIR + "/slow", "x\\n");
    },
  }`,
      ]);
      const run = start(["run", file, "--no-progress", "--grace", "5"], dir, 60_000);
      const deadline = Date.now() + 20_000;
      while (countLines(dir, "slow") < 10 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      const before = countLines(dir, "slow");
      assert.ok(before >= 10, "the slow blocks started");
      run.signal("SIGINT");
      const r = await run.done;
      assert.equal(r.code, 130, r.stderr);
      const after = countLines(dir, "slow");
      // The two running blocks, and any that started between the count and the signal.
      assert.ok(
        after - before <= 20,
        `${after - before} slow blocks ran after SIGINT (${before} before it)`,
      );
    },
  );
});

describe("blockwise plan", () => {
  const planPipeline = (dir: string): string =>
    writePipeline(
      dir,
      `export default { tasks: [
  {
    id: "extract",
    totalRoi: { offset: [0, 0], shape: [40, 30] },
    readRoi: { offset: [-2, -2], shape: [14, 14] },
    writeRoi: { offset: [0, 0], shape: [10, 10] },
    fit: "shrink",
    process() {},
  },
  {
    id: "export",
    upstream: ["extract"],
    totalRoi: { offset: [0, 0], shape: [40, 30] },
    readRoi: { offset: [0, 0], shape: [20, 20] },
    writeRoi: { offset: [0, 0], shape: [20, 20] },
    fit: "overhang",
    readWriteConflict: false,
    command: ["true"],
  },
] };
`,
      "plan.ts",
    );

  it("--json prints the tasks with block counts, levels and grids", async () => {
    const dir = newDir("cli-plan");
    const file = planPipeline(dir);
    const r = await cli(["plan", file, "--json"], dir);
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout) as {
      pipeline: string;
      tasks: Record<string, unknown>[];
    };
    assert.equal(plan.pipeline, file);
    assert.deepEqual(plan.tasks.map((t) => t["task"]), ["extract", "export"]);
    for (const t of plan.tasks) {
      // Other fields may be added; these are the documented ones.
      for (
        const key of [
          "block_grid_shape",
          "blocks",
          "fit",
          "levels",
          "read_write_conflict",
          "task",
          "total_write_roi",
          "tracking_grid_shape",
          "upstream",
          "warnings",
        ]
      ) {
        assert.ok(key in t, `plan --json task has "${key}": ${JSON.stringify(t)}`);
      }
    }
    const [extract, exp] = plan.tasks;
    assert.deepEqual(extract!["block_grid_shape"], [4, 3]);
    assert.equal(extract!["blocks"], 12);
    assert.equal(extract!["levels"], 4);
    assert.equal(extract!["fit"], "shrink");
    assert.equal(extract!["read_write_conflict"], true);
    assert.deepEqual(extract!["total_write_roi"], { offset: [2, 2], shape: [36, 26] });
    assert.deepEqual(exp!["upstream"], ["extract"]);
    assert.deepEqual(exp!["block_grid_shape"], [2, 2]);
    assert.equal(exp!["blocks"], 4);
    assert.equal(exp!["levels"], 1);
  });

  it("--blocks --json prints one JSON object per block with its ROIs, level and upstream", async () => {
    const dir = newDir("cli-plan-blocks");
    const file = planPipeline(dir);
    const r = await cli(["plan", file, "--blocks", "--json"], dir);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split("\n").map((l) =>
      JSON.parse(l) as Record<string, unknown>
    );
    assert.equal(lines.length, 12 + 4);
    for (const b of lines) {
      assert.deepEqual(Object.keys(b), [
        "task",
        "id",
        "index",
        "level",
        "read_roi",
        "write_roi",
        "upstream",
      ]);
      const read = b["read_roi"] as { offset: number[]; shape: number[] };
      const write = b["write_roi"] as { offset: number[]; shape: number[] };
      assert.equal(read.offset.length, 2);
      assert.equal(write.shape.length, 2);
      assert.equal(typeof b["id"], "number");
      assert.ok(Array.isArray(b["upstream"]));
    }
    const extract = lines.filter((b) => b["task"] === "extract");
    const exp = lines.filter((b) => b["task"] === "export");
    assert.equal(extract.length, 12);
    assert.equal(exp.length, 4);
    const ids = new Set(extract.map((b) => b["id"]));
    assert.equal(ids.size, 12, "block IDs are unique");
    // Level 0 blocks have no upstream; later levels depend on extract blocks only.
    for (const b of extract) {
      const up = b["upstream"] as { task: string; id: number }[];
      if (b["level"] === 0) assert.deepEqual(up, []);
      else assert.ok(up.length > 0 && up.every((u) => u.task === "extract" && ids.has(u.id)));
    }
    // Every export block reads from the extract blocks under it.
    for (const b of exp) {
      const up = b["upstream"] as { task: string; id: number }[];
      assert.ok(up.length > 0 && up.every((u) => u.task === "extract" && ids.has(u.id)));
      assert.equal(b["level"], 0);
    }
    const first = exp.find((b) => JSON.stringify(b["index"]) === "[0,0]")!;
    assert.deepEqual(first["write_roi"], { offset: [0, 0], shape: [20, 20] });
  });
});

describe("blockwise types, --help and --version", () => {
  it("types prints the pipeline declarations", async () => {
    const r = await cli(["types"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /export interface Task\b/);
    assert.match(r.stdout, /export interface Block\b/);
  });

  const commands = buildProgram(() => {}).commands.map((c) => c.name());

  it("knows the documented subcommands", () => {
    for (const c of ["run", "plan", "types", "demo"]) assert.ok(commands.includes(c), c);
  });

  for (const args of [[], ...commands.map((c) => [c])]) {
    const name = args.length === 0 ? "blockwise" : `blockwise ${args[0]}`;
    it(`${name} --help and --version exit 0`, async () => {
      const help = await cli([...args, "--help"]);
      assert.equal(help.code, 0, help.stderr);
      assert.match(help.stdout, /Usage: blockwise/);
      if (args.length > 0) assert.match(help.stdout, new RegExp(`Usage: blockwise ${args[0]}`));
      // The CLI runs under Bun whichever runner runs this test: Bun compiles the block copy.
      const codecs = (await codecsLine()).replace(
        /; block copy: .*$/,
        "; block copy: memcpy (Bun's cc)",
      );
      const expected = `${SOURCE_VERSION_LINE}\n${codecs}`;
      const version = await cli([...args, "--version"]);
      assert.equal(version.code, 0, version.stderr);
      assert.equal(version.stdout.trim(), expected);
      const short = await cli([...args, "-V"]);
      assert.equal(short.code, 0, short.stderr);
      assert.equal(short.stdout.trim(), expected);
    });
  }

  it("--version says which Blosc, zstd encoder and block copy run, and why not the C code", () => {
    const run = (setting: string, zstd = "", copy = "") =>
      spawnSync(BUN, ["main.ts", "--version"], {
        cwd: REPO_ROOT,
        encoding: "utf8",
        env: {
          ...process.env,
          BLOCKWISE_LIBBLOSC: setting,
          BLOCKWISE_LIBZSTD: zstd,
          BLOCKWISE_NATIVE_COPY: copy,
        },
      });
    const off = run("off");
    assert.equal(off.status, 0, off.stderr);
    assert.match(
      off.stdout,
      /^codecs: gzip, zlib native \(node:zlib\); zstd: .+; blosc: blockwise's TypeScript Blosc \(BLOCKWISE_LIBBLOSC=off\); block copy: memcpy \(Bun's cc\)$/m,
    );
    const copyOff = run("", "", "off");
    assert.match(copyOff.stdout, /; block copy: JavaScript \(BLOCKWISE_NATIVE_COPY=off\)$/m);
    const copyWrong = run("", "", "fast");
    assert.match(
      copyWrong.stdout,
      /; block copy: BLOCKWISE_NATIVE_COPY: "fast" is neither .*Fix: /m,
    );
    const zstdOff = run("", "off");
    assert.equal(zstdOff.status, 0, zstdOff.stderr);
    assert.match(zstdOff.stdout, /; zstd: node:zlib \(BLOCKWISE_LIBZSTD=off\); blosc: /);
    const missing = run("/no/such/libblosc.so.1");
    assert.equal(missing.status, 0, missing.stderr);
    assert.match(
      missing.stdout,
      /^codecs: .*; blosc: cannot use the libblosc "\/no\/such\/libblosc.so.1": .*Fix: /m,
    );
  });
});
