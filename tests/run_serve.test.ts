/**
 * `blockwise run --serve`: the run serves its own dashboard. Polled over HTTP during a real run
 * (`bun main.ts run` in a child process): the done count rises and ends at the total, the blocks
 * running now are listed with their workers, the last document says the run finished, and the
 * run still exits with its own code. The frames take the ledger's part from the run's live map
 * (no pass over the store per frame) and still count every block the run finished: never fewer
 * than the run's own counters at that moment, the map's cells agreeing with the counts and the
 * failed blocks listed with their errors. Refusals: `--serve` without `--tracking-dir`, an
 * address in use.
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
import { CELL_DONE, CELL_FAILED, type ReportData } from "../lib/view/report_data.ts";

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

function pipelineIn(name: string, text = PIPELINE): string {
  const dir = path.join(root, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, "pipeline.mjs"), text);
  return dir;
}

// The blocks at grid index (i, j) with (10 i + j) % 15 === 7 fail for good: 8 of the 120.
const FAILING = (i: number, j: number) => (i * 10 + j) % 15 === 7;
const FAILING_PIPELINE = PIPELINE.replace(
  "async process() { await sleep(25); },",
  `maxRetries: 0,
  async process(block) {
    await sleep(25);
    const [i, j] = block.index;
    if ((i * 10 + j) % 15 === 7) throw new Error(\`bad block \${i},\${j}\`);
  },`,
);

/** Start `run --serve` in `dir`: the process, the URL it prints, its stderr so far, its exit. */
async function startServedRun(dir: string) {
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
  const out = { stderr: "" };
  child.stderr.on("data", (chunk: Buffer) => (out.stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const deadline = Date.now() + 30_000;
  let url = "";
  while (url === "" && Date.now() < deadline) {
    url = out.stderr.match(/Dashboard of this run: (http:\/\/\S+)/)?.[1] ?? "";
    await new Promise((r) => setTimeout(r, 20));
  }
  return { child, url, out, exited, deadline };
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

  it("frames count the blocks the run finishes from its live map", async () => {
    const dir = pipelineIn("live-map", FAILING_PIPELINE);
    let failing = 0;
    for (let i = 0; i < 12; i++) for (let j = 0; j < 10; j++) if (FAILING(i, j)) failing++;
    const { child, url, out, exited, deadline } = await startServedRun(dir);
    try {
      assert.notEqual(url, "", out.stderr);
      const seen: string[] = [];
      let midRun = 0;
      let finished: ReportData | null = null;
      while (Date.now() < deadline) {
        const frame = await fetchJson(`${url}api/frame`);
        if (frame === null) break;
        const store = frame.status.stores[0]!;
        const live = frame.live!;
        const task = frame.tasks[0]!;
        seen.push(`${store.done}/${live.tasks[0]!.done}`);
        if (live.finished) {
          finished = frame;
          break;
        }
        assert.deepEqual(live.live_maps, ["tiles"]);
        // The ledger is written before the run counts a block: the map never lags the counters.
        assert.ok(store.done >= live.tasks[0]!.done, `ledger/counted done: ${seen}`);
        assert.ok(store.failed >= live.tasks[0]!.failed, `failed ${store.failed}`);
        const codes = Buffer.from(task.map.state.codes, "base64");
        assert.equal(codes.filter((c) => c === CELL_DONE).length, store.done);
        assert.equal(codes.filter((c) => c === CELL_FAILED).length, store.failed);
        assert.equal(task.failures.total, store.failed);
        for (const b of task.failures.blocks) {
          assert.ok(FAILING(b.index[0]!, b.index[1]!), `block ${b.index} is not one that fails`);
          assert.equal(b.message, `bad block ${b.index[0]},${b.index[1]}`);
        }
        if (live.tasks[0]!.done > 0 && store.done < 120 - failing) midRun++;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(await exited, 1, out.stderr);
      assert.ok(midRun >= 2, `frames seen (ledger/counted done): ${seen}`);
      assert.ok(finished !== null, `no finished frame: ${seen}`);
      assert.deepEqual(finished.live!.live_maps, []);
      assert.equal(finished.status.stores[0]!.done, 120 - failing);
      assert.equal(finished.status.stores[0]!.failed, failing);
      assert.equal(finished.tasks[0]!.failures.total, failing);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
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
