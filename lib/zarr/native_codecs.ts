/**
 * gzip, zlib and zstd as zarrita codecs, running the runtime's native C implementations
 * (native_compression.ts) instead of numcodecs' WebAssembly builds and fflate's pure JavaScript:
 * per chunk, 3-4x faster on decode and up to 3x on encode (docs/design/CODECS.md). The
 * configurations are Zarr v3's and numcodecs' (v2): `{level}` for gzip and zlib,
 * `{level, checksum}` for zstd; a value outside what the codec takes is refused with the value
 * and the range, where numcodecs would clamp it or fail deep inside the C library.
 */

import { InputError } from "../errors.ts";
import {
  gzipCompress,
  gzipDecompress,
  zlibCompress,
  zlibDecompress,
  zstdCompress,
  zstdDecompress,
} from "./native_compression.ts";

/** What zarrita's registry hands a codec class: its `configuration` object. */
type CodecConfig = Readonly<Record<string, unknown>> | undefined;

/** An integer setting of a codec's configuration, or `fallback` when absent. */
function integerSetting(
  codec: string,
  config: CodecConfig,
  key: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const value = config?.[key];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new InputError(
      `Zarr codec "${codec}": ${key} ${
        JSON.stringify(value)
      } is not an integer from ${min} to ${max}; set the array's "${codec}" configuration "${key}" to one`,
    );
  }
  return value;
}

function booleanSetting(codec: string, config: CodecConfig, key: string): boolean {
  const value = config?.[key];
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") {
    throw new InputError(
      `Zarr codec "${codec}": ${key} ${
        JSON.stringify(value)
      } is not true or false; set the array's "${codec}" configuration "${key}" to a boolean`,
    );
  }
  return value;
}

/** A copy into `out` when the caller gave one (zarrita may), else the decoded bytes. */
function into(decoded: Uint8Array, out: Uint8Array | undefined): Uint8Array {
  if (out === undefined) return decoded;
  out.set(decoded);
  return out;
}

/** gzip (RFC 1952), numcodecs' GZip and Zarr v3's `gzip`. Default level 1, as numcodecs'. */
export class NativeGzip {
  static readonly codecId = "gzip";
  readonly kind = "bytes_to_bytes";
  constructor(readonly level: number) {}
  static fromConfig(config: CodecConfig): NativeGzip {
    return new NativeGzip(integerSetting("gzip", config, "level", 1, 0, 9));
  }
  encode(data: Uint8Array): Uint8Array {
    return gzipCompress(data, this.level);
  }
  decode(data: Uint8Array, out?: Uint8Array): Uint8Array {
    return into(gzipDecompress(data), out);
  }
}

/** zlib (RFC 1950), numcodecs' Zlib. Default level 1, as numcodecs'; -1 is zlib's default. */
export class NativeZlib {
  static readonly codecId = "zlib";
  readonly kind = "bytes_to_bytes";
  constructor(readonly level: number) {}
  static fromConfig(config: CodecConfig): NativeZlib {
    return new NativeZlib(integerSetting("zlib", config, "level", 1, -1, 9));
  }
  encode(data: Uint8Array): Uint8Array {
    return zlibCompress(data, this.level);
  }
  decode(data: Uint8Array, out?: Uint8Array): Uint8Array {
    return into(zlibDecompress(data), out);
  }
}

/** zstd's levels: negative ones are its fast modes, 0 means its default (3); numcodecs defaults to 1. */
const ZSTD_MIN_LEVEL = -131072;
const ZSTD_MAX_LEVEL = 22;

/** Zstandard, numcodecs' Zstd and Zarr v3's `zstd` (`checksum` adds a frame checksum). */
export class NativeZstd {
  static readonly codecId = "zstd";
  readonly kind = "bytes_to_bytes";
  constructor(readonly level: number, readonly checksum: boolean) {}
  static fromConfig(config: CodecConfig): NativeZstd {
    return new NativeZstd(
      integerSetting("zstd", config, "level", 1, ZSTD_MIN_LEVEL, ZSTD_MAX_LEVEL),
      booleanSetting("zstd", config, "checksum"),
    );
  }
  encode(data: Uint8Array): Uint8Array {
    return zstdCompress(data, this.level, this.checksum);
  }
  decode(data: Uint8Array, out?: Uint8Array): Uint8Array {
    return into(zstdDecompress(data), out);
  }
}
