/**
 * The handshake's HMAC (lib/runtime/hmac.ts): Bun's own hasher where there is one, node:crypto
 * elsewhere. Both must give RFC 4231's HMAC-SHA-256, or a worker on one runtime (or the Python
 * client, with Python's hmac) could never prove itself to a scheduler on another.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { Buffer } from "node:buffer";
import { hmacSha256Hex } from "../lib/runtime/hmac.ts";
import { Rng } from "./fixtures/rng.ts";

describe("HMAC-SHA-256", () => {
  it("gives RFC 4231's test vectors", () => {
    // Test case 2: key "Jefe".
    assert.equal(
      hmacSha256Hex(Buffer.from("Jefe"), "what do ya want for nothing?"),
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    );
    // Test case 1: twenty 0x0b bytes.
    assert.equal(
      hmacSha256Hex(new Uint8Array(20).fill(0x0b), "Hi There"),
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
    );
  });

  it("agrees with node:crypto on random keys and texts, UTF-8 included", () => {
    const rng = new Rng(7);
    for (let i = 0; i < 200; i++) {
      const key = Uint8Array.from({ length: 1 + rng.int(100) }, () => rng.int(256));
      const text = Array.from(
        { length: rng.int(300) },
        () => String.fromCodePoint(rng.chance(0.1) ? 0x4e00 + rng.int(500) : 32 + rng.int(90)),
      ).join("");
      assert.equal(
        hmacSha256Hex(key, text),
        createHmac("sha256", key).update(text).digest("hex"),
        `key ${Buffer.from(key).toString("hex")}, text ${JSON.stringify(text)}`,
      );
    }
  });
});
