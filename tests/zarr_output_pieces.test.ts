/**
 * node:zlib's output is asked for in one piece of the expected size (lib/zarr/
 * native_compression.ts): the size comes from the zstd frame header or the gzip trailer, and a
 * wrong or forged size must never change what is decoded or ask for more than a bounded piece.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  gzipCompress,
  gzipDecompress,
  outputPiece,
  zstdCompress,
  zstdContentSize,
  zstdDecompress,
} from "../lib/zarr/native_compression.ts";

function sample(length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (Math.sin(i / 50) * 100 + (i % 7)) & 255;
  return out;
}

describe("output pieces of node:zlib", () => {
  it("reads the content size of zstd frames of every header size", () => {
    for (const length of [0, 1, 255, 256, 300, 65_791, 70_000, 1 << 20]) {
      const frame = zstdCompress(sample(length), 3, false);
      assert.equal(zstdContentSize(frame), length, `a frame of ${length} bytes`);
      assert.deepEqual(zstdDecompress(frame), sample(length));
    }
  });

  it("decodes small outputs into buffers of their own, which zarr.set may write whole", () => {
    for (const length of [16, 64, 1000, 5000]) {
      for (
        const decoded of [
          zstdDecompress(zstdCompress(sample(length), 1, false)),
          gzipDecompress(gzipCompress(sample(length), 1)),
        ]
      ) {
        assert.equal(decoded.byteOffset, 0, `${length} bytes`);
        assert.equal(decoded.buffer.byteLength, length, `${length} bytes`);
      }
    }
  });

  it("finds no size in a frame without one or in what is not a zstd frame", () => {
    // Magic, descriptor 0x00 (no size, window descriptor follows), window byte, then a block.
    assert.equal(
      zstdContentSize(Uint8Array.of(0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x48, 1, 0, 0)),
      undefined,
    );
    assert.equal(zstdContentSize(Uint8Array.of(0x1f, 0x8b, 8, 0, 0, 0)), undefined);
    assert.equal(zstdContentSize(new Uint8Array(3)), undefined);
  });

  it("bounds the piece whatever the size asked", () => {
    assert.equal(outputPiece(0), 16 * 1024);
    assert.equal(outputPiece(Number.NaN), 16 * 1024);
    assert.equal(outputPiece(10), 64);
    assert.equal(outputPiece(1 << 20), 1 << 20);
    assert.equal(outputPiece(2 ** 40), 64 * 1024 * 1024);
  });

  it("decodes gzip whose trailer lies, and streams of several members", () => {
    const data = sample(200_000);
    const stream = gzipCompress(data, 5);
    const forged = stream.slice();
    forged.set([0xff, 0xff, 0xff, 0xff], forged.length - 4);
    // The size check of gunzip refuses the forged trailer: the piece size is not what decides.
    assert.throws(() => gzipDecompress(forged));
    const small = stream.slice();
    small.set([16, 0, 0, 0], small.length - 4);
    assert.throws(() => gzipDecompress(small));
    const two = new Uint8Array(stream.length * 2);
    two.set(stream);
    two.set(gzipCompress(sample(1_000), 5), stream.length);
    const decoded = gzipDecompress(
      two.subarray(0, stream.length + gzipCompress(sample(1_000), 5).length),
    );
    assert.equal(decoded.length, 201_000);
    assert.deepEqual(decoded.subarray(0, 200_000), data);
  });
});
