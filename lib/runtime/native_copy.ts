/**
 * A box of bytes copied with libc's memcpy, one call per row, in a loop compiled by Bun's
 * built-in C compiler (`cc` from `bun:ffi`, TinyCC inside the runtime: nothing installed on the
 * node). A block written out of an in-memory volume (`out[:] = data` in numpy's words) is such a
 * box: a 64^3 float32 block out of a 512^3 volume takes 0.17 ms this way, 0.42-0.46 as integer
 * words in JavaScript, 0.30-0.37 with one FFI call per row, numpy 0.19
 * (docs/design/CODECS.md, "The copy through memcpy").
 *
 * Under Deno there is no compiler in the runtime, and one FFI call to memcpy per row measured no
 * faster than the word loop (0.72 against 0.66-0.74 ms), so the copy stays JavaScript's there.
 * BLOCKWISE_NATIVE_COPY=off keeps JavaScript's copy under Bun too; unset, anything unexpected
 * (no compiler, no temporary folder) quietly does the same, and BLOCKWISE_NATIVE_COPY=on makes
 * it an error instead. `blockwise --version` says which copy runs and why.
 */

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { InputError } from "../errors.ts";
import { runtimeName } from "./detect.ts";
import { oncePerThread, readSetting } from "./native_library.ts";

export const NATIVE_COPY_ENV = "BLOCKWISE_NATIVE_COPY";

/**
 * Copies `planes` planes of `rows` rows of `rowBytes` bytes each, starting `sourceOffset` bytes
 * into `source`'s view, rows `rowStride` and planes `planeStride` bytes apart (both may be
 * negative), to consecutive bytes from `targetOffset` in `target`. The caller has checked every
 * byte it names lies inside both views.
 */
export type NativeBoxCopy = (
  target: ArrayBufferView,
  targetOffset: number,
  source: ArrayBufferView,
  sourceOffset: number,
  planes: number,
  planeStride: number,
  rows: number,
  rowStride: number,
  rowBytes: number,
) => void;

/** Which copy this thread uses, and why. */
export interface NativeCopyStatus {
  readonly impl: NativeBoxCopy | null;
  /** "memcpy (Bun's cc)" or "JavaScript". */
  readonly description: string;
  readonly reason: string;
}

/** The C source: a row loop around libc's memcpy (declared here: TinyCC needs no headers). */
const SOURCE = `typedef unsigned long size_t;
void *memcpy(void *target, const void *source, size_t bytes);

void blockwise_copy_box(char *target, long long target_offset, const char *source,
                        long long source_offset, long long planes, long long plane_stride,
                        long long rows, long long row_stride, long long row_bytes) {
  char *to = target + target_offset;
  for (long long plane = 0; plane < planes; plane++) {
    const char *from = source + source_offset + plane * plane_stride;
    for (long long row = 0; row < rows; row++) {
      memcpy(to, from, (size_t)row_bytes);
      to += row_bytes;
      from += row_stride;
    }
  }
}
`;

interface BunCcModule {
  cc(options: {
    source: string;
    symbols: Readonly<Record<string, { args: readonly string[]; returns: string }>>;
  }): { readonly symbols: Readonly<Record<string, unknown>> };
}

let loaded: NativeBoxCopy | null = null;

/** The copy loaded in this thread, or null until `registerNativeCopy` found one (or if none). */
export function nativeBoxCopy(): NativeBoxCopy | null {
  return loaded;
}

/** Compiles the row loop in this thread, or says why JavaScript's copy stays. */
export async function loadNativeCopy(
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<NativeCopyStatus> {
  const javascript = (reason: string): NativeCopyStatus => ({
    impl: null,
    description: "JavaScript",
    reason,
  });
  const setting = readSetting(env, NATIVE_COPY_ENV).toLowerCase();
  if (setting === "off") return javascript(`${NATIVE_COPY_ENV}=off`);
  if (setting !== "" && setting !== "on") {
    throw new InputError(
      `${NATIVE_COPY_ENV}: "${setting}" is neither "on" nor "off". Fix: set it to "off" to ` +
        'copy blocks in JavaScript, "on" to require the native copy, or unset it',
    );
  }
  const required = setting === "on";
  const unusable = (why: string): NativeCopyStatus => {
    if (!required) return javascript(why);
    throw new InputError(
      `${NATIVE_COPY_ENV}=on: the native block copy cannot be used: ${why}. Fix: run under ` +
        `Bun (blockwise's binary is Bun), or unset ${NATIVE_COPY_ENV}`,
    );
  };
  const runtime = runtimeName();
  if (runtime !== "bun") {
    return unusable(`no built-in C compiler in ${runtime}`);
  }
  let folder: string | null = null;
  try {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-copy-"));
    const file = path.join(folder, "copy_box.c");
    fs.writeFileSync(file, SOURCE);
    const ffi = (await import("bun:ffi" as string)) as BunCcModule;
    const compiled = ffi.cc({
      source: file,
      symbols: {
        blockwise_copy_box: {
          args: ["ptr", "i64", "ptr", "i64", "i64", "i64", "i64", "i64", "i64"],
          returns: "void",
        },
      },
    });
    const impl = compiled.symbols["blockwise_copy_box"] as NativeBoxCopy;
    if (!copiesRight(impl)) return unusable("the compiled copy moved the wrong bytes");
    return { impl, description: "memcpy (Bun's cc)", reason: "compiled at start" };
  } catch (error) {
    if (error instanceof InputError) throw error;
    return unusable(`Bun's cc failed: ${(error as Error).message.split("\n")[0]}`);
  } finally {
    if (folder !== null) fs.rmSync(folder, { recursive: true, force: true });
  }
}

/** A small box with negative and positive strides, checked byte for byte before first use. */
function copiesRight(copy: NativeBoxCopy): boolean {
  const source = new Uint8Array(64).map((_, i) => i);
  const target = new Uint8Array(16);
  // Two planes, 16 bytes apart, from the second one back; two rows of 3 bytes, 5 apart.
  copy(target, 2, source.subarray(8), 16, 2, -16, 2, 5, 3);
  const expected = [0, 0, 24, 25, 26, 29, 30, 31, 8, 9, 10, 13, 14, 15, 0, 0];
  return expected.every((value, i) => target[i] === value);
}

/** Loads the copy once per thread; later calls get the same status. */
export const registerNativeCopy: () => Promise<NativeCopyStatus> = oncePerThread(async () => {
  const status = await loadNativeCopy();
  loaded = status.impl;
  return status;
});
