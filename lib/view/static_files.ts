/**
 * The files of a tracking store as `blockwise serve` hands them to Zarr readers: which request
 * paths name a file at all (a whitelist, checked segment by segment after one decoding), opening
 * it without leaving the store folder (real paths, no symbolic link as the last step, regular
 * files only), single byte ranges, and streaming from the open descriptor (chunk files can be
 * hundreds of MB: nothing is read whole into memory).
 */

import * as fs from "node:fs";
import type * as http from "node:http";
import * as path from "node:path";
import { pipeline } from "node:stream";

/**
 * A path segment a served file may have, once decoded: letters, digits, ".", "_" and "-", not
 * starting with "." (so never "." or "..", and no hidden or half-written temporary file).
 */
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

const DIGITS = /^\d+$/;

/**
 * One raw URL path segment decoded once (`%2e` is ".", `%252e` stays "%2e" and is refused), or
 * null when it is not a plain name.
 */
export function decodeSegment(raw: string): string | null {
  let text: string;
  try {
    text = decodeURIComponent(raw);
  } catch {
    return null;
  }
  return SEGMENT.test(text) ? text : null;
}

/**
 * A task ID from its URL segment (`encodeURIComponent(task)`), or null when the decoded text
 * could name a path rather than one folder name.
 */
export function decodeTaskSegment(raw: string): string | null {
  let text: string;
  try {
    text = decodeURIComponent(raw);
  } catch {
    return null;
  }
  if (text === "" || text === "." || text === "..") return null;
  for (const ch of text) {
    if (ch === "/" || ch === "\\" || ch === "%" || ch.charCodeAt(0) < 0x20) return null;
  }
  return text;
}

/**
 * Whether decoded segments are a key Zarr readers ask for: a `zarr.json` (at any level) or a
 * chunk file `<array>/c/<i>/<j>...` (`<array>/c` for a 0-D array). Everything else a store
 * holds (the lock, `runs.jsonl`, `errors.jsonl`, manifests) is not served: it is not Zarr, and
 * it names commands, hosts and error messages that the page gets through `/api/report`.
 */
export function isZarrKey(segments: readonly string[]): boolean {
  const n = segments.length;
  if (n === 0) return false;
  if (segments[n - 1] === "zarr.json") return true;
  let k = n;
  while (k > 0 && DIGITS.test(segments[k - 1]!)) k--;
  return k >= 2 && segments[k - 1] === "c";
}

/** The decoded, whitelisted key of raw URL segments, or null (answer 404). */
export function zarrKeyOf(rawSegments: readonly string[]): string[] | null {
  const segments: string[] = [];
  for (const raw of rawSegments) {
    const s = decodeSegment(raw);
    if (s === null) return null;
    segments.push(s);
  }
  return isZarrKey(segments) ? segments : null;
}

export interface OpenFile {
  readonly fd: number;
  readonly size: number;
  readonly mtime: Date;
  readonly etag: string;
  readonly contentType: string;
}

/** Whether `inner` is strictly inside folder `outer` (both real, absolute paths). */
export function isInside(outer: string, inner: string): boolean {
  const rel = path.relative(outer, inner);
  return rel !== "" && !rel.startsWith("..") && !path.isAbsolute(rel);
}

/**
 * Open `<storeDir>/<segments>` for reading, or null when it does not exist, is not a regular
 * file, or its real path (symbolic links resolved) is not inside the store folder's real path.
 * The file is opened by its real path with O_NOFOLLOW (a link put there since is refused) and
 * O_NONBLOCK (a FIFO cannot block the server; it is then refused as not a regular file).
 */
export function openStoreFile(storeDir: string, segments: readonly string[]): OpenFile | null {
  let real: string;
  try {
    const root = fs.realpathSync(storeDir);
    real = fs.realpathSync(path.join(root, ...segments));
    if (!isInside(root, real)) return null;
  } catch {
    return null;
  }
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(real, O_RDONLY | (O_NOFOLLOW ?? 0) | (O_NONBLOCK ?? 0));
  } catch {
    return null;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) {
      fs.closeSync(fd);
      return null;
    }
    return {
      fd,
      size: stat.size,
      mtime: stat.mtime,
      etag: `"${stat.size.toString(16)}-${Math.round(stat.mtimeMs * 1000).toString(16)}"`,
      contentType: segments[segments.length - 1] === "zarr.json"
        ? "application/json"
        : "application/octet-stream",
    };
  } catch {
    fs.closeSync(fd);
    return null;
  }
}

export type RangeAnswer =
  | { readonly kind: "full" }
  | { readonly kind: "partial"; readonly start: number; readonly end: number }
  | { readonly kind: "unsatisfiable" };

const FULL: RangeAnswer = { kind: "full" };

/**
 * A `Range` header for a file of `size` bytes: one range `bytes=a-b`, `bytes=a-` or `bytes=-n`
 * (end inclusive, cut at the file's end). A header that is malformed or asks for several
 * ranges is ignored (the whole file, as RFC 9110 allows); a range that starts at or past the
 * end, or an empty suffix, is unsatisfiable (416).
 */
export function parseRange(header: string | undefined, size: number): RangeAnswer {
  if (header === undefined) return FULL;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (m === null) return FULL;
  const [first, last] = [m[1]!, m[2]!];
  if (first === "" && last === "") return FULL;
  if (first === "") {
    const n = Number(last);
    if (n === 0 || size === 0) return { kind: "unsatisfiable" };
    return { kind: "partial", start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(first);
  const end = last === "" ? size - 1 : Number(last);
  if (last !== "" && end < start) return FULL;
  if (start >= size) return { kind: "unsatisfiable" };
  return { kind: "partial", start, end: Math.min(end, size - 1) };
}

/** Whether an `If-None-Match` header names `etag` (or is `*`). */
function matchesEtag(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(",").some((t) => {
    const tag = t.trim().replace(/^W\//, "");
    return tag === "*" || tag === etag;
  });
}

/**
 * Answer a GET or HEAD with `file` (which this takes over and closes): 304 when `If-None-Match`
 * names its ETag, 206 / 416 for a `Range`, else 200; the body streams from the descriptor.
 */
export function sendFile(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  file: OpenFile,
  headers: Readonly<Record<string, string>>,
): void {
  const close = () => fs.close(file.fd, () => {});
  const common: Record<string, string> = {
    ...headers,
    "Accept-Ranges": "bytes",
    "ETag": file.etag,
    "Last-Modified": file.mtime.toUTCString(),
    // The ledger changes while a run writes it: readers revalidate (cheap with the ETag).
    "Cache-Control": "no-cache",
  };
  if (matchesEtag(req.headers["if-none-match"], file.etag)) {
    close();
    res.writeHead(304, common);
    res.end();
    return;
  }
  const range = parseRange(req.headers["range"], file.size);
  if (range.kind === "unsatisfiable") {
    close();
    res.writeHead(416, {
      ...common,
      "Content-Range": `bytes */${file.size}`,
      "Content-Type": "text/plain; charset=utf-8",
    });
    res.end("Range not satisfiable\n");
    return;
  }
  const [start, end] = range.kind === "partial" ? [range.start, range.end] : [0, file.size - 1];
  const length = Math.max(0, end - start + 1);
  res.writeHead(range.kind === "partial" ? 206 : 200, {
    ...common,
    "Content-Type": file.contentType,
    "Content-Length": String(length),
    ...(range.kind === "partial" ? { "Content-Range": `bytes ${start}-${end}/${file.size}` } : {}),
  });
  if (req.method === "HEAD" || length === 0) {
    close();
    res.end();
    return;
  }
  const stream = fs.createReadStream("", { fd: file.fd, start, end, autoClose: true });
  pipeline(stream, res, () => {
    // A client that went away mid-file is not an error of the server; both ends are closed.
  });
}
