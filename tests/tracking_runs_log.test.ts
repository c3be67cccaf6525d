/**
 * `runs.jsonl` mechanics (lib/tracking/runs_log.ts): one JSON object per line, appended; torn
 * and non-object lines skipped and counted; an append after a torn line starts a new line.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { StoreError } from "../lib/errors.ts";
import {
  appendRunRecord,
  lastRunRecord,
  readRunRecords,
  RUNS_LOG_FILE,
} from "../lib/tracking/runs_log.ts";

let root = "";
let counter = 0;
before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-runs-log-"));
});
after(() => {
  if (root !== "") fs.rmSync(root, { recursive: true, force: true });
});

function storeDir(): string {
  const dir = path.join(root, `store-${++counter}`);
  fs.mkdirSync(dir);
  return dir;
}

function logText(dir: string): string {
  return fs.readFileSync(path.join(dir, RUNS_LOG_FILE), "utf8");
}

const RUN = {
  kind: "run",
  run_id: "r1",
  started_at: "2026-12-02T10:00:00.000Z",
  ended_at: "2026-12-02T10:01:00.000Z",
  seconds: 60,
  outcome: "done",
  exit_code: 0,
  blocks: { total: 4, completed: 3, skipped: 1, failed: 0, orphaned: 0 },
  note: "line\nbreak and \u2028 separator",
};

describe("runs log", () => {
  it("a missing log reads as empty", () => {
    const dir = storeDir();
    assert.deepEqual(readRunRecords(dir), { records: [], tornLines: 0 });
    assert.equal(lastRunRecord(dir), null);
    assert.deepEqual(readRunRecords(path.join(root, "no-such-store")), {
      records: [],
      tornLines: 0,
    });
  });

  it("appends one line per record and reads them back in order", () => {
    const dir = storeDir();
    appendRunRecord(dir, RUN);
    appendRunRecord(dir, { kind: "reset", what: "all", blocks: 4 });
    appendRunRecord(dir, { ...RUN, run_id: "r2" });
    const text = logText(dir);
    assert.equal(text.split("\n").length, 4); // three lines, each ending in "\n"
    assert.ok(text.endsWith("\n"));
    const { records, tornLines } = readRunRecords(dir);
    assert.equal(tornLines, 0);
    assert.deepEqual(records, [RUN, { kind: "reset", what: "all", blocks: 4 }, {
      ...RUN,
      run_id: "r2",
    }]);
    assert.deepEqual(lastRunRecord(dir), { ...RUN, run_id: "r2" });
    assert.deepEqual(lastRunRecord(dir, "reset"), { kind: "reset", what: "all", blocks: 4 });
    assert.equal(lastRunRecord(dir, "migration"), null);
  });

  it("skips a torn last line, and the next append starts on a new line", () => {
    const dir = storeDir();
    appendRunRecord(dir, RUN);
    const whole = `${JSON.stringify({ ...RUN, run_id: "torn" })}\n`;
    fs.appendFileSync(path.join(dir, RUNS_LOG_FILE), whole.slice(0, 40)); // crash mid-write
    assert.deepEqual(readRunRecords(dir), { records: [RUN], tornLines: 1 });
    assert.deepEqual(lastRunRecord(dir), RUN);
    appendRunRecord(dir, { ...RUN, run_id: "r2" });
    const lines = logText(dir).split("\n");
    assert.equal(lines.length, 4);
    assert.equal(lines[1], whole.slice(0, 40));
    assert.deepEqual(JSON.parse(lines[2] ?? ""), { ...RUN, run_id: "r2" });
    assert.deepEqual(readRunRecords(dir), {
      records: [RUN, { ...RUN, run_id: "r2" }],
      tornLines: 1,
    });
  });

  it("a torn multi-byte character is skipped too", () => {
    const dir = storeDir();
    const bytes = new TextEncoder().encode(`${JSON.stringify({ kind: "run", host: "nœud" })}\n`);
    const cut = bytes.indexOf(0xc5) + 1; // inside the two-byte "œ"
    fs.writeFileSync(path.join(dir, RUNS_LOG_FILE), bytes.subarray(0, cut));
    appendRunRecord(dir, { kind: "run", host: "nœud" });
    assert.deepEqual(readRunRecords(dir), {
      records: [{ kind: "run", host: "nœud" }],
      tornLines: 1,
    });
  });

  it("skips and counts lines that are not JSON objects; blank lines are not counted", () => {
    const dir = storeDir();
    fs.writeFileSync(
      path.join(dir, RUNS_LOG_FILE),
      [
        '{"kind":"run","n":1}',
        "[1,2]",
        "42",
        "null",
        '"text"',
        "",
        "   ",
        "{oops",
        '{"kind":"run","n":2}\r',
      ]
        .join("\n") + "\n",
    );
    const { records, tornLines } = readRunRecords(dir);
    assert.deepEqual(records, [{ kind: "run", n: 1 }, { kind: "run", n: 2 }]);
    assert.equal(tornLines, 5);
  });

  it("refuses a record that does not serialise to an object", () => {
    const dir = storeDir();
    const odd = { toJSON: () => [1, 2] };
    assert.throws(() => appendRunRecord(dir, odd), TypeError);
    assert.equal(fs.existsSync(path.join(dir, RUNS_LOG_FILE)), false);
  });

  it("a store folder that is missing is a StoreError on append", () => {
    const dir = path.join(root, "gone");
    assert.throws(
      () => appendRunRecord(dir, RUN),
      (error: unknown) => error instanceof StoreError && error.path === dir,
    );
  });
});
