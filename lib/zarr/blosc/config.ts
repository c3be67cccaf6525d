/**
 * The Blosc codec's configuration, as Zarr v3 writes it (`"shuffle": "noshuffle" | "shuffle" |
 * "bitshuffle"`, `typesize` given) and as Zarr v2 / numcodecs writes it (`"shuffle": 0 | 1 | 2 |
 * -1`, typesize taken from the array's data type), normalised to one shape. Every value is
 * checked: a value that is not one of the accepted ones is refused with a message that quotes
 * it and lists them. (numcodecs.js 0.3.2 read the v3 string "shuffle" as 0 and wrote every
 * chunk uncompressed, which is what this refusal exists to prevent from ever happening
 * silently again.)
 */

import { InputError } from "../../errors.ts";
import { type Cname, CNAMES, MAX_TYPESIZE } from "./format.ts";

/** The compressors this codec reads and writes: all of c-blosc's but snappy. */
export const SUPPORTED_CNAMES: readonly Cname[] = CNAMES.filter((c) => c !== "snappy");

/** Why snappy is refused, in configurations and in frames. */
export const SNAPPY_REFUSED = `blosc: cname "snappy" is not supported here (c-blosc's snappy ` +
  `is the C++ snappy library, which blockwise does not carry); use one of ` +
  `${SUPPORTED_CNAMES.map((c) => JSON.stringify(c)).join(", ")}`;

export type Shuffle = "noshuffle" | "shuffle" | "bitshuffle";

/** A configuration every field of which has been checked; `shuffle` is already resolved. */
export interface BloscConfig {
  readonly cname: Cname;
  readonly clevel: number;
  readonly shuffle: Shuffle;
  /** The element size blosc shuffles by (1..255; c-blosc treats larger ones as 1). */
  readonly typesize: number;
  /** Forced block size in bytes, 0 for c-blosc's automatic one. */
  readonly blocksize: number;
}

/** What the caller knows about the array: its data type's element size, if any. */
export interface BloscContext {
  readonly typesize?: number;
  readonly dataType?: string;
}

/** numcodecs' shuffle numbers; -1 (AUTOSHUFFLE) is resolved by the typesize. */
const SHUFFLE_NUMBERS: Readonly<Record<number, Shuffle | "auto">> = {
  [-1]: "auto",
  0: "noshuffle",
  1: "shuffle",
  2: "bitshuffle",
};
const SHUFFLE_NAMES: readonly Shuffle[] = ["noshuffle", "shuffle", "bitshuffle"];

const ACCEPTED_SHUFFLE =
  `"noshuffle", "shuffle" or "bitshuffle" (Zarr v3), or 0, 1, 2 or -1 (numcodecs: NOSHUFFLE, ` +
  `SHUFFLE, BITSHUFFLE, AUTOSHUFFLE)`;

function quote(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === undefined) return "undefined";
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** A configuration value refused: an InputError (exit 2), as the other codecs' settings. */
function refuse(field: string, value: unknown, accepted: string): never {
  throw new InputError(
    `blosc: configuration ${field} ${quote(value)} is not accepted; use ${accepted}`,
  );
}

function isInteger(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value);
}

/**
 * The element size of a zarrita data type name ("float32", "uint16", "v2:U8", ...), as numpy's
 * itemsize, which is what numcodecs passes to blosc; undefined for one it does not know.
 */
export function typesizeOfDataType(dataType: string): number | undefined {
  const fixed: Readonly<Record<string, number>> = {
    bool: 1,
    int8: 1,
    uint8: 1,
    int16: 2,
    uint16: 2,
    float16: 2,
    int32: 4,
    uint32: 4,
    float32: 4,
    int64: 8,
    uint64: 8,
    float64: 8,
  };
  const size = fixed[dataType];
  if (size !== undefined) return size;
  const text = /^v2:([US])(\d+)$/.exec(dataType);
  if (text) return Number(text[2]) * (text[1] === "U" ? 4 : 1);
  return undefined;
}

function normaliseTypesize(value: unknown, context: BloscContext): number {
  if (value === undefined || value === null) {
    const fromType = context.dataType === undefined
      ? undefined
      : typesizeOfDataType(context.dataType);
    const size = context.typesize ?? fromType ?? 1;
    if (!isInteger(size) || size < 1) {
      refuse("typesize (from the data type)", size, "an integer of at least 1");
    }
    return size > MAX_TYPESIZE ? 1 : size;
  }
  if (!isInteger(value) || value < 1) refuse("typesize", value, "an integer of at least 1");
  // c-blosc treats a typesize above 255 as a stream of bytes.
  return value > MAX_TYPESIZE ? 1 : value;
}

function normaliseShuffle(value: unknown, typesize: number): Shuffle {
  if (value === undefined || value === null) return "shuffle"; // numcodecs' default (SHUFFLE)
  let named: Shuffle | "auto" | undefined;
  if (typeof value === "string") {
    named = SHUFFLE_NAMES.find((name) => name === value);
  } else if (isInteger(value)) {
    named = SHUFFLE_NUMBERS[value];
  }
  if (named === undefined) refuse("shuffle", value, ACCEPTED_SHUFFLE);
  // AUTOSHUFFLE, as numcodecs resolves it: bit-shuffle for 1-byte elements, else byte-shuffle.
  if (named === "auto") return typesize === 1 ? "bitshuffle" : "shuffle";
  return named;
}

/**
 * The checked configuration of a Zarr v3 `blosc` codec or a v2 `numcodecs.blosc` compressor.
 * Absent fields take numcodecs' defaults (lz4, clevel 5, SHUFFLE, automatic blocksize);
 * an absent typesize comes from `context` (the data type), else 1. Fields it does not know
 * (such as v2's `id`) are ignored.
 */
export function normaliseBloscConfig(config: unknown, context: BloscContext = {}): BloscConfig {
  if (config !== undefined && config !== null && typeof config !== "object") {
    refuse("object", config, "an object with cname, clevel, shuffle, typesize and blocksize");
  }
  const fields = (config ?? {}) as Record<string, unknown>;
  const cname = fields["cname"] ?? "lz4";
  if (cname === "snappy") throw new InputError(SNAPPY_REFUSED);
  if (typeof cname !== "string" || !SUPPORTED_CNAMES.includes(cname as Cname)) {
    refuse("cname", cname, SUPPORTED_CNAMES.map(quote).join(", "));
  }
  const clevel = fields["clevel"] ?? 5;
  if (!isInteger(clevel) || clevel < 0 || clevel > 9) {
    refuse("clevel", clevel, "an integer from 0 to 9");
  }
  const blocksize = fields["blocksize"] ?? 0;
  if (!isInteger(blocksize) || blocksize < 0) {
    refuse("blocksize", blocksize, "0 (automatic) or a positive integer number of bytes");
  }
  const typesize = normaliseTypesize(fields["typesize"], context);
  const shuffle = normaliseShuffle(fields["shuffle"], typesize);
  return { cname: cname as Cname, clevel, shuffle, typesize, blocksize };
}
