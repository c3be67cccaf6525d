/**
 * zstd encodes through the system's libzstd with a context kept per thread
 * (lib/runtime/zstd_native.ts): found where it is installed, refused by name when
 * BLOCKWISE_LIBZSTD names one that cannot be used, off on request, and its frames carry the
 * content size and, when asked, the checksum, and decode back through node:zlib.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import process from "node:process";
import { loadNativeZstd } from "../lib/runtime/zstd_native.ts";
import {
  type NativeZstdEncoder,
  setNativeZstd,
  zstdCompress,
  zstdContentSize,
  zstdDecompress,
} from "../lib/zarr/native_compression.ts";

const installed = [
  "/usr/lib/x86_64-linux-gnu/libzstd.so.1",
  "/usr/lib/aarch64-linux-gnu/libzstd.so.1",
]
  .some((p) => fs.existsSync(p));
const skip = !installed && process.env["BLOCKWISE_REQUIRE_PYTHON_CODECS"] !== "1"
  ? { skip: "no libzstd.so.1 here: apt-get install libzstd1" }
  : {};

function sample(length: number): Uint8Array {
  return new Uint8Array(
    Float32Array.from({ length: length / 4 }, (_, i) => Math.sin(i / 300) * 1000).buffer,
  );
}

describe("zstd through libzstd", () => {
  it("is found where it is installed, and says which", skip, async () => {
    const status = await loadNativeZstd({});
    assert.match(status.description, /^libzstd 1\.\d+\.\d+ \(libzstd\.so\.1\)$/);
    assert.equal(status.reason, "found libzstd.so.1");
  });

  it(
    "writes frames with their size, the checksum when asked, that node:zlib decodes",
    skip,
    async () => {
      const { impl } = await loadNativeZstd({});
      const data = sample(1 << 20);
      for (const level of [-5, 1, 3, 4]) {
        for (const checksum of [false, true]) {
          const frame = impl!.compress(data, level, checksum)!;
          assert.equal(zstdContentSize(frame), data.length, `level ${level}`);
          // Frame_Header_Descriptor bit 2: Content_Checksum_flag.
          assert.equal((frame[4]! & 4) !== 0, checksum, `level ${level}, checksum ${checksum}`);
          assert.deepEqual(zstdDecompress(frame), data);
        }
      }
      assert.deepEqual(
        zstdDecompress(impl!.compress(new Uint8Array(0), 3, false)!),
        new Uint8Array(0),
      );
    },
  );

  it("is what zstdCompress uses once installed, and node:zlib again after", skip, async () => {
    const { impl } = await loadNativeZstd({});
    let calls = 0;
    const counted: NativeZstdEncoder = {
      description: impl!.description,
      compress(data, level, checksum) {
        calls++;
        return impl!.compress(data, level, checksum);
      },
    };
    const data = sample(4096);
    setNativeZstd(counted);
    try {
      assert.deepEqual(zstdDecompress(zstdCompress(data, 3, true)), data);
      assert.equal(calls, 1);
    } finally {
      setNativeZstd(null);
    }
    assert.deepEqual(zstdDecompress(zstdCompress(data, 3, true)), data);
    assert.equal(calls, 1);
  });

  it("is left alone with BLOCKWISE_LIBZSTD=off, and quietly when it is missing", async () => {
    const off = await loadNativeZstd({ BLOCKWISE_LIBZSTD: "off" });
    assert.equal(off.impl, null);
    assert.equal(off.description, "node:zlib");
    assert.equal(off.reason, "BLOCKWISE_LIBZSTD=off");
    const missing = await loadNativeZstd({}, "libzstd-that-is-not-there.so.1");
    assert.equal(missing.impl, null);
    assert.match(missing.reason, /^libzstd-that-is-not-there\.so\.1: /);
  });

  it("refuses a library BLOCKWISE_LIBZSTD names that cannot be used, naming it and the fix", async () => {
    await assert.rejects(
      loadNativeZstd({ BLOCKWISE_LIBZSTD: "/no/such/libzstd.so.1" }),
      (error: Error) =>
        /^zstd: cannot use the libzstd "\/no\/such\/libzstd\.so\.1": .+\. Fix: point BLOCKWISE_LIBZSTD at libzstd 1\.4 or later .*BLOCKWISE_LIBZSTD=off to encode with node:zlib \(currently BLOCKWISE_LIBZSTD=\/no\/such\/libzstd\.so\.1\)$/
          .test(error.message) && error.name === "InputError",
    );
  });
});
