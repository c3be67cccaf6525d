/** `HOST:PORT` addresses for the worker server (`--listen`) and workers (`--connect`). */

import * as os from "node:os";
import { InputError } from "../errors.ts";

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** The default: loopback only, a port the system picks. */
export const DEFAULT_LISTEN: HostPort = { host: "127.0.0.1", port: 0 };

/**
 * Parse `HOST:PORT` (`[v6]:PORT` for IPv6); `what` names the option in the message. Port 0 (pick
 * one) only where `allowZero`.
 */
export function parseHostPort(text: string, what: string, allowZero: boolean): HostPort {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:\s]+):(\d+)$/.exec(text);
  const example = allowZero ? "0.0.0.0:0 or node12:7000" : "node12:7000";
  if (m === null) {
    throw new InputError(
      `${what} "${text}" is not HOST:PORT; write e.g. ${example} ([::1]:7000 for IPv6)`,
    );
  }
  const port = Number(m[2]);
  if (!Number.isSafeInteger(port) || port > 65535 || (port === 0 && !allowZero)) {
    throw new InputError(
      `${what} "${text}" has port ${m[2]}, which is not ${
        allowZero ? "0-65535" : "1-65535"
      }; write e.g. ${example}`,
    );
  }
  return { host: m[1]!, port };
}

export function formatAddress(a: HostPort): string {
  return a.host.includes(":") ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

/** Listening on every interface: workers elsewhere need a name for this machine instead. */
export function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "" || host === "*";
}

/** Where workers should connect to reach a server bound to `bound`. */
export function connectAddress(bound: HostPort): HostPort {
  return isWildcard(bound.host) ? { host: os.hostname(), port: bound.port } : bound;
}

export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host.startsWith("127.");
}
