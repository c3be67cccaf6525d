/**
 * The worker server's accept queue. A job array's workers connect within the same second; a
 * connection that finds the listener's kernel queue full is dropped and its worker waits for TCP
 * to try again (1 s, then 3 s, 7 s). Bun asks the kernel for a queue of 512 whatever the program
 * says; the worker server widens it (lib/runtime/accept_queue.ts). Here a child opens 1,000
 * connections while this process accepts none (its thread blocked, as a busy scheduler's is):
 * every one must complete. With the runtime's 512, about 513 did and the rest waited.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { newSecret } from "../lib/remote/auth.ts";
import { WorkerServer } from "../lib/remote/worker_server.ts";
import { runtimeName } from "../lib/runtime/mod.ts";

const BURST = fileURLToPath(new URL("./fixtures/network/connect_burst.ts", import.meta.url));
const CONNECTIONS = 1000;

/** Block this thread (no event loop turn, so nothing is accepted) until `file` exists. */
function blockUntilExists(file: string, ms: number): void {
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + ms;
  while (!fs.existsSync(file) && Date.now() < deadline) Atomics.wait(sleeper, 0, 0, 10);
}

describe("the worker server's accept queue", () => {
  it("holds a burst of 1,000 connections made while the scheduler accepts none", async (t) => {
    if (process.platform !== "linux") return t.skip("other systems keep the runtime's queue");
    const somaxconn = Number(fs.readFileSync("/proc/sys/net/core/somaxconn", "utf8"));
    if (somaxconn < CONNECTIONS + 10) {
      return t.skip(`net.core.somaxconn is ${somaxconn}: no queue of ${CONNECTIONS} can be had`);
    }
    const runtime = runtimeName();
    const log: string[] = [];
    const server = await WorkerServer.start({
      listen: { host: "127.0.0.1", port: 0 },
      secret: newSecret(),
      log: (m) => log.push(m),
    });
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-accept-")), "r.json");
    try {
      assert.deepEqual(log, [], "the server said it keeps the runtime's queue");
      const port = server.address.port;
      const args = [BURST, String(port), String(CONNECTIONS), "15000", out];
      const child = spawn(process.execPath, runtime === "deno" ? ["run", "-A", ...args] : args, {
        stdio: "ignore",
      });
      const exited = new Promise((resolve) => child.once("close", resolve));
      blockUntilExists(out, 30_000);
      await exited;
      const report = JSON.parse(fs.readFileSync(out, "utf8")) as { connected: number };
      assert.equal(report.connected, CONNECTIONS);
    } finally {
      await server.close();
      fs.rmSync(path.dirname(out), { recursive: true, force: true });
    }
  });
});
