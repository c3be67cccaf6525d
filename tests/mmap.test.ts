/**
 * The memory-mapped file adapter (lib/runtime/mmap.ts) under every adapter the running runtime
 * has: bun-ffi under Bun, deno-ffi under `deno test -A`, fs everywhere. Adapters this runtime
 * lacks are skipped, not failed.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { runtimeName } from "../lib/runtime/detect.ts";
import {
  type MappedFile,
  type MmapKind,
  mmapSupport,
  nativeMmapKind,
  openMapped,
  type TypedViewOf,
} from "../lib/runtime/mmap.ts";
import {
  checkPatternViews,
  expectedPattern,
  PATTERN_BYTES,
  writePattern,
} from "./fixtures/mmap/pattern.ts";

const FIXTURES = fileURLToPath(new URL("./fixtures/mmap/", import.meta.url));
const KINDS: readonly MmapKind[] = ["bun-ffi", "deno-ffi", "fs"];
const RUNTIME = runtimeName();

/** Why `kind` cannot run here, or null when it can. */
function unavailable(kind: MmapKind): string | null {
  if (kind === "fs") return null;
  if (kind === "bun-ffi") {
    return RUNTIME === "bun" ? null : `bun-ffi needs Bun (this is ${RUNTIME})`;
  }
  if (RUNTIME !== "deno") return `deno-ffi needs Deno (this is ${RUNTIME})`;
  return mmapSupport().kind === "deno-ffi" ? null : "deno-ffi needs --allow-ffi (run deno test -A)";
}

/** The command that runs a fixture script under this same runtime, or null under Node. */
function childCommand(
  script: string,
  args: readonly string[],
  denoFlags: readonly string[] = ["-A"],
): { cmd: string; args: string[] } | null {
  const file = path.join(FIXTURES, script);
  if (RUNTIME === "bun") return { cmd: process.execPath, args: [file, ...args] };
  if (RUNTIME === "deno") {
    return { cmd: process.execPath, args: ["run", ...denoFlags, "--quiet", file, ...args] };
  }
  return null;
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

let dir = "";
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "blockwise-mmap-"));
});
after(() => {
  if (dir !== "") fs.rmSync(dir, { recursive: true, force: true });
});

function roundTripPath(kind: MmapKind): string {
  return path.join(dir, `roundtrip-${kind}.bin`);
}

describe("mmapSupport", () => {
  it("reports the adapter auto picks here, with a reason", async () => {
    const support = mmapSupport();
    const expected: MmapKind = RUNTIME === "bun"
      ? "bun-ffi"
      : RUNTIME === "deno" && unavailable("deno-ffi") === null
      ? "deno-ffi"
      : "fs";
    assert.equal(support.kind, expected);
    assert.ok(support.reason.length > 10, support.reason);
    const file = await openMapped(path.join(dir, "auto.bin"), { byteLength: 64, create: true });
    try {
      assert.equal(file.kind, expected);
    } finally {
      file.close();
    }
  });

  it("a child runtime reports and uses its adapter (Deno without --allow-ffi: fs)", (t) => {
    const target = path.join(dir, "child-auto.bin");
    const denoFlags = [`--allow-read=${dir},${FIXTURES}`, `--allow-write=${dir}`];
    const child = childCommand("auto_support.ts", [target], denoFlags);
    if (child === null) {
      t.skip("needs Bun or Deno to run the fixture");
      return;
    }
    const run = spawnSync(child.cmd, child.args, { encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    const report = JSON.parse(run.stdout) as {
      support: { kind: string; reason: string };
      kind: string;
    };
    const expected = RUNTIME === "bun" ? "bun-ffi" : "fs";
    assert.equal(report.support.kind, expected);
    assert.equal(report.kind, expected);
    if (RUNTIME === "deno") assert.match(report.support.reason, /Deno without --allow-ffi/);
    const words = new Uint32Array(new Uint8Array(fs.readFileSync(target)).buffer);
    assert.deepEqual(Array.from(words), [1, 2, 3, 0xffffffff]);
  });

  it("--tracking-io mmap asks for this runtime's own FFI adapter", () => {
    assert.equal(nativeMmapKind(), RUNTIME === "bun" ? "bun-ffi" : "deno-ffi");
  });

  it("refuses an adapter this runtime does not have", async () => {
    const other: MmapKind = RUNTIME === "bun" ? "deno-ffi" : "bun-ffi";
    const target = path.join(dir, "wrong-kind.bin");
    await assert.rejects(
      openMapped(target, { byteLength: 8, create: true, kind: other }),
      (e: unknown) => e instanceof Error && e.message.includes(target) && /needs/.test(e.message),
    );
    assert.equal(fs.existsSync(target), false);
  });
});

for (const kind of KINDS) {
  const isMmap = kind !== "fs";
  /** Adapters this runtime lacks are skipped when the tests are declared. */
  const here = { skip: unavailable(kind) ?? false };
  const mmapOnly = {
    skip: isMmap ? here.skip : "the fs fallback writes back only on flush()/close()",
  };

  /** Open with this describe's adapter. */
  const open = (
    file: string,
    byteLength: number,
    create: boolean,
    readOnly = false,
  ): Promise<MappedFile> => openMapped(file, { byteLength, create, readOnly, kind });

  describe(`openMapped kind ${kind}`, () => {
    it(
      "round-trips writes through uint8/uint32/float32/float64/biguint64 views",
      here,
      async () => {
        const target = roundTripPath(kind);
        const file = await open(target, PATTERN_BYTES, true);
        assert.equal(file.kind, kind);
        assert.equal(file.path, target);
        assert.equal(file.byteLength, PATTERN_BYTES);
        assert.equal(file.readOnly, false);
        assert.equal(file.closed, false);
        assert.equal(file.view().length, PATTERN_BYTES);
        assert.ok(file.view().every((b) => b === 0), "a new file is zero-filled");
        writePattern(file);
        file.flush();
        file.close();
        assert.equal(file.closed, true);
        assert.equal(fs.statSync(target).size, PATTERN_BYTES);

        const again = await open(target, PATTERN_BYTES, false);
        try {
          assert.equal(checkPatternViews(again), null);
          assert.equal(again.typed(Float64Array).length, PATTERN_BYTES / 8);
          assert.equal(again.typed(BigUint64Array).length, PATTERN_BYTES / 8);
          assert.equal(again.typed(Float32Array).length, PATTERN_BYTES / 4);
          assert.equal(again.typed(Uint32Array).length, PATTERN_BYTES / 4);
          assert.equal(again.typed(Uint8Array).length, PATTERN_BYTES);
        } finally {
          again.close();
        }
        assert.deepEqual(new Uint8Array(fs.readFileSync(target)), expectedPattern());
      },
    );

    it("typed views map each constructor to its own array type", here, async () => {
      const file = await open(path.join(dir, `types-${kind}.bin`), 12, true);
      try {
        const words: Uint32Array = file.typed(Uint32Array);
        const same = file.typed(Uint32Array);
        assert.equal(words, same, "one cached view per element type");
        words[2] = 0x01020304;
        assert.deepEqual(Array.from(file.view().subarray(8)), [4, 3, 2, 1]);
        const f64: Float64Array = null as unknown as TypedViewOf<Float64ArrayConstructor>;
        const either: Uint8Array | BigUint64Array = null as unknown as TypedViewOf<
          Uint8ArrayConstructor | BigUint64ArrayConstructor
        >;
        // @ts-expect-error: typed(Float64Array) is a Float64Array, not a Float32Array.
        const f32: Float32Array = null as unknown as TypedViewOf<Float64ArrayConstructor>;
        assert.deepEqual([f64, either, f32], [null, null, null]);
        assert.throws(() => file.typed(Float64Array), /not a multiple of 8/);
        assert.throws(
          () => file.typed(Int16Array as unknown as Uint8ArrayConstructor),
          /unsupported element type/,
        );
      } finally {
        file.close();
      }
    });

    it("refuses a size mismatch, naming path, expected and actual size", here, async () => {
      const target = path.join(dir, `mismatch-${kind}.bin`);
      fs.writeFileSync(target, new Uint8Array(100).fill(7));
      for (const create of [false, true]) {
        await assert.rejects(open(target, 200, create), (e: unknown) => {
          assert.ok(e instanceof Error);
          assert.ok(e.message.includes(target), e.message);
          assert.match(e.message, /\b100 bytes\b/);
          assert.match(e.message, /\b200 bytes\b/);
          return true;
        });
      }
      assert.equal(fs.statSync(target).size, 100, "never resized");
      // create on an existing file of the right size opens it as it is.
      const file = await open(target, 100, true);
      try {
        assert.ok(file.view().every((b) => b === 7));
      } finally {
        file.close();
      }
    });

    it("refuses a missing file, naming the path", here, async () => {
      const target = path.join(dir, `missing-${kind}.bin`);
      await assert.rejects(open(target, 64, false), (e: unknown) => {
        assert.ok(e instanceof Error);
        assert.ok(e.message.includes(target), e.message);
        assert.match(e.message, /no such file/);
        return true;
      });
      assert.equal(fs.existsSync(target), false);
      const inMissingDir = path.join(dir, "no-such-dir", `x-${kind}.bin`);
      await assert.rejects(
        open(inMissingDir, 64, true),
        (e: unknown) => e instanceof Error && e.message.includes(inMissingDir),
      );
    });

    it("refuses sizes below 1 byte and non-integer sizes; maps a 1-byte file", here, async () => {
      const target = path.join(dir, `tiny-${kind}.bin`);
      for (const bad of [0, -1, 1.5, Number.NaN]) {
        await assert.rejects(open(target, bad, true), /byteLength/);
      }
      assert.equal(fs.existsSync(target), false);
      const file = await open(target, 1, true);
      file.view()[0] = 42;
      file.close();
      assert.deepEqual(Array.from(fs.readFileSync(target)), [42]);
    });

    it(
      "throws on every call after close() and detaches the views it handed out",
      here,
      async () => {
        const file = await open(path.join(dir, `closed-${kind}.bin`), 4096, true);
        const bytes = file.view();
        const words = file.typed(Float64Array);
        file.close();
        assert.throws(() => file.view(), /was closed/);
        assert.throws(() => file.typed(Uint32Array), /was closed/);
        assert.throws(() => file.flush(), /was closed/);
        assert.throws(() => file.close(), /was closed/);
        // Stale views are detached, so touching them cannot reach unmapped memory.
        assert.equal(bytes.length, 0);
        assert.equal(words.length, 0);
        assert.equal(bytes[0], undefined);
      },
    );

    it(
      "gives a file mapped for writing all its blocks, so a full disk cannot turn a write into SIGBUS",
      { skip: process.platform !== "linux" ? "posix_fallocate is Linux's" : mmapOnly.skip },
      async () => {
        const bytes = 1 << 20;
        const sparse = path.join(dir, `sparse-${kind}.bin`);
        fs.rmSync(sparse, { force: true });
        fs.closeSync(fs.openSync(sparse, "w"));
        fs.truncateSync(sparse, bytes);
        const reader = await open(sparse, bytes, false, true);
        reader.close();
        assert.ok(fs.statSync(sparse).blocks * 512 < bytes, "a read-only open allocated blocks");
        const writer = await open(sparse, bytes, false);
        try {
          assert.ok(
            fs.statSync(sparse).blocks * 512 >= bytes,
            `${fs.statSync(sparse).blocks} blocks of 512 bytes for ${bytes} bytes`,
          );
          assert.ok(writer.view().every((b) => b === 0), "allocating changed the contents");
        } finally {
          writer.close();
        }
      },
    );

    it("readOnly refuses nothing but never writes back", here, async () => {
      const target = path.join(dir, `readonly-${kind}.bin`);
      const original = new Uint8Array(8192).map((_, i) => i & 255);
      fs.writeFileSync(target, original);
      const file = await open(target, 8192, false, true);
      try {
        assert.equal(file.readOnly, true);
        assert.deepEqual(file.view(), original);
        file.view()[0] = 0xff;
        file.typed(Float64Array)[10] = Math.PI;
        assert.equal(file.view()[0], 0xff, "the write is visible to this process");
        file.flush();
        if (isMmap) {
          // Pages not written here still follow the file (MAP_PRIVATE, Linux).
          const fd = fs.openSync(target, "r+");
          fs.writeSync(fd, new Uint8Array([9, 9]), 0, 2, 5000);
          fs.closeSync(fd);
          assert.deepEqual(Array.from(file.view().subarray(5000, 5002)), [9, 9]);
          original.set([9, 9], 5000);
        }
      } finally {
        file.close();
      }
      assert.deepEqual(new Uint8Array(fs.readFileSync(target)), original);
    });

    it("writes are visible to another process before any flush", mmapOnly, async (t) => {
      const target = path.join(dir, `xproc-${kind}.bin`);
      const file = await open(target, 3 * 4096, true);
      try {
        file.typed(Uint32Array)[0] = 0xdeadbeef;
        file.view().set([1, 2, 3, 4], 8190);
        const child = childCommand("read_bytes.ts", [target, "0", "4"]);
        const child2 = childCommand("read_bytes.ts", [target, "8190", "4"]);
        if (child === null || child2 === null) return t.skip("needs Bun or Deno");
        const a = spawnSync(child.cmd, child.args, { encoding: "utf8" });
        const b = spawnSync(child2.cmd, child2.args, { encoding: "utf8" });
        assert.equal(a.status, 0, a.stderr);
        assert.equal(b.status, 0, b.stderr);
        assert.equal(a.stdout, "efbeadde");
        assert.equal(b.stdout, "01020304");
      } finally {
        file.close();
      }
    });

    it("dropping the resident pages without a flush keeps every write", mmapOnly, async () => {
      const target = path.join(dir, `drop-${kind}.bin`);
      const pages = 16;
      const file = await open(target, pages * 4096, true);
      try {
        const bytes = file.view();
        for (let p = 0; p < pages; p++) bytes[p * 4096 + (p % 7)] = p + 1;
        file.flushAndDropResident();
        const onDisk = new Uint8Array(fs.readFileSync(target));
        for (let p = 0; p < pages; p++) {
          assert.equal(onDisk[p * 4096 + (p % 7)], p + 1, `page ${p}`);
        }
        for (let p = 0; p < pages; p++) assert.equal(bytes[p * 4096 + (p % 7)], p + 1, `page ${p}`);
        bytes[5] = 99; // a dropped page is mapped again on the next write
        file.flushAndDropResident();
        assert.equal(new Uint8Array(fs.readFileSync(target))[5], 99);
      } finally {
        file.close();
      }
    });

    it("writes survive SIGKILL of the writing process without a flush", mmapOnly, async (t) => {
      const target = path.join(dir, `sigkill-${kind}.bin`);
      const command = childCommand("hold_mapping.ts", [kind, target]);
      if (command === null) return t.skip("needs Bun or Deno");
      const child = spawn(command.cmd, command.args, { stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
      const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
        child.on("close", (code, signal) => resolve({ code, signal }));
      });
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          child.kill("SIGKILL");
          reject(new Error(`child never printed "written"; stderr: ${stderr}`));
        }, 30_000);
        child.stdout.setEncoding("utf8").on("data", (s: string) => {
          stdout += s;
          if (stdout.includes("written")) {
            clearTimeout(timer);
            resolve();
          }
        });
        void exited.then(({ code }) => {
          clearTimeout(timer);
          reject(new Error(`child exited (${code}) before writing; stderr: ${stderr}`));
        });
      });
      assert.match(stdout, new RegExp(`written ${kind}`));
      child.kill("SIGKILL");
      const { signal } = await exited;
      assert.equal(signal, "SIGKILL");
      const bytes = new Uint8Array(fs.readFileSync(target));
      assert.equal(bytes.length, PATTERN_BYTES);
      assert.equal(hex(bytes), hex(expectedPattern()));
    });
  });
}

describe("adapters agree", () => {
  it("every adapter here produced the same bytes for the same writes", (t) => {
    const written = KINDS.filter((k) => fs.existsSync(roundTripPath(k)));
    if (written.length === 0) return t.skip("no adapter ran");
    const expected = hex(expectedPattern());
    for (const kind of written) {
      assert.equal(hex(new Uint8Array(fs.readFileSync(roundTripPath(kind)))), expected, kind);
    }
    const available = KINDS.filter((k) => unavailable(k) === null);
    assert.deepEqual(written, available);
  });

  const bunOnly = { skip: unavailable("bun-ffi") ?? false };
  it("Bun refuses a mapping over 4 GiB before creating the file", bunOnly, async () => {
    const target = path.join(dir, "huge.bin");
    await assert.rejects(
      openMapped(target, { byteLength: 2 ** 32 + 4096, create: true, kind: "bun-ffi" }),
      (e: unknown) => e instanceof Error && e.message.includes(target) && /4 GiB/.test(e.message),
    );
    assert.equal(fs.existsSync(target), false);
  });
});
