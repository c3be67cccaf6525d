/**
 * `blockwise status` and `blockwise reset` on stores written by the real CLI (`bun main.ts run`
 * in a child process): counts in the human output and `--json`, `--map` for 2-D and 3-D grids,
 * a tracking directory of several stores, a store whose lock is held, `reset --failed` / `--roi`
 * / all followed by a re-run that processes exactly the reset blocks, refusals (lock held, no
 * `--yes` without a terminal, bad `--roi`), the `runs.jsonl` reset record, and zarrita reading
 * the store after a reset. Also `renderGridMap` and `parseRoiArgument` directly.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { percentDone } from "../lib/tracking/inspect.ts";
import { InputError } from "../lib/errors.ts";
import { parseRoiArgument } from "../lib/cli/reset.ts";
import { renderGridMap } from "../lib/tracking/grid_map.ts";
import { findStores } from "../lib/tracking/find_stores.ts";
import {
  BLOCK_DONE,
  BLOCK_FAILED,
  BLOCK_PENDING,
  inspectStore,
  type StoreReport,
} from "../lib/tracking/inspect.ts";
import { acquireStoreLock } from "../lib/tracking/lock.ts";
import { type FailedBlockReport, failedBlocks } from "../lib/outputs/errors_log.ts";
import { readRunRecords } from "../lib/tracking/runs_log.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const BUN = path.join(REPO, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO, "main.ts");
const ESC = "\x1b[";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-status-"));
let counter = 0;
after(() => fs.rmSync(root, { recursive: true, force: true }));

function freshDir(label: string): string {
  const dir = path.join(root, `${label}-${++counter}`);
  fs.mkdirSync(dir);
  return dir;
}

interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `bun main.ts ...args` with stdin a pipe (never a terminal) fed `input`. */
function cli(args: readonly string[], input = ""): Exit {
  const run = spawnSync(BUN, [MAIN, ...args], {
    encoding: "utf8",
    input,
    env: { ...process.env, NO_COLOR: "1" },
    timeout: 60_000,
  });
  if (run.error !== undefined) throw run.error;
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

interface TaskSpec {
  readonly id: string;
  readonly total: readonly number[];
  readonly write: readonly number[];
  /** Read context on each side (same on every axis), default 0. */
  readonly context?: number;
  /** Grid indices (`block.index`) that throw while the flag file exists. */
  readonly fail?: readonly (readonly number[])[];
  readonly maxRetries?: number;
  readonly upstream?: readonly string[];
}

interface Pipeline {
  readonly dir: string;
  readonly file: string;
  readonly tracking: string;
  /** While this file exists the `fail` blocks throw. */
  readonly flag: string;
  /** Every call of `process` appends `<task> <index>` here. */
  readonly log: string;
}

function writePipeline(label: string, tasks: readonly TaskSpec[]): Pipeline {
  const dir = freshDir(label);
  const flag = path.join(dir, "fail.flag");
  const log = path.join(dir, "calls.log");
  fs.writeFileSync(flag, "");
  const defs = tasks.map((t) => {
    const c = t.context ?? 0;
    const dims = t.total.length;
    return `{
      id: ${JSON.stringify(t.id)},
      totalRoi: { offset: ${JSON.stringify(new Array(dims).fill(0))}, shape: ${
      JSON.stringify(t.total)
    } },
      readRoi: { offset: ${JSON.stringify(new Array(dims).fill(0))}, shape: ${
      JSON.stringify(t.write.map((w) => w + 2 * c))
    } },
      writeRoi: { offset: ${JSON.stringify(new Array(dims).fill(c))}, shape: ${
      JSON.stringify(t.write)
    } },
      fit: "valid",
      readWriteConflict: false,
      maxWorkers: 2,
      maxRetries: ${t.maxRetries ?? 0},
      upstream: ${JSON.stringify(t.upstream ?? [])},
      process(block: { index: readonly number[] }) {
        const key = block.index.join(",");
        fs.appendFileSync(LOG, ${JSON.stringify(t.id)} + " " + key + "\\n");
        if (${
      JSON.stringify((t.fail ?? []).map((i) => i.join(",")))
    }.includes(key) && fs.existsSync(FLAG)) {
          throw new Error("planned failure at " + key);
        }
      },
    }`;
  });
  const source = `import * as fs from "node:fs";
const LOG = ${JSON.stringify(log)};
const FLAG = ${JSON.stringify(flag)};
export default { tasks: [${defs.join(",\n")}] };
`;
  const file = path.join(dir, "pipeline.ts");
  fs.writeFileSync(file, source);
  return { dir, file, tracking: path.join(dir, "tracking"), flag, log };
}

function run(p: Pipeline, resourceTracking = false): Exit {
  const args = ["run", p.file, "--tracking-dir", p.tracking, "--no-progress"];
  if (resourceTracking) args.push("--resource-tracking");
  return cli(args);
}

/** The `process` calls logged since the last call, sorted; the log is emptied. */
function takeCalls(p: Pipeline): string[] {
  if (!fs.existsSync(p.log)) return [];
  const lines = fs.readFileSync(p.log, "utf8").split("\n").filter((l) => l !== "");
  fs.rmSync(p.log);
  return lines.sort();
}

type StatusJson = StoreReport & {
  readonly failed_blocks: readonly FailedBlockReport[];
  readonly failed_blocks_total: number;
};

function statusJson(target: string): StatusJson[] {
  const r = cli(["status", target, "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const parsed = JSON.parse(r.stdout) as { stores: StatusJson[]; errors: unknown[] };
  assert.deepEqual(parsed.errors, []);
  return parsed.stores;
}

/** The map lines of `status --map` output (between the title line and the legend). */
function mapRows(stdout: string): string[] {
  const lines = stdout.split("\n");
  const title = lines.findIndex((l) => l.trimStart().startsWith("block grid "));
  const legend = lines.findIndex((l, i) => i > title && l.includes("█ done"));
  assert.ok(title >= 0 && legend > title, stdout);
  return lines.slice(title + 1, legend).map((l) => l.trim().split(" ")[1] ?? "");
}

describe("blockwise status", () => {
  const p = writePipeline("two-d", [
    { id: "a", total: [40, 60], write: [10, 10], fail: [[0, 2], [1, 2]], maxRetries: 1 },
  ]);
  let first: Exit;
  before(() => {
    first = run(p, true);
  });
  const store = path.join(p.tracking, "a");

  it("the run that made the store failed two blocks", () => {
    assert.equal(first.code, 1, first.stderr);
    assert.equal(takeCalls(p).length, 24 + 2); // two failed blocks were tried twice
  });

  it("--json counts what the run did", () => {
    const [r, ...rest] = statusJson(store);
    assert.equal(rest.length, 0);
    assert.ok(r !== undefined);
    assert.equal(r.path, store);
    assert.equal(r.task, "a");
    assert.match(r.task_hash, /^[0-9a-f]{64}$/);
    assert.equal(r.format, "blockwise-tracking/1");
    assert.deepEqual(r.grid_shape, [4, 6]);
    assert.deepEqual(r.block_grid_shape, [4, 6]);
    assert.equal(r.layout.fit, "valid");
    assert.deepEqual(r.layout.write_roi, { offset: [0, 0], shape: [10, 10] });
    assert.equal(r.blocks, 24);
    assert.equal(r.untracked_blocks, 0);
    assert.equal(r.done, 22);
    assert.equal(r.failed, 2);
    assert.equal(r.pending, 0);
    assert.equal(r.percent_done, 91.67, "22 of 24, rounded");
    assert.equal(r.failed_attempts, 4);
    assert.equal(r.runs, 1);
    assert.equal(r.torn_lines, 0);
    assert.equal(r.last_run?.outcome, "incomplete");
    assert.equal(r.last_run?.exit_code, 1);
    assert.equal(typeof r.last_run?.seconds, "number");
    assert.ok(Number.isFinite(Date.parse(r.last_run?.started_at ?? "")));
    assert.equal(r.lock, null);
    assert.equal(r.resource_tracking, true);
    assert.equal(r.resources?.blocks_measured, 24);
    assert.ok((r.resources?.wall_seconds_total ?? -1) >= 0);
    assert.ok((r.resources?.peak_rss_bytes_max ?? 0) > 0);
    assert.ok(Number.isFinite(Date.parse(r.resources?.first_sent_at ?? "")));
    assert.ok(
      Date.parse(r.resources?.last_returned_at ?? "") >=
        Date.parse(r.resources?.first_sent_at ?? ""),
    );
    assert.equal(r.io, "fs");
  });

  it("status --json is the in-process inspectStore report plus the failed blocks", () => {
    const mine = inspectStore(store);
    const { failed_blocks, failed_blocks_total, ...theirs } = statusJson(store)[0]!;
    assert.deepEqual(JSON.parse(JSON.stringify(mine)), theirs);
    const failed = failedBlocks(store);
    assert.equal(failed_blocks_total, failed.total);
    assert.equal(failed_blocks_total, 2);
    assert.deepEqual(failed_blocks, JSON.parse(JSON.stringify(failed.blocks)));
  });

  it("prints the counts, the last run, the lock and the layout", () => {
    const r = cli(["status", store]);
    assert.equal(r.code, 0, r.stderr);
    const out = r.stdout;
    assert.match(out, new RegExp(`task "a"  ${store.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
    assert.match(out, /blocks {5}24 \(block grid 4×6\)/);
    assert.match(out, /done {7}22 \(91\.67%\)/);
    assert.match(out, /failed {5}2 \(4 failed attempts in all\)/);
    assert.match(out, /pending {4}0/);
    assert.match(out, /runs {7}1; last: started .*, took .*, incomplete, exit 1/);
    assert.match(out, /lock {7}free/);
    assert.match(out, /layout {5}total Roi\(\(0, 0\), \(40, 60\)\).*fit valid/);
    assert.match(out, /resources {2}24 blocks measured: wall .*peak RSS/);
  });

  it("--map draws the 2-D grid with the failed blocks where they are", () => {
    const r = cli(["status", store, "--map"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /block grid 4×6: rows = axis 0, columns = axis 1/);
    assert.deepEqual(mapRows(r.stdout), ["██✗███", "██✗███", "██████", "██████"]);
    assert.match(r.stdout, /scale: 1 char = 1 block/);
    assert.ok(!r.stdout.includes(ESC), "not a terminal: no colours");
  });

  it("answers while a run holds the lock, and names the holder", () => {
    const lock = acquireStoreLock(store, { command: "test holder" });
    try {
      const [r] = statusJson(store);
      assert.equal(r?.lock?.pid, process.pid);
      assert.equal(r?.lock?.host, os.hostname());
      assert.equal(r?.lock?.command, "test holder");
      assert.equal(r?.lock?.alive, true);
      assert.equal(r?.done, 22);
      const human = cli(["status", store]);
      assert.equal(human.code, 0, human.stderr);
      assert.match(
        human.stdout,
        new RegExp(`lock {7}held by pid ${process.pid} on .*\\(running\\)`),
      );
    } finally {
      lock.release();
    }
  });

  it("says what a run will do with an empty lock file, young (refused) and old (taken over)", () => {
    const lockFile = path.join(store, "blockwise.lock");
    fs.writeFileSync(lockFile, "");
    try {
      const [young] = statusJson(store);
      assert.equal(young?.lock, null);
      assert.equal(young?.lock_unreadable?.next_run, "refuses");
      assert.match(
        cli(["status", store]).stdout,
        /lock {7}unreadable lock file \(0 B, written .*\): a run may be creating it, so the next run refuses the store for now/,
      );
      const old = new Date(Date.now() - 60_000);
      fs.utimesSync(lockFile, old, old);
      const [aged] = statusJson(store);
      assert.equal(aged?.lock_unreadable?.next_run, "takes it over");
      assert.match(cli(["status", store]).stdout, /the next run takes it over/);
    } finally {
      fs.rmSync(lockFile, { force: true });
    }
    assert.equal(statusJson(store)[0]?.lock_unreadable, null);
  });

  it("refuses paths that name no store with exit 2, and a corrupt store with exit 3", () => {
    const missing = cli(["status", path.join(root, "nope")]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /does not exist; expected a tracking store/);
    const empty = freshDir("empty");
    const notStore = cli(["status", empty]);
    assert.equal(notStore.code, 2, "the same code as a path that does not exist");
    const file = path.join(empty, "notes.txt");
    fs.writeFileSync(file, "x");
    const plainFile = cli(["status", file]);
    assert.equal(plainFile.code, 2);
    assert.match(plainFile.stderr, /is a file; expected a tracking store/);
    assert.match(notStore.stderr, /neither a tracking store nor a tracking directory/);
    const broken = freshDir("broken");
    fs.writeFileSync(path.join(broken, "zarr.json"), "{ not json");
    const corrupt = cli(["status", broken]);
    assert.equal(corrupt.code, 3);
    assert.match(corrupt.stderr, /zarr\.json is invalid: not valid JSON/);
    assert.ok(corrupt.stderr.includes(`rm -rf ${broken}`), corrupt.stderr);
    const badAxis = cli(["status", store, "--slice", "9"]);
    assert.equal(badAxis.code, 2);
    assert.match(badAxis.stderr, /--slice 9 is out of range/);
  });
});

describe("status of a tracking directory with several stores", () => {
  const p = writePipeline("multi", [
    { id: "extract", total: [30, 30], write: [10, 10], fail: [[2, 2]] },
    { id: "agglomerate", total: [30, 30], write: [10, 10], upstream: ["extract"] },
  ]);
  let first: Exit;
  before(() => {
    first = run(p);
  });

  it("reports every store, sorted by name", () => {
    assert.equal(first.code, 1, first.stderr);
    assert.deepEqual(findStores(p.tracking), [
      path.join(p.tracking, "agglomerate"),
      path.join(p.tracking, "extract"),
    ]);
    const stores = statusJson(p.tracking);
    assert.deepEqual(stores.map((s) => s.task), ["agglomerate", "extract"]);
    const [agg, ext] = stores;
    assert.equal(ext?.done, 8);
    assert.equal(ext?.failed, 1);
    assert.equal(ext?.pending, 0);
    // The downstream block of the failed one is orphaned: not done, never failed.
    assert.equal(agg?.done, 8);
    assert.equal(agg?.failed, 0);
    assert.equal(agg?.pending, 1);
    assert.equal(agg?.resource_tracking, false);
    assert.equal(agg?.resources, null);
    const human = cli(["status", p.tracking]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^2 tracking stores: 16\/18 blocks done, 1 failed/);
    assert.match(human.stdout, /task "agglomerate"/);
    assert.match(human.stdout, /task "extract"/);
    assert.match(human.stdout, /resources {2}not tracked/);
  });

  it("reset --yes on the directory resets every store and records it in each", () => {
    const r = cli(["reset", p.tracking, "--yes"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Reset task "agglomerate" .*: 8 blocks reset \(8 done marks/);
    assert.match(r.stdout, /Reset task "extract" .*: 9 blocks reset \(8 done marks and 1 failure/);
    for (const s of statusJson(p.tracking)) {
      assert.equal(s.done, 0);
      assert.equal(s.failed, 0);
      assert.equal(s.pending, 9);
      const records = readRunRecords(s.path).records.filter((x) => x["kind"] === "reset");
      assert.equal(records.length, 1);
      assert.equal(records[0]?.["mode"], "all");
    }
  });
});

/** Every file under `dir` and its bytes, to show a command changed nothing. */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = path.join(rel, e.name);
      if (e.isDirectory()) walk(r);
      else out.set(r, fs.readFileSync(path.join(dir, r)).toString("base64"));
    }
  };
  walk("");
  return out;
}

/** The text of the last `error: ...` of a command's stderr (to the end). */
function errorText(stderr: string): string {
  const at = stderr.lastIndexOf("error: ");
  assert.ok(at >= 0, `no error in: ${stderr}`);
  return stderr.slice(at + "error: ".length).trimEnd();
}

describe("a damaged store in a tracking directory", () => {
  // "segment" has 54 blocks, all done: before the validator was shared, a run skipped them all
  // and exited 0 although status refused the store.
  const p = writePipeline("damaged", [
    { id: "extract", total: [30, 30], write: [10, 10] },
    { id: "segment", total: [60, 90], write: [10, 10] },
  ]);
  const broken = () => path.join(p.tracking, "segment");
  const healthy = () => path.join(p.tracking, "extract");
  const REASON =
    /^Tracking store at (\S+) is damaged: Zarr array metadata \S+done\/zarr\.json is not a Zarr v3 array document/;
  before(() => {
    fs.rmSync(p.flag);
    const first = run(p);
    assert.equal(first.code, 0, first.stderr);
    takeCalls(p);
    fs.writeFileSync(path.join(broken(), "done", "zarr.json"), "{}");
  });

  it("status shows the healthy store, then names the damaged one with what is wrong and the fix; exit 3", () => {
    const r = cli(["status", p.tracking]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(
      r.stdout,
      /^2 tracking stores: 9\/9 blocks done, 0 failed; 1 cannot be read \(see below\)\n/,
    );
    assert.match(r.stdout, new RegExp(`task "extract"  ${healthy()}`));
    assert.doesNotMatch(r.stdout, /task "segment"/);
    const message = errorText(r.stderr);
    assert.match(message, REASON);
    assert.equal(REASON.exec(message)?.[1], broken());
    assert.ok(message.endsWith(`Delete it to start fresh:\n    rm -rf ${broken()}`), message);
    assert.doesNotMatch(r.stderr, /internal error/);
  });

  it("status --json carries the healthy report and an errors entry with the same message; exit 3", () => {
    const r = cli(["status", p.tracking, "--json"]);
    assert.equal(r.code, 3, r.stderr);
    const parsed = JSON.parse(r.stdout) as {
      stores: StoreReport[];
      errors: { path: string; error: string }[];
    };
    assert.deepEqual(parsed.stores.map((s) => s.task), ["extract"]);
    assert.equal(parsed.stores[0]?.done, 9);
    assert.deepEqual(parsed.errors.map((e) => e.path), [broken()]);
    assert.equal(parsed.errors[0]?.error, errorText(cli(["status", p.tracking]).stderr));
    assert.equal(r.stderr, "", "--json reports the damaged store in the JSON only");
  });

  it("status --json of healthy stores has an empty errors list", () => {
    const r = cli(["status", healthy(), "--json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual((JSON.parse(r.stdout) as { errors: unknown[] }).errors, []);
  });

  it("run, reset and migrate refuse it with exit 3 and the same message, changing nothing", () => {
    const message = errorText(cli(["status", broken()]).stderr);
    assert.match(message, REASON);
    const before = snapshot(p.tracking);
    const commands = [
      ["run", p.file, "--tracking-dir", p.tracking, "--no-progress"],
      ["reset", p.tracking, "--yes"],
      ["reset", broken(), "--yes"],
      ["migrate", broken(), "--pipeline", p.file, "--task", "segment"],
    ];
    for (const args of commands) {
      const r = cli(args);
      assert.equal(r.code, 3, `${args.join(" ")}: ${r.stderr}`);
      assert.equal(errorText(r.stderr), message, args.join(" "));
      assert.deepEqual(takeCalls(p), [], `${args[0]}: no block ran`);
      assert.deepEqual(snapshot(p.tracking), before, `${args.join(" ")} changed nothing`);
    }
  });

  it("a folder with a store's files whose zarr.json is not a blockwise group is named, not skipped", () => {
    const odd = path.join(p.tracking, "odd");
    fs.cpSync(healthy(), odd, { recursive: true });
    try {
      fs.writeFileSync(path.join(odd, "zarr.json"), "{}");
      const r = cli(["status", p.tracking, "--json"]);
      assert.equal(r.code, 3, r.stderr);
      const parsed = JSON.parse(r.stdout) as { errors: { path: string; error: string }[] };
      assert.deepEqual(parsed.errors.map((e) => e.path), [odd, broken()]);
      assert.match(
        parsed.errors[0]!.error,
        /has a zarr\.json without attributes\.blockwise\.task_hash/,
      );
    } finally {
      fs.rmSync(odd, { recursive: true, force: true });
    }
  });
});

describe("a ledger chunk file that is missing", () => {
  it("reads as the fill value: a lost failures chunk keeps every done mark", () => {
    const p = writePipeline("missing-failures", [
      { id: "t", total: [4, 4], write: [2, 2], fail: [[1, 1]], maxRetries: 1 },
    ]);
    assert.equal(run(p).code, 1);
    const store = path.join(p.tracking, "t");
    const chunk = path.join(store, "failures", "c", "0", "0");
    fs.rmSync(chunk);
    const [r] = statusJson(store);
    assert.equal(r?.done, 3, "the done marks are read as they are");
    assert.equal(r?.failed_attempts, 0, "the lost counts are the fill value");
    assert.deepEqual(r?.missing_chunks, ["failures"]);
    assert.match(
      cli(["status", store]).stdout,
      /missing {4}the chunk file of "failures": read as the fill value \(as Zarr does\); the next run or reset restores it/,
    );
    takeCalls(p);
    fs.rmSync(p.flag);
    const second = run(p);
    assert.equal(second.code, 0, second.stderr);
    assert.match(
      second.stderr + second.stdout,
      /the chunk file of array "failures" was missing; restored as its fill value \(0\), as Zarr reads a missing chunk: no failed attempt is recorded; the done marks are kept/,
    );
    assert.deepEqual(takeCalls(p), ["t 1,1"], "only the block that was not done ran");
    assert.equal(fs.statSync(chunk).size, 4 * 4);
    assert.deepEqual(statusJson(store)[0]?.missing_chunks, []);
  });

  it("a lost done chunk means no block is done: every block runs again", () => {
    const p = writePipeline("missing-done", [{ id: "t", total: [4], write: [2] }]);
    assert.equal(run(p).code, 0);
    fs.rmSync(path.join(p.tracking, "t", "done", "c", "0"));
    assert.equal(statusJson(path.join(p.tracking, "t"))[0]?.done, 0);
    takeCalls(p);
    const again = run(p);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr + again.stdout, /"done" was missing; .*every block runs again/);
    assert.deepEqual(takeCalls(p), ["t 0", "t 1"]);
  });
});

describe("blockwise reset", () => {
  it("--failed clears only the failures; the re-run processes only the failed blocks", () => {
    const p = writePipeline("failed", [
      { id: "a", total: [40, 60], write: [10, 10], fail: [[0, 2], [3, 5]] },
    ]);
    assert.equal(run(p).code, 1);
    takeCalls(p);
    const store = path.join(p.tracking, "a");
    // No done mark is destroyed, so no --yes is needed even without a terminal.
    const r = cli(["reset", store, "--failed"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /2 failed blocks reset to pending/);
    const [s] = statusJson(store);
    assert.equal(s?.done, 22);
    assert.equal(s?.failed, 0);
    assert.equal(s?.pending, 2);
    assert.equal(s?.failed_attempts, 0);
    const record = readRunRecords(store).records.at(-1);
    assert.equal(record?.["kind"], "reset");
    assert.equal(record?.["mode"], "failed");
    assert.equal(record?.["roi"], null);
    assert.equal(record?.["blocks_reset"], 2);
    assert.equal(record?.["done_cleared"], 0);
    assert.equal(record?.["failures_cleared"], 2);
    assert.equal(record?.["host"], os.hostname());
    assert.equal(typeof record?.["pid"], "number");
    assert.ok(Number.isFinite(Date.parse(String(record?.["at"]))));
    fs.rmSync(p.flag);
    const again = run(p);
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(takeCalls(p), ["a 0,2", "a 3,5"]);
    assert.equal(statusJson(store)[0]?.done, 24);
  });

  it("--roi resets the blocks whose write ROI intersects the box (context wider than a block)", async () => {
    // Context 10 = one block: the tracking grid (6×6) is anchored at totalRoi, the block grid
    // (4×4) at the total write ROI, and block g has tracking cell g + 1.
    const p = writePipeline("roi", [{ id: "c", total: [60, 60], write: [10, 10], context: 10 }]);
    assert.equal(run(p, true).code, 0);
    takeCalls(p);
    const store = path.join(p.tracking, "c");
    const before = statusJson(store)[0]!;
    assert.deepEqual(before.grid_shape, [6, 6]);
    assert.deepEqual(before.block_grid_shape, [4, 4]);
    assert.equal(before.blocks, 16);
    assert.equal(before.done, 16);

    // A box that meets no block is refused, changing nothing.
    const outside = cli(["reset", store, "--roi", "100,0:10,10", "--yes"]);
    assert.equal(outside.code, 2, outside.stderr);
    assert.match(
      outside.stderr,
      /--roi 100,0:10,10 intersects no block: the blocks of task "c" cover 10,10:40,40/,
    );
    assert.equal(statusJson(store)[0]!.done, 16);

    // [15, 25) on both axes meets blocks 0 ([10, 20)) and 1 ([20, 30)) on each axis.
    const r = cli(["reset", store, "--roi", "15,15:10,10", "--yes"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /4 blocks reset \(4 done marks and 0 failure counts cleared/);
    const after = statusJson(store)[0]!;
    assert.equal(after.done, 12);
    assert.equal(after.pending, 4);
    assert.equal(after.resources?.blocks_measured, 12);
    const record = readRunRecords(store).records.at(-1);
    assert.deepEqual(
      {
        kind: record?.["kind"],
        mode: record?.["mode"],
        roi: record?.["roi"],
        selected: record?.["blocks_selected"],
        reset: record?.["blocks_reset"],
        done: record?.["done_cleared"],
      },
      {
        kind: "reset",
        mode: "roi",
        roi: { offset: [15, 15], shape: [10, 10] },
        selected: 4,
        reset: 4,
        done: 4,
      },
    );
    const m = cli(["status", store, "--map"]);
    assert.deepEqual(mapRows(m.stdout), ["··██", "··██", "████", "████"]);

    // zarrita sees the reset cells back at their fill values, the others as the run left them.
    const zstore = new FileSystemStore(store);
    const group = await zarr.open(zarr.root(zstore), { kind: "group" });
    assert.equal(
      (group.attrs as { blockwise?: { task_id?: string } }).blockwise?.task_id,
      "c",
    );
    const read = async (name: string) => {
      const arr = await zarr.open(zarr.root(zstore).resolve(name), { kind: "array" });
      assert.deepEqual(arr.shape, [6, 6]);
      return (await zarr.get(arr)).data as unknown as ArrayLike<number | bigint>;
    };
    const done = await read("done");
    const wall = await read("wall_seconds");
    const worker = await read("worker_id");
    const rss = await read("peak_rss_bytes");
    const sent = await read("sent_at");
    const failures = await read("failures");
    for (let ty = 0; ty < 6; ty++) {
      for (let tx = 0; tx < 6; tx++) {
        const cell = ty * 6 + tx;
        const isBlock = ty >= 1 && ty <= 4 && tx >= 1 && tx <= 4;
        const wasReset = (ty === 1 || ty === 2) && (tx === 1 || tx === 2);
        const where = `cell (${ty}, ${tx})`;
        assert.equal(done[cell], isBlock && !wasReset ? 1 : 0, where);
        assert.equal(failures[cell], 0, where);
        if (isBlock && !wasReset) {
          assert.ok(Number.isFinite(wall[cell] as number), where);
          assert.notEqual(worker[cell], 2 ** 32 - 1, where);
          assert.ok((rss[cell] as bigint) > 0n, where);
        } else {
          assert.ok(Number.isNaN(wall[cell] as number), where);
          assert.ok(Number.isNaN(sent[cell] as number), where);
          assert.equal(worker[cell], 2 ** 32 - 1, where);
          assert.equal(rss[cell], 0n, where);
        }
      }
    }

    // A box on the edge of one block meets only that block.
    assert.equal(cli(["reset", store, "--roi", "10,10:10,10", "--yes"]).code, 0);
    assert.equal(readRunRecords(store).records.at(-1)?.["blocks_selected"], 1);
    const rerun = run(p, true);
    assert.equal(rerun.code, 0, rerun.stderr);
    // block.index is daisy's grid index, anchored at totalRoi: block g has index g + 1.
    assert.deepEqual(takeCalls(p), ["c 1,1", "c 1,2", "c 2,1", "c 2,2"]);
  });

  it("is refused with exit 3 while another process holds the lock, changing nothing", () => {
    const p = writePipeline("locked", [{ id: "a", total: [20, 20], write: [10, 10] }]);
    assert.equal(run(p).code, 0);
    const store = path.join(p.tracking, "a");
    const lock = acquireStoreLock(store, { command: "test holder" });
    try {
      const r = cli(["reset", store, "--yes"]);
      assert.equal(r.code, 3, r.stdout + r.stderr);
      assert.match(r.stderr, new RegExp(`in use by another run: pid ${process.pid}`));
      const f = cli(["reset", store, "--failed"]);
      assert.equal(f.code, 3);
    } finally {
      lock.release();
    }
    const [s] = statusJson(store);
    assert.equal(s?.done, 4);
    assert.equal(s?.lock, null);
    assert.equal(readRunRecords(store).records.filter((x) => x["kind"] === "reset").length, 0);
  });

  it("without --yes and without a terminal, refuses to destroy done marks (exit 2)", () => {
    const p = writePipeline("noyes", [{ id: "a", total: [20, 20], write: [10, 10] }]);
    assert.equal(run(p).code, 0);
    const store = path.join(p.tracking, "a");
    for (const input of ["", "y\n"]) {
      const r = cli(["reset", store], input);
      assert.equal(r.code, 2, r.stdout + r.stderr);
      assert.match(r.stderr, /would clear 4 done blocks in .*stdin is not a terminal.*Pass --yes/);
    }
    const roi = cli(["reset", store, "--roi", "0,0:5,5"]);
    assert.equal(roi.code, 2);
    assert.equal(statusJson(store)[0]?.done, 4);
    assert.equal(statusJson(store)[0]?.lock, null); // the refusal released the lock
    assert.equal(readRunRecords(store).records.filter((x) => x["kind"] === "reset").length, 0);
  });

  it("rejects a malformed --roi or one of the wrong dimensionality with exit 2", () => {
    const p = writePipeline("badroi", [{ id: "a", total: [20, 20], write: [10, 10] }]);
    assert.equal(run(p).code, 0);
    const store = path.join(p.tracking, "a");
    const dims = cli(["reset", store, "--roi", "0,0,0:1,1,1", "--yes"]);
    assert.equal(dims.code, 2);
    assert.match(dims.stderr, /Invalid --roi "0,0,0:1,1,1": it has 3 axes but task "a" .* has 2/);
    const form = cli(["reset", store, "--roi", "0,0-4,4", "--yes"]);
    assert.equal(form.code, 2);
    assert.match(form.stderr, /Invalid --roi "0,0-4,4".*expected OFFSET:SHAPE/);
    assert.equal(statusJson(store)[0]?.done, 4);
    assert.equal(cli(["reset", path.join(root, "nope"), "--yes"]).code, 2);
  });
});

describe("status --map of a 3-D grid", () => {
  const p = writePipeline("three-d", [{
    id: "vol",
    total: [40, 50, 60],
    write: [10, 10, 10],
    fail: [[1, 2, 3], [2, 4, 0], [3, 4, 0], [2, 4, 5]],
  }]);
  let first: Exit;
  before(() => {
    first = run(p);
  });
  const store = path.join(p.tracking, "vol");

  it("projects along axis 0 by default: a column with a failed block is ✗", () => {
    assert.equal(first.code, 1, first.stderr);
    const r = cli(["status", store, "--map"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /block grid 4×5×6, projected along axis 0 \(4 blocks per column\): rows = axis 1, columns = axis 2/,
    );
    assert.deepEqual(mapRows(r.stdout), [
      "██████",
      "██████",
      "███✗██",
      "██████",
      "✗████✗",
    ]);
    assert.match(r.stdout, /each a column of blocks/);
  });

  it("--slice shows one slice, along --axis", () => {
    const s1 = cli(["status", store, "--slice", "1"]);
    assert.equal(s1.code, 0, s1.stderr);
    assert.match(s1.stdout, /slice 1 of axis 0: rows = axis 1, columns = axis 2/);
    assert.deepEqual(mapRows(s1.stdout), ["██████", "██████", "███✗██", "██████", "██████"]);
    const x0 = cli(["status", store, "--map", "--axis", "2", "--slice", "0"]);
    assert.match(x0.stdout, /slice 0 of axis 2: rows = axis 0, columns = axis 1/);
    assert.deepEqual(mapRows(x0.stdout), ["█████", "█████", "████✗", "████✗"]);
    const y = cli(["status", store, "--axis", "1"]);
    assert.match(y.stdout, /projected along axis 1 \(5 blocks per column\): rows = axis 0/);
    assert.deepEqual(mapRows(y.stdout), ["██████", "███✗██", "✗████✗", "✗█████"]);
  });

  it("a partly done column shows its done fraction", () => {
    // Reset the slab z = 0: every column is then 3/4 done (▓) unless it has a failure.
    const r = cli(["reset", store, "--roi", "0,0,0:10,50,60", "--yes"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /30 blocks reset/);
    const m = cli(["status", store, "--map"]);
    assert.deepEqual(mapRows(m.stdout), [
      "▓▓▓▓▓▓",
      "▓▓▓▓▓▓",
      "▓▓▓✗▓▓",
      "▓▓▓▓▓▓",
      "✗▓▓▓▓✗",
    ]);
    const slice = cli(["status", store, "--slice", "0"]);
    assert.deepEqual(mapRows(slice.stdout), new Array(5).fill("······"));
  });
});

describe("renderGridMap", () => {
  const states = (n: number, at: (i: number) => number) =>
    Uint8Array.from({ length: n }, (_, i) => at(i));

  it("downsamples a wide 1-D grid: fraction shades, failed wins, and says the scale", () => {
    // 300 blocks in 10 characters of 30 blocks each.
    const done = [30, 0, 5, 15, 25, 29, 30, 0, 30, 30];
    const s = states(300, (i) => {
      const c = Math.floor(i / 30);
      if (c === 9 && i % 30 === 7) return BLOCK_FAILED;
      return i % 30 < done[c]! ? BLOCK_DONE : BLOCK_PENDING;
    });
    const text = renderGridMap({ block_grid_shape: [300], states: s }, { width: 12, color: false });
    const lines = text.split("\n");
    assert.equal(lines.length, 3);
    assert.equal(lines[0], "block grid 300: columns = axis 0");
    assert.equal(lines[1], "0 █·░▒▓▓█·█✗");
    assert.match(lines[2]!, /scale: 1 char = 1×30 blocks \(rows×columns\), downsampled/);
  });

  it("keeps a tall 2-D grid within 40 rows and fits the width", () => {
    const text = renderGridMap(
      { block_grid_shape: [100, 500], states: new Uint8Array(50_000).fill(BLOCK_DONE) },
      { width: 80, color: false },
    );
    const lines = text.split("\n");
    const rows = lines.slice(1, -1);
    assert.equal(rows.length, 34); // 3 rows of blocks per line
    for (const row of rows) assert.ok([...row].length <= 80, row);
    assert.match(lines.at(-1)!, /1 char = 3×7 blocks/);
  });

  it("colours only when asked", () => {
    const input = { block_grid_shape: [2, 2], states: Uint8Array.from([1, 2, 0, 1]) };
    const plain = renderGridMap(input, { width: 80, color: false });
    assert.ok(!plain.includes(ESC));
    const colored = renderGridMap(input, { width: 80, color: true });
    assert.ok(colored.includes(`${ESC}32m█`));
    assert.ok(colored.includes(`${ESC}31m✗`));
    assert.ok(colored.includes(`${ESC}2m·`));
  });

  it("refuses an axis or slice out of range with an InputError", () => {
    const input = { block_grid_shape: [2, 3, 4], states: new Uint8Array(24) };
    assert.throws(() => renderGridMap(input, { width: 80, color: false, axis: 3 }), InputError);
    assert.throws(
      () => renderGridMap(input, { width: 80, color: false, axis: 1, slice: 3 }),
      /--slice 3 is out of range: expected a block index along axis 1/,
    );
    assert.throws(
      () =>
        renderGridMap({ block_grid_shape: [5], states: new Uint8Array(5) }, {
          width: 80,
          color: false,
          slice: 0,
        }),
      InputError,
    );
  });
});

describe("parseRoiArgument", () => {
  it("parses OFFSET:SHAPE", () => {
    assert.deepEqual(parseRoiArgument("0,0,0:128,128,128"), {
      offset: [0, 0, 0],
      shape: [128, 128, 128],
    });
    assert.deepEqual(parseRoiArgument("-5, 10:3, 4"), { offset: [-5, 10], shape: [3, 4] });
  });

  it("names the value and the expected form", () => {
    for (
      const [value, why] of [
        ["0,0", /exactly one ':'/],
        ["0,0:1", /offset has 2 numbers but the shape has 1/],
        ["0,a:1,1", /component "a" is not an integer/],
        ["0,0:0,1", /shape must be positive/],
        ["0.5,0:1,1", /not an integer/],
      ] as const
    ) {
      assert.throws(() => parseRoiArgument(value), (error: unknown) => {
        assert.ok(error instanceof InputError);
        assert.ok(error.message.includes(`"${value}"`), error.message);
        assert.match(error.message, /expected OFFSET:SHAPE/);
        assert.match(error.message, why);
        return true;
      });
    }
  });
});

describe("percentDone", () => {
  it("rounds to the nearest hundredth, but says 100 and 0 only when they are true", () => {
    assert.equal(percentDone(22, 24), 91.67);
    assert.equal(percentDone(2, 3), 66.67);
    assert.equal(percentDone(999_999, 1_000_000), 99.99);
    assert.equal(percentDone(1, 1_000_000), 0.01);
    assert.equal(percentDone(0, 10), 0);
    assert.equal(percentDone(10, 10), 100);
    assert.equal(percentDone(0, 0), 100);
  });
});
