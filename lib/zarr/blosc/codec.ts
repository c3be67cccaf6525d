/**
 * The Blosc codec in the shape zarrita's registry takes (`fromConfig`, `encode`, `decode`, a
 * bytes-to-bytes `kind`), for the Zarr v3 `blosc` codec and the v2 `numcodecs.blosc`
 * compressor alike. It reads every frame c-blosc 1.21 writes and writes frames numcodecs reads,
 * with c-blosc's block layout and compression ratio; see docs/design/CODECS.md.
 */

import { type BloscConfig, type BloscContext, normaliseBloscConfig } from "./config.ts";
import { decodeFrame } from "./decode.ts";
import { encodeFrame } from "./encode.ts";
import { decodeNative, encodeNative } from "./native.ts";

export type { BloscConfig, BloscContext, Shuffle } from "./config.ts";
export { normaliseBloscConfig, typesizeOfDataType } from "./config.ts";
export { decodedSize } from "./decode.ts";
export type { BloscBufferSizes, NativeBlosc } from "./native.ts";
export { nativeBlosc, setNativeBlosc } from "./native.ts";

export class BloscCodec {
  static readonly kind = "bytes_to_bytes";
  static readonly codecId = "blosc";
  readonly kind = "bytes_to_bytes";
  readonly config: BloscConfig;

  constructor(config: BloscConfig) {
    this.config = config;
  }

  /**
   * A codec for a Zarr v3 `configuration` or a v2 compressor object. `meta` is what zarrita
   * passes (the chunk's `dataType`, from which an absent typesize is taken) or a typesize.
   */
  static fromConfig(config: unknown, meta?: BloscContext): BloscCodec {
    return new BloscCodec(normaliseBloscConfig(config, meta ?? {}));
  }

  /**
   * One Blosc frame holding `bytes` (a view of a buffer of bytes.length + 16 bytes): by the
   * native Blosc when one is installed (setNativeBlosc), else by the TypeScript encoder.
   */
  encode(bytes: Uint8Array): Uint8Array {
    return encodeNative(bytes, this.config) ?? encodeFrame(bytes, this.config);
  }

  /**
   * The bytes `frame` holds, decoded into `out` when given (its first nbytes; it must be large
   * enough), else into one new buffer; by the native Blosc when one is installed and takes it.
   */
  decode(frame: Uint8Array, out?: Uint8Array): Uint8Array {
    return decodeNative(frame, out) ?? decodeFrame(frame, out);
  }
}
