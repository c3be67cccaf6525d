/**
 * The system's libblosc as `BloscCodec`'s native implementation, where it is there and is the
 * c-blosc the TypeScript codec was written against (docs/design/CODECS.md, "Blosc through
 * libblosc"): decode at C speed (0.16-0.19 ms per 1 MiB lz4 chunk where TypeScript takes 0.7),
 * and the same frames with or without it.
 *
 * Which library: BLOCKWISE_LIBBLOSC=off uses the TypeScript codec; BLOCKWISE_LIBBLOSC=<path or
 * soname> that library, and a library that cannot be used is an error naming it and the fix;
 * unset, libblosc.so.1 (libblosc.1.dylib on macOS) through the dynamic loader, and anything
 * unexpected (absent, no FFI permission, another version) quietly leaves the TypeScript codec.
 *
 * What is accepted: c-blosc 1.21.1 and later 1.21.x (blosc_get_version_string), whose BloscLZ
 * (2.5.1) and LZ4 (1.9.x) write what the TypeScript ports write; checked once per thread by
 * encoding a small buffer both ways. A compressor whose bytes differ (a system liblz4 of another
 * version) is encoded in TypeScript; decoding, the same everywhere, stays native. zlib and zstd
 * are always encoded in TypeScript: the runtimes' zlib-ng and zstd (behind node:zlib) encode as
 * fast or faster than Debian's zlib and libzstd inside libblosc, and so a frame does not depend
 * on whether libblosc was there.
 *
 * Every call is checked before C sees it: cbytes within the frame, nbytes within the output.
 */

import process from "node:process";
import { normaliseBloscConfig } from "../zarr/blosc/config.ts";
import { encodeFrame } from "../zarr/blosc/encode.ts";
import { HEADER_BYTES } from "../zarr/blosc/format.ts";
import { type BloscBufferSizes, type NativeBlosc, setNativeBlosc } from "../zarr/blosc/native.ts";
import { ffiUnavailable, type OpenedLibblosc, openLibblosc } from "./blosc_ffi.ts";
import { registerNativeZstd } from "./zstd_native.ts";
import { registerNativeCopy } from "./native_copy.ts";
import { chooseLibrary, oncePerThread } from "./native_library.ts";

export const LIBBLOSC_ENV = "BLOCKWISE_LIBBLOSC";

/** The c-blosc versions accepted: 1.21.1 (BloscLZ 2.5.1) and later 1.21 releases. */
const ACCEPTED_VERSION = /^1\.21\.([1-9]\d*)$/;

/**
 * The compressors encoded through C: those the TypeScript codec writes byte for byte as c-blosc
 * (checked at load), where C is 1.5-2x faster.
 */
export const NATIVE_ENCODES: readonly string[] = ["blosclz", "lz4", "lz4hc"];

/** Which Blosc this thread's `BloscCodec` runs, and why. */
export interface NativeBloscStatus {
  /** The native implementation, or null for the TypeScript codec. */
  readonly impl: NativeBlosc | null;
  /** e.g. "libblosc 1.21.3 (libblosc.so.1)" or "blockwise's TypeScript Blosc". */
  readonly description: string;
  /** Why this one. */
  readonly reason: string;
}

/** The library to open when BLOCKWISE_LIBBLOSC is unset, by the dynamic loader's rules. */
export function defaultLibblosc(): string | null {
  if (process.platform === "linux") return "libblosc.so.1";
  if (process.platform === "darwin") return "libblosc.1.dylib";
  return null;
}

const TYPESCRIPT = "blockwise's TypeScript Blosc";

function fixFor(setting: string): string {
  return `point ${LIBBLOSC_ENV} at c-blosc 1.21's shared library (Debian and Ubuntu: ` +
    `apt-get install libblosc1, then /usr/lib/<arch>-linux-gnu/libblosc.so.1), unset it to ` +
    `look for ${defaultLibblosc() ?? "libblosc"} where the loader looks, or set ` +
    `${LIBBLOSC_ENV}=off to use ${TYPESCRIPT} (currently ${LIBBLOSC_ENV}=${setting})`;
}

/**
 * Opens and checks the libblosc `env` asks for (`usual` when BLOCKWISE_LIBBLOSC is unset).
 * Resolves to the TypeScript codec (impl null) with the reason when none is asked for or the
 * usual one cannot be used; rejects (InputError: exit 2) when the one BLOCKWISE_LIBBLOSC names
 * cannot be used.
 */
export async function loadNativeBlosc(
  env: Readonly<Record<string, string | undefined>> = process.env,
  usual: string | null = defaultLibblosc(),
): Promise<NativeBloscStatus> {
  const typescript = (reason: string): NativeBloscStatus => ({
    impl: null,
    description: TYPESCRIPT,
    reason,
  });
  const choice = chooseLibrary(env, LIBBLOSC_ENV, usual, {
    what: "libblosc",
    prefix: "blosc",
    fix: fixFor,
  });
  const library = choice.library;
  if (library === null) return typescript(choice.skipped!);
  const unusable = (why: string) => typescript(choice.unusable(why));
  const noFfi = ffiUnavailable();
  if (noFfi !== null) return unusable(noFfi);
  let opened: OpenedLibblosc;
  try {
    opened = await openLibblosc(library);
  } catch (error) {
    return unusable(error instanceof Error ? error.message : String(error));
  }
  if (!ACCEPTED_VERSION.test(opened.version)) {
    return unusable(
      `it is c-blosc ${JSON.stringify(opened.version)}; blockwise uses c-blosc 1.21.1 to 1.21.x`,
    );
  }
  const impl = bindLibblosc(opened, new Set(NATIVE_ENCODES));
  const differs = selfTest(impl);
  if (differs === "decode") {
    return unusable(`it does not decode ${TYPESCRIPT}'s frames to the same bytes`);
  }
  const exact = differs.length === 0
    ? ""
    : `; ${differs.join(", ")} written in TypeScript (this library writes other bytes)`;
  const kept = new Set(NATIVE_ENCODES.filter((c) => !differs.includes(c)));
  return {
    impl: differs.length === 0 ? impl : bindLibblosc(opened, kept),
    description: impl.description,
    reason: `${
      choice.setting !== "" ? `${LIBBLOSC_ENV}=${choice.setting}` : `found ${library}`
    }${exact}`,
  };
}

/** The NativeBlosc over an opened libblosc, encoding the compressors in `encodes`. */
export function bindLibblosc(opened: OpenedLibblosc, encodes: ReadonlySet<string>): NativeBlosc {
  const s = opened.symbols;
  const names = new Map<string, Uint8Array>();
  for (const cname of encodes) {
    const name = new TextEncoder().encode(`${cname}\0`);
    if (s.blosc_compname_to_compcode(name) >= 0) names.set(cname, name);
  }
  // size_t outputs as two 32-bit words each (little-endian hosts: x64, arm64).
  const words = new Uint32Array(6);
  const out = [words.subarray(0, 2), words.subarray(2, 4), words.subarray(4, 6)] as const;
  const size = (i: number) => words[2 * i]! + words[2 * i + 1]! * 2 ** 32;
  const cbufferSizes = (src: Uint8Array): BloscBufferSizes => {
    if (src.length < HEADER_BYTES) {
      throw new Error(`blosc: a frame of ${src.length} bytes is shorter than the 16-byte header`);
    }
    s.blosc_cbuffer_sizes(src, out[0], out[1], out[2]);
    return { nbytes: size(0), cbytes: size(1), blocksize: size(2) };
  };
  return {
    description: `libblosc ${opened.version} (${opened.library})`,
    encodes: (cname) => names.has(cname),
    cbufferSizes,
    compress(src, typesize, clevel, shuffle, cname, blocksize, dest) {
      const name = names.get(cname);
      if (name === undefined || src.length === 0) return -1;
      return s.blosc_compress_ctx(
        clevel,
        shuffle,
        typesize,
        src.length,
        src,
        dest,
        dest.length,
        name,
        blocksize,
        1,
      );
    },
    decompress(src, dest) {
      const { nbytes, cbytes } = cbufferSizes(src);
      if (cbytes > src.length) {
        throw new Error(
          `blosc: cannot decode this frame: it says ${cbytes} bytes but has ${src.length}`,
        );
      }
      if (nbytes > dest.length) {
        throw new Error(
          `blosc: the frame holds ${nbytes} bytes; the output has room for ${dest.length}`,
        );
      }
      if (nbytes === 0) return 0;
      return s.blosc_decompress_ctx(src, dest, dest.length, 1);
    },
  };
}

/**
 * Encodes 8 KiB of smooth float32 with each exactly-ported compressor both ways: the ones
 * whose bytes differ, or "decode" when the library does not decode the TypeScript frames.
 */
function selfTest(impl: NativeBlosc): string[] | "decode" {
  const data = new Uint8Array(
    Float32Array.from({ length: 2048 }, (_, i) => Math.sin(i / 97) + 0.25 * Math.cos(i / 13))
      .buffer,
  );
  const differs: string[] = [];
  for (const cname of NATIVE_ENCODES) {
    if (!impl.encodes(cname)) continue;
    const config = normaliseBloscConfig({ cname, clevel: 5, shuffle: 1, typesize: 4 });
    const ts = encodeFrame(data, config);
    const back = new Uint8Array(data.length);
    if (impl.decompress(ts, back) !== data.length || !equal(back, data)) return "decode";
    const dest = new Uint8Array(data.length + HEADER_BYTES);
    const n = impl.compress(data, 4, 5, 1, cname, 0, dest);
    if (n <= 0 || !equal(dest.subarray(0, n), ts)) differs.push(cname);
  }
  return differs;
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Installs this thread's Blosc once (the system's libblosc where usable, else the TypeScript
 * codec) and its zstd encoder (the system's libzstd where usable, else node:zlib), and says
 * which Blosc. Called next to registerZarrCodecs wherever pipelines and workers get
 * their codecs. Rejects (every time) when BLOCKWISE_LIBBLOSC names a library it cannot use.
 */
export const registerNativeCodecs: () => Promise<NativeBloscStatus> = oncePerThread(() =>
  // libzstd's encoder (zstd_native.ts) and the block copy (native_copy.ts) come with it: the
  // same callers, the same moment.
  Promise.all([loadNativeBlosc(), registerNativeZstd(), registerNativeCopy()]).then(([status]) => {
    setNativeBlosc(status.impl);
    return status;
  })
);
