/**
 * `blockwise daisy-session`, the engine behind the Python daisy API, driven as Python drives
 * it (JSON lines): daisy's scheduler order, releases, counters and dependency queries across
 * tasks; refusals that name what to fix (unknown request, bad task, cycle, unknown task); a
 * serial run whose blocks and checks are answered by the peer, resumed from its ledger; a
 * failing block that stops a serial run; and the end of stdin ending a run cleanly.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { BUN, MAIN, REPO } from "./fixtures/tracking/harness.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";
import { LOCK_FILE } from "../lib/tracking/lock_files.ts";

const newDir = scratchDirs("daisy-session");

type Message = Record<string, unknown>;

/** One session process and the lines it sends. */
class Peer {
  readonly child: ChildProcess;
  readonly stderr: string[] = [];
  readonly #queue: Message[] = [];
  #wake: (() => void) | null = null;
  #nextId = 1;
  readonly exited: Promise<number | null>;

  constructor() {
    this.child = spawn(BUN, [MAIN, "daisy-session"], {
      cwd: REPO,
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let pending = "";
    this.child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      pending += chunk;
      let nl = pending.indexOf("\n");
      while (nl >= 0) {
        this.#queue.push(JSON.parse(pending.slice(0, nl)) as Message);
        pending = pending.slice(nl + 1);
        nl = pending.indexOf("\n");
      }
      this.#wake?.();
    });
    this.child.stderr!.setEncoding("utf8").on("data", (s: string) => this.stderr.push(s));
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
  }

  send(message: Message): void {
    this.child.stdin!.write(JSON.stringify(message) + "\n");
  }

  /** Sends a request and returns its id. */
  ask(op: string, fields: Message = {}): number {
    const id = this.#nextId++;
    this.send({ id, op, ...fields });
    return id;
  }

  async next(): Promise<Message> {
    while (this.#queue.length === 0) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no line from the session; stderr: ${this.stderr.join("")}`)),
          30_000,
        );
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return this.#queue.shift()!;
  }

  /** The answer to request `id` (events before it are handed to `onEvent`). */
  async answer(id: number, onEvent: (m: Message) => void = () => {}): Promise<Message> {
    for (;;) {
      const m = await this.next();
      if (m["re"] === id) return m;
      onEvent(m);
    }
  }

  async request(op: string, fields: Message = {}): Promise<Message> {
    return await this.answer(this.ask(op, fields));
  }

  async close(): Promise<number | null> {
    this.child.stdin!.end();
    return await this.exited;
  }
}

function task(id: string, fields: Message = {}): Message {
  return {
    id,
    totalRoi: { offset: [0], shape: [40] },
    readRoi: { offset: [0], shape: [10] },
    writeRoi: { offset: [0], shape: [10] },
    fit: "valid",
    readWriteConflict: false,
    maxWorkers: 1,
    maxRetries: 2,
    maxWorkerRestarts: 10,
    timeout: null,
    requires: {},
    check: false,
    mode: "block",
    tracking: null,
    resourceTracking: false,
    skipMask: null,
    ...fields,
  };
}

const grid2d = (id: string, total: [number[], number[]]): Message =>
  task(id, {
    totalRoi: { offset: total[0], shape: total[1] },
    readRoi: { offset: [0, 0], shape: [3, 3] },
    writeRoi: { offset: [1, 1], shape: [1, 1] },
    readWriteConflict: true,
  });

const SLOW = { timeout: 120_000 };

describe("daisy session: scheduler", () => {
  it(
    "hands out blocks level by level in daisy's order and keeps daisy's counters",
    SLOW,
    async () => {
      const peer = new Peer();
      try {
        const hello = await peer.request("hello");
        assert.equal(hello["protocol"], 1);
        const opened = await peer.request("open", {
          pipeline: { tasks: [grid2d("t", [[0, 0], [6, 6]])], edges: [] },
        });
        const handle = opened["handle"];
        assert.deepEqual(opened["tasks"], [{ id: "t", blocks: 16, levels: 4, roots: 4 }]);
        for (const level of [[12, 23, 25, 40], [8, 17, 19, 32], [7, 16, 18, 31], [4, 11, 13, 24]]) {
          const got: Message[] = [];
          for (let i = 0; i < level.length; i++) {
            got.push((await peer.request("acquire", { handle, task: "t" }))["block"] as Message);
          }
          assert.deepEqual(got.map((b) => b["id"]), level);
          assert.equal((await peer.request("acquire", { handle, task: "t" }))["block"], null);
          for (const b of got) {
            await peer.request("release", {
              handle,
              task: "t",
              position: b["position"],
              status: "success",
            });
          }
        }
        const states = (await peer.request("states", { handle }))["states"] as Message;
        assert.deepEqual(
          { ...(states["t"] as Message) },
          {
            total: 16,
            ready: 0,
            processing: 0,
            pending: 0,
            completed: 16,
            skipped: 0,
            failed: 0,
            orphaned: 0,
            started: true,
            done: true,
            abandoned: false,
            workerFailures: 0,
            workerRestarts: 0,
          },
        );
      } finally {
        await peer.close();
      }
    },
  );

  it("retries a failed block, then fails it and orphans what depends on it", SLOW, async () => {
    const peer = new Peer();
    try {
      const t = task("t", {
        totalRoi: { offset: [0], shape: [4] },
        readRoi: { offset: [0], shape: [3] },
        writeRoi: { offset: [1], shape: [1] },
        readWriteConflict: true,
        maxRetries: 1,
      });
      const { handle } = await peer.request("open", { pipeline: { tasks: [t], edges: [] } });
      for (let attempt = 1; attempt <= 2; attempt++) {
        const b = (await peer.request("acquire", { handle, task: "t" }))["block"] as Message;
        assert.equal(b["id"], 2);
        assert.equal(b["attempt"], attempt);
        await peer.request("release", {
          handle,
          task: "t",
          position: b["position"],
          status: "failed",
        });
      }
      assert.equal((await peer.request("acquire", { handle, task: "t" }))["block"], null);
      const s = ((await peer.request("states", { handle }))["states"] as Message)["t"] as Message;
      assert.equal(s["failed"], 1);
      assert.equal(s["orphaned"], 1);
      assert.equal(s["done"], true);
    } finally {
      await peer.close();
    }
  });

  it(
    "answers upstream and downstream blocks across tasks and blocks within a ROI",
    SLOW,
    async () => {
      const peer = new Peer();
      try {
        const { handle } = await peer.request("open", {
          pipeline: {
            tasks: [grid2d("first", [[0, 0], [6, 6]]), grid2d("second", [[1, 1], [4, 4]])],
            edges: [["first", "second"]],
          },
        });
        const ids = (m: Message) =>
          (m["blocks"] as Message[]).map((b) => `${b["task"]}/${b["id"]}`).sort();
        const up = await peer.request("upstream", {
          handle,
          task: "second",
          writeRoi: { offset: [3, 3], shape: [1, 1] },
        });
        assert.deepEqual(
          ids(up),
          [12, 17, 18, 23, 24, 25, 31, 32, 40].map((i) => `first/${i}`).sort(),
        );
        const down = await peer.request("downstream", {
          handle,
          task: "first",
          writeRoi: { offset: [3, 3], shape: [1, 1] },
        });
        assert.deepEqual(ids(down).filter((s) => s.startsWith("second/")), [
          "second/12",
          "second/4",
          "second/7",
          "second/8",
        ]);
        const within = await peer.request("blocks", {
          handle,
          task: "first",
          which: "within",
          roi: { offset: [2, 2], shape: [2, 1] },
        });
        assert.deepEqual(
          (within["blocks"] as Message[]).map((b) => (b["writeRoi"] as Message)["offset"]),
          [[2, 2], [3, 2]],
        );
        const roots = await peer.request("blocks", { handle, task: "first", which: "roots" });
        assert.equal((roots["blocks"] as Message[]).length, 4);
      } finally {
        await peer.close();
      }
    },
  );

  it(
    "refuses what it cannot do with the Python exception and a message that says why",
    SLOW,
    async () => {
      const peer = new Peer();
      try {
        const unknown = await peer.request("frobnicate");
        assert.equal((unknown["error"] as Message)["type"], "ValueError");
        assert.match(
          String((unknown["error"] as Message)["message"]),
          /Unknown request "frobnicate"/,
        );

        const bad = await peer.request("open", {
          pipeline: {
            tasks: [task("bad", { writeRoi: { offset: [0, 0], shape: [10, 10] } })],
            edges: [],
          },
        });
        assert.equal((bad["error"] as Message)["type"], "ValueError");
        assert.match(String((bad["error"] as Message)["message"]), /Task "bad"/);

        const cycle = await peer.request("open", {
          pipeline: { tasks: [task("a"), task("b")], edges: [["a", "b"], ["b", "a"]] },
        });
        assert.match(String((cycle["error"] as Message)["message"]), /cycle/);

        const { handle } = await peer.request("open", {
          pipeline: { tasks: [task("a")], edges: [] },
        });
        const missing = await peer.request("acquire", { handle, task: "nope" });
        assert.equal((missing["error"] as Message)["type"], "KeyError");
        assert.match(String((missing["error"] as Message)["message"]), /"nope".*"a"/);
      } finally {
        await peer.close();
      }
    },
  );
});

describe("daisy session: serial runs", () => {
  const serialRun = (failOn: number | null = null) => {
    const ran: string[] = [];
    const checked: string[] = [];
    const onEvent = (peer: Peer) => (m: Message) => {
      const block = m["block"] as Message | undefined;
      if (m["ev"] === "check") {
        checked.push(`${block!["task"]}/${block!["id"]}`);
        peer.send({ op: "checked", q: m["q"], done: block!["task"] === "a" && block!["id"] === 0 });
      } else if (m["ev"] === "block") {
        ran.push(`${block!["task"]}/${block!["id"]}`);
        if (block!["id"] === failOn) {
          peer.send({
            op: "ran",
            q: m["q"],
            ok: false,
            error: { message: "ValueError: boom", stack: "Traceback ...\nValueError: boom" },
            stop: true,
          });
        } else peer.send({ op: "ran", q: m["q"], ok: true });
      }
    };
    return { ran, checked, onEvent };
  };
  const pipeline = {
    tasks: [task("a", { check: true }), task("b")],
    edges: [["a", "b"]],
  };

  it(
    "runs each block through the peer after its upstream block, resumes from the ledger",
    SLOW,
    async () => {
      const dir = newDir("resume");
      const trackingDir = path.join(dir, "tracking");
      const peer = new Peer();
      try {
        const first = serialRun();
        const id = peer.ask("run", { pipeline, options: { serial: true, trackingDir } });
        const answer = await peer.answer(id, first.onEvent(peer));
        assert.equal(answer["code"], 0, peer.stderr.join(""));
        assert.deepEqual(first.ran, ["a/1", "a/2", "a/3", "b/0", "b/1", "b/2", "b/3"]);
        const states = answer["states"] as Record<string, Message>;
        assert.equal(states["a"]!["skipped"], 1);
        assert.equal(states["b"]!["completed"], 4);
        assert.ok(fs.existsSync(path.join(trackingDir, "a", "zarr.json")));

        const second = serialRun();
        const again = await peer.answer(
          peer.ask("run", { pipeline, options: { serial: true, trackingDir } }),
          second.onEvent(peer),
        );
        assert.deepEqual(second.ran, []);
        assert.equal((again["states"] as Record<string, Message>)["b"]!["skipped"], 4);
      } finally {
        await peer.close();
      }
    },
  );

  it(
    "creates a task's store in a folder that holds only daisy's worker logs, keeping them",
    SLOW,
    async () => {
      const trackingDir = path.join(newDir("logs-first"), "tracking");
      fs.mkdirSync(path.join(trackingDir, "a"), { recursive: true });
      fs.writeFileSync(
        path.join(trackingDir, "a", "worker_0.out"),
        "printed by an untracked run\n",
      );
      const peer = new Peer();
      try {
        const run = serialRun();
        const answer = await peer.answer(
          peer.ask("run", { pipeline, options: { serial: true, trackingDir } }),
          run.onEvent(peer),
        );
        assert.equal(answer["code"], 0, peer.stderr.join(""));
        assert.ok(fs.existsSync(path.join(trackingDir, "a", "zarr.json")));
        assert.equal(
          fs.readFileSync(path.join(trackingDir, "a", "worker_0.out"), "utf8"),
          "printed by an untracked run\n",
        );
      } finally {
        await peer.close();
      }
    },
  );

  it("stops at a failed block when the peer says so, recording the failure", SLOW, async () => {
    const dir = newDir("fail-fast");
    const trackingDir = path.join(dir, "tracking");
    const peer = new Peer();
    try {
      const run = serialRun(2);
      const answer = await peer.answer(
        peer.ask("run", { pipeline, options: { serial: true, trackingDir } }),
        run.onEvent(peer),
      );
      assert.deepEqual(run.ran, ["a/1", "a/2"]);
      assert.equal(answer["outcome"], "interrupted-sigint");
      const failures = answer["failures"] as Message[];
      assert.equal(failures.length, 1);
      assert.equal(failures[0]!["message"], "ValueError: boom");
      assert.equal(failures[0]!["id"], 2);
    } finally {
      await peer.close();
    }
  });

  it("ends a run and exits when Python closes its end", SLOW, async () => {
    const dir = newDir("eof");
    const trackingDir = path.join(dir, "tracking");
    const peer = new Peer();
    peer.ask("run", { pipeline, options: { serial: true, trackingDir } });
    // Answer the check, then leave the first block unanswered and close the pipe.
    for (;;) {
      const m = await peer.next();
      if (m["ev"] === "check") peer.send({ op: "checked", q: m["q"], done: false });
      if (m["ev"] === "block") break;
    }
    assert.ok(fs.existsSync(path.join(trackingDir, "a", LOCK_FILE)), "locked while it runs");
    const code = await peer.close();
    assert.equal(code, 0, peer.stderr.join(""));
    assert.ok(!fs.existsSync(path.join(trackingDir, "a", LOCK_FILE)), "the store is unlocked");
    assert.match(peer.stderr.join(""), /the Python process closed the session/);
  });
});
