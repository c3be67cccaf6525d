/**
 * Workers joining a run by hand: a task with `launch: "manual"` launches nothing and waits; the
 * run writes its secret to a 0600 file and prints `Workers can join: ... --secret-file PATH`;
 * `blockwise worker --connect HOST:PORT --secret-file PATH` started by hand joins, up to the
 * task's maxWorkers (one more is told the task is full and exits 0). A joiner killed mid-run is
 * simply gone: its blocks go back to the queue, no restart is spent. A wrong secret, an unknown
 * task and bad `--secret-file` values are refused with the path and the fix; the secret appears
 * in no output.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import * as net from "node:net";
import {
  encodeFrame,
  type SessionFrame,
  workerSideDecoder,
} from "../lib/execute/protocol/frames.ts";
import { PROTOCOL_VERSION, type ToWorker } from "../lib/execute/protocol/messages.ts";
import { joinSlot, newNonce, newSecret, workerProof } from "../lib/remote/auth.ts";
import { type JoinAnswer, WorkerServer } from "../lib/remote/worker_server.ts";
import { pythonMissing } from "./fixtures/python_peer.ts";
import { killStartedAfterEach, track } from "./fixtures/started.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import {
  BUN,
  callCounts,
  calls,
  CliRun,
  type Finished,
  ledger,
  MAIN,
  until,
  writePipeline,
} from "./fixtures/remote.ts";

const newDir = scratchDirs("join");
const SLOW = { timeout: 120_000 };

const ROIS = `totalRoi: { offset: [0, 0], shape: [40, 40] },
      readRoi: { offset: [0, 0], shape: [10, 10] },
      writeRoi: { offset: [0, 0], shape: [10, 10] },`;

function run(dir: string): CliRun {
  return new CliRun(
    ["run", path.join(dir, "pipeline.mjs"), "--tracking-dir", path.join(dir, "tracking")].concat(
      ["--no-progress"],
    ),
    dir,
  );
}

interface Worker {
  readonly pid: number;
  readonly done: Promise<Finished>;
  kill(signal: NodeJS.Signals): void;
}

/** `blockwise worker <args>`, started by hand (no slot, no secret in the environment). */
function worker(args: readonly string[], cwd: string): Worker {
  const env: Record<string, string | undefined> = { ...process.env, NO_COLOR: "1" };
  delete env["BLOCKWISE_SECRET"];
  delete env["BLOCKWISE_WORKER_SLOT"];
  const child = track(spawn(BUN, [MAIN, "worker", ...args], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  }));
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (t: string) => (stdout += t));
  child.stderr.setEncoding("utf8").on("data", (t: string) => (stderr += t));
  const done = new Promise<Finished>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  );
  return { pid: child.pid!, done, kill: (signal) => child.kill(signal) };
}

/** The join line's address and secret file. */
async function joinLine(cli: CliRun): Promise<{ connect: string; secretFile: string }> {
  const m = await cli.waitFor(
    /Workers can join: .* worker --connect (\S+) --secret-file (\S+)/,
    "the join line",
  );
  return { connect: m[1]!, secretFile: m[2]! };
}

function assertEachOnce(counts: Map<number, number>, blocks: number, except: number[] = []): void {
  assert.equal(counts.size, blocks, `every block ran: ${[...counts.keys()].sort((a, b) => a - b)}`);
  for (const [id, n] of counts) {
    if (!except.includes(id)) assert.equal(n, 1, `block ${id} ran ${n} times`);
  }
}

describe("workers joining by hand", () => {
  // A failed assertion must not leave the run (holding its blocks) and its joiners running.
  killStartedAfterEach();

  it(
    "a manual task waits; two joiners do every block once; a third is told it is full",
    SLOW,
    async () => {
      const dir = newDir("two");
      writePipeline(
        dir,
        `[{ id: "a", ${ROIS} maxWorkers: 2, launch: "manual",
      process(block) { logCall(block); holdUntil("release"); } }]`,
      );
      const cli = run(dir);
      const { connect, secretFile } = await joinLine(cli);
      assert.equal(fs.statSync(secretFile).mode & 0o777, 0o600, "the secret file is private");
      const secret = fs.readFileSync(secretFile, "utf8").trim();
      assert.match(secret, /^[0-9a-f]{64}$/);
      // Nobody launched a worker: the run waits for joiners.
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(calls(dir).length, 0, "no block runs before a worker joins");
      const args = ["--connect", connect, "--secret-file", secretFile];
      const w1 = worker(args, dir);
      const w2 = worker([...args, "--task", "a"], dir);
      await until(() => new Set(calls(dir).map((c) => c.pid)).size === 2, "both joiners to run");
      const w3 = worker(args, dir);
      const third = await w3.done;
      assert.equal(third.code, 0, third.stderr);
      assert.match(
        third.stderr,
        /task "a" is full: it has its 2 workers \(maxWorkers\); try again/,
      );
      assert.match(third.stderr, /The run needs no more workers now/);
      fs.writeFileSync(path.join(dir, "release"), "");
      const r = await cli.finished;
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /All 16 blocks completed\./);
      assertEachOnce(callCounts(dir, "a"), 16);
      assert.deepEqual(new Set(calls(dir).map((c) => c.pid)), new Set([w1.pid, w2.pid]));
      assert.deepEqual(ledger(dir).get("a"), { ...ledger(dir).get("a")!, done: 16, pending: 0 });
      const [e1, e2] = await Promise.all([w1.done, w2.done]);
      assert.equal(e1.code, 0, e1.stderr);
      assert.equal(e2.code, 0, e2.stderr);
      for (const said of [r.stdout, r.stderr, e1.stderr, e2.stderr, third.stderr, e1.stdout]) {
        assert.ok(!said.includes(secret), "the secret appears in no output");
      }
      assert.ok(!fs.existsSync(secretFile), "the run removes its secret file when it ends");
    },
  );

  it(
    "refuses a wrong secret and an unknown task; a joiner killed mid-run is simply gone",
    SLOW,
    async () => {
      const dir = newDir("kill");
      writePipeline(
        dir,
        `[{ id: "a", ${ROIS} maxWorkers: 2, maxRetries: 1, maxWorkerRestarts: 0, launch: "manual",
      process(block) { logCall(block); if (once("victim", block)) holdUntil("never"); else sleep(20); } }]`,
      );
      const cli = run(dir);
      const { connect, secretFile } = await joinLine(cli);
      const wrongFile = path.join(dir, "wrong.secret");
      fs.writeFileSync(wrongFile, newSecret() + "\n", { mode: 0o600 });
      const wrong = await worker(["--connect", connect, "--secret-file", wrongFile], dir).done;
      assert.notEqual(wrong.code, 0);
      assert.match(wrong.stderr, /could not prove it knows this run's secret/);
      await cli.waitFor(/Refused a worker connection from .*: the worker refused this scheduler/);
      const args = ["--connect", connect, "--secret-file", secretFile];
      const nope = await worker([...args, "--task", "nope"], dir).done;
      assert.equal(nope.code, 1, nope.stderr);
      assert.match(nope.stderr, /task "nope" takes no workers joining by hand; tasks that do: "a"/);
      // The first joiner takes a block that holds; kill it once it runs that block.
      const victim = worker(args, dir);
      await until(() => fs.existsSync(path.join(dir, "victim")), "the held block to start");
      const helper = worker(args, dir);
      await until(() => calls(dir).some((c) => c.pid === helper.pid), "the second joiner to run");
      victim.kill("SIGKILL");
      const r = await cli.finished;
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /All 16 blocks completed\./);
      assert.match(r.stderr, /worker \d+, which joined by hand, is gone \(/);
      assert.doesNotMatch(r.stderr, /restarting it|no restarts left|abandoned/);
      const held = Number(fs.readFileSync(path.join(dir, "victim"), "utf8"));
      assertEachOnce(callCounts(dir, "a"), 16, [held]);
      assert.equal(callCounts(dir, "a").get(held), 2, "the killed joiner's block ran again");
      assert.ok(
        calls(dir).filter((c) => c.pid === victim.pid).length === 1,
        "the killed joiner ran only its held block",
      );
      assert.deepEqual(ledger(dir).get("a"), { ...ledger(dir).get("a")!, done: 16, pending: 0 });
      assert.equal((await helper.done).code, 0);
    },
  );

  it("a Python task takes joiners running blockwise's Python client", {
    ...SLOW,
    ...(pythonMissing() === null ? {} : { skip: pythonMissing()! }),
  }, async () => {
    const dir = newDir("python");
    fs.writeFileSync(
      path.join(dir, "task.py"),
      `import os
def process(block, state):
    with open(${JSON.stringify(path.join(dir, "calls.log"))}, "a") as f:
        f.write("%s %s %s %d\\n" % (block.task_id, block.id, block.attempt, os.getpid()))
`,
    );
    writePipeline(
      dir,
      `[{ id: "py", ${ROIS} maxWorkers: 1, launch: "manual",
      python: { module: "task.py", process: "process" } }]`,
    );
    const cli = run(dir);
    const m = await cli.waitFor(
      /Workers can join: (\S+) (\S+) --connect (\S+) --secret-file (\S+)/,
      "the join line",
    );
    const [, interpreter, client, connect, secretFile] = m;
    assert.match(client!, /blockwise-client-[0-9a-f]{16}\/blockwise_worker\.py$/);
    const js = await worker(["--connect", connect!, "--secret-file", secretFile!], dir).done;
    assert.equal(js.code, 1, js.stderr);
    assert.match(js.stderr, /task "py" runs Python: join it with blockwise's Python client/);
    const py = spawnSync(
      interpreter!,
      [client!, "--connect", connect!, "--secret-file", secretFile!, "--task", "py"],
      { cwd: dir, encoding: "utf8" },
    );
    assert.equal(py.status, 0, py.stderr);
    const r = await cli.finished;
    assert.equal(r.code, 0, r.stderr);
    assertEachOnce(callCounts(dir, "py"), 16);
    assert.deepEqual(ledger(dir).get("py"), { ...ledger(dir).get("py")!, done: 16, pending: 0 });
  });

  it(
    "refuses bad --secret-file values with the path and the fix, never printing the secret",
    SLOW,
    () => {
      const dir = newDir("bad");
      const join = (file: string) =>
        spawnSync(BUN, [MAIN, "worker", "--connect", "127.0.0.1:1", "--secret-file", file], {
          cwd: dir,
          encoding: "utf8",
          env: { ...process.env, NO_COLOR: "1" },
        });
      const missing = path.join(dir, "missing.secret");
      let r = join(missing);
      assert.equal(r.status, 2, r.stderr);
      assert.match(
        r.stderr,
        new RegExp(`Cannot read the secret file ${missing} \\(--secret-file\\)`),
      );
      assert.match(r.stderr, /check the path/);

      const open = path.join(dir, "open.secret");
      const secret = newSecret();
      fs.writeFileSync(open, secret + "\n", { mode: 0o644 });
      fs.chmodSync(open, 0o644);
      r = join(open);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /can be read by other users \(mode 644\)/);
      assert.ok(r.stderr.includes(`chmod 600 ${open}`), r.stderr);
      assert.ok(!(r.stdout + r.stderr).includes(secret), "the secret is never printed");

      fs.chmodSync(open, 0o640);
      r = join(open);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /mode 640/);

      const folder = path.join(dir, "folder.secret");
      fs.mkdirSync(folder, { mode: 0o700 });
      r = join(folder);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, new RegExp(`Cannot read the secret file ${folder}`));

      const garbled = path.join(dir, "garbled.secret");
      fs.writeFileSync(garbled, "not a secret\n", { mode: 0o600 });
      r = join(garbled);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /is not 64 hex digits/);
    },
  );
});

/** One joiner's handshake on a raw socket: the frames the server sent until it closed. */
async function rawJoin(
  port: number,
  secret: string,
  join: string,
  macSlot = joinSlot(join),
): Promise<(ToWorker | SessionFrame)[]> {
  const socket = net.connect({ host: "127.0.0.1", port });
  socket.on("error", () => {});
  const decoder = workerSideDecoder();
  const frames: (ToWorker | SessionFrame)[] = [];
  const nonce = newNonce();
  socket.write(encodeFrame({
    kind: "hello",
    protocol: PROTOCOL_VERSION,
    client: "test",
    pid: 1,
    host: "h",
    join,
    nonce,
  }));
  socket.on("data", (chunk: Uint8Array) => {
    for (const f of decoder.push(chunk)) {
      frames.push(f);
      if (f.kind === "challenge") {
        socket.write(
          encodeFrame({ kind: "auth", mac: workerProof(secret, f.nonce, nonce, macSlot) }),
        );
      }
      if (f.kind === "stop") socket.destroy();
    }
  });
  await new Promise((resolve) => socket.on("close", resolve));
  return frames;
}

describe("the handshake of a worker joining by hand", () => {
  killStartedAfterEach();

  it("binds the task in its proof, reaches the join handler, and carries later", async () => {
    const secret = newSecret();
    const log: string[] = [];
    const server = await WorkerServer.start({
      listen: { host: "127.0.0.1", port: 0 },
      secret,
      log: (m) => log.push(m),
    });
    try {
      const port = server.address.port;
      // Without joinable tasks: refused after authentication, not "later".
      let frames = await rawJoin(port, secret, "");
      const last = () => frames[frames.length - 1]!;
      assert.equal(last().kind, "error");
      assert.match(JSON.stringify(last()), /this run takes no workers joining by hand/);
      assert.doesNotMatch(JSON.stringify(last()), /later/);
      const asked: string[] = [];
      let answer: JoinAnswer = { refusal: "full, try again later", later: true };
      server.acceptJoiners((hello) => {
        asked.push(hello.join ?? "?");
        return answer;
      });
      frames = await rawJoin(port, secret, "a");
      assert.deepEqual(last(), {
        kind: "error",
        message: `refused: worker h:1 joining by hand: full, try again later`,
        later: true,
      });
      // A proof for another task (or for a slot) does not pass.
      frames = await rawJoin(port, secret, "a", joinSlot("b"));
      assert.match(JSON.stringify(last()), /wrong secret/);
      frames = await rawJoin(port, secret, "a", "0123456789abcdef0123456789abcdef");
      assert.match(JSON.stringify(last()), /wrong secret/);
      assert.deepEqual(asked, ["a"], "only authenticated joiners reach the handler");
      answer = {
        claim: (channel) => {
          channel.write(encodeFrame({ kind: "stop" }));
          return true;
        },
      };
      frames = await rawJoin(port, secret, "");
      assert.equal(last().kind, "stop", "the joiner's connection reached its executor");
      assert.deepEqual(asked, ["a", ""]);
    } finally {
      await server.close();
    }
  });
});

describe("what a test starts", () => {
  killStartedAfterEach();
  let left: { cli: CliRun; joiner: Worker } | null = null;

  it("(a test that ends with its run and a joiner holding a block)", SLOW, async () => {
    const dir = newDir("left");
    writePipeline(
      dir,
      `[{ id: "a", ${ROIS} maxWorkers: 1, launch: "manual",
      process(block) { logCall(block); holdUntil("never"); } }]`,
    );
    const cli = run(dir);
    const { connect, secretFile } = await joinLine(cli);
    const joiner = worker(["--connect", connect, "--secret-file", secretFile], dir);
    await until(() => calls(dir).length > 0, "the joiner to take a block");
    // Ends here, as a failed assertion would: neither process would ever finish by itself.
    left = { cli, joiner };
  });

  it("is killed when the test ends, pass or fail", async () => {
    assert.ok(left !== null, "the previous test started a run");
    const within = <T>(p: Promise<T>, what: string) =>
      Promise.race([
        p,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`${what} is still running`)), 10_000)
        ),
      ]);
    const [r, w] = await Promise.all([
      within(left.cli.finished, "the run"),
      within(left.joiner.done, "the joiner"),
    ]);
    for (const f of [r, w]) {
      assert.ok(f.signal === "SIGKILL" || f.code === 137, `killed: ${JSON.stringify(f)}`);
    }
  });
});
