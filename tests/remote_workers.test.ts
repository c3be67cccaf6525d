/**
 * Remote workers end to end: `blockwise run` with tasks whose workers are separate
 * `blockwise worker` processes (the generic command launcher around `{worker}`), connecting back
 * over loopback TCP. Every block is done exactly once; strangers on the port are refused and
 * logged while the run goes on; a killed worker's block is retried on a replacement; a silent
 * (stopped) worker is lost after its lease; workers near their job's end leave and are replaced;
 * a launch that never yields a worker abandons the task with the reason; a worker whose pipeline
 * file differs from the scheduler's refuses to run it.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { encodeFrame } from "../lib/execute/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../lib/execute/protocol/messages.ts";
import { newNonce } from "../lib/remote/auth.ts";
import { inspectStore } from "../lib/tracking/inspect.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import {
  callCounts,
  calls,
  CliRun,
  listeningPort,
  rawClient,
  until,
  writePipeline,
} from "./fixtures/remote.ts";

const newDir = scratchDirs("remote");

const ROIS_2D = `totalRoi: { offset: [0, 0], shape: [40, 40] },
      readRoi: { offset: [-10, -10], shape: [30, 30] },
      writeRoi: { offset: [0, 0], shape: [10, 10] },`;

function run(dir: string, extra: readonly string[] = []): CliRun {
  return new CliRun(
    [
      "run",
      path.join(dir, "pipeline.mjs"),
      "--tracking-dir",
      path.join(dir, "tracking"),
      "--no-progress",
      ...extra,
    ],
    dir,
  );
}

function statusDone(dir: string, task: string): { done: number; failed_attempts: number } {
  const r = inspectStore(path.join(dir, "tracking", task));
  return { done: r.done, failed_attempts: r.failed_attempts };
}

function assertEachOnce(counts: Map<number, number>, blocks: number, except: number[] = []): void {
  assert.equal(counts.size, blocks, `every block ran: ${[...counts.keys()].sort((a, b) => a - b)}`);
  for (const [id, n] of counts) {
    if (!except.includes(id)) assert.equal(n, 1, `block ${id} ran ${n} times`);
  }
}

describe("remote workers through the command launcher", () => {
  it("run a two-task pipeline with conflicts; every block is done exactly once", async () => {
    const dir = newDir("e2e");
    writePipeline(
      dir,
      `[
    { id: "a", ${ROIS_2D} maxWorkers: 2,
      launch: { kind: "command", argv: ["{worker}"] },
      process(block) { logCall(block); } },
    { id: "b", upstream: ["a"], ${ROIS_2D} maxWorkers: 2,
      launch: { kind: "command", argv: ["sh", "-c", "exec {worker_shell}"] },
      process(block) { logCall(block); } },
  ]`,
    );
    const r = await run(dir).finished;
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /Listening for remote workers on 127\.0\.0\.1:\d+/);
    assert.match(r.stderr, /All 8 blocks completed\./);
    assertEachOnce(callCounts(dir, "a"), 4);
    assertEachOnce(callCounts(dir, "b"), 4);
    assert.ok(new Set(calls(dir).map((c) => c.pid)).size >= 2, "blocks ran in several processes");
    assert.ok(!calls(dir).some((c) => c.pid === 0));
    assert.equal(statusDone(dir, "a").done, 4);
    assert.equal(statusDone(dir, "b").done, 4);
    const logs = fs.readdirSync(path.join(dir, "tracking", ".workers"));
    assert.equal(logs.length, 1, "one folder of worker logs per run");
    const files = fs.readdirSync(path.join(dir, "tracking", ".workers", logs[0]!));
    assert.ok(files.some((f) => /^a-worker-\d+\.log$/.test(f)), files.join(" "));
    const rerun = await run(dir).finished;
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.equal(calls(dir).length, 8, "a rerun runs nothing");
  });

  it("refuse strangers on the port and log them, while the run goes on", async () => {
    const dir = newDir("strangers");
    writePipeline(
      dir,
      `[{ id: "a", ${ROIS_2D} launch: { kind: "command", argv: ["{worker}"] },
      process(block) { logCall(block); holdUntil("release"); } }]`,
    );
    const cli = run(dir);
    const port = await listeningPort(cli);
    await until(() => calls(dir).length >= 1, "the first block to start");
    // A worker that does not know the secret.
    const wrong = rawClient(port);
    wrong.socket.write(encodeFrame({
      kind: "hello",
      protocol: PROTOCOL_VERSION,
      client: "intruder",
      pid: 1,
      host: "x",
      slot: "0123456789abcdef0123456789abcdef",
      nonce: newNonce(),
    }));
    wrong.socket.once("data", () => {
      wrong.socket.write(encodeFrame({ kind: "auth", mac: "00".repeat(32) }));
    });
    await wrong.closed;
    // Garbage, and a frame announced far over the cap.
    const garbage = rawClient(port);
    garbage.socket.write("SSH-2.0-OpenSSH_9.2\r\n");
    await garbage.closed;
    const huge = rawClient(port);
    const header = new Uint8Array(4);
    new DataView(header.buffer).setUint32(0, 0xffffffff, true);
    huge.socket.write(header);
    await huge.closed;
    await cli.waitFor(/(Refused a worker connection[^\n]*\n[^]*){3}/, "three refusals");
    fs.writeFileSync(path.join(dir, "release"), "");
    const r = await cli.finished;
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /Refused a worker connection from 127\.0\.0\.1:\d+: wrong secret/);
    assert.match(
      r.stderr,
      /Refused a worker connection from [^\n]*does not speak the blockwise protocol/,
    );
    assert.match(r.stderr, /exceeds the cap of 16384 bytes/);
    assertEachOnce(callCounts(dir, "a"), 4);
    assert.equal(statusDone(dir, "a").failed_attempts, 0, "the run was not disturbed");
  });

  it("retry the block of a killed worker on a replacement", async () => {
    const dir = newDir("killed");
    writePipeline(
      dir,
      `[{ id: "a", ${ROIS_2D} launch: { kind: "command", argv: ["{worker}"] },
      process(block) {
        logCall(block);
        if (once("killed", block)) process.kill(process.pid, "SIGKILL");
      } }]`,
    );
    const r = await run(dir).finished;
    assert.equal(r.code, 0, r.stderr);
    const counts = callCounts(dir, "a");
    const victim = Number(fs.readFileSync(path.join(dir, "killed"), "utf8"));
    assertEachOnce(counts, 4, [victim]);
    assert.equal(counts.get(victim), 2, "the killed worker's block ran again");
    assert.match(r.stderr, /worker 0 was terminated \([^)]*\); restarting it/);
    assert.deepEqual(statusDone(dir, "a"), { done: 4, failed_attempts: 1 });
  });

  it("lose a worker that stops heartbeating after its lease, and retry its block", async () => {
    const dir = newDir("silent");
    writePipeline(
      dir,
      `[{ id: "a", ${ROIS_2D} launch: { kind: "command", argv: ["{worker}"] },
      process(block) {
        logCall(block);
        if (once("stopped", block)) process.kill(process.pid, "SIGSTOP");
      } }]`,
    );
    const r = await run(dir, ["--lease", "3"]).finished;
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /the worker sent nothing for \d+ s \(its lease is 3 s\)/);
    const counts = callCounts(dir, "a");
    const victim = Number(fs.readFileSync(path.join(dir, "stopped"), "utf8"));
    assertEachOnce(counts, 4, [victim]);
    assert.equal(counts.get(victim), 2);
  });

  it("replace workers that leave before their job's end; every block done once, no restart spent", async () => {
    const dir = newDir("walltime");
    // Each worker's "job" ends 6 s after it starts; with a margin of 4 s it works for about 2 s.
    writePipeline(
      dir,
      `[{ id: "a", totalRoi: { offset: [0], shape: [600] }, readRoi: { offset: [0], shape: [10] },
      writeRoi: { offset: [0], shape: [10] }, maxWorkerRestarts: 0,
      launch: { kind: "command", walltimeMargin: 4,
        argv: ["sh", "-c", "BLOCKWISE_JOB_END_TIME=$(( $(date +%s) + 6 )) exec {worker_shell}"] },
      process(block) { logCall(block); sleep(100); } }]`,
    );
    const r = await run(dir).finished;
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stderr,
      /worker \d+ takes no more blocks \(its job ends in \d+ s, less than the margin of 4 s\)/,
    );
    assertEachOnce(callCounts(dir, "a"), 60);
    assert.ok(new Set(calls(dir).map((c) => c.pid)).size >= 2, "replacements took over");
  });

  it("abandon a task whose launches never yield a worker, saying why", async () => {
    const dir = newDir("nolaunch");
    writePipeline(
      dir,
      `[{ id: "a", ${ROIS_2D} maxWorkerRestarts: 1,
      launch: { kind: "command", argv: ["sh", "-c", "echo no such queue >&2; exit 3", "{worker}"] },
      process(block) { logCall(block); } }]`,
    );
    const r = await run(dir).finished;
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      /launch command \(pid \d+\) ended before its worker connected: it exited with status 3 \(its output: [^)]*a-worker-0\.log\)/,
    );
    assert.match(r.stderr, /Task "a" abandoned: its workers failed 2 times/);
    assert.equal(calls(dir).length, 0);
  });

  it("refuse to run a pipeline file that differs on the worker's side", async () => {
    const dir = newDir("sha");
    const file = writePipeline(
      dir,
      `[{ id: "a", ${ROIS_2D} maxWorkerRestarts: 0,
      launch: { kind: "command", argv: ["sh", "-c", "echo '// edited' >> ${
        path.join(dir, "pipeline.mjs")
      }; exec {worker_shell}"] },
      process(block) { logCall(block); } }]`,
    );
    const r = await run(dir).finished;
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `The pipeline file ${
          file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
        } on [^ ]+ differs from the scheduler's`,
      ),
    );
    assert.equal(calls(dir).length, 0);
  });

  it("refuse --launcher command for a task without a launch command, and launch on a command task", async () => {
    const dir = newDir("usage");
    writePipeline(dir, `[{ id: "a", ${ROIS_2D} process(block) { logCall(block); } }]`);
    const r = await run(dir, ["--launcher", "command"]).finished;
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--launcher command needs the launch command of task "a"/);
    writePipeline(dir, `[{ id: "a", ${ROIS_2D} command: ["true"], launch: "slurm" }]`);
    const c = await run(dir).finished;
    assert.equal(c.code, 2, c.stderr);
    assert.match(
      c.stderr,
      /Task "a": field "launch" is "slurm", but command tasks run their blocks on this machine/,
    );
  });
});
