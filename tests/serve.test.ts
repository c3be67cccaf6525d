/**
 * `blockwise serve`: the dashboard server (lib/view/server.ts) on stores written by the real
 * CLI (`bun main.ts run` in a child process), started in-process on a free loopback port.
 * `/api/status` is `statusJson` and `status --json`; `/api/report` and `/api/frame`; the ledger
 * read through HTTP with zarrita equals the files on disk; byte ranges, HEAD, ETags, CORS and
 * preflights; 405 for every writing method with nothing written; every path traversal variant
 * (encoded, double-encoded, backslashes, NUL, absolute, symbolic links out of the store, FIFOs,
 * folders, files that are not Zarr) is a bare 404 that never shows the secret file next to the
 * target; a store that appears after start and a single store as the target; the Host check
 * of a loopback server; the token of a server on 0.0.0.0; the refresh rule of the cached
 * documents; bad `--listen` values; and the `serve` subcommand itself (SIGTERM and SIGINT
 * end it with exit 0; a bad `--listen` or a missing target exits 2 before listening).
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import * as zarr from "zarrita";
import { FetchStore, FileSystemStore } from "@zarrita/storage";
import { InputError } from "../lib/errors.ts";
import { parseListen } from "../lib/view/access.ts";
import type { ReportData } from "../lib/view/report_data.ts";
import { startViewServer, type ViewServer } from "../lib/view/server.ts";
import { FRAME_REFRESH, REPORT_REFRESH, Snapshot } from "../lib/view/snapshots.ts";
import { parseRange } from "../lib/view/static_files.ts";
import { statusJson } from "../lib/view/status_json.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const BUN = path.join(REPO, "node_modules", ".bin", "bun");
const MAIN = path.join(REPO, "main.ts");
const newDir = scratchDirs("serve");

interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function cli(args: readonly string[]): Exit {
  const run = spawnSync(BUN, [MAIN, ...args], {
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1" },
    timeout: 60_000,
  });
  if (run.error !== undefined) throw run.error;
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** A tracking dir of two tasks run by the CLI: "a" (4x6 blocks, one fails) and "b" (2x2). */
function makeTracking(label: string): { root: string; tracking: string } {
  const root = newDir(label);
  const task = (id: string, shape: readonly number[], fail: string) =>
    `{
    id: ${JSON.stringify(id)},
    totalRoi: { offset: [0, 0], shape: ${JSON.stringify(shape)} },
    readRoi: { offset: [0, 0], shape: [10, 10] },
    writeRoi: { offset: [0, 0], shape: [10, 10] },
    fit: "valid", readWriteConflict: false, maxWorkers: 1, maxRetries: 0, upstream: [],
    process(block: { index: readonly number[] }) {
      if (block.index.join(",") === ${JSON.stringify(fail)}) throw new Error("planned failure");
    },
  }`;
  const file = path.join(root, "pipeline.ts");
  fs.writeFileSync(
    file,
    `export default { tasks: [${task("a", [40, 60], "1,2")}, ${task("b", [20, 20], "")}] };\n`,
  );
  const tracking = path.join(root, "tracking");
  const r = cli(["run", file, "--tracking-dir", tracking, "--no-progress", "--resource-tracking"]);
  assert.equal(r.code, 1, r.stderr); // the planned failure
  return { root, tracking };
}

interface RawAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** One request with the path sent exactly as given (fetch would normalise `..` and `%2e`). */
function raw(
  port: number,
  method: string,
  target: string,
  headers: Readonly<Record<string, string>> = {},
  body = "",
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("connect", () => {
      const lines = [`${method} ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`];
      for (const [k, v] of Object.entries(headers)) {
        if (k.toLowerCase() === "host") lines[1] = `Host: ${v}`;
        else lines.push(`${k}: ${v}`);
      }
      if (body !== "") lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
      lines.push("Connection: close", "", body);
      socket.write(lines.join("\r\n"));
    });
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("error", reject);
    socket.on("end", () => {
      socket.destroy();
      const all = Buffer.concat(chunks);
      const split = all.indexOf("\r\n\r\n");
      const head = all.subarray(0, split).toString("latin1").split("\r\n");
      const status = Number(head[0]!.split(" ")[1]);
      const fields: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const colon = line.indexOf(":");
        fields[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status, headers: fields, body: all.subarray(split + 4) });
    });
  });
}

/** Every file and folder under `dir` with its size, mode and mtime (to prove nothing changed). */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const s = fs.lstatSync(p);
      out.push(`${path.relative(dir, p)} ${s.size} ${s.mode} ${s.mtimeMs}`);
      if (s.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

async function json<T>(url: string): Promise<T> {
  const r = await fetch(url);
  assert.equal(r.status, 200, url);
  return await r.json() as T;
}

async function readArray(store: FetchStore | FileSystemStore, name: string) {
  const arr = await zarr.open(zarr.root(store).resolve(name), { kind: "array" });
  const chunk = await zarr.get(arr);
  return { shape: arr.shape, data: Array.from(chunk.data as ArrayLike<number | bigint>) };
}

describe("blockwise serve on loopback", () => {
  let tracking = "";
  let server: ViewServer;
  let base = "";
  before(async () => {
    tracking = makeTracking("loopback").tracking;
    server = await startViewServer({ target: tracking, listen: "127.0.0.1:0" });
    base = server.url;
  });
  after(async () => await server.close());

  it("prints a URL without a token", () => {
    assert.equal(server.url, `http://127.0.0.1:${server.port}/`);
  });

  it("/api/status is statusJson(target) and what `status --json` prints", async () => {
    const served = await json<unknown>(`${base}api/status`);
    assert.deepEqual(served, JSON.parse(JSON.stringify(statusJson(tracking))));
    const printed = cli(["status", tracking, "--json"]);
    assert.equal(printed.code, 0, printed.stderr);
    assert.deepEqual(served, JSON.parse(printed.stdout));
  });

  it("/api/report is a full report and /api/frame a frame, both with served.base_path", async () => {
    const report = await json<ReportData>(`${base}api/report`);
    assert.equal(report.parts, "full");
    assert.equal(report.target, tracking);
    assert.deepEqual(report.served, { base_path: "/" });
    assert.equal(report.live, null);
    assert.deepEqual(report.status.stores.map((s) => s.task), ["a", "b"]);
    const frame = await json<ReportData>(`${base}api/frame`);
    assert.equal(frame.parts, "frame");
    assert.deepEqual(frame.served, { base_path: "/" });
    const head = await fetch(`${base}api/frame`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("cache-control"), "no-store");
    assert.equal(await head.text(), "");
  });

  it("/ is the live page, never cached; unknown routes are 404", async () => {
    const page = await fetch(base);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
    assert.equal(page.headers.get("cache-control"), "no-store");
    assert.match(await page.text(), /<html|<!doctype/i);
    for (const p of ["api", "api/", "api/status/", "index.html", "favicon.ico", "zarr", "zarr/"]) {
      const r = await fetch(`${base}${p}`);
      assert.equal(r.status, 404, p);
      await r.body?.cancel();
    }
  });

  it("zarrita reads the ledger through HTTP as it reads it on disk", async () => {
    for (const task of ["a", "b"]) {
      const http = new FetchStore(`${base}zarr/${encodeURIComponent(task)}/`);
      const disk = new FileSystemStore(path.join(tracking, task));
      const group = await zarr.open(zarr.root(http), { kind: "group" });
      assert.equal((group.attrs as { blockwise?: { task_id?: string } }).blockwise?.task_id, task);
      for (const name of ["done", "failures", "wall_seconds", "worker_id"]) {
        assert.deepEqual(await readArray(http, name), await readArray(disk, name), name);
      }
    }
    const done = await readArray(new FetchStore(`${base}zarr/a/`), "done");
    assert.deepEqual(done.shape, [4, 6]);
    assert.equal(done.data.filter((v) => v === 1).length, 23);
  });

  it("examples/report/read_ledger.mjs counts the done blocks over HTTP", async () => {
    // Spawned asynchronously: the server answering it runs in this process.
    const script = path.join(REPO, "examples", "report", "read_ledger.mjs");
    const child = spawn(BUN, [script, `${base}zarr/a/`], { cwd: REPO });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.equal(code, 0, stderr);
    assert.equal(stdout, "a: 23 of 24 blocks done (block grid 4×6, tracking grid 4×6)\n");
  });

  it("serves zarr.json as JSON and chunks as bytes, with CORS; a missing chunk is 404", async () => {
    const meta = await fetch(`${base}zarr/a/done/zarr.json`);
    assert.equal(meta.headers.get("content-type"), "application/json");
    assert.equal(meta.headers.get("access-control-allow-origin"), "*");
    assert.deepEqual(
      await meta.json(),
      JSON.parse(fs.readFileSync(path.join(tracking, "a", "done", "zarr.json"), "utf8")),
    );
    const chunk = await fetch(`${base}zarr/a/done/c/0/0`);
    assert.equal(chunk.headers.get("content-type"), "application/octet-stream");
    assert.equal(chunk.headers.get("accept-ranges"), "bytes");
    assert.equal(
      chunk.headers.get("access-control-expose-headers"),
      "Content-Length, Content-Range, ETag",
    );
    assert.deepEqual(
      Buffer.from(await chunk.arrayBuffer()),
      fs.readFileSync(path.join(tracking, "a", "done", "c", "0", "0")),
    );
    const missing = await fetch(`${base}zarr/a/done/c/7/7`);
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.get("access-control-allow-origin"), "*");
    await missing.body?.cancel();
  });

  it("answers single byte ranges, HEAD and If-None-Match", async () => {
    const file = path.join(tracking, "a", "wall_seconds", "c", "0", "0");
    const bytes = fs.readFileSync(file);
    const size = bytes.length;
    assert.ok(size >= 16);
    const url = `${base}zarr/a/wall_seconds/c/0/0`;
    const ranged = async (range: string) => {
      const r = await fetch(url, { headers: { Range: range } });
      return {
        status: r.status,
        contentRange: r.headers.get("content-range"),
        body: Buffer.from(await r.arrayBuffer()),
      };
    };
    assert.deepEqual(await ranged("bytes=0-3"), {
      status: 206,
      contentRange: `bytes 0-3/${size}`,
      body: bytes.subarray(0, 4),
    });
    assert.deepEqual(await ranged("bytes=5-"), {
      status: 206,
      contentRange: `bytes 5-${size - 1}/${size}`,
      body: bytes.subarray(5),
    });
    assert.deepEqual(await ranged("bytes=-4"), {
      status: 206,
      contentRange: `bytes ${size - 4}-${size - 1}/${size}`,
      body: bytes.subarray(size - 4),
    });
    assert.deepEqual(await ranged(`bytes=2-${size + 100}`), {
      status: 206,
      contentRange: `bytes 2-${size - 1}/${size}`,
      body: bytes.subarray(2),
    });
    for (const bad of [`bytes=${size}-`, `bytes=${size + 5}-${size + 9}`, "bytes=-0"]) {
      const r = await ranged(bad);
      assert.equal(r.status, 416, bad);
      assert.equal(r.contentRange, `bytes */${size}`, bad);
    }
    // Several ranges or a malformed header: the whole file.
    for (const ignored of ["bytes=0-1,4-5", "items=0-3", "bytes=5-2"]) {
      const r = await ranged(ignored);
      assert.equal(r.status, 200, ignored);
      assert.deepEqual(r.body, bytes, ignored);
    }
    const head = await fetch(url, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("content-length"), String(size));
    assert.equal(await head.text(), "");
    const etag = head.headers.get("etag");
    assert.ok(etag !== null);
    const again = await fetch(url, { headers: { "If-None-Match": etag } });
    assert.equal(again.status, 304);
    await again.body?.cancel();
  });

  it("parseRange covers the edge cases", () => {
    assert.deepEqual(parseRange(undefined, 10), { kind: "full" });
    assert.deepEqual(parseRange("bytes=-20", 10), { kind: "partial", start: 0, end: 9 });
    assert.deepEqual(parseRange("bytes=0-0", 10), { kind: "partial", start: 0, end: 0 });
    assert.deepEqual(parseRange("bytes=0-", 0), { kind: "unsatisfiable" });
    assert.deepEqual(parseRange("bytes=99999999999999999999-", 10), { kind: "unsatisfiable" });
    assert.deepEqual(parseRange("bytes=-", 10), { kind: "full" });
  });

  it("answers CORS preflights for the Zarr files", async () => {
    const r = await raw(server.port, "OPTIONS", "/zarr/a/done/c/0/0", {
      "Origin": "https://neuroglancer-demo.appspot.com",
      "Access-Control-Request-Method": "GET",
      "Access-Control-Request-Headers": "range",
    });
    assert.equal(r.status, 204);
    assert.equal(r.headers["access-control-allow-origin"], "*");
    assert.match(r.headers["access-control-allow-methods"] ?? "", /\bGET\b/);
    assert.match(r.headers["access-control-allow-headers"] ?? "", /\bRange\b/);
    assert.equal(r.headers["allow"], "GET, HEAD, OPTIONS");
    // The page and the API are same-origin only.
    const api = await fetch(`${base}api/status`);
    assert.equal(api.headers.get("access-control-allow-origin"), null);
    assert.equal(api.headers.get("x-content-type-options"), "nosniff");
    await api.body?.cancel();
  });

  it("refuses every writing method with 405 and writes nothing", async () => {
    const before = tree(path.dirname(tracking));
    const targets = ["/", "/api/status", "/api/report", "/zarr/a/zarr.json", "/zarr/a/done/c/0/0"];
    for (const method of ["POST", "PUT", "DELETE", "PATCH", "PROPFIND", "MKCOL"]) {
      for (const t of targets) {
        const r = await raw(server.port, method, t, { "Content-Type": "text/plain" }, "1234");
        assert.equal(r.status, 405, `${method} ${t}`);
        assert.equal(r.headers["allow"], "GET, HEAD, OPTIONS", `${method} ${t}`);
      }
    }
    assert.deepEqual(tree(path.dirname(tracking)), before);
  });

  it("serves one store given as the target", async () => {
    const one = await startViewServer({ target: path.join(tracking, "b"), listen: "127.0.0.1:0" });
    try {
      const status = await json<{ stores: { task: string }[] }>(`${one.url}api/status`);
      assert.deepEqual(status.stores.map((s) => s.task), ["b"]);
      const done = await readArray(new FetchStore(`${one.url}zarr/b/`), "done");
      assert.deepEqual(
        done,
        await readArray(new FileSystemStore(path.join(tracking, "b")), "done"),
      );
      assert.equal((await raw(one.port, "GET", "/zarr/a/zarr.json")).status, 404);
    } finally {
      await one.close();
    }
  });

  it("answers only loopback Host names (DNS rebinding)", async () => {
    const as = async (host: string) =>
      (await raw(server.port, "GET", "/api/status", { Host: host })).status;
    assert.equal(await as("evil.example"), 403);
    assert.equal(await as(`evil.example:${server.port}`), 403);
    assert.equal(await as("127.0.0.1.evil.example"), 403);
    assert.equal(await as(`localhost:${server.port}`), 200);
    assert.equal(await as(`127.0.0.1:${server.port}`), 200);
    assert.equal(await as(`[::1]:${server.port}`), 200);
  });
});

describe("blockwise serve never leaves the store folder", () => {
  const SECRET = `TOP-SECRET-${Math.random().toString(36).slice(2)}`;
  let root = "";
  let tracking = "";
  let store = "";
  let server: ViewServer;
  let big: Buffer;
  before(async () => {
    ({ root, tracking } = makeTracking("unsafe"));
    store = path.join(tracking, "a");
    // The secret next to the target, next to the store, and where a link out would find it.
    fs.writeFileSync(path.join(root, "secret.txt"), SECRET);
    fs.writeFileSync(path.join(tracking, "secret.txt"), SECRET);
    fs.writeFileSync(path.join(root, "zarr.json"), SECRET);
    fs.mkdirSync(path.join(root, "c"));
    fs.writeFileSync(path.join(root, "c", "0"), SECRET);
    // Links out of the store, named like Zarr keys.
    fs.mkdirSync(path.join(store, "done", "c", "1"));
    fs.symlinkSync(path.join(root, "secret.txt"), path.join(store, "done", "c", "1", "1"));
    fs.symlinkSync("../../../../secret.txt", path.join(store, "done", "c", "0", "1"));
    fs.symlinkSync(root, path.join(store, "leak"));
    // A link that stays inside the store is followed.
    fs.mkdirSync(path.join(store, "done", "c", "8"));
    fs.symlinkSync("../0/0", path.join(store, "done", "c", "8", "8"));
    // A FIFO and a hidden file named like chunks.
    fs.mkdirSync(path.join(store, "done", "c", "5"));
    const fifo = spawnSync("mkfifo", [path.join(store, "done", "c", "5", "5")]);
    assert.equal(fifo.status, 0);
    fs.writeFileSync(path.join(store, ".zarr.json.tmp"), SECRET);
    fs.writeFileSync(path.join(store, "blockwise.lock"), SECRET);
    // A large chunk file, streamed.
    big = Buffer.alloc(24 << 20);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE(i, i);
    fs.mkdirSync(path.join(store, "done", "c", "9"));
    fs.writeFileSync(path.join(store, "done", "c", "9", "9"), big);
    server = await startViewServer({ target: tracking, listen: "127.0.0.1:0" });
  });
  after(async () => await server.close());

  const refused = [
    "/zarr/a/../secret.txt",
    "/zarr/a/../../secret.txt",
    "/zarr/a/%2e%2e/secret.txt",
    "/zarr/a/%2E%2E/%2E%2E/secret.txt",
    "/zarr/a/%2e%2e%2fsecret.txt",
    "/zarr/a/%2E%2E%2F%2E%2E%2Fsecret.txt",
    "/zarr/a/..%2fsecret.txt",
    "/zarr/a/..%2F..%2Fsecret.txt",
    "/zarr/a/%252e%252e/secret.txt",
    "/zarr/a/%252e%252e%252fsecret.txt",
    "/zarr/a/%252E%252E%252F%252E%252E%252Fzarr.json",
    "/zarr/a/..\\secret.txt",
    "/zarr/a/..\\..\\zarr.json",
    "/zarr/a/..%5csecret.txt",
    "/zarr/a/%5c..%5c..%5czarr.json",
    "/zarr/a/zarr.json%00",
    "/zarr/a/zarr.json%00.png",
    "/zarr/a/%00/../zarr.json",
    "/zarr/a/./zarr.json",
    "/zarr/a/done/./zarr.json",
    "/zarr/a//zarr.json",
    "/zarr/a//etc/passwd",
    "/zarr/a/%2fetc%2fpasswd",
    "/zarr/a/%2F..%2F..%2Fzarr.json",
    "//etc/passwd",
    "/../secret.txt",
    "/%2e%2e/secret.txt",
    "/..%2fsecret.txt",
    "/zarr/../secret.txt",
    "/zarr/%2e%2e/zarr.json",
    "/zarr/..%2f/zarr.json",
    "/zarr/%2e%2e%2f%2e%2e/zarr.json",
    "/zarr/%252e%252e/zarr.json",
    "/zarr/a%2f..%2f..%2fzarr.json",
    "/zarr/./a/zarr.json",
    "/zarr/nosuch/zarr.json",
    // Links out of the store, though named like Zarr keys.
    "/zarr/a/done/c/1/1",
    "/zarr/a/done/c/0/1",
    "/zarr/a/leak/zarr.json",
    "/zarr/a/leak/c/0",
    // Not Zarr, or not a regular file.
    "/zarr/a/secret.txt",
    "/zarr/a/runs.jsonl",
    "/zarr/a/errors.jsonl",
    "/zarr/a/blockwise.lock",
    "/zarr/a/.zarr.json.tmp",
    "/zarr/a/%2ezarr.json.tmp",
    "/zarr/a/",
    "/zarr/a/done",
    "/zarr/a/done/",
    "/zarr/a/done/c",
    "/zarr/a/done/c/0",
    "/zarr/a/done/c/5/5",
  ];

  it("answers every traversal, link, folder and non-Zarr file with a bare 404", async () => {
    const targets = [
      ...refused,
      `/zarr/a/${root}/secret.txt`,
      `/zarr/a/${encodeURIComponent(root)}%2fsecret.txt`,
    ];
    for (const t of targets) {
      for (const method of ["GET", "HEAD"]) {
        const r = await raw(server.port, method, t);
        assert.equal(r.status, 404, `${method} ${t}`);
        assert.equal(r.body.toString("latin1"), method === "GET" ? "Not found\n" : "", t);
      }
    }
  });

  it("follows a link that stays inside the store, and streams a large chunk in full and in part", async () => {
    const inside = await raw(server.port, "GET", "/zarr/a/done/c/8/8");
    assert.equal(inside.status, 200);
    assert.deepEqual(inside.body, fs.readFileSync(path.join(store, "done", "c", "0", "0")));
    const url = `${server.url}zarr/a/done/c/9/9`;
    const whole = Buffer.from(await (await fetch(url)).arrayBuffer());
    assert.equal(whole.length, big.length);
    assert.equal(
      createHash("sha256").update(whole).digest("hex"),
      createHash("sha256").update(big).digest("hex"),
    );
    const part = await fetch(url, { headers: { Range: "bytes=10000000-10004999" } });
    assert.equal(part.status, 206);
    assert.deepEqual(Buffer.from(await part.arrayBuffer()), big.subarray(10000000, 10005000));
  });

  it("serves a store that appears after start (a run creates stores as it goes)", async () => {
    const late = path.join(tracking, "late");
    fs.cpSync(path.join(tracking, "b"), late, { recursive: true });
    const meta = JSON.parse(fs.readFileSync(path.join(late, "zarr.json"), "utf8"));
    meta.attributes.blockwise.task_id = "late";
    fs.writeFileSync(path.join(late, "zarr.json"), JSON.stringify(meta));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const r = await raw(server.port, "GET", "/zarr/late/done/c/0/0");
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, fs.readFileSync(path.join(late, "done", "c", "0", "0")));
  });

  it("still serves the store's Zarr files", async () => {
    const r = await raw(server.port, "GET", "/zarr/a/zarr.json");
    assert.equal(r.status, 200);
    assert.ok(!r.body.toString("utf8").includes(SECRET));
  });
});

describe("blockwise serve on 0.0.0.0 needs the token", () => {
  let tracking = "";
  let server: ViewServer;
  let token = "";
  before(async () => {
    tracking = makeTracking("token").tracking;
    server = await startViewServer({ target: tracking, listen: "0.0.0.0:0" });
    const m = /^http:\/\/([^/]+):(\d+)\/([0-9a-f]{32})\/$/.exec(server.url);
    assert.ok(m !== null, server.url);
    assert.equal(m[1], os.hostname());
    assert.equal(Number(m[2]), server.port);
    token = m[3]!;
  });
  after(async () => await server.close());

  it("answers 404 without the token or with a wrong one, 200 with it", async () => {
    const wrong = token.slice(0, -1) + (token.endsWith("0") ? "1" : "0");
    const paths = ["", "api/status", "api/report", "zarr/a/zarr.json", "zarr/a/done/c/0/0"];
    for (const p of paths) {
      assert.equal((await raw(server.port, "GET", `/${p}`)).status, 404, `/${p}`);
      assert.equal((await raw(server.port, "GET", `/${wrong}/${p}`)).status, 404, wrong);
      assert.equal((await raw(server.port, "GET", `/${token.toUpperCase()}/${p}`)).status, 404);
      assert.equal((await raw(server.port, "GET", `/${token}x/${p}`)).status, 404);
      assert.equal((await raw(server.port, "GET", `/${token.slice(0, 16)}/${p}`)).status, 404);
      assert.equal((await raw(server.port, "POST", `/${p}`)).status, 404, `POST /${p}`);
      assert.equal((await raw(server.port, "GET", `/${token}/${p}`)).status, 200, p);
    }
    // Any Host is fine once the token is right.
    const elsewhere = await raw(server.port, "GET", `/${token}/api/status`, { Host: "node7:1" });
    assert.equal(elsewhere.status, 200);
    const bare = await raw(server.port, "GET", `/${token}`);
    assert.equal(bare.status, 301);
    assert.equal(bare.headers["location"], `/${token}/`);
  });

  it("puts the token in served.base_path and Zarr readers keep it", async () => {
    const local = `http://127.0.0.1:${server.port}/${token}/`;
    const report = await json<ReportData>(`${local}api/frame`);
    assert.deepEqual(report.served, { base_path: `/${token}/` });
    const viaHttp = await readArray(new FetchStore(`${local}zarr/b/`), "done");
    const onDisk = await readArray(new FileSystemStore(path.join(tracking, "b")), "done");
    assert.deepEqual(viaHttp, onDisk);
  });
});

describe("the refresh rule of the cached documents", () => {
  /** A snapshot whose build takes `took()` ms of a manual clock. */
  const rig = (rule: typeof FRAME_REFRESH, took: () => number) => {
    let now = 0;
    let n = 0;
    const snap = new Snapshot(
      () => {
        now += took();
        return String(++n);
      },
      rule,
      () => now,
    );
    return { snap, advance: (ms: number) => (now += ms), now: () => now };
  };

  it("a fast frame is rebuilt after 1 s, not sooner; the report after 10 s", () => {
    const f = rig(FRAME_REFRESH, () => 5);
    assert.deepEqual(f.snap.get(), { ok: true, text: "1" });
    f.advance(999);
    assert.deepEqual(f.snap.get(), { ok: true, text: "1" });
    f.advance(2);
    assert.deepEqual(f.snap.get(), { ok: true, text: "2" });
    const r = rig(REPORT_REFRESH, () => 5);
    r.snap.get();
    r.advance(9_999);
    assert.equal(r.snap.builds, 1);
    r.advance(2);
    r.snap.get();
    assert.equal(r.snap.builds, 2);
  });

  it("frames of 100 ms builds are at most 2 s old; slower ones cost at most 5 % of a core", () => {
    for (const ms of [1, 50, 100, 400, 3_000, 20_000]) {
      const f = rig(FRAME_REFRESH, () => ms);
      // A page polling every 50 ms for an hour (of the manual clock).
      let busy = 0;
      let oldest = 0;
      let readyAt = 0;
      const hour = 3_600_000;
      while (f.now() < hour) {
        const before = f.now();
        const builds = f.snap.builds;
        f.snap.get();
        if (f.snap.builds > builds) {
          busy += f.now() - before;
          readyAt = f.now();
        }
        oldest = Math.max(oldest, f.now() - readyAt);
        f.advance(50);
      }
      assert.ok(busy / f.now() <= 0.05, `${ms} ms builds: ${(100 * busy / f.now()).toFixed(2)} %`);
      if (ms <= 100) assert.ok(oldest <= 2_000 + 50, `${ms} ms builds: ${oldest} ms old`);
    }
  });

  it("failures are cached like documents", () => {
    let now = 0;
    let calls = 0;
    const snap = new Snapshot(
      () => {
        calls++;
        throw new Error("the store is gone");
      },
      FRAME_REFRESH,
      () => now,
    );
    assert.deepEqual(snap.get(), { ok: false, message: "the store is gone" });
    snap.get();
    assert.equal(calls, 1);
    now += 1_001;
    snap.get();
    assert.equal(calls, 2);
  });
});

describe("--listen", () => {
  it("parses HOST:PORT and refuses the rest naming the value and the fix", () => {
    assert.deepEqual(parseListen("127.0.0.1:8000"), { host: "127.0.0.1", port: 8000 });
    assert.deepEqual(parseListen("[::1]:0"), { host: "::1", port: 0 });
    const cases: [string, RegExp][] = [
      ["127.0.0.1", /there is no port/],
      ["127.0.0.1:", /no port after the colon/],
      [":8000", /no host/],
      ["127.0.0.1:99999", /port 99999 is out of range/],
      ["127.0.0.1:http", /port "http" is not a whole number/],
      ["::1:8000", /IPv6 address needs brackets/],
    ];
    for (const [value, why] of cases) {
      assert.throws(() => parseListen(value), (error: unknown) => {
        assert.ok(error instanceof InputError);
        assert.ok(error.message.startsWith(`Cannot listen on "${value}": `), error.message);
        assert.match(error.message, why);
        assert.match(error.message, /--listen 127\.0\.0\.1:8000/);
        return true;
      });
    }
  });

  it("says why an address cannot be listened on", async () => {
    const holder = await startViewServer({ target: newDir("listen"), listen: "127.0.0.1:0" });
    try {
      const inUse = `127.0.0.1:${holder.port}`;
      await assert.rejects(
        startViewServer({ target: ".", listen: inUse }),
        (error: unknown) => {
          assert.ok(error instanceof InputError);
          assert.match(
            error.message,
            new RegExp(`^Cannot listen on "${inUse}": port \\d+ is in use`),
          );
          assert.match(error.message, /choose another port, e\.g\. --listen 127\.0\.0\.1:/);
          return true;
        },
      );
      await assert.rejects(
        startViewServer({ target: ".", listen: "192.0.2.1:8000" }),
        (error: unknown) => {
          assert.ok(error instanceof InputError);
          assert.match(error.message, /^Cannot listen on "192\.0\.2\.1:8000": /);
          assert.match(error.message, /--listen 127\.0\.0\.1:8000/);
          return true;
        },
      );
    } finally {
      await holder.close();
    }
  });
});

describe("blockwise serve (the subcommand)", () => {
  let tracking = "";
  before(() => {
    tracking = makeTracking("cli").tracking;
  });

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`prints the URL and the Zarr sources, answers, and exits 0 on ${signal}`, async () => {
      const child = spawn(BUN, [MAIN, "serve", tracking, "--listen", "127.0.0.1:0"], {
        env: { ...process.env, NO_COLOR: "1" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
      try {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no URL printed: ${stderr}`)), 20_000);
          child.stdout.on("data", (d: Buffer) => {
            stdout += d.toString();
            if (stdout.includes("Press Ctrl-C to stop.")) {
              clearTimeout(timer);
              resolve();
            }
          });
          child.on("close", () => reject(new Error(`serve exited early: ${stderr}`)));
        });
        const m = /^Serving the dashboard of (.+) at (http:\/\/127\.0\.0\.1:\d+\/)$/m.exec(stdout);
        assert.ok(m !== null, stdout);
        assert.equal(m[1], tracking);
        const url = m[2]!;
        assert.ok(stdout.includes(`  a: zarr3://${url}zarr/a/\n`), stdout);
        assert.ok(stdout.includes(`  b: zarr3://${url}zarr/b/\n`), stdout);
        const served = await json<unknown>(`${url}api/status`);
        assert.deepEqual(served, JSON.parse(JSON.stringify(statusJson(tracking))));
        // Not child.kill(): Deno then reports the signal, not the exit code the child chose.
        process.kill(child.pid!, signal);
        assert.equal(await exited, 0, stderr);
        assert.match(stderr, new RegExp(`Received ${signal}: stopping the server`));
      } finally {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }
    });
  }

  it("exits 2 for a bad --listen or a missing target, before listening", () => {
    for (
      const [value, why] of [
        ["127.0.0.1", /there is no port/],
        ["127.0.0.1:65536", /out of range/],
        ["localhost:abc", /not a whole number/],
        ["192.0.2.1:8000", /^error: Cannot listen on "192\.0\.2\.1:8000": /],
      ] as const
    ) {
      const r = cli(["serve", tracking, "--listen", value]);
      assert.equal(r.code, 2, `${value}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`Cannot listen on "${value.replaceAll(".", "\\.")}"`));
      assert.match(r.stderr, why);
      assert.equal(r.stdout, "");
    }
    const missing = path.join(tracking, "nope");
    const r = cli(["serve", missing, "--listen", "127.0.0.1:0"]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`${missing.replaceAll(".", "\\.")} does not exist`));
    assert.equal(r.stdout, "");
  });
});
