/**
 * The per-run secret that admits remote workers, and the challenge-response built on it. The
 * secret (256 random bits) reaches a worker through its environment (`BLOCKWISE_SECRET`) or a
 * file only its owner can read (`BLOCKWISE_SECRET_FILE`), never its command line, and never
 * crosses the wire: each side proves it knows the secret with an HMAC-SHA-256 over both sides'
 * fresh nonces, so a recorded handshake is worthless and a worker never runs code for a
 * scheduler that could not prove itself.
 */

import { randomBytes, timingSafeEqual } from "node:crypto";
import { Buffer } from "node:buffer";
import * as fs from "node:fs";
import { errorCode, InputError } from "../errors.ts";
import { hmacSha256Hex } from "../runtime/hmac.ts";

export const SECRET_ENV = "BLOCKWISE_SECRET";
export const SECRET_FILE_ENV = "BLOCKWISE_SECRET_FILE";
const SECRET_HEX = /^[0-9a-f]{64}$/;
const NONCE_HEX = /^[0-9a-f]{64}$/;

/** 256 random bits as 64 hex digits. */
export function newSecret(): string {
  return randomBytes(32).toString("hex");
}

/** A fresh 256-bit nonce as 64 hex digits. */
export function newNonce(): string {
  return randomBytes(32).toString("hex");
}

export function isNonce(text: string): boolean {
  return NONCE_HEX.test(text);
}

/** The secret's bytes, kept for the secret used last (a run has one). */
let key: { readonly secret: string; readonly bytes: Uint8Array } | null = null;

function mac(secret: string, parts: readonly string[]): string {
  if (key?.secret !== secret) key = { secret, bytes: Buffer.from(secret, "hex") };
  // Lengths first, so that no two different part lists hash the same bytes.
  let text = "";
  for (const p of parts) text += `${p.length}:${p};`;
  return hmacSha256Hex(key.bytes, text);
}

/** What the scheduler sends to prove it knows the secret (answers the worker's nonce). */
export function schedulerProof(
  secret: string,
  workerNonce: string,
  schedulerNonce: string,
): string {
  return mac(secret, ["blockwise scheduler", workerNonce, schedulerNonce]);
}

/** What the worker sends to prove it knows the secret; binds the slot it claims. */
export function workerProof(
  secret: string,
  schedulerNonce: string,
  workerNonce: string,
  slot: string,
): string {
  return mac(secret, ["blockwise worker", schedulerNonce, workerNonce, slot]);
}

/** Constant-time comparison of two hex MACs. */
export function sameMac(a: string, b: string): boolean {
  if (a.length !== b.length || !/^[0-9a-f]*$/.test(a)) return false;
  return timingSafeEqual(Buffer.from(a, "hex"), Buffer.from(b, "hex"));
}

/**
 * The secret a worker was given: `BLOCKWISE_SECRET`, or the file `BLOCKWISE_SECRET_FILE` names,
 * which must be readable by its owner only (mode 0600 or stricter).
 */
export function secretFromEnvironment(env: Readonly<Record<string, string | undefined>>): string {
  const direct = env[SECRET_ENV];
  const file = env[SECRET_FILE_ENV];
  if (direct !== undefined && direct !== "") return checkSecret(direct.trim(), SECRET_ENV);
  if (file === undefined || file === "") {
    throw new InputError(
      `No secret to connect with: neither ${SECRET_ENV} nor ${SECRET_FILE_ENV} is set. The scheduler gives its workers the run's secret through one of them; start workers through a launcher (launch: "slurm" or "command"), or export the variable the scheduler printed`,
    );
  }
  return readSecretFile(file, SECRET_FILE_ENV);
}

/**
 * The secret in `file` (named by `via`: `BLOCKWISE_SECRET_FILE` or `--secret-file`), which must
 * exist and be readable by its owner only (mode 0600 or stricter). The secret is never printed.
 */
export function readSecretFile(file: string, via: string): string {
  let text: string;
  try {
    const stat = fs.statSync(file);
    if ((stat.mode & 0o077) !== 0) {
      throw new InputError(
        `The secret file ${file} (${via}) can be read by other users (mode ${
          (stat.mode & 0o777).toString(8)
        }); make it private with chmod 600 ${file}`,
      );
    }
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    if (error instanceof InputError) throw error;
    throw new InputError(
      `Cannot read the secret file ${file} (${via}): ${
        errorCode(error) ?? (error as Error).message
      }; check the path (the run prints it: "Workers can join: ...") and that this user may read it (chmod 600 ${file})`,
    );
  }
  return checkSecret(text.trim(), `the secret file ${file}`);
}

/**
 * What a worker that joins by hand binds in its proof instead of a launch slot: the task it asks
 * for ("" when it names none). Slots are hex, so no joiner's proof can pass for a slot's.
 */
export function joinSlot(task: string): string {
  return `join:${task}`;
}

function checkSecret(text: string, where: string): string {
  if (!SECRET_HEX.test(text)) {
    throw new InputError(
      `The secret in ${where} is not 64 hex digits (got ${text.length} characters); pass the secret the scheduler generated for this run, unchanged`,
    );
  }
  return text;
}

/** Write `secret` to a new file readable by its owner only; returns the path. */
export function writeSecretFile(path: string, secret: string): string {
  fs.writeFileSync(path, secret + "\n", { mode: 0o600, flag: "wx" });
  fs.chmodSync(path, 0o600);
  return path;
}
