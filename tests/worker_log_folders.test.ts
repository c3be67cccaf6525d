/**
 * Worker log folders do not pile up: a run keeps the last 10 runs' folders (its own included),
 * never removes one written to within the last hour, and touches nothing else.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pruneWorkerLogFolders } from "../lib/remote/worker_log_folders.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("worker-logs");
const MINUTE = 60_000;

/** A run folder with one log file, last written `ago` ms before `now`. */
function runFolder(parent: string, name: string, ago: number, now: number): string {
  const folder = path.join(parent, name);
  fs.mkdirSync(folder, { recursive: true });
  const log = path.join(folder, "t-worker-0.log");
  fs.writeFileSync(log, "a log line\n");
  const when = new Date(now - ago);
  fs.utimesSync(log, when, when);
  fs.utimesSync(folder, when, when);
  return folder;
}

describe("pruneWorkerLogFolders", () => {
  it("keeps the 9 newest run folders and recent ones, removes older ones, touches nothing else", () => {
    const now = Date.now();
    const workers = path.join(newDir("tracking"), ".workers");
    const newest = Array.from(
      { length: 9 },
      (_, i) => runFolder(workers, randomUUID(), (i + 1) * MINUTE, now),
    );
    const recent = runFolder(workers, randomUUID(), 30 * MINUTE, now);
    const old = [2, 3, 4].map((hours) =>
      runFolder(workers, randomUUID(), hours * 60 * MINUTE, now)
    );
    const notes = runFolder(workers, "notes", 48 * 60 * MINUTE, now);
    fs.writeFileSync(path.join(workers, "blockwise_worker-0123456789abcdef.py"), "# client\n");
    const client = path.join(workers, "blockwise-client-0123456789abcdef");
    fs.mkdirSync(client);
    fs.writeFileSync(path.join(client, "blockwise_worker.py"), "# client\n");
    fs.utimesSync(client, new Date(now - 72 * 60 * MINUTE), new Date(now - 72 * 60 * MINUTE));

    const removed = pruneWorkerLogFolders(path.join(workers, randomUUID()), now);
    assert.deepEqual(removed.sort(), [...old].sort());
    for (const kept of [...newest, recent, notes]) assert.ok(fs.existsSync(kept), kept);
    assert.ok(fs.existsSync(path.join(workers, "blockwise_worker-0123456789abcdef.py")));
    assert.ok(fs.existsSync(path.join(client, "blockwise_worker.py")), "the client folder stays");
  });

  it("a log written within the hour keeps an old folder (its run may still be going)", () => {
    const now = Date.now();
    const workers = path.join(newDir("live"), ".workers");
    for (let i = 0; i < 9; i++) runFolder(workers, randomUUID(), (i + 1) * MINUTE, now);
    const live = runFolder(workers, randomUUID(), 5 * 60 * MINUTE, now);
    fs.writeFileSync(path.join(live, "t-worker-1.log"), "still writing\n"); // written now
    assert.deepEqual(pruneWorkerLogFolders(path.join(workers, randomUUID()), now), []);
    assert.ok(fs.existsSync(live));
  });

  it("in the system temp folder, only this user's blockwise-workers-<run id> folders", () => {
    const now = Date.now();
    const mine = Array.from({ length: 9 }, () => `blockwise-workers-${randomUUID()}`);
    const fresh = mine.map((name, i) => runFolder(os.tmpdir(), name, (i + 1) * MINUTE, now));
    const stale = runFolder(os.tmpdir(), `blockwise-workers-${randomUUID()}`, 3 * 60 * MINUTE, now);
    const other = runFolder(os.tmpdir(), `blockwise-other-${randomUUID()}`, 3 * 60 * MINUTE, now);
    try {
      const removed = pruneWorkerLogFolders(
        path.join(os.tmpdir(), `blockwise-workers-${randomUUID()}`),
        now,
      );
      assert.ok(removed.includes(stale), removed.join("\n"));
      assert.ok(!fs.existsSync(stale));
      assert.ok(fs.existsSync(other));
      for (const f of fresh) assert.ok(fs.existsSync(f), f);
    } finally {
      for (const f of [...fresh, stale, other]) fs.rmSync(f, { recursive: true, force: true });
    }
  });
});
