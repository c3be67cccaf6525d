/**
 * Who may talk to `blockwise serve`: the `--listen HOST:PORT` value, the secret URL token that
 * every address other than loopback requires, the Host check that keeps DNS rebinding away from
 * a loopback server, and the messages for an address that cannot be listened on.
 */

import { Buffer } from "node:buffer";
import { timingSafeEqual } from "node:crypto";
import * as os from "node:os";
import { errorCode, InputError, messageOf } from "../errors.ts";
import { type HostPort, isLoopback, isWildcard, parseHostPort } from "../remote/address.ts";

/** Where `serve` listens unless told: this machine only, port 8000. */
export const DEFAULT_VIEW_LISTEN = "127.0.0.1:8000";

const FIX = "write HOST:PORT, e.g. --listen 127.0.0.1:8000 (this machine only; port 0 picks a " +
  "free port), --listen 0.0.0.0:8000 (every interface, with a secret token in the URL) or " +
  "--listen [::1]:8000 for IPv6";

/**
 * `--listen HOST:PORT` (`[v6]:PORT` for IPv6, port 0 = any free port), or an InputError that
 * quotes the value, says what is wrong and shows values that work.
 */
export function parseListen(text: string): HostPort {
  try {
    return parseHostPort(text.trim(), "--listen", true);
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    throw new InputError(`Cannot listen on "${text}": ${listenSyntaxProblem(text.trim())}; ${FIX}`);
  }
}

function listenSyntaxProblem(text: string): string {
  const bracketed = text.startsWith("[");
  if (!bracketed && text.split(":").length > 2) return "an IPv6 address needs brackets around it";
  const colon = text.lastIndexOf(":");
  if (colon < 0 || (bracketed && colon < text.indexOf("]"))) return "there is no port";
  const host = text.slice(0, colon);
  const port = text.slice(colon + 1);
  if (host === "" || host === "[]") return "there is no host before the port";
  if (port === "") return "there is no port after the colon";
  if (!/^\d+$/.test(port)) return `the port "${port}" is not a whole number`;
  if (Number(port) > 65535) return `the port ${port} is out of range (0-65535)`;
  return "it is not HOST:PORT";
}

/** Loopback needs no token: only this machine's users reach it. */
export function needsToken(host: string): boolean {
  return !isLoopback(host);
}

/** A fresh 128-bit token as 32 hex digits. */
export function newToken(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Buffer.from(bytes).toString("hex");
}

/** `given === token`, in time that does not depend on where they differ. */
export function tokenMatches(given: string, token: string): boolean {
  const a = Buffer.from(given, "utf8");
  const b = Buffer.from(token, "utf8");
  if (a.length !== b.length) {
    timingSafeEqual(b, b);
    return false;
  }
  return timingSafeEqual(a, b);
}

/** The host name for the printed URL: this machine's name when listening on every interface. */
export function urlHost(listenHost: string): string {
  const host = isWildcard(listenHost) ? os.hostname() : listenHost;
  return host.includes(":") ? `[${host}]` : host;
}

/**
 * Whether a request's Host header names this machine's loopback (`localhost`, `*.localhost`,
 * `127.x.x.x`, `[::1]`, any port): a loopback server answers nothing else, so that a web page
 * whose name an attacker re-points at 127.0.0.1 (DNS rebinding) cannot read it. A request
 * without a Host header (HTTP/1.0, not a browser) is let through.
 */
export function isLoopbackHostHeader(header: string | undefined): boolean {
  if (header === undefined) return true;
  const value = header.trim().toLowerCase();
  let host: string;
  if (value.startsWith("[")) {
    const end = value.indexOf("]");
    if (end < 0) return false;
    host = value.slice(1, end);
    const rest = value.slice(end + 1);
    if (rest !== "" && !/^:\d+$/.test(rest)) return false;
  } else {
    const m = /^([^:]+)(?::\d+)?$/.exec(value);
    if (m === null) return false;
    host = m[1]!;
  }
  if (host === "localhost" || host.endsWith(".localhost") || host === "::1") return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * Why listening on `address` failed and what to do, as an InputError quoting `text` (the
 * `--listen` value), e.g. `Cannot listen on "127.0.0.1:80": permission denied; choose a port
 * above 1023, e.g. --listen 127.0.0.1:8000`.
 */
export function listenFailure(error: unknown, text: string, address: HostPort): InputError {
  const host = address.host.includes(":") ? `[${address.host}]` : address.host;
  const code = errorCode(error);
  let why: string;
  switch (code) {
    case "EADDRINUSE":
      why = `port ${address.port} is in use (EADDRINUSE); stop what uses it or choose another ` +
        `port, e.g. --listen ${host}:${address.port === 8000 ? 8001 : 8000} (port 0 picks a ` +
        `free port)`;
      break;
    case "EACCES":
    case "EPERM":
      why = `permission denied (${code}); choose a port above 1023, e.g. --listen ${host}:8000`;
      break;
    case "EADDRNOTAVAIL":
    case "EINVAL":
    case "ENOTCONN":
      why = `${address.host} is not an address of this machine (${code}); use 127.0.0.1 (this ` +
        `machine only), 0.0.0.0 (every interface) or one of this machine's addresses, e.g. ` +
        `--listen 127.0.0.1:${address.port === 0 ? 8000 : address.port}`;
      break;
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_NONAME":
    case "EAI_FAIL":
      why = `the host name ${address.host} does not resolve (${code}); use an IP address of ` +
        `this machine, e.g. --listen 127.0.0.1:${address.port === 0 ? 8000 : address.port}`;
      break;
    default:
      why = `${messageOf(error)}; choose another address, e.g. --listen 127.0.0.1:8000`;
  }
  return new InputError(`Cannot listen on "${text}": ${why}`);
}
