/**
 * TCP connections behind lib/runtime/tcp.ts: Bun's own sockets (what the worker server uses
 * under Bun) and `node:net` (Deno's, and any runtime's `net.Socket`). Bun's sockets take what
 * the kernel's buffer holds and leave the rest to the caller, so these tests fill that buffer:
 * nothing written may be lost, reordered or changed, `end` sends everything first, `destroy`
 * does not wait, and a connection's close is told once.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as net from "node:net";
import { spawn } from "node:child_process";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { runtimeName } from "../lib/runtime/mod.ts";
import type {
  TcpConnection,
  TcpConnectOptions,
  TcpListener,
  TcpListenOptions,
} from "../lib/runtime/tcp.ts";
import { connectBunTcp, listenBunTcp } from "../lib/runtime/tcp_bun.ts";
import { connectNodeTcp, listenNodeTcp } from "../lib/runtime/tcp_node.ts";

interface Adapter {
  readonly name: string;
  listen(options: TcpListenOptions): Promise<TcpListener>;
  connect(options: TcpConnectOptions): Promise<TcpConnection>;
}

const ADAPTERS: Adapter[] = [
  { name: "node:net", listen: listenNodeTcp, connect: connectNodeTcp },
  ...(runtimeName() === "bun"
    ? [{ name: "Bun sockets", listen: listenBunTcp, connect: connectBunTcp }]
    : []),
];

const STOPPED_LISTENER = fileURLToPath(
  new URL("./fixtures/network/stopped_listener.ts", import.meta.url),
);
const runtimeArgs = (file: string): string[] =>
  runtimeName() === "deno" ? ["run", "-A", file] : [file];

/** Far more than a loopback socket's buffers hold (a few MB), so writes must queue. */
const MB = 1024 * 1024;

/** A listener on a free loopback port whose connections go to `take` (in order). */
async function listener(adapter: Adapter) {
  const waiting: ((c: TcpConnection) => void)[] = [];
  const arrived: TcpConnection[] = [];
  const server = await adapter.listen({
    host: "127.0.0.1",
    port: 0,
    backlog: 64,
    onConnection: (c) => {
      const next = waiting.shift();
      if (next !== undefined) next(c);
      else arrived.push(c);
    },
    onError: (error) => {
      throw error;
    },
  });
  const take = (): Promise<TcpConnection> => {
    const c = arrived.shift();
    return c !== undefined ? Promise.resolve(c) : new Promise((resolve) => waiting.push(resolve));
  };
  return { server, port: server.address.port, take };
}

/** A connection from a client of `adapter` to its listener: both ends. */
async function pair(adapter: Adapter) {
  const { server, port, take } = await listener(adapter);
  const client = await adapter.connect({ host: "127.0.0.1", port, timeoutMs: 5000 });
  return { server, client, peer: await take() };
}

/** Everything the peer sends until it closes, and how it closed. */
function collect(c: TcpConnection): Promise<{ bytes: Uint8Array; failure: string | null }> {
  const chunks: Uint8Array[] = [];
  c.setOnData((chunk) => chunks.push(chunk.slice()));
  return new Promise((resolve) =>
    c.onClose((failure) => {
      const bytes = new Uint8Array(chunks.reduce((n, ch) => n + ch.length, 0));
      let at = 0;
      for (const ch of chunks) {
        bytes.set(ch, at);
        at += ch.length;
      }
      resolve({ bytes, failure });
    })
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const adapter of ADAPTERS) {
  describe(`TCP connections through ${adapter.name}`, () => {
    it("sends every byte in order when the kernel's buffer is full, and end() sends them all before closing", async () => {
      const { server, client, peer } = await pair(adapter);
      const received = collect(client);
      // 16 chunks of 4 MB, chunk i filled with i: a lost, repeated or reordered part shows.
      for (let i = 0; i < 16; i++) peer.write(new Uint8Array(4 * MB).fill(i));
      peer.end(new Uint8Array([255]));
      const { bytes, failure } = await received;
      assert.equal(failure, null);
      assert.equal(bytes.length, 64 * MB + 1);
      for (let i = 0; i < 16; i++) {
        const part = bytes.subarray(i * 4 * MB, (i + 1) * 4 * MB);
        assert.ok(part.every((b) => b === i), `chunk ${i} arrived changed or out of order`);
      }
      assert.equal(bytes[64 * MB], 255);
      await server.close();
    });

    it("destroy closes at once, drops what is still queued, and tells the close once", async () => {
      const { server, client, peer } = await pair(adapter);
      const received = collect(client);
      const closes: (string | null)[] = [];
      peer.onClose((failure) => closes.push(failure));
      for (let i = 0; i < 16; i++) peer.write(new Uint8Array(4 * MB));
      peer.destroy();
      peer.destroy();
      peer.write(new Uint8Array(10)); // after the close: nothing, no throw
      const { bytes } = await received;
      assert.ok(bytes.length < 64 * MB, `all ${bytes.length} bytes were sent`);
      await sleep(20);
      assert.equal(closes.length, 1);
      assert.equal(peer.closed, true);
      await server.close();
    });

    it("holds chunks that arrive while the connection has no data handler, for the next one", async () => {
      const { server, client, peer } = await pair(adapter);
      client.write(new TextEncoder().encode("hello"));
      await sleep(50); // arrived, with nobody to read it
      const got: string[] = [];
      peer.setOnData((chunk) => got.push(new TextDecoder().decode(chunk)));
      assert.equal(got.join(""), "hello");
      // Handed over: the first handler stops, the second gets what follows.
      const second: string[] = [];
      peer.setOnData(null);
      client.write(new TextEncoder().encode("again"));
      await sleep(50);
      peer.setOnData((chunk) => second.push(new TextDecoder().decode(chunk)));
      await sleep(10);
      assert.equal(got.join(""), "hello");
      assert.equal(second.join(""), "again");
      client.destroy();
      await server.close();
    });

    it("pause leaves the peer's bytes unread until resume", async () => {
      const { server, client, peer } = await pair(adapter);
      peer.pause();
      const got: string[] = [];
      peer.setOnData((chunk) => got.push(new TextDecoder().decode(chunk)));
      client.write(new TextEncoder().encode("wait"));
      await sleep(100);
      assert.deepEqual(got, []);
      peer.resume();
      await sleep(50);
      assert.equal(got.join(""), "wait");
      client.destroy();
      await server.close();
    });

    it("tells a close to a handler added after it, soon and once, and a handler removed never", async () => {
      const { server, client, peer } = await pair(adapter);
      const removed: (string | null)[] = [];
      const stop = peer.onClose((f) => removed.push(f));
      stop();
      const closed = new Promise<string | null>((resolve) => peer.onClose(resolve));
      client.end();
      assert.equal(await closed, null);
      let late = 0;
      peer.onClose(() => late++);
      assert.equal(late, 0, "not before onClose returns");
      await sleep(10);
      assert.equal(late, 1);
      assert.deepEqual(removed, []);
      await server.close();
    });

    it("connects from the local address it is given (a simulated node's)", async () => {
      const { server, port, take } = await listener(adapter);
      const client = await adapter.connect({
        host: "127.0.0.1",
        port,
        localAddress: "127.1.0.5",
        timeoutMs: 5000,
      });
      const peer = await take();
      assert.equal(peer.remoteAddress, "127.1.0.5");
      assert.ok(peer.remotePort > 0);
      client.destroy();
      await server.close();
    });

    it("refuses to listen on a port in use, naming it; a connect to nobody is refused", async () => {
      const { server, port } = await listener(adapter);
      await assert.rejects(
        adapter.listen({
          host: "127.0.0.1",
          port,
          backlog: 8,
          onConnection: () => {},
          onError: () => {},
        }),
        (error: Error) => error.message.includes("EADDRINUSE") && error.message.includes(`${port}`),
      );
      await server.close();
      // The port is free now, and nobody listens on it.
      await assert.rejects(
        adapter.connect({ host: "127.0.0.1", port, timeoutMs: 5000 }),
        /ECONNREFUSED/,
      );
    });

    it("gives up a connect that gets no answer, saying it timed out", async () => {
      const stopped = spawn(process.execPath, runtimeArgs(STOPPED_LISTENER), {
        stdio: ["ignore", "pipe", "inherit"],
      });
      try {
        const port = await new Promise<number>((resolve) =>
          stopped.stdout!.once("data", (d: Uint8Array) => resolve(Number(String(d).trim())))
        );
        // Its queue holds a connection or two (512 under Bun, which asks for that whatever the
        // backlog); the kernel drops the SYNs of the rest.
        const fillers = Array.from({ length: 600 }, () => net.connect({ host: "127.0.0.1", port }));
        for (const f of fillers) f.on("error", () => {});
        await sleep(100);
        const started = Date.now();
        await assert.rejects(
          adapter.connect({ host: "127.0.0.1", port, timeoutMs: 300 }),
          /timed out/,
        );
        const waited = Date.now() - started;
        assert.ok(waited >= 250 && waited < 3000, `gave up after ${waited} ms`);
        for (const f of fillers) f.destroy();
      } finally {
        stopped.kill("SIGKILL");
      }
    });
  });
}
