/**
 * HMAC-SHA-256 as hex, the runtime's fastest way. Under Bun, `node:crypto`'s Hmac is a stream
 * class that loads Node's stream modules on first use (8 ms, inside the first worker's
 * handshake) and costs about twice Bun's own hasher per call; a scheduler admitting thousands of
 * workers computes two per worker. Deno uses `node:crypto`.
 */

import { createHmac } from "node:crypto";

interface BunHasher {
  update(data: string): BunHasher;
  digest(encoding: "hex"): string;
}
type BunHasherClass = new (algorithm: "sha256", key: Uint8Array) => BunHasher;

const bunHasher = (globalThis as unknown as { Bun?: { CryptoHasher?: BunHasherClass } }).Bun
  ?.CryptoHasher;

/** HMAC-SHA-256 of `text` (UTF-8) under `key`, as 64 hex digits. */
export function hmacSha256Hex(key: Uint8Array, text: string): string {
  if (bunHasher !== undefined) return new bunHasher("sha256", key).update(text).digest("hex");
  return createHmac("sha256", key).update(text).digest("hex");
}
