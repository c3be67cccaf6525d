/**
 * `blockwise serve` (and `run --serve`): a read-only web server for the dashboard of a tracking
 * dir or one store, on `node:http` (Bun and Deno alike).
 *
 * Routes, all under the base path (`/`, or `/<token>/`, see below), GET and HEAD:
 * - `/`            the live page (`renderLivePage`), `text/html`, `Cache-Control: no-store`;
 * - `/api/report`  `buildReport(target, {parts: "full", live, served})` as JSON;
 * - `/api/frame`   the same with `parts: "frame"` (what the page polls);
 * - `/api/status`  `statusJson(target)`: what `blockwise status --json TARGET` prints;
 * - `/zarr/<encodeURIComponent(task)>/<key>`  the task's store folder as Zarr v3, for zarrita,
 *   neuroglancer (`zarr3://<url>zarr/<task>/`) and the like: CORS open, byte ranges, ETags.
 * The JSON documents are cached and rebuilt at most as often as snapshots.ts says.
 *
 * Security rules of serve:
 * 1. Read-only. Only GET and HEAD read anything; OPTIONS answers CORS preflights (204); every
 *    other method is 405 with `Allow: GET, HEAD, OPTIONS`. Nothing is ever written to disk, no
 *    lock is taken (the stores are read as `status` reads them).
 * 2. Who: on a loopback address (127.0.0.0/8, ::1, localhost) no token is needed, since only
 *    this machine's users can connect; such a server answers only requests whose Host header is
 *    a loopback name (localhost, *.localhost, 127.x.x.x, [::1]; else 403), so that a web page
 *    cannot re-point its own name at 127.0.0.1 (DNS rebinding) and read the dashboard. On any
 *    other address (0.0.0.0, ::, a LAN address, a host name) a random 128-bit token
 *    (crypto.getRandomValues, 32 hex digits) is made at start and every route lives under
 *    `/<token>/` (a path prefix, so Zarr readers that join relative paths keep it; printed in
 *    the URL, never logged elsewhere). A request without the right token is 404, compared in
 *    constant time; `/<token>` alone redirects to `/<token>/`.
 * 3. Which files: only under `/zarr/<task>/`, only the store folders `findStores(target)`
 *    names, looked up by task ID (never by joining the task's URL segment to a path), and only
 *    keys Zarr readers ask for: `zarr.json` at any level and chunk files `<array>/c/<i>/...`.
 *    The lock file (`blockwise.lock`: pid, host, command line), `runs.jsonl`, `errors.jsonl`
 *    and manifests are not served: they are not Zarr, they name commands, hosts and error
 *    messages, and the page gets what it shows of them through `/api/report`.
 * 4. Paths: the raw URL path is split at "/" first, then each segment is decoded once and must
 *    be a plain name (letters, digits, ".", "_", "-", not starting with "."). So `..`, `.`,
 *    `%2e%2e`, `..%2f`, `%2F`, double encoding (`%252e` decodes to "%2e", refused), "\" and
 *    `%5c`, NUL and control characters, empty segments (`//`, absolute paths) and hidden or
 *    half-written temporary files are all refused. Query strings are ignored.
 * 5. Links: the file's real path (every symbolic link resolved) must lie inside the store
 *    folder's real path; it is then opened by that real path with O_NOFOLLOW and O_NONBLOCK and
 *    must be a regular file (no folder listing, no FIFO or device). A link inside a store that
 *    points elsewhere in the same store is followed; one that leads out is refused. (A local
 *    user who can write into the store folder and swaps folders for links between the check
 *    and the open is out of scope: such a user can already rewrite the ledger.)
 * 6. Answers: every refusal of a path, task or token above is the same bare 404 (`Not
 *    found`), whatever the reason, never a 400 with details, so nothing is learnt about the
 *    disk; a missing chunk is 404 too, which Zarr readers take as "fill value". Only a caller
 *    past the token hears more: 405 for a method, 403 for a Host that is not loopback (with
 *    the fix), 500 with the message for a JSON build that failed (about stores it may read).
 * 7. CORS: `/zarr/` answers (404s included, so readers see a missing chunk rather than a CORS
 *    error) carry `Access-Control-Allow-Origin: *`, so viewers hosted elsewhere can read the
 *    ledger; the page and `/api/*` do not (same origin only). Every answer has
 *    `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer` (the token never
 *    leaks in a Referer).
 * 8. Size: files stream from their descriptor in ranges (never read whole into memory); a
 *    single `Range` is honoured (206, 416 past the end), several ranges or a malformed header
 *    get the whole file (RFC 9110 allows ignoring Range).
 */

import { Buffer } from "node:buffer";
import * as http from "node:http";
import type * as net from "node:net";
import * as path from "node:path";
import {
  DEFAULT_VIEW_LISTEN,
  isLoopbackHostHeader,
  listenFailure,
  needsToken,
  newToken,
  parseListen,
  tokenMatches,
  urlHost,
} from "./access.ts";
import type { LiveStoreMap } from "./live_map.ts";
import { renderLivePage } from "./page.ts";
import { buildReport } from "./report_build.ts";
import type { LiveView } from "./report_data.ts";
import { StoreIndex } from "./served_stores.ts";
import {
  type Built,
  FRAME_REFRESH,
  REPORT_REFRESH,
  Snapshot,
  STATUS_REFRESH,
} from "./snapshots.ts";
import { decodeTaskSegment, openStoreFile, sendFile, zarrKeyOf } from "./static_files.ts";
import { statusJson } from "./status_json.ts";

export interface ViewServerOptions {
  /** A tracking dir or one store. */
  readonly target: string;
  /** `HOST:PORT` (default 127.0.0.1:8000; port 0 = any free port). */
  readonly listen?: string;
  /** What the run in flight knows (`run --serve`), read at each build of a report or frame. */
  readonly live?: () => LiveView | null;
  /** Where the server's own troubles go (a build that fails, a socket error), one line each. */
  readonly log?: (line: string) => void;
  /** The live map of a store this process holds (`run --serve`): frames are made from it. */
  readonly held?: (storeDir: string) => LiveStoreMap | null;
}

export interface ViewServer {
  /** The URL to print: `http://HOST:PORT/`, with `<token>/` when one is needed. */
  readonly url: string;
  readonly port: number;
  /** Stop listening and drop open connections (downloads in flight end). */
  close(): Promise<void>;
}

const ALLOW = "GET, HEAD, OPTIONS";

const COMMON_HEADERS: Readonly<Record<string, string>> = {
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
};

const CORS_HEADERS: Readonly<Record<string, string>> = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Expose-Headers": "Content-Length, Content-Range, ETag",
};

const PREFLIGHT_HEADERS: Readonly<Record<string, string>> = {
  "Access-Control-Allow-Methods": ALLOW,
  "Access-Control-Allow-Headers": "Range, If-None-Match, If-Modified-Since, Cache-Control",
  "Access-Control-Max-Age": "600",
};

/** Listen as `options.listen` says; an address that cannot be used is an InputError. */
export async function startViewServer(options: ViewServerOptions): Promise<ViewServer> {
  const target = path.resolve(options.target);
  const listenText = options.listen ?? DEFAULT_VIEW_LISTEN;
  const address = parseListen(listenText);
  const token = needsToken(address.host) ? newToken() : null;
  const handler = new ViewHandler(target, token, options);
  const server = http.createServer((req, res) => handler.handle(req, res));
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ port: address.port, host: address.host }, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (error) {
    server.close(() => {});
    throw listenFailure(error, listenText, address);
  }
  server.on("error", (error) => options.log?.(`The dashboard server failed: ${error.message}`));
  const bound = server.address() as net.AddressInfo;
  return {
    url: `http://${urlHost(address.host)}:${bound.port}${handler.basePath}`,
    port: bound.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The routes (see the module comment). */
class ViewHandler {
  readonly basePath: string;
  readonly #target: string;
  readonly #token: string | null;
  readonly #log: (line: string) => void;
  readonly #stores: StoreIndex;
  readonly #page: string;
  readonly #report: Snapshot;
  readonly #frame: Snapshot;
  readonly #status: Snapshot;
  readonly #logged = new Map<string, string>();

  constructor(target: string, token: string | null, options: ViewServerOptions) {
    this.#target = target;
    this.#token = token;
    this.basePath = token === null ? "/" : `/${token}/`;
    this.#log = options.log ?? (() => {});
    this.#stores = new StoreIndex(target);
    this.#page = renderLivePage(`blockwise serve: ${path.basename(target)}`);
    const live = options.live ?? (() => null);
    const served = { base_path: this.basePath };
    const held = options.held ?? null;
    const report = (parts: "full" | "frame") => () =>
      JSON.stringify(buildReport(target, { parts, live: live(), served, held }));
    this.#report = new Snapshot(report("full"), REPORT_REFRESH);
    this.#frame = new Snapshot(report("frame"), FRAME_REFRESH);
    this.#status = new Snapshot(() => JSON.stringify(statusJson(target)), STATUS_REFRESH);
  }

  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    // A body (of a refused POST, say) is read and dropped, so the connection stays usable.
    req.resume();
    try {
      this.#route(req, res);
    } catch (error) {
      this.#log(
        `The dashboard server failed to answer ${req.method} ${this.#redacted(req)}: ${
          error instanceof Error ? error.stack ?? error.message : String(error)
        }`,
      );
      if (!res.headersSent) {
        send(req, res, 500, "text/plain; charset=utf-8", "Internal server error\n");
      } else {
        res.destroy();
      }
    }
  }

  #route(req: http.IncomingMessage, res: http.ServerResponse): void {
    const raw = req.url ?? "";
    if (!raw.startsWith("/")) return notFound(req, res, {});
    const end = raw.search(/[?#]/);
    const rawPath = end < 0 ? raw : raw.slice(0, end);
    let rest: string;
    if (this.#token !== null) {
      const slash = rawPath.indexOf("/", 1);
      if (!tokenMatches(slash < 0 ? rawPath.slice(1) : rawPath.slice(1, slash), this.#token)) {
        return notFound(req, res, {});
      }
      if (slash < 0) {
        res.writeHead(301, { ...COMMON_HEADERS, "Location": this.basePath, "Content-Length": "0" });
        res.end();
        return;
      }
      rest = rawPath.slice(slash + 1);
    } else {
      if (!isLoopbackHostHeader(req.headers.host)) {
        return send(
          req,
          res,
          403,
          "text/plain; charset=utf-8",
          "This server answers only requests addressed to localhost, 127.0.0.1 or [::1] " +
            "(protection against DNS rebinding): use one of them in the URL.\n",
        );
      }
      rest = rawPath.slice(1);
    }
    const segments = rest.split("/");
    const zarr = segments[0] === "zarr";
    const cors = zarr ? CORS_HEADERS : {};
    if (req.method === "OPTIONS") {
      res.writeHead(204, {
        ...COMMON_HEADERS,
        ...cors,
        ...(zarr ? PREFLIGHT_HEADERS : {}),
        "Allow": ALLOW,
      });
      res.end();
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      return send(req, res, 405, "text/plain; charset=utf-8", "Method not allowed\n", {
        ...cors,
        "Allow": ALLOW,
      });
    }
    switch (rest) {
      case "":
        return send(req, res, 200, "text/html; charset=utf-8", this.#page, {
          "Cache-Control": "no-store",
        });
      case "api/report":
        return this.#json(req, res, this.#report, "report");
      case "api/frame":
        return this.#json(req, res, this.#frame, "frame");
      case "api/status":
        return this.#json(req, res, this.#status, "status");
    }
    if (zarr) return this.#zarr(req, res, segments.slice(1));
    notFound(req, res, {});
  }

  #json(req: http.IncomingMessage, res: http.ServerResponse, doc: Snapshot, name: string): void {
    const built: Built = doc.get();
    if (built.ok) {
      this.#logged.delete(name);
      return send(req, res, 200, "application/json; charset=utf-8", built.text, {
        "Cache-Control": "no-store",
      });
    }
    if (this.#logged.get(name) !== built.message) {
      this.#logged.set(name, built.message);
      this.#log(`The dashboard's ${name} of ${this.#target} cannot be built: ${built.message}`);
    }
    send(
      req,
      res,
      500,
      "application/json; charset=utf-8",
      JSON.stringify({ error: built.message }),
      { "Cache-Control": "no-store" },
    );
  }

  #zarr(req: http.IncomingMessage, res: http.ServerResponse, segments: readonly string[]): void {
    const [taskSegment, ...keySegments] = segments;
    const task = taskSegment === undefined ? null : decodeTaskSegment(taskSegment);
    const folder = task === null ? null : this.#stores.folderOf(task);
    const key = zarrKeyOf(keySegments);
    const file = folder === null || key === null ? null : openStoreFile(folder, key);
    if (file === null) return notFound(req, res, CORS_HEADERS);
    sendFile(req, res, file, { ...COMMON_HEADERS, ...CORS_HEADERS });
  }

  /** The request's path for a log line, the token left out. */
  #redacted(req: http.IncomingMessage): string {
    const url = req.url ?? "";
    return this.#token === null ? url : url.replaceAll(this.#token, "<token>");
  }
}

/** A whole answer from a string (headers only for HEAD). */
function send(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  status: number,
  contentType: string,
  body: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  res.writeHead(status, {
    ...COMMON_HEADERS,
    ...headers,
    "Content-Type": contentType,
    "Content-Length": String(Buffer.byteLength(body)),
  });
  res.end(req.method === "HEAD" ? undefined : body);
}

/** The one answer to every refusal (see rule 6). */
function notFound(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  headers: Readonly<Record<string, string>>,
): void {
  send(req, res, 404, "text/plain; charset=utf-8", "Not found\n", headers);
}
