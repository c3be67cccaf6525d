/**
 * The worker server's handshake against real TCP clients on loopback: a worker with the run's
 * secret is admitted on its slot; a wrong secret, a frame over the handshake cap, bytes that are
 * not frames, another protocol version, a client that never finishes (slow-loris, on a manual
 * deadline), a slot nobody waits on or one already taken, and frames sent before init are each
 * refused, logged, and leave the server serving. The worker side refuses a scheduler that cannot
 * prove the secret. Also the secret's transport: environment or a private file, never argv.
 */

import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import {
  encodeFrame,
  type FrameDecoder,
  workerSideDecoder,
} from "../lib/execute/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../lib/execute/protocol/messages.ts";
import type { ToWorker } from "../lib/execute/protocol/messages.ts";
import type { SessionFrame } from "../lib/execute/protocol/frames.ts";
import {
  newNonce,
  newSecret,
  schedulerProof,
  secretFromEnvironment,
  workerProof,
  writeSecretFile,
} from "../lib/remote/auth.ts";
import {
  type AdmissionGate,
  MAX_HANDSHAKES_PER_ADDRESS,
  WorkerServer,
} from "../lib/remote/worker_server.ts";
import { MAX_WAITING_PER_ADDRESS } from "../lib/remote/waiting_room.ts";
import { runRemoteWorker } from "../lib/remote/remote_worker.ts";
import { parseHostPort } from "../lib/remote/address.ts";
import { connectionChannel } from "../lib/execute/byte_channel.ts";
import { nodeConnection } from "../lib/runtime/tcp_node.ts";
import { serveWorker } from "../lib/execute/worker_relay.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("remote-server");
const SLOT = "0123456789abcdef0123456789abcdef";

interface Rig {
  readonly server: WorkerServer;
  readonly secret: string;
  readonly log: string[];
  readonly claimed: { slot: string; host: string }[];
  /** Expire every pending handshake deadline (the manual slow-loris clock). */
  expireDeadlines(): void;
  /** Expire the deadline set last (a waiting connection's, when it was the last to arrive). */
  expireNewestDeadline(): void;
}

const servers: WorkerServer[] = [];
after(async () => {
  for (const s of servers) await s.close();
});

async function startServer(
  options: {
    maxHandshakes?: number;
    maxWaiting?: number;
    maxWaitingPerAddress?: number;
    realDeadlines?: boolean;
    gate?: AdmissionGate;
  } = {},
): Promise<Rig> {
  const secret = newSecret();
  const log: string[] = [];
  const claimed: { slot: string; host: string }[] = [];
  const deadlines = new Set<() => void>();
  const server = await WorkerServer.start({
    listen: { host: "127.0.0.1", port: 0 },
    secret,
    log: (m) => log.push(m),
    ...(options.realDeadlines === true ? {} : {
      deadline: (_ms: number, expire: () => void) => {
        deadlines.add(expire);
        return () => deadlines.delete(expire);
      },
    }),
    ...(options.maxHandshakes === undefined ? {} : { maxHandshakes: options.maxHandshakes }),
    ...(options.maxWaiting === undefined ? {} : { maxWaiting: options.maxWaiting }),
    demandPollMs: 5,
    ...(options.maxWaitingPerAddress === undefined
      ? {}
      : { maxWaitingPerAddress: options.maxWaitingPerAddress }),
  });
  servers.push(server);
  if (options.gate !== undefined) server.admitWhen(options.gate);
  server.expect(SLOT, (channel, hello) => {
    claimed.push({ slot: hello.slot ?? "", host: hello.host });
    channel.write(encodeFrame({ kind: "stop" }));
    return true;
  });
  return {
    server,
    secret,
    log,
    claimed,
    expireDeadlines: () => {
      for (const d of [...deadlines]) d();
    },
    expireNewestDeadline: () => [...deadlines].pop()?.(),
  };
}

/** A raw client: sends bytes, collects decoded frames, knows when the server closed it. */
class Client {
  readonly socket: net.Socket;
  readonly frames: (ToWorker | SessionFrame)[] = [];
  readonly closed: Promise<void>;
  readonly #decoder: FrameDecoder<ToWorker | SessionFrame> = workerSideDecoder();
  readonly #waiters: (() => void)[] = [];

  constructor(port: number) {
    this.socket = net.connect({ host: "127.0.0.1", port });
    this.socket.on("data", (chunk: Uint8Array) => {
      this.frames.push(...this.#decoder.push(chunk));
      for (const w of this.#waiters.splice(0)) w();
    });
    this.socket.on("error", () => {});
    this.closed = new Promise((resolve) => this.socket.on("close", () => resolve()));
  }

  connected(): Promise<void> {
    return new Promise((resolve) => this.socket.once("connect", () => resolve()));
  }

  async frame(kind: string): Promise<ToWorker | SessionFrame> {
    for (;;) {
      const f = this.frames.find((x) => x.kind === kind);
      if (f !== undefined) return f;
      const closed = this.socket.destroyed;
      if (closed) {
        throw new Error(`closed without a "${kind}" frame: ${JSON.stringify(this.frames)}`);
      }
      await Promise.race([new Promise<void>((r) => this.#waiters.push(r)), this.closed]);
    }
  }

  send(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }

  hello(nonce: string, slot = SLOT, protocol = PROTOCOL_VERSION): void {
    this.send(
      encodeFrame({ kind: "hello", protocol, client: "test", pid: 1, host: "h", slot, nonce }),
    );
  }
}

/** A full handshake with `secret` (`beforeAuth` runs once challenged); returns the client after sending auth. */
async function handshake(
  rig: Rig,
  secret: string,
  slot = SLOT,
  beforeAuth = (): void => {},
): Promise<Client> {
  const c = new Client(rig.server.address.port);
  await c.connected();
  const nonce = newNonce();
  c.hello(nonce, slot);
  const challenge = await c.frame("challenge");
  assert.equal(challenge.kind, "challenge");
  if (challenge.kind !== "challenge") throw new Error("unreachable");
  assert.equal(challenge.proof, schedulerProof(rig.secret, nonce, challenge.nonce));
  beforeAuth();
  c.send(encodeFrame({ kind: "auth", mac: workerProof(secret, challenge.nonce, nonce, slot) }));
  return c;
}

/** A few event-loop turns: what the server does with bytes already sent happens meanwhile. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 10));
}

/** The server refuses `client` as busy and tells it to connect again, saying why. */
async function toldToComeBack(client: Client, why: RegExp): Promise<void> {
  const error = await client.frame("error");
  assert.ok(error.kind === "error" && error.retry === true, JSON.stringify(error));
  assert.match(errorText(error), why);
}

function errorText(frame: ToWorker | SessionFrame): string {
  assert.equal(frame.kind, "error");
  return frame.kind === "error" ? frame.message : "";
}

async function refusedWith(rig: Rig, pattern: RegExp): Promise<void> {
  for (let i = 0; i < 200 && !rig.log.some((l) => pattern.test(l)); i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.ok(
    rig.log.some((l) => pattern.test(l)),
    `no log line matches ${pattern}: ${rig.log.join("\n")}`,
  );
}

describe("worker server handshake", () => {
  it("admits a worker that proves the secret and hands its connection to its slot", async () => {
    const rig = await startServer();
    const c = await handshake(rig, rig.secret);
    assert.equal((await c.frame("stop")).kind, "stop", "the slot's executor got the connection");
    assert.deepEqual(rig.claimed, [{ slot: SLOT, host: "h" }]);
    assert.equal(rig.server.refused, 0);
    c.socket.destroy();
  });

  it("refuses a wrong secret, tells the client and logs it; the slot still waits for its worker", async () => {
    const rig = await startServer();
    const bad = await handshake(rig, newSecret());
    const error = await bad.frame("error");
    assert.match(errorText(error), /wrong secret/);
    await bad.closed;
    await refusedWith(rig, /^Refused a worker connection from 127\.0\.0\.1:\d+: wrong secret/);
    assert.deepEqual(rig.claimed, []);
    const good = await handshake(rig, rig.secret);
    await good.frame("stop");
    assert.equal(rig.claimed.length, 1);
    good.socket.destroy();
  });

  it("refuses a frame over the handshake cap as soon as its length arrives", async () => {
    const rig = await startServer();
    const c = new Client(rig.server.address.port);
    await c.connected();
    const header = new Uint8Array(4);
    new DataView(header.buffer).setUint32(0, 50 * 1024 * 1024, true);
    c.send(header);
    await c.closed;
    await refusedWith(
      rig,
      /does not speak the blockwise protocol: A frame of 52428800 bytes exceeds the cap/,
    );
  });

  it("refuses bytes that are not frames", async () => {
    const rig = await startServer();
    const c = new Client(rig.server.address.port);
    await c.connected();
    c.send(new TextEncoder().encode("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    await c.closed;
    await refusedWith(rig, /does not speak the blockwise protocol/);
    assert.equal(rig.server.refused, 1);
  });

  it("drops a client that does not finish its handshake in time (slow-loris)", async () => {
    const rig = await startServer();
    const c = new Client(rig.server.address.port);
    await c.connected();
    const frame = encodeFrame({
      kind: "hello",
      protocol: PROTOCOL_VERSION,
      client: "slow",
      pid: 1,
      host: "h",
      slot: SLOT,
      nonce: newNonce(),
    });
    c.send(frame.subarray(0, 3)); // a few bytes, then nothing
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(c.socket.destroyed, false);
    rig.expireDeadlines();
    await c.closed;
    await refusedWith(rig, /no complete handshake within 10 s/);
  });

  it("refuses another protocol version, naming both", async () => {
    const rig = await startServer();
    const c = new Client(rig.server.address.port);
    await c.connected();
    c.hello(newNonce(), SLOT, PROTOCOL_VERSION + 1);
    const error = await c.frame("error");
    assert.match(
      errorText(error),
      new RegExp(`protocol ${PROTOCOL_VERSION + 1} but this blockwise speaks ${PROTOCOL_VERSION}`),
    );
    await c.closed;
  });

  it("refuses a slot nobody waits on, and a second worker on a slot already taken", async () => {
    const rig = await startServer();
    const stranger = await handshake(rig, rig.secret, "ffffffffffffffffffffffffffffffff");
    assert.match(errorText(await stranger.frame("error")), /no worker of this run waits on/);
    const first = await handshake(rig, rig.secret);
    await first.frame("stop");
    const again = await handshake(rig, rig.secret);
    assert.match(errorText(await again.frame("error")), /no worker of this run waits on/);
    assert.equal(rig.claimed.length, 1, "a reconnecting worker is not the old one");
    first.socket.destroy();
  });

  it("refuses a hello without slot and nonce, and frames sent before hello", async () => {
    const rig = await startServer();
    const a = new Client(rig.server.address.port);
    await a.connected();
    a.send(
      encodeFrame({ kind: "hello", protocol: PROTOCOL_VERSION, client: "c", pid: 1, host: "h" }),
    );
    assert.match(errorText(await a.frame("error")), /no slot and nonce/);
    const b = new Client(rig.server.address.port);
    await b.connected();
    b.send(encodeFrame({ kind: "ready" }));
    assert.match(errorText(await b.frame("error")), /sent "ready" before "hello"/);
  });

  it("refuses frames sent after auth before init", async () => {
    const rig = await startServer();
    const c = new Client(rig.server.address.port);
    await c.connected();
    const nonce = newNonce();
    c.hello(nonce);
    const challenge = await c.frame("challenge");
    if (challenge.kind !== "challenge") throw new Error("unreachable");
    const auth = encodeFrame({
      kind: "auth",
      mac: workerProof(rig.secret, challenge.nonce, nonce, SLOT),
    });
    const extra = encodeFrame({ kind: "ready" });
    const both = new Uint8Array(auth.length + extra.length);
    both.set(auth);
    both.set(extra, auth.length);
    c.send(both);
    assert.match(errorText(await c.frame("error")), /frames after auth before receiving init/);
    assert.deepEqual(rig.claimed, []);
  });

  it("bounds the connections in their handshake: the next ones wait, unread, in order", async () => {
    const rig = await startServer({ maxHandshakes: 2 });
    const a = new Client(rig.server.address.port);
    const b = new Client(rig.server.address.port);
    await Promise.all([a.connected(), b.connected()]);
    await settle(); // the server accepted both: they hold the two handshakes
    // Two workers arrive while both handshakes are held: their hellos wait in the kernel.
    const first = new Client(rig.server.address.port);
    await first.connected();
    await settle();
    const second = new Client(rig.server.address.port);
    await second.connected();
    const nonces = [newNonce(), newNonce()];
    first.hello(nonces[0]!);
    second.hello(nonces[1]!, "another slot");
    await settle();
    assert.deepEqual([first.frames, second.frames], [[], []], "nobody read their hellos");
    assert.equal(rig.server.refused, 0);
    a.socket.destroy(); // one handshake ends: the oldest waiting one starts, not the other
    const challenge = await first.frame("challenge");
    await settle();
    assert.deepEqual(second.frames, []);
    if (challenge.kind !== "challenge") throw new Error("unreachable");
    first.send(encodeFrame({
      kind: "auth",
      mac: workerProof(rig.secret, challenge.nonce, nonces[0]!, SLOT),
    }));
    await first.frame("stop");
    assert.deepEqual(rig.claimed, [{ slot: SLOT, host: "h" }]);
    assert.equal((await second.frame("challenge")).kind, "challenge", "admitted: the next one");
    for (const c of [b, first, second]) c.socket.destroy();
  });

  it("refuses a connection that waited too long for a handshake, telling it to come back", async () => {
    const rig = await startServer({ maxHandshakes: 1 });
    const holder = new Client(rig.server.address.port);
    await holder.connected();
    await settle();
    const waiting = new Client(rig.server.address.port);
    await waiting.connected();
    await settle();
    rig.expireNewestDeadline(); // the waiting one's: the holder is still in its handshake
    const error = await waiting.frame("error");
    assert.ok(error.kind === "error" && error.retry === true, JSON.stringify(error));
    assert.match(
      errorText(error),
      /^refused: busy: it waited 30 s for one of 1 handshakes to end; connect again later$/,
    );
    await waiting.closed;
    // The holder's handshake ending later starts nothing: the refused one left the queue.
    holder.socket.destroy();
    await holder.closed;
    await settle();
    assert.equal(rig.server.refused, 2); // the waiting one, then the holder closing
    assert.deepEqual(rig.claimed, []);
  });

  it("lets one address hold only its share of the waiting room; its next is told to come back", async () => {
    const rig = await startServer({ maxHandshakes: 1, maxWaitingPerAddress: 2 });
    assert.equal(MAX_WAITING_PER_ADDRESS, 1024);
    const holder = new Client(rig.server.address.port);
    await holder.connected();
    await settle();
    const waiting = [new Client(rig.server.address.port), new Client(rig.server.address.port)];
    await Promise.all(waiting.map((c) => c.connected()));
    await settle();
    await toldToComeBack(
      new Client(rig.server.address.port),
      /busy: 2 other connections from 127\.0\.0\.1 wait for a handshake; connect again later/,
    );
    // The holder's handshake ends: the oldest waiting one starts its own, and leaves the room.
    holder.socket.destroy();
    await holder.closed;
    await settle();
    const again = new Client(rig.server.address.port);
    await again.connected();
    await settle();
    assert.deepEqual(again.frames, [], "it waits, unread, and is not refused");
    assert.equal(rig.server.refused, 2); // the one turned away, and the holder closing
    for (const c of [...waiting, again]) c.socket.destroy();
  });

  it("tells workers still in their handshake or waiting for one that the run has ended, so they exit cleanly", async () => {
    const rig = await startServer({ maxHandshakes: 1 });
    // One worker holds the only handshake (challenged, no auth yet); a real one waits its turn.
    const holder = new Client(rig.server.address.port);
    await holder.connected();
    holder.hello(newNonce());
    await holder.frame("challenge");
    const socket = net.connect({ host: "127.0.0.1", port: rig.server.address.port });
    await new Promise<void>((r) => socket.once("connect", () => r()));
    const log: string[] = [];
    const waiting = serveWorker({
      channel: connectionChannel(nodeConnection(socket)),
      client: "test worker",
      auth: { secret: rig.secret, slot: SLOT },
      log: (m) => log.push(m),
    });
    await settle();
    await rig.server.close();
    const told = await holder.frame("error");
    assert.ok(told.kind === "error" && told.later === true && told.retry === undefined);
    assert.equal(errorText(told), "refused: the run has ended");
    await holder.closed;
    const end = await waiting;
    assert.deepEqual([end.stopped, end.later], [false, true], JSON.stringify(end));
    assert.ok(log.some((l) => /refused: the run has ended/.test(l)), log.join("\n"));
    assert.deepEqual(rig.claimed, []);
  });

  it("refuses connections beyond the waiting room as busy", async () => {
    const rig = await startServer({ maxHandshakes: 1, maxWaiting: 0 });
    const holder = new Client(rig.server.address.port);
    await holder.connected();
    await settle();
    await toldToComeBack(
      new Client(rig.server.address.port),
      /busy: 1 other connections are still in their handshake and 0 wait; connect again later/,
    );
    holder.socket.destroy();
  });
});

/** A gate the test opens and closes; it says why it holds workers back. */
class TestGate implements AdmissionGate {
  open = true;
  none = false;
  /** Times the server held a connection back (the gate's cue to say why). */
  held = 0;
  wanted(): boolean {
    return this.open;
  }
  needsNone(): boolean {
    return this.none;
  }
  holding(): void {
    this.held++;
  }
}

/** Give the server time to act on the gate (it asks again every 5 ms here). */
async function polled(): Promise<void> {
  await new Promise((r) => setTimeout(r, 30));
  await settle();
}

/** A worker that began its handshake and proves itself once the gate has closed. */
function provenAfterGateCloses(rig: Rig, gate: TestGate): Promise<Client> {
  return handshake(rig, rig.secret, SLOT, () => {
    gate.open = false;
  });
}

/** The gate opens: the held worker `c` takes its slot (the test's slot stops it at once). */
async function takesItsSlotOnceOpen(rig: Rig, gate: TestGate, c: Client): Promise<void> {
  gate.open = true;
  await c.frame("stop");
  assert.deepEqual(rig.claimed, [{ slot: SLOT, host: "h" }]);
  c.socket.destroy();
}

/** Two held back: a worker proven after the gate closed, and a connection never read. */
async function heldTwo(rig: Rig, gate: TestGate): Promise<[Client, Client]> {
  const proven = await provenAfterGateCloses(rig, gate);
  const unread = new Client(rig.server.address.port);
  await unread.connected();
  unread.hello(newNonce());
  await polled();
  return [proven, unread];
}

describe("admission by need", () => {
  it("holds a connection unread while no worker is needed, tells the gate, and admits it when one is", async () => {
    const gate = new TestGate();
    gate.open = false;
    const rig = await startServer({ gate });
    const clients = [new Client(rig.server.address.port), new Client(rig.server.address.port)];
    await Promise.all(clients.map((c) => c.connected()));
    const nonce = newNonce();
    clients[0]!.hello(nonce);
    clients[1]!.hello(newNonce(), "another slot");
    await polled();
    assert.deepEqual(clients.map((c) => c.frames), [[], []], "nobody read their hellos");
    assert.equal(rig.server.holding, true);
    assert.ok(gate.held >= 2, `the gate was told of both (${gate.held})`);
    assert.deepEqual(rig.log, [], "the server says nothing itself: the gate says why");
    gate.open = true;
    const challenge = await clients[0]!.frame("challenge");
    if (challenge.kind !== "challenge") throw new Error("unreachable");
    clients[0]!.send(encodeFrame({
      kind: "auth",
      mac: workerProof(rig.secret, challenge.nonce, nonce, SLOT),
    }));
    await clients[0]!.frame("stop");
    assert.deepEqual(rig.claimed, [{ slot: SLOT, host: "h" }]);
    assert.equal(rig.server.holding, false);
    assert.equal(rig.server.refused, 0);
    for (const c of clients) c.socket.destroy();
  });

  it("lets a worker whose handshake began before the gate closed prove itself, then holds it until a worker is needed", async () => {
    const gate = new TestGate();
    const rig = await startServer({ gate });
    const c = await provenAfterGateCloses(rig, gate);
    await polled();
    assert.deepEqual(rig.claimed, [], "proven, but not handed to its slot");
    assert.deepEqual(c.frames.map((f) => f.kind), ["challenge"]);
    assert.equal(rig.server.holding, true);
    await takesItsSlotOnceOpen(rig, gate, c);
  });

  it("reads a connection held 30 s: a stranger is refused, a worker proves itself and waits on, not told to come back", async () => {
    const gate = new TestGate();
    gate.open = false;
    const rig = await startServer({ gate });
    const stranger = new Client(rig.server.address.port);
    const worker = new Client(rig.server.address.port);
    await Promise.all([stranger.connected(), worker.connected()]);
    stranger.send(new TextEncoder().encode("GET / HTTP/1.1\r\n\r\n"));
    const nonce = newNonce();
    worker.hello(nonce);
    await polled();
    assert.deepEqual([stranger.frames, worker.frames], [[], []]);
    rig.expireDeadlines(); // both waited WAITING_MS
    await stranger.closed;
    await refusedWith(rig, /does not speak the blockwise protocol/);
    const challenge = await worker.frame("challenge");
    if (challenge.kind !== "challenge") throw new Error("unreachable");
    worker.send(encodeFrame({
      kind: "auth",
      mac: workerProof(rig.secret, challenge.nonce, nonce, SLOT),
    }));
    await polled();
    assert.deepEqual(worker.frames.map((f) => f.kind), ["challenge"], "no busy refusal");
    assert.equal(rig.server.refused, 1, "the stranger only");
    await takesItsSlotOnceOpen(rig, gate, worker);
  });

  it("tells held workers, read or not, to leave cleanly once no worker of the run waits for its connection", async () => {
    const gate = new TestGate();
    const rig = await startServer({ gate });
    const [proven, unread] = await heldTwo(rig, gate);
    assert.equal(rig.server.waiting, 2);
    gate.none = true; // the run retired the workers still starting: these are nobody's now
    for (const c of [proven, unread]) {
      const told = await c.frame("error");
      assert.ok(told.kind === "error" && told.later === true, JSON.stringify(told));
      assert.equal(errorText(told), "refused: the run needs no more workers");
      await c.closed;
    }
    assert.deepEqual([rig.claimed, rig.server.waiting, rig.server.refused], [[], 0, 0]);
  });

  it("tells held workers, read or not, that the run has ended when it closes", async () => {
    const gate = new TestGate();
    const rig = await startServer({ gate });
    const [proven, unread] = await heldTwo(rig, gate);
    await rig.server.close();
    for (const c of [proven, unread]) {
      const told = await c.frame("error");
      assert.ok(told.kind === "error" && told.later === true, JSON.stringify(told));
      assert.equal(errorText(told), "refused: the run has ended");
      await c.closed;
    }
    assert.deepEqual(rig.claimed, []);
  });
});

describe("idle connections", () => {
  it("from one address hold at most 64 handshake slots; the next is told to come back", async () => {
    const rig = await startServer();
    assert.equal(MAX_HANDSHAKES_PER_ADDRESS, 64);
    const idle = Array.from(
      { length: MAX_HANDSHAKES_PER_ADDRESS },
      () => new Client(rig.server.address.port),
    );
    await Promise.all(idle.map((c) => c.connected()));
    const next = new Client(rig.server.address.port);
    await next.connected();
    const error = await next.frame("error");
    assert.ok(error.kind === "error" && error.retry === true, JSON.stringify(error));
    assert.match(
      errorText(error),
      /busy: 64 other connections from 127\.0\.0\.1 are still in their handshake; connect again later/,
    );
    for (const c of idle) c.socket.destroy();
  });

  it("are dropped when they send no hello within 2 s", async () => {
    const rig = await startServer({ realDeadlines: true });
    const c = new Client(rig.server.address.port);
    await c.connected();
    const started = Date.now();
    await c.closed;
    assert.ok(Date.now() - started < 4_000);
    await refusedWith(rig, /no hello within 2 s/);
  });

  it("refused by the hundred are logged at a bounded rate, then summed up", async () => {
    const rig = await startServer({ maxHandshakes: 1, maxWaiting: 0 });
    const holder = new Client(rig.server.address.port);
    await holder.connected();
    await settle();
    const refused = Array.from({ length: 60 }, () => new Client(rig.server.address.port));
    await Promise.all(refused.map((c) => c.closed));
    const lines = rig.log.filter((l) => l.startsWith("Refused a worker connection"));
    assert.equal(lines.length, 10, rig.log.join("\n"));
    await rig.server.close();
    assert.ok(
      rig.log.some((l) => /^\.\.\. and 50 more refused worker connections within 10 s/.test(l)),
      rig.log.join("\n"),
    );
    holder.socket.destroy();
  });

  it("do not keep a worker out: a worker told the scheduler is busy comes back and is admitted", async () => {
    const rig = await startServer({ realDeadlines: true });
    const idle = Array.from(
      { length: MAX_HANDSHAKES_PER_ADDRESS },
      () => new Client(rig.server.address.port),
    );
    await Promise.all(idle.map((c) => c.connected()));
    const log: string[] = [];
    const end = await runRemoteWorker({
      connect: `127.0.0.1:${rig.server.address.port}`,
      env: { BLOCKWISE_SECRET: rig.secret, BLOCKWISE_WORKER_SLOT: SLOT },
      log: (m) => log.push(m),
    });
    assert.equal(end.stopped, true, `${end.reason}\n${log.join("\n")}`);
    assert.ok(
      log.some((l) => /The scheduler is busy; connecting again in \d+ ms/.test(l)),
      log.join("\n"),
    );
    assert.equal(rig.claimed.length, 1);
    for (const c of idle) c.socket.destroy();
  });
});

describe("a worker's side of the handshake", () => {
  it("refuses a scheduler that cannot prove it knows the secret, and runs nothing", async () => {
    const log: string[] = [];
    const fake = net.createServer((socket) => {
      const decoder = workerSideDecoder();
      socket.on("data", () => {
        socket.write(encodeFrame({ kind: "challenge", nonce: newNonce(), proof: "00".repeat(32) }));
      });
      void decoder;
    });
    await new Promise<void>((r) => fake.listen(0, "127.0.0.1", () => r()));
    const port = (fake.address() as net.AddressInfo).port;
    const socket = net.connect({ host: "127.0.0.1", port });
    await new Promise<void>((r) => socket.once("connect", () => r()));
    const end = await serveWorker({
      channel: connectionChannel(nodeConnection(socket)),
      client: "test worker",
      auth: { secret: newSecret(), slot: SLOT },
      log: (m) => log.push(m),
    });
    assert.equal(end.stopped, false);
    assert.ok(
      log.some((l) => /could not prove it knows this run's secret/.test(l)),
      log.join("\n"),
    );
    await new Promise<void>((r) => fake.close(() => r()));
  });
});

describe("the secret's transport", () => {
  it("reads BLOCKWISE_SECRET, or a private BLOCKWISE_SECRET_FILE", () => {
    const secret = newSecret();
    assert.equal(secretFromEnvironment({ BLOCKWISE_SECRET: secret }), secret);
    const dir = newDir("secret");
    const file = writeSecretFile(path.join(dir, "secret"), secret);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(secretFromEnvironment({ BLOCKWISE_SECRET_FILE: file }), secret);
  });

  it("refuses a secret file others can read, a malformed secret, and none at all", () => {
    const dir = newDir("secret");
    const file = path.join(dir, "open");
    fs.writeFileSync(file, newSecret());
    fs.chmodSync(file, 0o644);
    assert.throws(
      () => secretFromEnvironment({ BLOCKWISE_SECRET_FILE: file }),
      /can be read by other users \(mode 644\); make it private with chmod 600/,
    );
    assert.throws(
      () => secretFromEnvironment({ BLOCKWISE_SECRET: "hunter2" }),
      /is not 64 hex digits \(got 7 characters\)/,
    );
    assert.throws(
      () => secretFromEnvironment({}),
      /neither BLOCKWISE_SECRET nor BLOCKWISE_SECRET_FILE is set/,
    );
  });

  it("parses listen and connect addresses and names bad ones", () => {
    assert.deepEqual(parseHostPort("0.0.0.0:0", "--listen", true), { host: "0.0.0.0", port: 0 });
    assert.deepEqual(parseHostPort("[::1]:7000", "--connect", false), { host: "::1", port: 7000 });
    assert.throws(() => parseHostPort("node12", "--connect", false), /"node12" is not HOST:PORT/);
    assert.throws(
      () => parseHostPort("node12:0", "--connect", false),
      /port 0, which is not 1-65535/,
    );
    assert.throws(() => parseHostPort("a:70000", "--listen", true), /port 70000/);
  });
});
