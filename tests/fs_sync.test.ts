/**
 * Making files durable off the run loop (lib/runtime/fs_sync.ts): `syncfs` through a sync thread
 * (Bun) or a nonblocking FFI call (Deno), and fsync through the runtime's I/O threads. The
 * output commit depends on both answering, and on a failure being reported, not swallowed.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import { fsyncAsync, fsyncFileAsync, removeAll, syncFilesystem } from "../lib/runtime/fs_sync.ts";
import { OutputRemover } from "../lib/outputs/temporary_files.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("fs-sync");

describe("fs_sync", () => {
  it("syncfs answers for every caller, also many at once", async () => {
    const dir = newDir("syncfs");
    fs.writeFileSync(path.join(dir, "a.bin"), new Uint8Array(4096));
    const answers = await Promise.all(Array.from({ length: 20 }, () => syncFilesystem(dir)));
    // On Linux with FFI (both runtimes under -A) it is syncfs; elsewhere the caller fsyncs.
    const expected = process.platform === "linux";
    assert.deepEqual(answers, Array(20).fill(expected));
  });

  it("syncfs of a path that does not exist is refused, not waited for", {
    skip: process.platform !== "linux" && "syncfs is Linux-only",
  }, async () => {
    const missing = path.join(newDir("missing"), "nothing", "here");
    await assert.rejects(syncFilesystem(missing), /ENOENT|No such file/);
  });

  it("fsync on the I/O threads: a file, an open descriptor, and a missing file's error", async () => {
    const dir = newDir("fsync");
    const file = path.join(dir, "b.bin");
    fs.writeFileSync(file, "bytes");
    await fsyncFileAsync(file);
    await fsyncFileAsync(dir);
    const fd = fs.openSync(file, "a");
    try {
      await fsyncAsync(fd);
    } finally {
      fs.closeSync(fd);
    }
    await assert.rejects(fsyncFileAsync(path.join(dir, "gone.bin")), /ENOENT/);
  });

  it("removeAll removes files and folders, takes a missing one as removed, and names each failure", async () => {
    const { dir, files, folder, impossible, missing } = removalFixture("remove");
    const errors = await removeAll([impossible, ...files, folder, missing]);
    assert.match(String(errors[0]?.message), /ENOTDIR|not a directory/);
    assert.deepEqual(errors.slice(1), new Array(files.length + 2).fill(null));
    assert.deepEqual(fs.readdirSync(dir), ["kept.bin"]);
    assert.deepEqual(await removeAll([]), []);
  });

  it("OutputRemover removes on the calling thread while fast, then through the helper, and rejects with the first failure after trying every path", async () => {
    const fast = new OutputRemover();
    const first = removalFixture("remover-fast");
    await assert.rejects(
      fast.remove([first.impossible, ...first.files, first.folder, first.missing]),
      /ENOTDIR|not a directory/,
    );
    assert.deepEqual(fs.readdirSync(first.dir), ["kept.bin"], "the failure stopped nothing");
    assert.equal(fast.inline, true, "unlinks here take microseconds");
    // At 0 µs a file every window of 10 files is slow: after two in a row (one alone could be
    // the thread losing its core for a time slice), the helper takes over.
    const slow = new OutputRemover(0, 10);
    const second = removalFixture("remover-slow");
    await slow.remove(second.files.slice(0, 6));
    await slow.remove(second.files.slice(6, 12));
    assert.equal(slow.inline, true, "one slow window does not switch");
    await slow.remove(second.files.slice(12, 22));
    assert.equal(slow.inline, false);
    await slow.remove([...second.files.slice(22), second.folder, second.missing]);
    assert.deepEqual(fs.readdirSync(second.dir), ["kept.bin"]);
    await assert.rejects(slow.remove([second.impossible]), /ENOTDIR|not a directory/);
  });

  it("OutputRemover reports each block once its files went, in order; after a failure, only the blocks before it", async () => {
    const remover = new OutputRemover(0, 10);
    const { dir, files, folder, impossible } = removalFixture("remover-blocks");
    // Two slow windows: the helper thread removes from now on, in requests of 32 files.
    await remover.remove(files.slice(0, 10));
    await remover.remove(files.slice(10, 20));
    assert.equal(remover.inline, false);
    // 94 blocks of 3 files (the last of 1): 280 files, 9 requests.
    const blocks = Array.from({ length: 94 }, (_, i) => files.slice(20 + 3 * i, 23 + 3 * i));
    const reported: number[] = [];
    await remover.removeBlocks(blocks, (i) => {
      reported.push(i);
      for (const f of blocks[i]!) assert.equal(fs.existsSync(f), false, `${f} is still there`);
    });
    assert.deepEqual(reported, blocks.map((_, i) => i));
    // A block that cannot go: the blocks before its request are reported, none from it on, the
    // rest is still removed, and the failure names it.
    const more = Array.from({ length: 40 }, (_, i) => path.join(dir, `g${i}.bin`));
    for (const f of more) fs.writeFileSync(f, "y");
    const failing = [
      ...more.slice(0, 33).map((f) => [f]),
      [impossible],
      ...more.slice(33).map((f) => [f]),
      [folder],
    ];
    const seen: number[] = [];
    await assert.rejects(
      remover.removeBlocks(failing, (i) => void seen.push(i)),
      /ENOTDIR|not a directory/,
    );
    assert.deepEqual(
      seen,
      Array.from({ length: 32 }, (_, i) => i),
      "reported up to the failing request",
    );
    assert.deepEqual(fs.readdirSync(dir), ["kept.bin"]);
  });

  it("OutputRemover judges whole windows: slow batches within one window do not switch", async () => {
    // Every batch is slow at 0 µs a file, but the window of 1,000 files is never full.
    const remover = new OutputRemover(0, 1000);
    const { dir, files } = removalFixture("remover-window");
    for (let i = 0; i < files.length; i += 50) {
      await remover.remove(files.slice(i, i + 50));
      assert.equal(remover.inline, true);
    }
    assert.deepEqual(fs.readdirSync(dir).sort(), ["folder", "kept.bin"]);
  });
});

/** 300 files, a folder with a file inside, a path under a file (ENOTDIR) and a missing path. */
function removalFixture(name: string) {
  const dir = newDir(name);
  const files = Array.from({ length: 300 }, (_, i) => path.join(dir, `f${i}.bin`));
  for (const f of files) fs.writeFileSync(f, "x");
  const folder = path.join(dir, "folder");
  fs.mkdirSync(path.join(folder, "inner"), { recursive: true });
  fs.writeFileSync(path.join(folder, "inner", "z.bin"), "z");
  // A path under a file cannot be removed (ENOTDIR): reported, and the others still go.
  const kept = path.join(dir, "kept.bin");
  fs.writeFileSync(kept, "k");
  const impossible = path.join(kept, "under-a-file");
  const missing = path.join(dir, "never-made.bin");
  return { dir, files, folder, impossible, missing };
}
