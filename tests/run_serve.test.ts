/**
 * `blockwise run --serve`: the run serves its own dashboard. Polled over HTTP during a real run
 * (`bun main.ts run` in a child process): the done count rises and ends at the total, the blocks
 * running now are listed with their workers, the last document says the run finished, and the
 * run still exits with its own code. Refusals: `--serve` without `--tracking-dir`, an address
 * in use.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import type { ReportData } from "../lib/view/report_data.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const BUN = path.join(REPO, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO, "main.ts");
const root = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-run-serve-"));
after(() => fs.rmSync(root, { recursive: true, force: true }));

const PIPELINE = `
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default { tasks: [{
  id: "tiles",
  totalRoi: { offset: [0, 0], shape: [120, 100] },
  readRoi: { offset: [0, 0], shape: [10, 10] },
  writeRoi: { offset: [0, 0], shape: [10, 10] },
  readWriteConflict: false,
  maxWorkers: 2,
  async process() { await sleep(25); },
}] };
`;

function pipelineIn(name: string): string {
  const dir = path.join(root, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, "pipeline.mjs"), PIPELINE);
  return dir;
}

async function fetchJson(url: string): Promise<ReportData | null> {
  try {
    const r = await fetch(url);
    return r.ok ? (await r.json()) as ReportData : null;
  } catch {
    return null; // the run has not started serving yet, or has stopped
  }
}

describe("run --serve", () => {
  it("serves the run in flight: done rises to the total, running blocks, finished", async () => {
    const dir = pipelineIn("live");
    const child = spawn(
      BUN,
      [
        MAIN,
        "run",
        "pipeline.mjs",
        "--tracking-dir",
        "trk",
        "--serve",
        "127.0.0.1:0",
        "--no-progress",
      ],
      { cwd: dir, env: { ...process.env, NO_COLOR: "1" } },
    );
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code) => resolve(code))
    );
    const deadline = Date.now() + 30_000;
    let url = "";
    while (url === "" && Date.now() < deadline) {
      url = stderr.match(/Dashboard of this run: (http:\/\/\S+)/)?.[1] ?? "";
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.notEqual(url, "", stderr);
    const done: number[] = [];
    let sawRunning = false;
    let finished: ReportData | null = null;
    while (Date.now() < deadline) {
      const frame = await fetchJson(`${url}api/frame`);
      if (frame === null) break;
      assert.equal(frame.parts, "frame");
      const live = frame.live!;
      assert.equal(live.tasks[0]!.total, 120);
      done.push(live.tasks[0]!.done);
      if (live.running.length > 0) {
        sawRunning = true;
        assert.match(live.running[0]!.worker, /^tiles:w\d+$/);
        assert.equal(live.running[0]!.task, "tiles");
      }
      if (live.finished) {
        finished = frame;
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(await exited, 0, stderr);
    assert.ok(finished !== null, `no finished frame; done counts seen: ${done}`);
    assert.equal(finished.live!.tasks[0]!.done, 120);
    assert.ok(sawRunning, "no running block was listed");
    assert.ok(done.length >= 3 && done[0]! < 120, `done counts seen: ${done}`);
    for (let k = 1; k < done.length; k++) assert.ok(done[k]! >= done[k - 1]!);
    assert.equal(finished.status.stores[0]!.done, 120);
  });

  it("refuses --serve without --tracking-dir (exit 2) before any block runs", () => {
    const dir = pipelineIn("untracked");
    const r = spawnSync(BUN, [MAIN, "run", "pipeline.mjs", "--serve"], {
      cwd: dir,
      encoding: "utf8",
    });
    assert.equal(r.status, 2, r.stderr);
    assert.match(
      r.stderr,
      /--serve shows the run's ledger, and this run keeps none: give --tracking-dir DIR too/,
    );
  });

  it("refuses an address in use (exit 2), leaving the store unlocked", async () => {
    const dir = pipelineIn("busy");
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = spawnSync(
        BUN,
        [MAIN, "run", "pipeline.mjs", "--tracking-dir", "trk", "--serve", `127.0.0.1:${port}`],
        { cwd: dir, encoding: "utf8" },
      );
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, new RegExp(`127\\.0\\.0\\.1:${port}`));
      assert.ok(!fs.existsSync(path.join(dir, "trk", "tiles", "blockwise.lock")));
    } finally {
      blocker.close();
    }
  });
});
