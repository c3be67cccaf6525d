/**
 * Stat and list many files fast (lib/runtime/file_scan.ts): reconciliation of block outputs
 * trusts these answers over the ledger, so they must be exactly node:fs's answers, whichever
 * implementation this runtime uses (libc through Deno FFI under `deno test -A` on Linux, node:fs
 * elsewhere). And the manifest reader's line splitter, whose chunks of 1 MiB may cut a line or
 * a character in two.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import process from "node:process";
import {
  A_FOLDER,
  fileScanKind,
  forEachLine,
  lastModifiedMs,
  listFolder,
  NOT_A_FILE,
  pathSize,
} from "../lib/runtime/file_scan.ts";
import { runtimeName } from "../lib/runtime/mod.ts";
import { scratchDirs } from "./fixtures/temp_dirs.ts";

const newDir = scratchDirs("file-scan");

/** A folder with one of each kind of entry a block's outputs may meet. */
function mixedFolder(): string {
  const dir = newDir("mixed");
  fs.writeFileSync(path.join(dir, "four.bin"), new Uint8Array(4096));
  fs.writeFileSync(path.join(dir, "empty"), "");
  fs.writeFileSync(path.join(dir, "étoile-块.json"), "{}");
  fs.mkdirSync(path.join(dir, "sub"));
  fs.symlinkSync(path.join(dir, "four.bin"), path.join(dir, "link-to-file"));
  fs.symlinkSync(path.join(dir, "sub"), path.join(dir, "link-to-folder"));
  fs.symlinkSync(path.join(dir, "nowhere"), path.join(dir, "dangling"));
  return dir;
}

function nodeListing(dir: string): { name: string; folder: boolean }[] {
  return fs.readdirSync(dir, { withFileTypes: true })
    .map((e) => ({ name: e.name, folder: e.isDirectory() }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

describe("file scan", () => {
  it("uses libc through FFI under Deno on Linux, node:fs elsewhere", () => {
    const ffi = runtimeName() === "deno" && process.platform === "linux" &&
      (process.arch === "x64" || process.arch === "arm64");
    assert.equal(fileScanKind(), ffi ? "deno-ffi" : "node-fs");
  });

  it("gives a file's size, A_FOLDER for a folder, NOT_A_FILE for what is missing", () => {
    const dir = mixedFolder();
    assert.equal(pathSize(path.join(dir, "four.bin")), 4096);
    assert.equal(pathSize(path.join(dir, "empty")), 0);
    assert.equal(pathSize(path.join(dir, "étoile-块.json")), 2);
    assert.equal(pathSize(path.join(dir, "sub")), A_FOLDER);
    // Links are followed, as fs.statSync does.
    assert.equal(pathSize(path.join(dir, "link-to-file")), 4096);
    assert.equal(pathSize(path.join(dir, "link-to-folder")), A_FOLDER);
    assert.equal(pathSize(path.join(dir, "dangling")), NOT_A_FILE);
    assert.equal(pathSize(path.join(dir, "missing.bin")), NOT_A_FILE);
    assert.equal(pathSize(path.join(dir, "four.bin", "below-a-file")), NOT_A_FILE);
    assert.equal(pathSize(`${dir}/four.bin\0tail`), NOT_A_FILE);
  });

  it("gives the modification time of what pathSize found, as node:fs does", () => {
    const dir = mixedFolder();
    const file = path.join(dir, "four.bin");
    const when = new Date(Date.UTC(2025, 0, 2, 3, 4, 5, 678));
    fs.utimesSync(file, when, when);
    assert.equal(pathSize(file), 4096);
    assert.ok(Math.abs(lastModifiedMs() - fs.statSync(file).mtimeMs) < 1, String(lastModifiedMs()));
    assert.ok(Math.abs(lastModifiedMs() - when.getTime()) < 1);
    assert.equal(pathSize(path.join(dir, "missing.bin")), NOT_A_FILE);
    assert.ok(Number.isNaN(lastModifiedMs()));
  });

  it("a size above 4 GiB comes back whole (a sparse file)", () => {
    const file = path.join(newDir("sparse"), "big.bin");
    const size = 5 * 2 ** 30 + 3;
    fs.closeSync(fs.openSync(file, "w"));
    fs.truncateSync(file, size);
    assert.equal(pathSize(file), size);
  });

  it("lists a folder as node:fs does: names, folders, links not folders", () => {
    const dir = mixedFolder();
    const listed = listFolder(dir)!.map((e) => ({ ...e })).sort((a, b) =>
      a.name.localeCompare(b.name)
    );
    assert.deepEqual(listed, nodeListing(dir));
    assert.deepEqual(listed.filter((e) => e.folder).map((e) => e.name), ["sub"]);
  });

  it("lists a folder larger than one read of entries, every name once", () => {
    const dir = newDir("many");
    // Long names make the entries span several getdents64 reads of 256 KiB.
    const names = Array.from(
      { length: 4000 },
      (_, i) => `${String(i).padStart(6, "0")}-${"x".repeat(150)}`,
    );
    for (const name of names) fs.writeFileSync(path.join(dir, name), "");
    const listed = listFolder(dir)!;
    assert.equal(listed.length, names.length);
    assert.deepEqual(listed.map((e) => e.name).sort(), names);
    assert.ok(listed.every((e) => !e.folder));
  });

  it("cannot list what is missing or not a folder: null", () => {
    const dir = mixedFolder();
    assert.equal(listFolder(path.join(dir, "missing")), null);
    assert.equal(listFolder(path.join(dir, "four.bin")), null);
    assert.deepEqual(listFolder(newDir("empty")), []);
  });
});

describe("forEachLine", () => {
  const lines = (file: string): string[] | null => {
    const seen: string[] = [];
    return forEachLine(file, (line) => seen.push(line)) ? seen : null;
  };

  it("splits as split('\\n') does, with a last line without its newline", () => {
    const dir = newDir("lines");
    const file = path.join(dir, "a.jsonl");
    fs.writeFileSync(file, 'one\n\n{"t":"commit"}\ntorn');
    assert.deepEqual(lines(file), ["one", "", '{"t":"commit"}', "torn"]);
    fs.writeFileSync(file, "one\ntwo\n");
    assert.deepEqual(lines(file), ["one", "two"]);
    fs.writeFileSync(file, "");
    assert.deepEqual(lines(file), []);
    assert.equal(lines(path.join(dir, "missing.jsonl")), null);
  });

  it("keeps lines and characters whole across its 1 MiB reads", () => {
    const file = path.join(newDir("chunks"), "big.jsonl");
    // Lines of varying length with 2-, 3- and 4-byte characters, over three reads, so that
    // chunk boundaries fall inside lines and inside characters.
    // The first read ends two bytes into a four-byte character.
    const written: string[] = [`${"a".repeat(2 ** 20 - 2)}𝄞b`];
    for (let i = 1, length = written[0]!.length; length < 3.5 * 2 ** 20; i++) {
      written.push(`${i}:${"é块𝄞".repeat(i % 97)}${"a".repeat((i * 7) % 301)}`);
      length += written[i]!.length + 1;
    }
    written.push("x".repeat(1.5 * 2 ** 20)); // one line longer than a read
    fs.writeFileSync(file, written.join("\n") + "\n");
    assert.deepEqual(lines(file), written);
  });
});
